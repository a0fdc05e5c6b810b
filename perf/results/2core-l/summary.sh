#!/bin/bash
# summary.sh FILE...: the randwrite IOPS (k) of ab.sh's output by label and numjobs, and
# sysop's per-write figures, one line per run.
awk '
/^== sysop/ {mode="sysop"; lab=$3; next}
/^== / {mode="cmp"; lab=$2; next}
mode=="cmp" && $2=="randwrite" {printf "%-10s %-8s nj%s randwrite %d k p99 %s us\n", lab, $1, $4, $5/1000, $8}
/ wiops / {w=$3}
/^fio us\/op/ {fu=$3}
/^store us\/op/ {su=$3}
/^fio syscalls:sys_enter_sched_yield/ {fy=$4}
/^fio raw_syscalls/ {fs=$4}
/^fio user/ {printf "%-10s sysop wiops %d k fio_us/op %s store_us/op %s fio_syscalls/op %s fio_yields/op %s fio_user_us/op %s fio_sys_us/op %s\n", lab, w/1000, fu, su, fs, fy, $3, $5}
' "$@"
