#!/bin/bash
# wake-run.sh TREE_BUILD WAKEBIN LABEL: a store of that tree, then wake with 0 and 4000 idle channels
S=/tmp/wake.$$.sock; $1/tools/coffer-store -s $S -m 256M >/dev/null 2>&1 & sp=$!; sleep 0.5
for n in 0 4000; do echo "$3 $($2 $S $n 300)"; done
kill $sp; wait
