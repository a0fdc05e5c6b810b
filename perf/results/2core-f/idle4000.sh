#!/bin/bash
# idle4000.sh TREE_BUILD LABEL: create-seal at batch 1 and 32, alone and beside 4000 idle channels (coffer-bench --idle-channels)
B=$1; S=/tmp/idle4000.$$.sock
$B/tools/coffer-store --socket $S --memory 1G >/dev/null 2>&1 &
SP=$!; sleep 1
$B/perf/bench/coffer-bench store --socket $S --threads 1 --batch 1,32 --workload create-seal --seconds 1 --idle-channels 4000 2>&1 | grep "ops/s" | awk -v l="$2" '{print l, $2, $4, $3, $7}'
kill $SP; wait 2>/dev/null
