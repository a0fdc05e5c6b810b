#!/bin/bash
# perf/results/2core-l/commands.sh BASE NEW: kernel entries of the fio jobs at randwrite
# numjobs 2 (issue 8) and the adaptive sched_yield() backoff. BASE, NEW: release build folders
# (tools/coffer-store, perf/fio/libcoffer_fio.so) of BASE = main 964c877 (built from `git
# archive 964c877`, meson setup -Dbuildtype=release -Dfio_source=.../subprojects/fio-src) and
# NEW = 2a0608b (the perf10 worktree's build/release). Every run under flock
# /tmp/coffer-bench.lock (ab.sh takes it per run).
set -u
base=$(cd "$1" && pwd) new=$(cd "$2" && pwd) here=$(cd "$(dirname "$0")" && pwd)
L=/tmp/coffer-bench.lock
cd "$here"
mkdir -p raw
export OUT=$here/raw
# 1. baseline: cpuop figures + context switches, user/sys time and syscalls by kind per write
#    (raw/s-base1.*), and where the syscalls come from (perf record --call-graph dwarf on
#    raw_syscalls:sys_enter; raw/yieldsites-base.txt; the unwinding slows the run).
flock $L ./sysop.sh base1 "$base" ""
flock $L ./yieldsites.sh "$base" "$here"/raw/yieldsites-base.txt
flock $L ./yieldsites.sh "$new" "$here"/raw/yieldsites-new.txt
# 2. first look, two pairs (raw/s-y*.sum).
for i in 1 2; do
	flock $L ./sysop.sh ybase$i "$base" ""
	flock $L ./sysop.sh ynew$i "$new" ""
done
# 3. the A/B: compare.sh coffer rows nj1/nj2, psync rows once per pair, sysop per pair; three
#    pairs each order.
./ab.sh "$base" "$new" 3 base new >ab-base-first.txt
./ab.sh "$new" "$base" 3 new base >ab-new-first.txt
./summary.sh ab-base-first.txt ab-new-first.txt >summary.txt
# 4. idle: store + an idle connected fio job (think time), CPU ticks over 2 s, each build.
for b in "$base" "$new"; do flock $L ./idle.sh "$b"; done >idle.txt
