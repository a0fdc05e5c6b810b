#!/bin/bash
# perf/results/2core-k/ab.sh BASE NEW PAIRS: the A/B of this set, alternating BASE and NEW
# builds (release build folders), each step under flock /tmp/coffer-bench.lock:
#  cpuop-ab2.txt: ../2core-j/cpuop.sh (fio randwrite-2jobs, store -m 1G, perf stat -p)
#  compare-ab.txt: perf/fio/compare.sh --runtime 5 --size 256m --engines coffer,psync
#                  --numjobs 2 (randread and randwrite rows)
#  bench-ab.txt: coffer-bench store --workload create-seal --batch 1,32 --seconds 1
#                against coffer-store -m 64M (evicting) and -m 1G
set -u
base=$1 new=$2 pairs=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
L=/tmp/coffer-bench.lock
bench() { # BUILD LABEL MEM
	local S=/tmp/perf9-bench-$$.sock
	"$1"/tools/coffer-store -m "$3" -s $S -q 2>/dev/null &
	local sp=$!
	sleep 0.7
	echo "== $2 -m $3 load $(cut -d' ' -f1-3 /proc/loadavg)"
	"$1"/perf/bench/coffer-bench store --socket $S --threads 1 --batch 1,32 \
		--workload create-seal --seconds 1 2>&1 | grep -v '^#'
	kill $sp
	wait $sp 2>/dev/null
}
export -f bench
for i in $(seq 1 "$pairs"); do
	for v in base new; do
		d=$base
		[ $v = new ] && d=$new
		OUT=$here/raw flock $L "$here"/../2core-j/cpuop.sh $v-p$i "$d" "" >>"$here"/cpuop-ab2.txt 2>&1
		echo "== $v-p$i load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$here"/compare-ab.txt
		flock $L "$here"/../../fio/compare.sh --build "$d" --runtime 5 --size 256m \
			--engines coffer,psync --numjobs 2 --csv "$here"/raw/compare-$v-p$i.csv \
			--png "$here"/raw/compare-$v-p$i.png >>"$here"/compare-ab.txt 2>&1
		for m in 64M 1G; do
			flock $L bash -c "bench $d $v-p$i $m" >>"$here"/bench-ab.txt 2>&1
		done
	done
done
