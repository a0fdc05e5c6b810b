#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# examples/manythreads_test.sh STORE_BIN STAT_BIN MANYTHREADS_BIN - run examples/manythreads.c
# (shared libcoffer, public API only) against a fresh coffer-store: 300 threads of blocking
# calls on one connection, 600 on two, 1000 on one (the 488 past its 512 channels get
# -EMFILE, the others are unaffected), 8 threads with 10-50 ms idle gaps (the store sleeps;
# no call may take over a second), and a client killed mid-run: the store's clients, used
# bytes of unsealed objects and fds must come back to their baseline.
set -eu
. "$(dirname "$0")/../tools/lib/store.sh"
coffer_store_start_tmp "$1" 64M manythreads
stat_bin=$2
stat_field() { # FIELD: one number from coffer-stat --json
	"$stat_bin" -s "$sock" --json | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}
"$3" "$sock" 300 1 20
"$3" "$sock" 600 2 10
"$3" "$sock" 1000 1 5
"$3" "$sock" 8 1 20 50 1000
fds0=$(ls "/proc/$store_pid/fd" | wc -l)
used0=$(stat_field used_bytes)
"$3" "$sock" 300 1 1000000 >/dev/null 2>&1 &
client=$!
sleep 1
kill -KILL "$client"
wait "$client" 2>/dev/null || true
# Killed between a seal and its delete, a thread leaves a sealed object: kept by design
# (the store is a cache), so the bytes checked are those of unsealed objects.
for _ in $(seq 100); do
	fds=$(ls "/proc/$store_pid/fd" | wc -l)
	clients=$(stat_field clients)
	created=$(stat_field objects_created)
	[ "$fds" = "$fds0" ] && [ "$clients" = 1 ] && [ "$created" = 0 ] && break
	sleep 0.1
done
sealed=$(stat_field objects_sealed)
used=$(stat_field used_bytes)
echo "after SIGKILL: fds $fds (baseline $fds0), clients $clients (coffer-stat itself)," \
	"unsealed $created, used bytes $used = $used0 + $sealed sealed objects of 256"
[ "$fds" = "$fds0" ] && [ "$clients" = 1 ] && [ "$created" = 0 ] &&
	[ "$used" = $((used0 + sealed * 256)) ]
