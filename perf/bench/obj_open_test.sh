#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Integration test of `coffer-bench obj_open`: starts a real coffer-store on a temporary
# socket, runs the benchmark briefly (every phase, 1 and 2 threads; it verifies its own
# results and exits non-zero on any mismatch), checks that --min-seconds repeats the open and
# close phases, then stops the store. Never leaves it running.
# usage: obj_open_test.sh COFFER_STORE COFFER_BENCH
set -u
store=$1
bench=$2
dir=$(mktemp -d)
sock=$dir/coffer.sock
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM

"$store" -m 64M -s "$sock" --hugepages=off &
pid=$!
i=0
while [ ! -S "$sock" ]; do
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "obj_open_test.sh: coffer-store exited before listening" >&2
		pid=
		exit 1
	fi
	i=$((i + 1))
	if [ $i -gt 100 ]; then
		echo "obj_open_test.sh: coffer-store did not listen on $sock within 10 s" >&2
		exit 1
	fi
	sleep 0.1
done
"$bench" obj_open --socket "$sock" --threads 1,2 --objects 2000 --seconds 0.2 || exit $?
# --min-seconds S: open and close repeat with fresh ObjectIDs until together they took S
# seconds (a single pass of --objects is too short to time steadily; tools/quickstart.sh
# relies on it): the rows sum whole passes, and their seconds add up to at least S
csv=$dir/min.csv
"$bench" obj_open --socket "$sock" --threads 1 --objects 2000 --min-seconds 0.3 \
	--phases open-close --csv "$csv" || exit $?
awk -F, 'NR > 1 && $9 == "ok" { s += $5; ops[$3] = $6; n++ }
	END {
		if (n != 2 || s < 0.3 || ops["open"] % 2000 || ops["open"] != ops["close"]) {
			printf "obj_open_test.sh: --min-seconds 0.3: %d rows, %.3f s, open %d, close %d ops\n",
				n, s, ops["open"], ops["close"] > "/dev/stderr"
			exit 1
		}
	}' "$csv" || { cat "$csv" >&2; exit 1; }
exit 0
