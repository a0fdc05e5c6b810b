#!/bin/bash
# st-ab.txt: three alternations of st-ab.sh, base = 558b572 (before quick lists), main = 19c26b2; load 1.9-2.0
# st-ab.sh BUILD LABEL: coffer-bench store, 1 thread, batch 1 and 32, create-seal and get-release
S=/tmp/s12-st-$$.sock
b=$1; l=$2
"$b"/tools/coffer-store -m 1G -s $S -q 2>/dev/null &
sp=$!
sleep 0.7
echo "== $l load $(cut -d' ' -f1-3 /proc/loadavg)"
"$b"/perf/bench/coffer-bench store --socket $S --threads 1 --batch 1,32 --workload create-seal,get-release --seconds 1 2>&1 | grep -v '^#'
kill $sp; wait $sp
