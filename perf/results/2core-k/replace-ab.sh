#!/bin/bash
# perf/results/2core-k/replace-ab.sh BASE NEW PAIRS: the store's random-replace path without
# fio: coffer-bench store create-seal (CREATE_REPLACE over the key set), 4 KiB objects,
# 65536 keys (256 MiB) against coffer-store -m 1G, batch 32 and 128, 2 s per result; BASE
# and NEW alternating, each run under flock /tmp/coffer-bench.lock. Output: replace-ab.txt.
set -u
here=$(cd "$(dirname "$0")" && pwd)
run() { # BUILD LABEL
	local S=/tmp/perf9-repl-$$.sock
	"$1"/tools/coffer-store -m 1G -s $S -q 2>/dev/null &
	local sp=$!
	sleep 0.7
	echo "== $2 load $(cut -d' ' -f1-3 /proc/loadavg)"
	"$1"/perf/bench/coffer-bench store --socket $S --threads 1 --batch 32,128 --obj-size 4096 \
		--keys 65536 --workload create-seal --seconds 2 2>&1 | grep -v '^#'
	kill $sp
	wait $sp 2>/dev/null
}
export -f run
for i in $(seq 1 "${3:-3}"); do
	flock /tmp/coffer-bench.lock bash -c "run $1 base-p$i"
	flock /tmp/coffer-bench.lock bash -c "run $2 new-p$i"
done >>"$here"/replace-ab.txt 2>&1
