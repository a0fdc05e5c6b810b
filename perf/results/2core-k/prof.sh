#!/bin/bash
# prof.sh BUILD JOB OUTPREFIX [fio options]: a fresh store (-m 1G) and JOB (--runtime=5);
# 2 s in, perf stat -p on the store and on the fio jobs for 2 s (REC=1: also perf record -g -a).
# PENV: environment assignments for fio. OUTPREFIX must be an absolute path.

set -u
build=$1 job=$2 out=$3; shift 3
S=/tmp/perf9-$$.sock
eng=$build/perf/fio/libcoffer_fio.so
$build/tools/coffer-store -m 1G -s $S -q 2>/dev/null &
sp=$!
sleep 1
cd "$(dirname "$0")"/../../fio/jobs
env COFFER_SOCKET=$S $PENV fio --ioengine=external:$eng --runtime=5 "$@" --output-format=terse --terse-version=3 $job > $out.terse &
fp=$!
sleep 2
pids=$(pgrep -P $fp -d,) ; pids=${pids:+$pids,}$fp
perf stat -e task-clock,context-switches -p $sp -- sleep 2 2> $out.stat-store &
perf stat --per-thread -e task-clock,context-switches -p $pids -- sleep 2 2> $out.stat-fio &
if [ -n "${REC:-}" ]; then perf record -g -o $out.data -a -- sleep 2 2>/dev/null >/dev/null; else sleep 2.1; fi
wait $fp
kill $sp; wait $sp 2>/dev/null
awk -F';' '/^3;/{w+=$49} END{print "wiops",w}' $out.terse
