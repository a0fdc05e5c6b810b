#!/bin/bash
# Final measurement set on the merged tree (build/release), short runs, quiet machine hoped.
set -u
cd "$(dirname "$0")/../../.."  # the repository root
B=build/release
out=${1:-/tmp/meas}; rm -rf "$out"; mkdir -p "$out"
uptime > $out/load.txt
$B/perf/bench/coffer-bench hash --threads 1,2 --seconds 1 --repeat 3 --csv $out/hash.csv > $out/hash.txt 2>&1
d=$(mktemp -d); S=$d/s.sock
$B/tools/coffer-store -m 1G -s $S 2> $out/store1.log & sp=$!
for i in $(seq 50); do [ -S $S ] && break; sleep 0.1; done
$B/perf/bench/coffer-bench obj_open --socket $S --threads 1,2 --objects 100000 --seconds 1 --csv $out/objopen.csv > $out/objopen.txt 2>&1
for r in 1 2 3; do
$B/perf/bench/coffer-bench store --socket $S --threads 1,2 --batch 1,8,32,128 --seconds 0.5 --put-max 16M --put-bytes 256M --csv $out/store.csv > $out/store-$r.txt 2>&1
done
kill $sp; wait $sp 2>/dev/null
perf/store-compare.sh --build $B --seconds 0.5 --requests 50000 > $out/redis.txt 2>&1
perf/fio/compare.sh --build $B --runtime 5 --csv $out/fio.csv > $out/fio.txt 2>&1
uptime >> $out/load.txt
echo done
