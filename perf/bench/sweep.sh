#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
#
# perf/bench/sweep.sh - one reproducible results set: `coffer-bench hash` (every impl and
# workload) and `coffer-bench obj_open` (against a coffer-store started and stopped here) into
# one CSV, the machine's description and the exact commands into a .txt beside it, and the
# charts drawn by perf/plot.sh.
#
# usage: perf/bench/sweep.sh BUILDDIR OUTDIR NAME THREADS SECONDS [REPEAT [OBJECTS]]
#   e.g. perf/bench/sweep.sh build/release perf/results 2core 1,2,4 1 3
#        perf/bench/sweep.sh build/release perf/results 16core 1,2,4,8,16 2 3
# BUILDDIR: a meson build with perf/bench/coffer-bench and tools/coffer-store (README.md's
# build makes build/release); "auto": the first of build/release, build, build-* with both.
# REPEAT (default 3): hash points are run that many times, impls interleaved; plot.sh and
# summary.sh use the median. OBJECTS (default 100000): objects per thread in obj_open.
# Writes OUTDIR/NAME.csv, OUTDIR/NAME.txt, OUTDIR/NAME-*.png. Exit status non-zero when any
# result failed its verification (the CSV then says FAIL on that row).
set -u

if [ $# -lt 5 ] || [ $# -gt 7 ]; then
	echo "usage: $0 BUILDDIR OUTDIR NAME THREADS SECONDS [REPEAT [OBJECTS]]" >&2
	exit 2
fi
build=$1 out=$2 name=$3 threads=$4 seconds=$5 repeat=${6:-3} objects=${7:-100000}
here=$(dirname "$0")
# shellcheck source=../../tools/lib/build.sh
. "$here/../../tools/lib/build.sh"
# shellcheck disable=SC2034 # read by tools/lib/build.sh
coffer_build_who=sweep.sh
need="perf/bench/coffer-bench tools/coffer-store"
if [ "$build" = auto ]; then
	# shellcheck disable=SC2086 # $need: two paths
	build=$(coffer_find_build $need) || {
		echo "$0: no build directory among build/release, build, build-* holds $need;" \
			"$(coffer_build_advice)" >&2
		exit 2
	}
fi
# shellcheck disable=SC2086
coffer_check_build "$build" $need || exit 2
bench=$build/perf/bench/coffer-bench
store=$build/tools/coffer-store
mkdir -p "$out"
csv=$out/$name.csv
txt=$out/$name.txt
rm -f "$csv"

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

hash_cmd="$bench hash --threads $threads --seconds $seconds --repeat $repeat --csv $csv"
oo_cmd="$bench obj_open --socket \$SOCK --threads $threads --objects $objects --seconds $seconds --csv $csv"
store_cmd="$store -m 256M -s \$SOCK"

status=0
{
	echo "coffer-bench results '$name' - $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "git: $(git -C "$here" describe --always --dirty 2>/dev/null || echo unknown)"
	echo
	echo "Machine:"
	lscpu 2>/dev/null | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|L3 cache)' | sed 's/^/  /'
	grep -E '^(MemTotal|HugePages_Total|HugePages_Free|Hugepagesize)' /proc/meminfo | sed 's/^/  /'
	echo "  kernel: $(uname -r)"
	echo "  load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	echo "Commands (in this order; \$SOCK a temporary socket):"
	echo "  $hash_cmd"
	echo "  $store_cmd &"
	echo "  $oo_cmd"
	echo "  perf/plot.sh $csv"
	echo "  perf/bench/summary.sh $csv"
	echo
	echo "Output:"
} > "$txt"

$hash_cmd > "$dir/hash.out" 2>&1 || status=1
cat "$dir/hash.out" >> "$txt"

"$store" -m 256M -s "$sock" 2> "$dir/store.err" &
pid=$!
i=0
while [ ! -S "$sock" ] && kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
if [ -S "$sock" ]; then
	$bench obj_open --socket "$sock" --threads "$threads" --objects "$objects" \
		--seconds "$seconds" --csv "$csv" > "$dir/oo.out" 2>&1 || status=1
	cat "$dir/oo.out" >> "$txt"
	grep -m1 'ready' "$dir/store.err" | sed 's/^/# store: /' >> "$txt"
else
	echo "coffer-store did not start:" >> "$txt"
	cat "$dir/store.err" >> "$txt"
	status=1
fi
echo "  load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$txt"

"$here/../plot.sh" "$csv" "$out" > /dev/null || status=1
echo >> "$txt"
echo "Summary (medians; ratios are coffer / baseline at the same point):" >> "$txt"
"$here/summary.sh" "$csv" >> "$txt" || status=1
cat "$txt"
exit $status
