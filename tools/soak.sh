#!/usr/bin/env bash
# tools/soak.sh - load and soak: fio randrw with verify=crc32c through coffer-store from
# several processes while a loop keeps starting and SIGKILLing other coffer clients.
#
# usage: tools/soak.sh DURATION [--jobs N] [--mem SIZE] [--kill-max-ms MS]
#                      [--rss-slack-kb KB] [--store BIN] [--engine SO]
#   DURATION        seconds of verified I/O (CI: 60; hours on demand, e.g. 14400)
#   --jobs N        fio processes doing verified randrw (default 2)
#   --mem SIZE      the store's arena (default 512M)
#   --kill-max-ms   a victim client lives a random 100..MS ms before SIGKILL (default 1500)
#   --rss-slack-kb  allowed growth of the store's private RSS (default 8192)
#   --store, --engine  coffer-store and libcoffer_fio.so (default: build/release/...;
#                   env COFFER_STORE and COFFER_FIO_ENGINE also work)
#
# Verified I/O: fio (fork mode) jobs, 4 KiB randrw 50/50 over 32 MiB each at iodepth 16,
# verify=crc32c with verify_backlog (written blocks are read back and checked during the
# run), verify_fatal. Victims: fio randrw jobs in another namespace (alternately fork and
# thread mode) in their own process group, killed with SIGKILL at a random moment - with
# creates unsealed, copies half done, references held and requests in their rings.
#
# Prints `verify errors: N`, the store's fd count and RSS (total and private) at start and
# end (and every DURATION/10 s), IOPS over time, victims killed. Exit status 0 only when: no verify error, every
# verified job finished cleanly, the store survived, and at the end (every client gone) it
# has its start fd count, no unsealed object, and private RSS within the slack of what it
# was at a quarter of the run (by then every block of the bounded working set exists).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
	sed -n '2,26p' "$0"
	exit 2
}

duration=""
jobs=2
mem=512M
kill_max_ms=1500
rss_slack_kb=8192
store_bin=${COFFER_STORE:-$here/build/release/tools/coffer-store}
engine=${COFFER_FIO_ENGINE:-$here/build/release/perf/fio/libcoffer_fio.so}
while [ $# -gt 0 ]; do
	case "$1" in
	--jobs) jobs=${2:?}; shift ;;
	--mem) mem=${2:?}; shift ;;
	--kill-max-ms) kill_max_ms=${2:?}; shift ;;
	--rss-slack-kb) rss_slack_kb=${2:?}; shift ;;
	--store) store_bin=${2:?}; shift ;;
	--engine) engine=${2:?}; shift ;;
	-h | --help) usage ;;
	-*) echo "soak.sh: unknown option $1" >&2; usage ;;
	*) [ -z "$duration" ] || usage; duration=$1 ;;
	esac
	shift
done
case "$duration$jobs$kill_max_ms$rss_slack_kb" in
'' | *[!0-9]*) echo "soak.sh: DURATION and the numeric options take whole numbers" >&2; usage ;;
esac
[ "$duration" -ge 5 ] || { echo "soak.sh: DURATION must be at least 5 s" >&2; exit 2; }
[ "$kill_max_ms" -ge 200 ] || kill_max_ms=200

skip() {
	echo "soak.sh: skipped: $*"
	exit 77
}
command -v fio >/dev/null || skip "fio is not installed"
command -v jq >/dev/null || skip "jq is not installed (tools/setup.sh installs it)"
[ -x "$store_bin" ] || skip "no coffer-store at $store_bin (build first, or --store)"
[ -f "$engine" ] || skip "no fio engine at $engine (configure with -Dfio_source, or --engine)"
store_bin=$(realpath "$store_bin")
engine=$(realpath "$engine")
stat_bin=$(dirname "$store_bin")/coffer-stat
[ -x "$stat_bin" ] || skip "no coffer-stat beside $store_bin"

work=$(mktemp -d /tmp/coffer-soak.XXXXXX)
sock=$work/s.sock
# fio writes its verify state files (NAME-N-verify.state) into the current directory
cd "$work" || exit 1
# shellcheck source=lib/store.sh
. "$here/tools/lib/store.sh"
killer_pid=""
cleanup() {
	[ -n "$killer_pid" ] && kill "$killer_pid" 2>/dev/null && wait "$killer_pid" 2>/dev/null
	[ -s "$work/victim.pid" ] && kill_victim "$(cat "$work/victim.pid")"
	coffer_store_stop
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail=0
problem() {
	echo "soak: FAIL: $*"
	fail=1
}

# proc_sample PID -> "FDS RSS_KB RSSANON_KB"
proc_sample() {
	local fds rss anon
	fds=$(ls "/proc/$1/fd" 2>/dev/null | wc -l)
	rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
	anon=$(awk '/^RssAnon:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
	echo "$fds ${rss:-0} ${anon:-0}"
}

stat_json() {
	"$stat_bin" -s "$sock" --json 2>/dev/null
}

# ---- the store
coffer_store_start "$store_bin" "$sock" "$work/store.log" -m "$mem" || {
	cat "$work/store.log"
	echo "soak.sh: coffer-store did not start"
	exit 1
}
read -r fds0 rss0 anon0 <<<"$(proc_sample "$store_pid")"
echo "soak: ${duration}s, $jobs verified fio processes, store $mem ($(sed -n 's/.*ready //p' "$work/store.log"))"

fio_engine() {
	fio --ioengine="external:$engine" --coffer_socket="$sock" "$@"
}

# kill_victim PID: SIGKILL a victim fio and its job processes (fio's forked jobs call
# setsid(), so a process-group kill would miss them): children first, by parent pid.
kill_victim() {
	local kids
	kill -STOP "$1" 2>/dev/null # a stopped parent forks no new job while we look
	kids=$(ps -o pid= --ppid "$1" 2>/dev/null)
	# shellcheck disable=SC2086
	kill -KILL $kids "$1" 2>/dev/null
}

# ---- the client-killing loop (victims: fio processes)
killer() {
	local n=0 mode pg="" ms
	trap '[ -n "$pg" ] && kill_victim "$pg"; exit 0' TERM
	while :; do
		if [ $((n % 2)) -eq 0 ]; then mode=(); else mode=(--thread); fi
		fio --ioengine="external:$engine" --coffer_socket="$sock" "${mode[@]}" \
			--name=victim --rw=randrw --rwmixread=50 --bs=4k --size=8m --iodepth=32 \
			--numjobs=2 --time_based --runtime=3600 --coffer_namespace=victim-$((n % 4)) \
			--coffer_missing=zeros >/dev/null 2>&1 &
		pg=$!
		echo "$pg" >"$work/victim.pid"
		# let fio fork its jobs before the kill can land (a kill may still hit mid-connect)
		ms=$((100 + RANDOM % (kill_max_ms - 99)))
		sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
		kill_victim "$pg"
		wait "$pg" 2>/dev/null
		n=$((n + 1))
		echo "$n" >"$work/kills"
	done
}
killer &
killer_pid=$!

# ---- the store over time: fds and RSS every step seconds (background)
step=$(((duration + 9) / 10))
sampler() {
	local t=0
	trap 'exit 0' TERM
	while :; do
		echo "$t $(proc_sample "$store_pid")" >>"$work/store.samples"
		sleep "$step"
		t=$((t + step))
	done
}
sampler &
sampler_pid=$!

# ---- verified I/O for DURATION seconds
fio_engine --name=soak --rw=randrw --rwmixread=50 --bs=4k --size=32m --iodepth=16 \
	--iodepth_batch_submit=8 --iodepth_batch_complete_max=16 --numjobs="$jobs" \
	--time_based --runtime="$duration" --verify=crc32c --verify_backlog=1024 \
	--verify_fatal=1 --coffer_namespace=soak --coffer_prefill=1 \
	--write_iops_log="$work/soak" --log_avg_msec=1000 \
	--output-format=json --output="$work/soak.json" >"$work/soak.log" 2>&1
fio_rc=$?
kill -TERM "$sampler_pid" 2>/dev/null
wait "$sampler_pid" 2>/dev/null

kill -TERM "$killer_pid" 2>/dev/null
wait "$killer_pid" 2>/dev/null
killer_pid=""
# the last victim, if the loop was stopped while it ran
[ -s "$work/victim.pid" ] && kill_victim "$(cat "$work/victim.pid")"
kills=$(cat "$work/kills" 2>/dev/null || echo 0)

# ---- results
verify_errors=$(grep -Eci 'verify.*(fail|bad)|bad (magic|header)|crc32c.*(fail|mismatch)' \
	"$work/soak.log" || true)
job_errors=0
if [ -s "$work/soak.json" ] && jq -e . "$work/soak.json" >/dev/null 2>&1; then
	job_errors=$(jq '[.jobs[] | select(.error != 0)] | length' "$work/soak.json")
	riops=$(jq '[.jobs[].read.iops] | add | floor' "$work/soak.json")
	wiops=$(jq '[.jobs[].write.iops] | add | floor' "$work/soak.json")
	rbytes=$(jq '[.jobs[].read.io_bytes] | add' "$work/soak.json")
else
	riops=0 wiops=0 rbytes=0
	problem "fio wrote no JSON result"
fi
if [ "$fio_rc" -ne 0 ] || [ "$job_errors" -ne 0 ]; then
	[ "$verify_errors" -gt 0 ] || verify_errors=$job_errors
	tail -30 "$work/soak.log"
	problem "fio exited with $fio_rc, $job_errors job(s) with errors"
fi
echo "verify errors: $verify_errors"
[ "$verify_errors" -eq 0 ] || problem "verify errors"

echo "IOPS over time (read+write, all verified jobs):"
cat "$work"/soak_iops.*.log 2>/dev/null | awk -F, -v step=$(((duration + 9) / 10)) '
	{ s = int($1 / 1000); sum[s] += $2; if (s > max) max = s }
	END {
		for (t = 0; t <= max; t += step) {
			tot = 0; n = 0
			for (u = t; u < t + step && u <= max; u++) { tot += sum[u]; n++ }
			if (n > 0) printf "  t=%4ds  %8.0f IOPS\n", t, tot / n
		}
	}'
echo "IOPS mean: read $riops, write $wiops; verified bytes read back $rbytes; victims killed: $kills"

# ---- the store at the end: every client gone
if ! kill -0 "$store_pid" 2>/dev/null; then
	problem "the store died"
else
	for _ in $(seq 1 200); do
		j=$(stat_json)
		[ "$(jq -r .clients <<<"$j")" = 1 ] && [ "$(jq -r .objects_created <<<"$j")" = 0 ] && break
		sleep 0.05
	done
	read -r fds1 rss1 anon1 <<<"$(proc_sample "$store_pid")"
	j=$(stat_json)
	echo "store fds: start $fds0 end $fds1"
	echo "store RSS: start $rss0 kB end $rss1 kB (private: start $anon0 kB end $anon1 kB)"
	echo "store at end: $(jq -c '{clients, used_bytes, objects_created, objects_sealed, evictions}' <<<"$j")"
	# coffer-stat's own connection is the one client; its socket is one more fd
	[ "$fds1" -le $((fds0 + 1)) ] || problem "store fds grew from $fds0 to $fds1"
	# The working set (every block of every namespace written) is reached early; from
	# then on the store must stay flat: compare the end with the sample at a quarter.
	read -r _ _ _ anonq <<<"$(awk -v q=$((duration / 4)) '$1 >= q { print; exit }' \
		"$work/store.samples")"
	anonq=${anonq:-$anon0}
	echo "store over time (s, fds, RSS kB, private kB):"
	awk '{ printf "  t=%4ds  fds %3d  RSS %7d kB  private %7d kB\n", $1, $2, $3, $4 }' \
		"$work/store.samples"
	[ "$anon1" -le $((anonq + rss_slack_kb)) ] ||
		problem "store private RSS grew from $anonq kB (at $((duration / 4)) s) to $anon1 kB (slack $rss_slack_kb)"
	[ "$(jq -r .objects_created <<<"$j")" = 0 ] || problem "unsealed objects left behind"
	[ "$(jq -r .clients <<<"$j")" = 1 ] || problem "clients left behind"
fi
if [ "$fail" -eq 0 ]; then
	echo "soak: PASS (${duration}s, $kills victims killed)"
else
	sed -n '1,40p' "$work/store.log"
	echo "soak: FAIL"
fi
exit "$fail"
