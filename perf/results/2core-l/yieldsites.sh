#!/bin/bash
# yieldsites.sh BUILD OUT.txt: where the fio jobs' and the store's syscalls come from: perf record
# --call-graph dwarf on raw_syscalls:sys_enter of the fio jobs (randwrite-2jobs, 1 s, 2 s in),
# report by syscall id and caller. Run under flock /tmp/coffer-bench.lock.
set -u
build=$1 txt=$2
S=/tmp/perf10-$$.sock
eng=$build/perf/fio/libcoffer_fio.so
$build/tools/coffer-store -m 1G -s $S -q 2>/dev/null &
sp=$!
sleep 1
cd "$(dirname "$0")"/../../fio/jobs
env COFFER_SOCKET=$S fio --ioengine=external:$eng --runtime=5 --output-format=terse --terse-version=3 randwrite-2jobs.fio > /dev/null &
fp=$!
sleep 2
pids=$(pgrep -P $fp -d,)
perf record -q -e raw_syscalls:sys_enter --call-graph dwarf,16384 -o /tmp/perf10-ys.data -p $pids,$sp -- sleep 1 2>/dev/null >/dev/null
wait $fp
kill $sp; wait $sp 2>/dev/null
perf report -i /tmp/perf10-ys.data --stdio --no-children --sort comm,sym -G --percent-limit 2 2>/dev/null | grep -v '^$' | head -150 > $txt
perf script -i /tmp/perf10-ys.data -F comm,trace,ip,sym 2>/dev/null | awk '
  /raw_syscalls:sys_enter|NR / {if (key!="") c[key]++; split($0,a,"NR "); split(a[2],b," "); nr=b[1]; comm=$1; depth=0; key=""; next}
  NF>=2 && depth<6 {depth++; if ($2 !~ /^(__|syscall|entry|do_syscall|\[unknown\])/ && key=="") key=comm" NR"nr" "$2}
  END{if (key!="") c[key]++; for (k in c) print c[k], k}' | sort -rn | head -30 >> $txt
rm -f /tmp/perf10-ys.data
