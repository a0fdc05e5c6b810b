#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# tests/store/stat_test.sh STORE_BIN STAT_BIN - coffer-stat as a user runs it:
#  - --json is valid JSON (python3's parser) for a socket path holding '"', '\' and a tab,
#    and names that path exactly; it and the table show the arena's quick-listed blocks and
#    bytes (v7; values after deletes: store-semantics / test_stat_reports_quick_lists); the
#    table's free_bytes is capacity_bytes - used_bytes;
#  - against a stopped store (SIGSTOP) it gives up after COFFER_STORE_TIMEOUT_MS, as every
#    client does (README.md "Linking a client"), not after a fixed 10 s;
#  - a COFFER_STORE_TIMEOUT_MS that is not a number in range is refused (exit 2);
#  - with no store at the path it says so in coffer_connect()'s words (exit 1).
set -eu
store_bin=$1
stat_bin=$2
# shellcheck source=../../tools/lib/store.sh
. "$(dirname "$0")/../../tools/lib/store.sh"
tmp=$(mktemp -d /tmp/coffer-stat-test.XXXXXX)
cleanup() {
	[ -n "$store_pid" ] && kill -CONT "$store_pid" 2>/dev/null
	coffer_store_stop
	rm -rf "$tmp"
}
trap cleanup EXIT
sock=$(printf '%s/q"b\\\tx.sock' "$tmp")
coffer_store_start "$store_bin" "$sock" "$tmp/store.log" -m 4M -q || {
	cat "$tmp/store.log" >&2
	exit 1
}
"$stat_bin" -s "$sock" --json >"$tmp/stat.json"
python3 - "$tmp/stat.json" "$sock" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    d = json.load(f)
assert d["socket"] == sys.argv[2], (d["socket"], sys.argv[2])
assert d["capacity_bytes"] >= 4 << 20, d
# v7: the arena's quick-listed free blocks, within the free bytes
assert d["quick_blocks"] == 0 and d["quick_bytes"] == 0, d
assert d["quick_bytes"] <= d["capacity_bytes"] - d["used_bytes"], d
print("json ok:", d["socket"])
PY
# the table shows them too
"$stat_bin" -s "$sock" >"$tmp/stat.txt"
for f in quick_blocks quick_bytes; do
	grep -q "^$f  *0\$" "$tmp/stat.txt" || {
		echo "table: no '$f 0' line:" >&2
		cat "$tmp/stat.txt" >&2
		exit 1
	}
done
# and free_bytes = capacity_bytes - used_bytes (an empty store: all of it)
cap=$(awk '$1 == "capacity_bytes" {print $2}' "$tmp/stat.txt")
free=$(awk '$1 == "free_bytes" {print $2}' "$tmp/stat.txt")
[ -n "$cap" ] && [ "$free" = "$cap" ] || {
	echo "table: free_bytes '$free', want capacity_bytes '$cap' (empty store):" >&2
	cat "$tmp/stat.txt" >&2
	exit 1
}

# no store there: say so as coffer_connect() does, with its hint, not ENOENT's bare
# "No such file or directory"
rc=0
"$stat_bin" -s "$tmp/none.sock" 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] || { echo "no store: exit $rc, want 1" >&2; exit 1; }
grep -q "is coffer-store running" "$tmp/err" || {
	echo "no store: want coffer_connect()'s hint, got: $(cat "$tmp/err")" >&2
	exit 1
}

rc=0
COFFER_STORE_TIMEOUT_MS=abc "$stat_bin" -s "$sock" 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] || { echo "COFFER_STORE_TIMEOUT_MS=abc: exit $rc, want 2" >&2; exit 1; }

kill -STOP "$store_pid"
start=$(date +%s%N)
rc=0
COFFER_STORE_TIMEOUT_MS=300 "$stat_bin" -s "$sock" 2>"$tmp/err" || rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
kill -CONT "$store_pid"
cat "$tmp/err"
[ "$rc" = 1 ] || { echo "stopped store: exit $rc, want 1" >&2; exit 1; }
[ "$ms" -lt 5000 ] || { echo "stopped store: gave up after $ms ms, want ~300" >&2; exit 1; }
echo "stopped store: gave up after $ms ms"
