#!/bin/bash
# perf/results/2core-k/nj-ab.sh BASE NEW PAIRS: perf/fio/compare.sh --engines coffer
# --numjobs 1,2 --runtime 5 --size 1g, BASE and NEW release build folders alternating; prints
# the coffer rows of each run. Run it under flock /tmp/coffer-bench.lock.
base=$1 new=$2 pairs=${3:-3}
cmp=$(cd "$(dirname "$0")"/../../fio && pwd)/compare.sh
tmp=$(mktemp -d)
for i in $(seq 1 "$pairs"); do
	for v in base new; do
		d=$base
		[ $v = new ] && d=$new
		echo "== $v-p$i load $(cut -d' ' -f1-3 /proc/loadavg)"
		bash "$cmp" --build "$d" --runtime 5 --size 1g --engines coffer --numjobs 1,2 \
			--csv "$tmp/$v-p$i.csv" --png "$tmp/$v-p$i.png" 2>&1 | grep -E '^coffer'
	done
done
rm -rf "$tmp"
