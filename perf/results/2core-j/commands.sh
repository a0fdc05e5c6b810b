#!/bin/bash
# perf/results/2core-j/commands.sh BASE NEW: fio randwrite at numjobs 2 (issue 8).
# BASE, NEW: build folders (tools/coffer-store, perf/fio/libcoffer_fio.so); BASE = 1e029db,
# NEW = 3655fd4 (cf_block_busy asked before the write counts itself).
# 1. busy-ab.txt: perf/fio/jobs/randwrite-2jobs.fio and randwrite.fio (--runtime=5), a fresh
#    store (-m 1G) per run, BASE then NEW, then psync and mmap on a tmpfs file of the same
#    shape; three alternations.
# 2. fio-full.{csv,png,txt}: perf/fio/compare.sh --runtime 5 --build NEW (all engines,
#    numjobs 1,2).
# cpuop.txt (store and fio task-clock per op, perf stat -p) was made with cpuop.sh and
# prof.sh here: ./cpuop.sh LABEL BUILD "ENV" [fio options], under the bench lock.
set -u
base=$(cd "$1" && pwd) new=$(cd "$2" && pwd) here=$(cd "$(dirname "$0")" && pwd)
S=/tmp/busy-ab-$$.sock jobs=$here/../../fio/jobs
coffer() { # BUILD NUMJOBS
	local job=randwrite.fio
	[ "$2" = 2 ] && job=randwrite-2jobs.fio
	"$1"/tools/coffer-store -m 1G -s $S -q 2>/dev/null &
	local sp=$!
	sleep 0.5
	(cd "$jobs" && COFFER_SOCKET=$S fio --ioengine=external:"$1"/perf/fio/libcoffer_fio.so \
		--runtime=5 --output-format=terse --terse-version=3 $job) |
		awk -F';' '/^3;/{w+=$49} END{printf "wiops %d", w}'
	kill $sp
	wait $sp 2>/dev/null
}
plain() { # ENGINE NUMJOBS
	local f=/dev/shm/busy-ab-$$.dat
	fio --name=p --ioengine="$1" --rw=randwrite --bs=4k --size=256m --numjobs="$2" \
		--group_reporting --time_based --runtime=5 --ramp_time=1 --filename=$f \
		--output-format=terse --terse-version=3 | awk -F';' '{printf "wiops %d", $49}'
	rm -f $f
}
{
	echo "# busy-ab: randwrite IOPS, base $1 / new $2, psync, mmap; three alternations"
	for i in 1 2 3; do
		for nj in 2 1; do
			for b in base new; do
				d=$base
				[ $b = new ] && d=$new
				echo "rep$i nj$nj $b $(coffer "$d" $nj) load $(cut -d' ' -f1 /proc/loadavg)"
			done
			echo "rep$i nj$nj psync $(plain psync $nj)"
			echo "rep$i nj$nj mmap $(plain mmap $nj)"
		done
	done
} >"$here/busy-ab.txt"
"$here/../../fio/compare.sh" --build "$new" --csv "$here/fio-full.csv" --png "$here/fio-full.png" \
	--runtime 5 >"$here/fio-full.txt" 2>&1
