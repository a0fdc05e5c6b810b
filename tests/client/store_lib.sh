# SPDX-License-Identifier: BSD-2-Clause
# tests/client/store_lib.sh - sourced by the client suite's shell tests:
#   store_start STORE_BIN MEM   start a coffer-store on a fresh socket, wait until it
#                               is ready; sets $tmp (work directory), $sock and $pid, and
#                               stops the store and removes $tmp at exit.
# shellcheck source=../../tools/lib/store.sh
. "$(dirname "$0")/../../tools/lib/store.sh"
store_start() {
	coffer_store_start_tmp "$1" "$2" client-sh
	pid=$store_pid
}
