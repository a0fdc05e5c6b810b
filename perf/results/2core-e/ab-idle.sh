#!/bin/bash
# ab-idle.sh OUT: before (f2b9208) / after (main) with 0 and 8x63 idle channels in another process, alternated 3 times
OUT=$1; : > "$OUT"
for r in 1 2 3; do
 for v in old new; do
  if [ $v = old ]; then B=/work/wt-old/build; else B=/work/main/build/release; fi
  for c in 0 8; do
   ./run2.sh $B ./idle-$v $c 63 "$v r$r" >> $OUT
  done
 done
done
