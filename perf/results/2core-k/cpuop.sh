#!/bin/bash
# cpuop.sh LABEL BUILD [PENV] [fio extra]: wiops, store and fio-jobs task-clock per op (us)
# OUT: folder for the raw files (default /tmp).
l=$1 b=$2; export PENV=${3:-}; shift 3
"$(dirname "$0")"/prof.sh $b randwrite-2jobs.fio ${OUT:-/tmp}/p-$l "$@" > ${OUT:-/tmp}/p-$l.out 2>&1
w=$(awk '{print $2}' ${OUT:-/tmp}/p-$l.out)
st=$(awk '/task-clock/{print $1}' ${OUT:-/tmp}/p-$l.stat-store | tr -d ,)
fj=$(awk '/fio-.*task-clock/{s+=$2} END{print s}' ${OUT:-/tmp}/p-$l.stat-fio)
cs=$(awk '/context-switches/ && !/fio/{print $1}' ${OUT:-/tmp}/p-$l.stat-store | tr -d ,)
echo "$l wiops $w store_us/op $(echo "scale=3; $st*1000/($w*2)" | bc) fio_us/op $(echo "scale=3; $fj*1000/($w*2)" | bc) store_cpu $(echo "scale=2; $st/2000" | bc) store_cs/s $((cs/2))"
