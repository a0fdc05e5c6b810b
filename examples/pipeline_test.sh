#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# examples/pipeline_test.sh STORE_BIN PIPELINE_BIN - run examples/pipeline.c (shared
# libcoffer, public API only) against a fresh coffer-store whose 160 MiB arena is smaller
# than the data set (three 64 MiB objects among 192 of 1 B .. 64 MiB), so that objects are
# evicted while consumers read: one producer process, 3 and then 5 consumer processes, one
# of them killed while it holds an object and waits on a get; every byte read is checked,
# every return code against the header's list, and the store must hold nothing at the end.
set -eu
. "$(dirname "$0")/../tools/lib/store.sh"
coffer_store_start_tmp "$1" 160M pipeline
"$2" -c 3 -n 192 "$sock"
"$2" -c 5 -n 128 "$sock"
