#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# tests/client/bench_store_test.sh STORE_BIN BENCH_BIN - run `coffer-bench store` briefly
# against a fresh coffer-store: every workload at batch 1 and 32, 1 and 2 threads, puts of
# 1 and 4 MiB, then reserve-put. The benchmark verifies its own results (statuses, sizes,
# content, store back to its baseline) and exits non-zero otherwise; this test passes its
# exit status on.
set -eu
bench=$2
. "$(dirname "$0")/store_lib.sh"
store_start "$1" 64M
"$bench" store --socket "$sock" --seconds 0.1 --batch 1,32 --threads 1,2 \
	--put-max 4M --put-bytes 8M --csv "$tmp/out.csv" | tee "$tmp/out.txt"
# one CSV row per result: 2 workloads x 2 batches x 2 thread counts + 2 sizes x
# (coffer batch 1, coffer batch 2, coffer put-stream, memcpy), plus a memcpy-4k row per
# size when the memcpy baseline is not on 4 KiB pages (backed as a hugepage arena is)
rows=$(($(wc -l < "$tmp/out.csv") - 1))
n4k=$(grep -c '^store,memcpy-4k,put,1,1,' "$tmp/out.csv" || true)
[ "$(grep -c '^store,memcpy,put,1,1,' "$tmp/out.csv")" -eq 2 ] ||
	{ echo "expected 2 memcpy rows" >&2; exit 1; }
if grep -q 'memcpy on 4 KiB pages' "$tmp/out.txt"; then want4k=0; else want4k=2; fi
[ "$n4k" -eq "$want4k" ] || { echo "expected $want4k memcpy-4k rows, got $n4k" >&2; exit 1; }
[ "$((rows - n4k))" -eq 16 ] || { echo "expected 16 CSV rows besides memcpy-4k, got $((rows - n4k))" >&2; exit 1; }
[ "$(grep -c '^store,coffer,put-stream,3,1,' "$tmp/out.csv")" -eq 2 ] ||
	{ echo "expected 2 put-stream rows" >&2; exit 1; }
head -1 "$tmp/out.csv" | grep -qx 'bench,impl,workload,batch,threads,size_bytes,seconds,ops,mops,gbps,status'
! grep -q ',FAIL$' "$tmp/out.csv"
# reserve-put (protocol v5 RESERVE/PUT; opt-in): 2 batches x 2 thread counts, each verified
# by the benchmark (every key put read back, the pool given back, the store back to its
# baseline)
"$bench" store --socket "$sock" --seconds 0.1 --batch 1,32 --threads 1,2 \
	--workload reserve-put --csv "$tmp/rp.csv" | tee "$tmp/rp.txt"
[ "$(grep -c '^store,coffer,reserve-put,' "$tmp/rp.csv")" -eq 4 ] ||
	{ echo "expected 4 reserve-put rows" >&2; exit 1; }
! grep -q ',FAIL$' "$tmp/rp.csv"
