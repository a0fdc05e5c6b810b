# SPDX-License-Identifier: BSD-2-Clause
# tests/client/store_lib.sh - sourced by the client suite's shell tests:
#   store_start STORE_BIN MEM   start a coffer-store on a fresh socket, wait until it
#                               is ready; sets $tmp (work directory), $sock and $pid, and
#                               stops the store and removes $tmp at exit.
# shellcheck source=../../tools/lib/store.sh
. "$(dirname "$0")/../../tools/lib/store.sh"
tmp=
pid=
store_cleanup() {
	coffer_store_stop
	[ -n "$tmp" ] && rm -rf "$tmp"
}
store_start() {
	tmp=$(mktemp -d /tmp/coffer-client-sh.XXXXXX)
	sock=$tmp/s.sock
	trap store_cleanup EXIT INT TERM
	coffer_store_start "$1" "$sock" "$tmp/store.log" -m "$2" -q || {
		cat "$tmp/store.log" >&2
		echo "coffer-store did not start" >&2
		exit 1
	}
	pid=$store_pid
}
