#!/bin/bash
# idle.sh BUILD: CPU of an idle store and an idle connected client. A fresh coffer-store -m 256M
# and one fio job (randwrite.fio shape, numjobs 1) that writes 32 blocks, then thinks 4 s with
# its connection, channel and EQ open; utime + stime ticks (10 ms) of both over 2 s of the
# think time (1.5-3.5 s after the start). Run it under flock /tmp/coffer-bench.lock.
set -u
build=$1
S=/tmp/perf10-idle-$$.sock
$build/tools/coffer-store -m 256M -s $S -q 2>/dev/null &
sp=$!
sleep 1
cd "$(dirname "$0")"/../../fio/jobs
COFFER_SOCKET=$S fio --name=idle --ioengine=external:$build/perf/fio/libcoffer_fio.so --rw=randwrite \
	--bs=4k --size=16m --iodepth=32 --thinktime=4000000 --thinktime_blocks=32 --number_ios=64 \
	--output-format=terse > /dev/null &
fp=$!
sleep 1.5
jp=$(pgrep -P $fp | head -1)
t() { awk '{print $14 + $15}' /proc/$1/stat; }
s0=$(t $sp) j0=$(t $jp) f0=$(t $fp)
sleep 2
s1=$(t $sp) j1=$(t $jp) f1=$(t $fp)
echo "idle 2 s: store $((s1 - s0)) ticks, fio job $((j1 - j0)) ticks, fio main $((f1 - f0)) ticks (100 = one CPU for 1 s)"
wait $fp
kill $sp; wait $sp 2>/dev/null
