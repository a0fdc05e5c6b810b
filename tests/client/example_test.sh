#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# tests/client/example_test.sh STORE_BIN EXAMPLE_BIN - run the README's client example
# (docs/example.c, linked against the SHARED libcoffer, so only exported symbols are used)
# against a fresh coffer-store, twice: the second run passes only if the first deleted its
# object (create would answer -EEXIST otherwise).
set -eu
example=$2
. "$(dirname "$0")/store_lib.sh"
store_start "$1" 16M
"$example" "$sock"
COFFER_SOCKET="$sock" "$example"
