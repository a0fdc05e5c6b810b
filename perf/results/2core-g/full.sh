#!/bin/bash
# perf/results/2core-g/full.sh BUILD: one full set on the final tree of this session, with
# the load average before each part: store IPC (64 B, threads 1 and 2, batch 1/8/32/128),
# large put vs memcpy (1/4/16 MiB), coffer vs redis-server, fio compare (every engine,
# numjobs 1 and 2). Writes full-*.{txt,csv} beside this script.
set -u
b=$1 here=$(cd "$(dirname "$0")" && pwd) S=/tmp/full-$$.sock
cd "$here/../../.." || exit 1
load() { echo "# load $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)"; }
"$b"/tools/coffer-store -m 1G -s $S -q 2>/dev/null &
sleep 1
{
	load
	"$b"/perf/bench/coffer-bench store --socket $S --threads 1,2 --batch 1,8,32,128 \
		--workload create-seal,get-release --seconds 1 --csv "$here/full-store.csv"
	load
	"$b"/perf/bench/coffer-bench store --socket $S --threads 1 --workload put \
		--put-max 16M --put-bytes 1G --csv "$here/full-store.csv"
	load
} >"$here/full-store.txt" 2>&1
kill %1
wait
{ load; sh perf/store-compare.sh --build "$b" --seconds 1 --requests 100000 \
	--csv "$here/full-redis.csv"; load; } >"$here/full-redis.txt" 2>&1
{ load; bash perf/fio/compare.sh --build "$b" --runtime 5 --numjobs 1,2 \
	--csv "$here/full-fio.csv"; load; } >"$here/full-fio.txt" 2>&1
