#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# examples/ckpt_test.sh STORE_BIN CKPT_BIN - run examples/ckpt.c (shared libcoffer, public
# API only) against a fresh coffer-store: 8 threads on one connection, an EQ each, writing
# and reading back objects of 0 B to 1 MiB + 13 with events they reuse, then deleting them,
# then shutting down (disconnect, last coffer_fini) while the threads still submit; and
# the same with 2 threads. Every byte and every return code is checked; a hung thread
# fails the run (watchdog).
set -eu
. "$(dirname "$0")/../tools/lib/store.sh"
coffer_store_start_tmp "$1" 256M ckpt
"$2" -t 8 -r 3 "$sock"
"$2" -t 2 -r 1 "$sock"
