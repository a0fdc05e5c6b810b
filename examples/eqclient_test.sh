#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# examples/eqclient_test.sh STORE_BIN EQCLIENT_BIN - run examples/eqclient.c (shared
# libcoffer, public API only) against a fresh coffer-store: 1, 4 and 8 threads with an EQ
# each, then 4 and 8 threads sharing one EQ, at 16-64 operations in flight per thread, and
# 2 threads at depth 64 over 8192 objects, where the 16-request calls fill the 512-entry
# channel (-EAGAIN at launch; get_oid_vec may launch only a prefix). Objects are up to 64 KiB
# in the first run and up to 4 KiB after it (the same paths, less checksumming under the
# sanitizers). Each run checks every byte it reads against the writer's checksum, nearly 100
# documented error returns, a thread that exits with gets in flight, and that the store
# holds nothing of the client after its disconnect.
set -eu
. "$(dirname "$0")/../tools/lib/store.sh"
coffer_store_start_tmp "$1" 256M eqclient
"$2" -t 1 -d 16 -n 512 "$sock"
"$2" -t 4 -d 32 -n 1024 -z 4096 "$sock"
"$2" -t 8 -d 64 -n 1024 -z 4096 "$sock"
"$2" -t 4 -d 32 -n 1024 -z 4096 -s "$sock"
"$2" -t 8 -d 64 -n 1024 -z 4096 -s "$sock"
"$2" -t 2 -d 64 -n 8192 -z 4096 "$sock"
