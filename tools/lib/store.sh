# SPDX-License-Identifier: BSD-2-Clause
# tools/lib/store.sh - sourced by the shell scripts that run a coffer-store of their own
# (quickstart, soak, perf/fio/compare.sh, the fio test suite):
#   coffer_store_start BIN SOCK LOG ARGS...  start `BIN -s SOCK ARGS...` in the background
#       (stderr to LOG), set $store_pid, and wait up to 20 s until it is ready. Returns 0
#       when ready, 1 when it exited or never became ready (LOG says why; the caller
#       reports it).
#   coffer_store_stop                        SIGTERM $store_pid if it still runs, wait for
#       it (a clean stop removes its socket), and clear $store_pid.
#   coffer_store_start_tmp BIN MEM NAME      for tests: start `BIN -m MEM -q` on $sock in
#       a fresh directory $tmp (/tmp/coffer-NAME.XXXXXX), stop it and remove $tmp at exit;
#       when it does not start, print its log and exit 1.
store_pid=""

coffer_store_start() {
	local bin=$1 sock=$2 log=$3 i
	shift 3
	rm -f "$sock" # a stale socket would pass for a ready store
	"$bin" -s "$sock" "$@" 2>"$log" &
	store_pid=$!
	for i in $(seq 1 400); do
		grep -q "coffer-store: ready" "$log" 2>/dev/null && [ -S "$sock" ] && return 0
		kill -0 "$store_pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

coffer_store_stop() {
	if [ -n "$store_pid" ] && kill -0 "$store_pid" 2>/dev/null; then
		kill -TERM "$store_pid" 2>/dev/null
		wait "$store_pid" 2>/dev/null
	fi
	store_pid=""
}

coffer_store_tmp_cleanup() {
	coffer_store_stop
	[ -n "${tmp:-}" ] && rm -rf "$tmp"
}

coffer_store_start_tmp() {
	tmp=$(mktemp -d "/tmp/coffer-$3.XXXXXX")
	sock=$tmp/s.sock
	trap coffer_store_tmp_cleanup EXIT INT TERM
	coffer_store_start "$1" "$sock" "$tmp/store.log" -m "$2" -q || {
		cat "$tmp/store.log" >&2
		echo "coffer-store did not start" >&2
		exit 1
	}
}
