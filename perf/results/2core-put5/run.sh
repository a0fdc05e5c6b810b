#!/bin/bash
# run.sh BUILD HUGEPAGES [bench args...]: one fresh 1 GiB store, one coffer-bench store put run
set -u
b=$1 h=$2; shift 2
d=$(mktemp -d) S=$d/s.sock
"$b"/tools/coffer-store -m 1G --hugepages="$h" -s "$S" 2>"$d/store.log" &
sp=$!
for _ in $(seq 50); do [ -S "$S" ] && break; sleep 0.1; done
uptime
"$b"/perf/bench/coffer-bench store --socket "$S" --workload put "$@"
rc=$?
kill "$sp"; wait "$sp" 2>/dev/null
grep -i huge "$d/store.log" | head -3
rm -rf "$d"
exit $rc
