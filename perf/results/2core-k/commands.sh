#!/bin/bash
# perf/results/2core-k/commands.sh BASE NEW: deferred coalescing in the store's arena
# (tools/arena.c quick lists), issue 8. BASE, NEW: release build folders (tools/coffer-store,
# perf/fio/libcoffer_fio.so, perf/bench/coffer-bench) of BASE = 558b572 and NEW = 269dd1e,
# each built from `git archive` of its commit (meson setup -Dbuildtype=release
# -Dfio_source=.../subprojects/fio-src). Everything runs under flock /tmp/coffer-bench.lock.
# cpuop.sh and prof.sh are 2core-j's (run from there; perf9 first ran a copy that differed only in
# the socket name), arena_bench.c is new.
set -u
base=$(cd "$1" && pwd) new=$(cd "$2" && pwd) here=$(cd "$(dirname "$0")" && pwd)
L=/tmp/coffer-bench.lock
cd "$here"
mkdir -p raw
# 1. baseline.txt: cpuop.sh on BASE, three runs.
for i in 1 2 3; do OUT=$here/raw flock $L ../2core-j/cpuop.sh base0-$i "$base" ""; done >baseline.txt
# 2. cpuop-ab.txt: cpuop.sh, BASE and NEW alternating, four pairs.
for i in 1 2 3 4; do
	OUT=$here/raw flock $L ../2core-j/cpuop.sh base-r$i "$base" ""
	OUT=$here/raw flock $L ../2core-j/cpuop.sh new-r$i "$new" ""
done >cpuop-ab.txt
# 3. cpuop-rec.txt + the profiles (profile.txt): REC=1 (perf record -g -a for 2 s).
for v in base new; do
	d=$base
	[ $v = new ] && d=$new
	REC=1 OUT=$here/raw flock $L ../2core-j/cpuop.sh rec-$v "$d" ""
done >cpuop-rec.txt
#    perf report -i raw/p-rec-V.data --comms coffer-store --percentage relative --sort sym
#      --no-children -g none;  perf annotate -i raw/p-rec-V.data --stdio -s SYM
# 4. arena-bench.txt: the allocator alone (arena_bench.c), BASE's and NEW's tools/arena.c
#    (SRC: the source trees the builds came from), three alternations.
#    cc -O2 -I SRC -o /tmp/arena_bench-V arena_bench.c SRC/tools/arena.c
#    for i in 1 2 3; do for v in base new; do flock $L /tmp/arena_bench-$v; done; done
#    mixed sizes: /tmp/arena_bench-V 1024 16384 0 2000000
# 5. ab.sh BASE NEW 3: cpuop-ab2.txt, compare-ab.txt (perf/fio/compare.sh --runtime 5
#    --size 256m --engines coffer,psync --numjobs 2), bench-ab.txt (coffer-bench store
#    create-seal, batch 1,32, store -m 64M and -m 1G).
./ab.sh "$base" "$new" 3
# 6. replace-ab.sh BASE NEW 4: replace-ab.txt (create-seal replacing 65536 x 4 KiB keys).
./replace-ab.sh "$base" "$new" 4
# 7. cpuop-storespin0.txt: cpuop.sh with the store's busy-poll off, four pairs.
for i in 1 2 3 4; do
	for v in base new; do
		d=$base
		[ $v = new ] && d=$new
		COFFER_STORE_SPIN_US=0 OUT=$here/raw flock $L ../2core-j/cpuop.sh ss0-$v-$i "$d" ""
	done
done >cpuop-storespin0.txt
# 8. (lead, after the helpers stopped; load 1.2-2.0, nothing else running) nj-ab.txt and
#    nj-ab-rev.txt: nj-ab.sh BASE NEW 3, then nj-ab.sh NEW BASE 3 (order reversed):
#    compare.sh --engines coffer --numjobs 1,2 --runtime 5 --size 1g, alternating builds.
#    flock /tmp/coffer-bench.lock ./nj-ab.sh BASE NEW 3 > nj-ab.txt
#    flock /tmp/coffer-bench.lock ./nj-ab.sh NEW BASE 3 > nj-ab-rev.txt
# 9. fio-full.{txt,csv,png}: main 0a85a2e (quick lists merged), all engines:
#    flock /tmp/coffer-bench.lock perf/fio/compare.sh --runtime 5 --csv fio-full.csv --png fio-full.png
# 10. lf-ab.txt, lf-ab-rev.txt (lead): main 19c26b2 against main + lf.diff (entry table load
#     factor 0.25-0.5 instead of 0.5-1.0, perf9's suggestion), nj-ab.sh, two pairs each order.
# 11. st-ab.txt (lead): issue 6's batch ratio after the merge, st-ab.sh BUILD LABEL three
#     alternations of 558b572 and main 19c26b2, each under flock /tmp/coffer-bench.lock.
