#!/bin/bash
# perf/results/2core-g/commands.sh OLD_BUILD NEW_BUILD: the alternated A/B of this set.
# OLD_BUILD: a release build of 1e636a9 (store yields after replies and every 5 us without
# work); NEW_BUILD: of 44cb234 (store yields only after 5 us without any work).
set -u
old=$1 new=$2 here=$(cd "$(dirname "$0")" && pwd) S=/tmp/ab-$$.sock
store_ab() { # BUILD LABEL
	"$1"/tools/coffer-store -m 1G -s $S -q 2>/dev/null &
	sleep 0.7
	echo "== $2 load $(cut -d' ' -f1 /proc/loadavg)"
	"$1"/perf/bench/coffer-bench store --socket $S --threads 1,2 --batch 1,32 \
		--workload create-seal,get-release --seconds 1 2>&1 | grep -v '^#'
	kill %1
	wait
}
for i in 1 2 3; do store_ab "$old" old; store_ab "$new" new; done >"$here/store-ab.txt"
cd "$here/../../.." || exit 1
for i in 1 2; do
	for v in "old:$old" "new:$new"; do
		sh perf/store-compare.sh --build "${v#*:}" --seconds 1 --requests 100000 \
			--csv "$here/sc-${v%%:*}-$i.csv"
	done
done
for i in 1 2; do
	for v in "old:$old" "new:$new"; do
		bash perf/fio/compare.sh --build "${v#*:}" --runtime 5 --numjobs 1,2 \
			--engines coffer,mmap,psync --csv "$here/fio-${v%%:*}-$i.csv"
	done
done
