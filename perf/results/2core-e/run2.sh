#!/bin/bash
# run2.sh TREE(build dir) IDLEBIN CONNS K label
B=$1; S=/tmp/idle.$$.sock
$B/tools/coffer-store --socket $S --memory 1G >/dev/null 2>&1 &
SP=$!; sleep 1
IP=""
if [ "$3" != 0 ]; then $2 $S $3 $4 2>/dev/null & IP=$!; sleep 2; fi
flock /tmp/coffer-bench.lock $B/perf/bench/coffer-bench store --socket $S --threads 1 --batch 1,32 --workload create-seal --seconds 2 2>&1 | grep ops | awk -v l="$5 idle=$3x$4" '{print l, $3, $4, $7}'
[ -n "$IP" ] && kill $IP; kill $SP; wait 2>/dev/null
