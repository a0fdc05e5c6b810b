#!/bin/bash
# sysop.sh LABEL BUILD [PENV] [fio options]: cpuop.sh's figures (2core-j) plus, per write,
# the fio jobs' and the store's context switches (voluntary / involuntary, from
# /proc/PID/task/*/status), user and system time (/proc/PID/task/*/stat, 10 ms ticks) and
# syscalls by kind (perf stat -e syscalls:sys_enter_* on the pids), all over the same 2 s
# window of randwrite-2jobs.fio (runtime 5) against a fresh coffer-store -m 1G.
# OUT: folder for the raw files (default /tmp). Run it under flock /tmp/coffer-bench.lock.
set -u
l=$1 build=$2; PENV=${3:-}; shift 3
out=${OUT:-/tmp}/s-$l
S=/tmp/perf10-$$.sock
eng=$build/perf/fio/libcoffer_fio.so
$build/tools/coffer-store -m 1G -s $S -q 2>/dev/null &
sp=$!
sleep 1
cd "$(dirname "$0")"/../../fio/jobs
env COFFER_SOCKET=$S $PENV fio --ioengine=external:$eng --runtime=5 "$@" --output-format=terse --terse-version=3 randwrite-2jobs.fio > $out.terse &
fp=$!
sleep 2
jobs=$(pgrep -P $fp | tr '\n' ' ')
pids=$(echo $jobs | tr ' ' ,)
ev=task-clock,context-switches,raw_syscalls:sys_enter
for s in sched_yield write read ppoll poll epoll_wait epoll_pwait futex clock_gettime clock_nanosleep nanosleep getrusage pread64 pwrite64 lseek io_getevents sendmsg recvmsg; do
	ev=$ev,syscalls:sys_enter_$s
done
snap() { # pid list -> "utime stime vcs nvcs" summed over threads
	for p in "$@"; do
		for t in /proc/$p/task/*; do
			u=$(awk '{print $14, $15}' $t/stat 2>/dev/null)
			c=$(awk '/^voluntary_ctxt/{v=$2} /^nonvoluntary_ctxt/{n=$2} END{print v, n}' $t/status 2>/dev/null)
			echo "$u $c"
		done
	done | awk '{u+=$1; s+=$2; v+=$3; n+=$4} END{print u, s, v, n}'
}
a_f=$(snap $jobs); a_s=$(snap $sp)
perf stat -e $ev -p $sp -- sleep 2 2> $out.stat-store &
perf stat -e $ev -p $pids -- sleep 2 2> $out.stat-fio &
sleep 2
b_f=$(snap $jobs); b_s=$(snap $sp)
wait $fp
kill $sp; wait $sp 2>/dev/null
w=$(awk -F';' '/^3;/{w+=$49} END{print w}' $out.terse)
ops=$((w * 2)) # writes in the 2 s window, at the run's average rate
{
echo "$l wiops $w jobs_pids $jobs store_pid $sp"
for who in fio store; do
	f=$out.stat-$who
	tc=$(awk '/task-clock/{print $1}' $f | tr -d ,)
	echo "$who us/op $(echo "scale=3; $tc*1000/$ops" | bc)"
	awk -v ops=$ops -v who=$who '/syscalls|context-switches/{gsub(",","",$1); if ($1+0>0) printf "%s %s per-op %.4f (%s in 2 s)\n", who, $2, $1/ops, $1}' $f
done
echo "$a_f $b_f" | awk -v ops=$ops '{printf "fio user %.3f sys %.3f us/op (ticks %d/%d) vcs/op %.4f nvcs/op %.4f\n", ($5-$1)*1e4/ops, ($6-$2)*1e4/ops, $5-$1, $6-$2, ($7-$3)/ops, ($8-$4)/ops}'
echo "$a_s $b_s" | awk -v ops=$ops '{printf "store user %.3f sys %.3f us/op (ticks %d/%d) vcs/op %.4f nvcs/op %.4f\n", ($5-$1)*1e4/ops, ($6-$2)*1e4/ops, $5-$1, $6-$2, ($7-$3)/ops, ($8-$4)/ops}'
} | tee $out.sum
