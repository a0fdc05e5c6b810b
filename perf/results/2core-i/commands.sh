#!/bin/bash
# perf/results/2core-i/commands.sh BUILD: fio writes by put of a reserved block (protocol v5).
# 1. put-ab.txt: perf/fio/jobs/randwrite.fio and randwrite-2jobs.fio (--runtime=5) with
#    coffer_put=0 (create + copy + seal: two requests on a write's path) and =1 (copy into a
#    block reserved ahead, one put), a fresh store (-m 1G) per run, then psync on a tmpfs file
#    of the same shape; three alternations.
# 2. fio-full.{csv,png,txt}: perf/fio/compare.sh --runtime 5 (all engines, numjobs 1,2).
set -u
build=$(cd "$1" && pwd) here=$(cd "$(dirname "$0")" && pwd) S=/tmp/put-ab-$$.sock
eng=$build/perf/fio/libcoffer_fio.so jobs=$here/../../fio/jobs
coffer() { # JOB PUT
	"$build"/tools/coffer-store -m 1G -s $S -q 2>/dev/null &
	local sp=$!
	sleep 1
	(cd "$jobs" && COFFER_SOCKET=$S fio --ioengine=external:"$eng" --runtime=5 \
		--coffer_put="$2" --output-format=terse --terse-version=3 "$1") |
		awk -F';' '/^3;/{w+=$49} END{print "wiops",w}'
	kill $sp
	wait $sp 2>/dev/null
}
{
	echo "# put-ab: randwrite IOPS, coffer_put 0/1 and psync, three alternations"
	for i in 1 2 3; do
		for nj in 1 2; do
			job=randwrite.fio
			[ $nj = 2 ] && job=randwrite-2jobs.fio
			for p in 0 1; do
				echo "rep$i nj$nj put=$p $(coffer $job $p) load $(cut -d' ' -f1 /proc/loadavg)"
			done
			echo "rep$i nj$nj psync $(fio --name=p --ioengine=psync --rw=randwrite --bs=4k \
				--size=256m --numjobs=$nj --group_reporting --time_based --runtime=5 \
				--ramp_time=1 --filename=/dev/shm/put-ab-$$.dat --output-format=terse \
				--terse-version=3 | awk -F';' '{print "wiops",$49}')"
			rm -f /dev/shm/put-ab-$$.dat
		done
	done
} >"$here/put-ab.txt"
"$here/../../fio/compare.sh" --csv "$here/fio-full.csv" --png "$here/fio-full.png" \
	--runtime 5 >"$here/fio-full.txt" 2>&1
