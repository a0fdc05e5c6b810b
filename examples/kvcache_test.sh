#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# examples/kvcache_test.sh STORE_BIN KVCACHE_BIN - run examples/kvcache.c (linked against
# the SHARED libcoffer, so only the public API is used) against a fresh coffer-store with
# 1, 4, 16 and 64 threads; each run checks every byte it reads and that it leaked nothing.
set -eu
. "$(dirname "$0")/../tools/lib/store.sh"
coffer_store_start_tmp "$1" 64M kvcache
for threads in 1 4 16 64; do
	# fewer operations per thread as threads grow: about the same total work
	"$2" "$sock" "$threads" $((4000 / threads + 50)) $((threads > 16 ? threads : 16))
done
