# SPDX-License-Identifier: BSD-2-Clause
# tests/client/store_lib.sh - sourced by the client suite's shell tests:
#   store_start STORE_BIN MEM   start a coffer-store on a fresh socket, wait until it
#                               listens; sets $tmp (work directory), $sock and $pid, and
#                               stops the store and removes $tmp at exit.
tmp=
pid=
store_cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	[ -n "$tmp" ] && rm -rf "$tmp"
}
store_start() {
	tmp=$(mktemp -d /tmp/coffer-client-sh.XXXXXX)
	sock=$tmp/s.sock
	trap store_cleanup EXIT INT TERM
	"$1" -m "$2" -s "$sock" -q &
	pid=$!
	i=0
	while [ ! -S "$sock" ]; do
		kill -0 "$pid" 2>/dev/null || { echo "coffer-store did not start" >&2; exit 1; }
		i=$((i + 1))
		[ $i -gt 500 ] && { echo "coffer-store not ready" >&2; exit 1; }
		sleep 0.02
	done
}
