#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# tests/client/example_test.sh STORE_BIN EXAMPLE_BIN - run the README's client example
# (docs/example.c, linked against the SHARED libcoffer, so only exported symbols are used)
# against a fresh coffer-store, twice: the second run passes only if the first deleted its
# object (create would answer -EEXIST otherwise).
set -eu
store=$1
example=$2
tmp=$(mktemp -d /tmp/coffer-example-test.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
"$store" -m 16M -s "$tmp/s.sock" -q &
pid=$!
i=0
while [ ! -S "$tmp/s.sock" ]; do
	kill -0 "$pid" 2>/dev/null || { echo "coffer-store did not start" >&2; exit 1; }
	i=$((i + 1))
	[ $i -gt 500 ] && { echo "coffer-store not ready" >&2; exit 1; }
	sleep 0.02
done
"$example" "$tmp/s.sock"
COFFER_SOCKET="$tmp/s.sock" "$example"
