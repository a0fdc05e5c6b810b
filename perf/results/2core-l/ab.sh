#!/bin/bash
# perf/results/2core-l/ab.sh FIRST SECOND PAIRS LABEL_FIRST LABEL_SECOND: per pair, the
# coffer rows of perf/fio/compare.sh --engines coffer --numjobs 1,2 --runtime 5 --size 1g
# (as 2core-k/nj-ab.sh) for FIRST then SECOND (release build folders), the psync rows once
# (the same compare.sh with --engines psync), then sysop.sh (randwrite-2jobs per-op figures)
# for FIRST then SECOND. Every run under flock /tmp/coffer-bench.lock (taken here, per run,
# so other sessions' benchmarks can interleave between runs but never overlap one).
# OUT: folder for sysop's raw files.
set -u
a=$1 b=$2 pairs=${3:-3} la=${4:-base} lb=${5:-new}
here=$(cd "$(dirname "$0")" && pwd)
cmp=$here/../../fio/compare.sh
tmp=$(mktemp -d)
L="flock /tmp/coffer-bench.lock"
for i in $(seq 1 "$pairs"); do
	for v in a b; do
		d=$a l=$la
		[ $v = b ] && d=$b l=$lb
		echo "== $l-p$i load $(cut -d' ' -f1-3 /proc/loadavg)"
		$L bash "$cmp" --build "$d" --runtime 5 --size 1g --engines coffer --numjobs 1,2 \
			--csv "$tmp/$l-p$i.csv" --png "$tmp/$l-p$i.png" 2>&1 | grep -E '^coffer'
	done
	echo "== psync-p$i load $(cut -d' ' -f1-3 /proc/loadavg)"
	$L bash "$cmp" --runtime 5 --size 1g --engines psync --numjobs 1,2 \
		--csv "$tmp/psync-p$i.csv" --png "$tmp/psync-p$i.png" 2>&1 | grep -E '^psync'
	for v in a b; do
		d=$a l=$la
		[ $v = b ] && d=$b l=$lb
		echo "== sysop $l-p$i load $(cut -d' ' -f1-3 /proc/loadavg)"
		$L "$here"/sysop.sh "$l-p$i" "$d" "" | grep -E 'wiops|us/op|sched_yield|context|raw_sys|_write|ppoll'
	done
done
rm -rf "$tmp"
