#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
#
# perf/store-compare.sh - the same small-object workload against coffer-store and against
# redis-server (Debian's package) on a Unix socket, side by side in one run (issue 6,
# item 6): 4 KiB values, put then get, batch / pipeline depth 1 and 32, 1 and 2 client
# threads. coffer: `coffer-bench store` (create+copy+seal+release = put, get+release = get;
# batch = requests in flight per thread, one EQ and channel per thread). redis:
# `redis-benchmark -t set,get -P depth` (pipelining equal to the batch depth), one
# connection per client thread, `--threads` client threads.
#
# usage: perf/store-compare.sh [--build DIR] [--seconds S] [--requests N] [--csv FILE]
#   --build DIR     meson build directory with tools/coffer-store and perf/bench/coffer-bench
#                   (default: the first of build/release, build, build-* holding both;
#                   README.md's build makes build/release)
#   --seconds S     per coffer result (default 2)
#   --requests N    per redis-benchmark run (default 200000)
#   --csv FILE      write the combined table as CSV too
# Both servers are started on temporary sockets and stopped by this script; both are
# given the same memory budget (1 GiB). Exit status: 0, or 1 when a run failed.
set -eu

build=
seconds=2
requests=200000
csv=
depths="1 32"
threads_list="1 2"
value=4096

while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--requests) requests=$2; shift 2 ;;
	--csv) csv=$2; shift 2 ;;
	-h|--help) sed -n '3,/^set -eu/p' "$0" | sed '$d'; exit 0 ;;
	*) echo "store-compare.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

# shellcheck source=../tools/lib/build.sh
. "$(dirname "$0")/../tools/lib/build.sh"
# shellcheck disable=SC2034 # read by tools/lib/build.sh
coffer_build_who=store-compare.sh
need="tools/coffer-store perf/bench/coffer-bench"
if [ -z "$build" ]; then
	# shellcheck disable=SC2086 # $need: two paths
	build=$(coffer_find_build $need) || {
		echo "store-compare.sh: no build directory among build/release, build, build-* holds" \
			"$need; $(coffer_build_advice), or give --build DIR" >&2
		exit 2
	}
fi
# shellcheck disable=SC2086
coffer_check_build "$build" $need || exit 2
store_bin=$build/tools/coffer-store
bench_bin=$build/perf/bench/coffer-bench
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null || {
	echo "store-compare.sh: redis-server/redis-benchmark missing (apt-get install redis-server redis-tools)" >&2
	exit 2
}

tmp=$(mktemp -d /tmp/coffer-store-compare.XXXXXX)
# shellcheck source=../tools/lib/store.sh
. "$(dirname "$0")/../tools/lib/store.sh"
redis_pid=
cleanup() {
	coffer_store_stop
	[ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

wait_socket() { # path pid
	i=0
	while [ ! -S "$1" ]; do
		kill -0 "$2" 2>/dev/null || return 1
		i=$((i + 1))
		[ $i -gt 500 ] && return 1
		sleep 0.02
	done
}

failed=0
echo "impl,workload,depth,threads,value_bytes,ops_per_s,status" > "$tmp/rows.csv"

# ---- coffer -----------------------------------------------------------------------------
coffer_store_start "$store_bin" "$tmp/coffer.sock" "$tmp/store.log" -m 1G -q ||
	{ cat "$tmp/store.log" >&2; exit 1; }
tl=$(echo $threads_list | tr ' ' ,)
dl=$(echo $depths | tr ' ' ,)
if ! "$bench_bin" store --socket "$tmp/coffer.sock" --workload create-seal,get-release \
	--obj-size $value --batch "$dl" --threads "$tl" --seconds "$seconds" \
	--csv "$tmp/coffer.csv" > "$tmp/coffer.out"; then
	failed=1
fi
cat "$tmp/coffer.out" >&2
coffer_store_stop
# bench,impl,workload,batch,threads,size_bytes,seconds,ops,mops,gbps,status
awk -F, 'NR > 1 { w = ($3 == "create-seal") ? "put" : "get";
	printf "coffer,%s,%s,%s,%s,%.0f,%s\n", w, $4, $5, $6, $9 * 1e6, $11 }' \
	"$tmp/coffer.csv" >> "$tmp/rows.csv"

# ---- redis ------------------------------------------------------------------------------
redis-server --port 0 --unixsocket "$tmp/redis.sock" --unixsocketperm 700 --save '' \
	--appendonly no --maxmemory 1gb --daemonize no --dir "$tmp" > "$tmp/redis.log" 2>&1 &
redis_pid=$!
wait_socket "$tmp/redis.sock" "$redis_pid" || { cat "$tmp/redis.log" >&2; exit 1; }
for t in $threads_list; do
	for d in $depths; do
		extra=
		[ "$t" -gt 1 ] && extra="--threads $t"
		# -r: keys spread over 1024 per thread, as coffer's --keys default
		if ! redis-benchmark -s "$tmp/redis.sock" -t set,get -d $value -P "$d" -c "$t" \
			$extra -n "$requests" -r $((1024 * t)) --csv > "$tmp/redis-$t-$d.csv" 2>&1; then
			failed=1
			continue
		fi
		# "test","rps",...: SET then GET
		awk -F, -v d="$d" -v t="$t" -v v="$value" '{ gsub(/"/, "") }
			$1 == "SET" { printf "redis,put,%s,%s,%s,%.0f,ok\n", d, t, v, $2 }
			$1 == "GET" { printf "redis,get,%s,%s,%s,%.0f,ok\n", d, t, v, $2 }' \
			"$tmp/redis-$t-$d.csv" >> "$tmp/rows.csv"
	done
done
kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true; redis_pid=

# ---- one table ------------------------------------------------------------------------
val() { # impl op depth threads -> ops/s (or -)
	awk -F, -v i="$1" -v o="$2" -v d="$3" -v t="$4" \
		'$1 == i && $2 == o && $3 == d && $4 == t { print $6; f = 1 } END { if (!f) print "-" }' \
		"$tmp/rows.csv"
}
printf "%-4s %5s %7s %14s %14s %8s\n" op depth threads "coffer ops/s" "redis ops/s" ratio
for op in put get; do
	for d in $depths; do
		for t in $threads_list; do
			c=$(val coffer $op $d $t)
			r=$(val redis $op $d $t)
			ratio=$(awk -v c="$c" -v r="$r" 'BEGIN { if (r + 0 > 0 && c != "-") printf "%.1fx", c / r; else print "-" }')
			printf "%-4s %5s %7s %14s %14s %8s\n" $op $d $t "$c" "$r" "$ratio"
		done
	done
done
if [ -n "$csv" ]; then
	cp "$tmp/rows.csv" "$csv"
	echo "csv: $csv"
fi
grep -q ',FAIL' "$tmp/rows.csv" && failed=1
exit $failed
