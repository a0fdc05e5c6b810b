#!/usr/bin/env bash
# perf/fio/compare.sh - one fio run of the same 4 KiB random job shape through coffer and
# through what a user would pick instead, side by side on this machine:
#   coffer    the coffer engine against a coffer-store this script starts and stops
#   null      fio's null engine: the ceiling of fio itself (no data moves)
#   mmap      fio's mmap engine on a tmpfs file (/dev/shm)
#   psync     pread/pwrite on a tmpfs file
#   io_uring  io_uring on a tmpfs file
# for rw in randread, randwrite and numjobs 1, 2; iodepth 32 for the asynchronous engines
# (coffer, null, io_uring), 1 for the synchronous ones (mmap, psync).
#
# Usage: perf/fio/compare.sh [--csv FILE] [--runtime SECONDS] [--size SIZE] [--build DIR]
#                            [--png FILE] [--store-size SIZE] [--numjobs LIST]
#                            [--engines LIST]
#   --csv FILE       also write the CSV there (default: perf/results/fio-compare.csv)
#   --runtime S      seconds per run (default 10)
#   --size SIZE      per-job file size (default 1g)
#   --build DIR      build directory (default: the first of build/release, build, build-*
#                    holding both tools/coffer-store and perf/fio/libcoffer_fio.so)
#   --png FILE       bar chart (default: the CSV's name with .png)
#   --store-size S   coffer-store -m (default: numjobs x size + 256 MiB, a store per numjobs)
#   --numjobs LIST   comma-separated (default 1,2)
#   --engines LIST   comma-separated subset of coffer,null,mmap,psync,io_uring
#
# Output: CSV engine,rw,iodepth,numjobs,iops,bw_mib,lat_p50_us,lat_p99_us (completion
# latency percentiles, fio's clat), a table with coffer's ratios to the others, a PNG bar
# chart (gnuplot). Exit status: 0 when every run succeeded, 1 otherwise.
#
# Coffer's blocks are written once (sequential pre-pass, not measured) before the measured
# runs, so randread never meets a missing block and randwrite replaces existing objects, as
# a tmpfs file's blocks exist once fio has laid it out.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$here"

csv=perf/results/fio-compare.csv
png=""
runtime=10
size=1g
build=""
store_size=""
numjobs_list=1,2
engines_list=coffer,null,mmap,psync,io_uring

die() {
	printf 'compare.sh: %s\n' "$*" >&2
	exit 2
}
usage() {
	sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
	exit "${1:-0}"
}

while [ $# -gt 0 ]; do
	case "$1" in
	--csv) csv=${2:?--csv needs a file}; shift 2 ;;
	--runtime) runtime=${2:?--runtime needs seconds}; shift 2 ;;
	--size) size=${2:?--size needs a size}; shift 2 ;;
	--build) build=${2:?--build needs a directory}; shift 2 ;;
	--png) png=${2:?--png needs a file}; shift 2 ;;
	--store-size) store_size=${2:?--store-size needs a size}; shift 2 ;;
	--numjobs) numjobs_list=${2:?--numjobs needs a list}; shift 2 ;;
	--engines) engines_list=${2:?--engines needs a list}; shift 2 ;;
	-h | --help) usage 0 ;;
	*) printf 'compare.sh: unknown argument %s\n' "$1" >&2; usage 2 ;;
	esac
done
[[ "$runtime" =~ ^[0-9]+$ ]] && [ "$runtime" -ge 1 ] || die "--runtime must be a positive integer"
[ -n "$png" ] || png=${csv%.csv}.png
IFS=, read -r -a numjobs_arr <<<"$numjobs_list"
IFS=, read -r -a engines <<<"$engines_list"
for e in "${engines[@]}"; do
	case "$e" in coffer | null | mmap | psync | io_uring) ;; *) die "unknown engine $e" ;; esac
done

command -v fio >/dev/null || die "fio is not installed"
command -v jq >/dev/null || die "jq is not installed (tools/setup.sh installs it)"

# bytes of a fio-style size (k/m/g, powers of two)
to_bytes() {
	local v=${1,,}
	case "$v" in
	*k) echo $((${v%k} << 10)) ;;
	*m) echo $((${v%m} << 20)) ;;
	*g) echo $((${v%g} << 30)) ;;
	*) echo "$v" ;;
	esac
}
size_bytes=$(to_bytes "$size")
# A store per numjobs, sized for what that numjobs writes (every block once, plus room for
# the replacements in flight): a small enough arena fits the hugepages reserved here
# (tools/setup.sh reserves up to 1536 x 2 MiB), and the coffer figures depend on that: with
# ordinary 4 KiB pages every random 4 KiB block is a TLB miss in fio's copy (measured here,
# randread numjobs 1, 1 GiB of blocks, 5 s after a 1 s ramp: ~40-120k IOPS with 4 KiB pages
# against ~600-900k with hugepages; one 10 s run with 4 KiB pages did reach 708k, so the
# penalty varies with the host). The store's log line below says which one it got.
store_size_for() {
	if [ -n "$store_size" ]; then
		echo "$store_size"
	else
		echo "$((($1 * size_bytes + (256 << 20)) >> 20))M"
	fi
}

engine_so=""
store_bin=""
if [[ " ${engines[*]} " == *" coffer "* ]]; then
	# shellcheck source=../../tools/lib/build.sh
	. tools/lib/build.sh
	# shellcheck disable=SC2034 # read by tools/lib/build.sh
	coffer_build_who=compare.sh
	need=(tools/coffer-store perf/fio/libcoffer_fio.so)
	if [ -z "$build" ]; then
		build=$(coffer_find_build "${need[@]}") ||
			die "no build directory among build/release, build, build-* holds ${need[*]};" \
				"$(coffer_build_advice), or give --build DIR"
	fi
	coffer_check_build "$build" "${need[@]}" || exit 2
	store_bin=$build/tools/coffer-store
	engine_so=$(cd "$build/perf/fio" && pwd)/libcoffer_fio.so
fi

work=$(mktemp -d /tmp/coffer-compare.XXXXXX)
shm=$(mktemp -d /dev/shm/coffer-compare.XXXXXX)
sock=$work/store.sock
# shellcheck source=../../tools/lib/store.sh
. "$here/tools/lib/store.sh"
cleanup() {
	coffer_store_stop
	rm -rf "$work" "$shm"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_store SIZE
start_store() {
	coffer_store_start "$store_bin" "$sock" "$work/store.log" -m "$1" && return 0
	cat "$work/store.log" >&2
	die "coffer-store did not start (-m $1)"
}

# fio arguments of one engine (everything but rw, numjobs, runtime)
engine_args() {
	case "$1" in
	coffer)
		echo "--ioengine=external:$engine_so --iodepth=32 --iodepth_batch_submit=8" \
			"--iodepth_batch_complete_max=32 --coffer_socket=$sock" \
			"--coffer_namespace=compare"
		;;
	null) echo "--ioengine=null --iodepth=32" ;;
	mmap) echo "--ioengine=mmap --iodepth=1 --directory=$shm" ;;
	psync) echo "--ioengine=psync --iodepth=1 --directory=$shm" ;;
	io_uring) echo "--ioengine=io_uring --iodepth=32 --directory=$shm" ;;
	esac
}
engine_depth() {
	case "$1" in mmap | psync) echo 1 ;; *) echo 32 ;; esac
}

failures=0
echo "engine,rw,iodepth,numjobs,iops,bw_mib,lat_p50_us,lat_p99_us" >"$work/results.csv"

# run ENGINE RW NUMJOBS: one measured fio run, appended to the CSV
run_one() {
	local eng=$1 rw=$2 nj=$3 out=$work/$1-$2-$3.json dir=read
	[ "$rw" = randwrite ] && dir=write
	# shellcheck disable=SC2046
	if ! fio --output-format=json --output="$out" --name=cmp --bs=4k --size="$size" \
		--rw="$rw" --numjobs="$nj" --group_reporting=1 --time_based=1 \
		--runtime="$runtime" --ramp_time=1 $(engine_args "$eng") >"$work/fio.err" 2>&1; then
		printf 'compare.sh: %s %s numjobs=%s failed:\n' "$eng" "$rw" "$nj" >&2
		tail -n 20 "$work/fio.err" "$out" >&2 2>/dev/null
		failures=$((failures + 1))
		return
	fi
	local line
	line=$(jq -r --arg d "$dir" '.jobs[0][$d] as $x |
		[($x.iops | floor), ($x.bw_bytes / 1048576 * 10 | round / 10),
		 (($x.clat_ns.percentile["50.000000"] // 0) / 1000 * 100 | round / 100),
		 (($x.clat_ns.percentile["99.000000"] // 0) / 1000 * 100 | round / 100),
		 (.jobs[0].error)] | @csv' "$out") || line=""
	local iops err
	iops=$(cut -d, -f1 <<<"$line")
	err=$(cut -d, -f5 <<<"$line")
	if [ -z "$line" ] || [ "${err:-1}" != 0 ] || [ "${iops:-0}" -le 0 ]; then
		printf 'compare.sh: %s %s numjobs=%s: no result (error %s)\n' "$eng" "$rw" "$nj" "${err:-?}" >&2
		failures=$((failures + 1))
		return
	fi
	echo "$eng,$rw,$(engine_depth "$eng"),$nj,$(cut -d, -f1-4 <<<"$line")" >>"$work/results.csv"
	printf '  %-9s %-10s numjobs=%s  %10s IOPS\n' "$eng" "$rw" "$nj" "$iops"
}

# coffer: write every block once (sequential, not measured) so that the measured runs find
# them, as the tmpfs engines find the file fio laid out.
coffer_prepass() {
	local nj=$1
	if ! fio --output-format=terse --name=cmp --bs=4k --size="$size" --rw=write \
		--numjobs="$nj" $(engine_args coffer) >"$work/prepass.out" 2>&1; then
		tail -n 20 "$work/prepass.out" >&2
		die "coffer pre-pass (write of every block) failed"
	fi
}

echo "compare.sh: 4k random, size $size per job, ${runtime}s per run; engines ${engines[*]}"
# Other processes skew every figure on a small machine: say how busy it was.
echo "compare.sh: $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for nj in "${numjobs_arr[@]}"; do
	if [ -n "$store_bin" ]; then
		coffer_store_stop
		start_store "$(store_size_for "$nj")"
		echo "compare.sh: numjobs=$nj: coffer-store -m $(store_size_for "$nj") (pid $store_pid): $(grep -o 'arena.*' "$work/store.log" | head -1)"
		coffer_prepass "$nj"
	fi
	for rw in randread randwrite; do
		for eng in "${engines[@]}"; do
			run_one "$eng" "$rw" "$nj"
		done
	done
	rm -f "$shm"/cmp.* # tmpfs files of this numjobs
done
coffer_store_stop

mkdir -p "$(dirname "$csv")"
cp "$work/results.csv" "$csv"

# --- table: every result, and coffer's ratio to each other engine at the same rw/numjobs ---
echo
awk -F, 'NR == 1 { next }
	{ key = $2 "," $4; iops[$1 "," key] = $5; rows[NR] = $0; keys[key] = 1 }
	END {
		printf "%-9s %-10s %7s %7s %12s %10s %10s %10s %9s\n", "engine", "rw", "iodepth",
			"numjobs", "IOPS", "MiB/s", "p50 us", "p99 us", "coffer/x"
		for (i = 2; i <= NR; i++) {
			if (!(i in rows)) continue
			split(rows[i], f, ",")
			c = iops["coffer," f[2] "," f[4]]
			r = (c != "" && f[5] > 0 && f[1] != "coffer") ? sprintf("%.2f", c / f[5]) : "-"
			printf "%-9s %-10s %7s %7s %12s %10s %10s %10s %9s\n", f[1], f[2], f[3], f[4],
				f[5], f[6], f[7], f[8], r
		}
	}' "$csv"
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
echo "targets (issue 8): coffer >= mmap, >= 2x psync, >= 0.5x null at the same rw and numjobs"
echo "CSV: $csv"

# --- chart ---------------------------------------------------------------------------------
if command -v gnuplot >/dev/null; then
	# one row per (rw, numjobs), one column per engine
	{
		printf 'case'
		for e in "${engines[@]}"; do printf ' %s' "$e"; done
		printf '\n'
		for rw in randread randwrite; do
			for nj in "${numjobs_arr[@]}"; do
				printf '%s/nj%s' "$rw" "$nj"
				for e in "${engines[@]}"; do
					v=$(awk -F, -v e="$e" -v r="$rw" -v n="$nj" \
						'$1 == e && $2 == r && $4 == n { print $5 / 1000 }' "$csv")
					printf ' %s' "${v:-0}"
				done
				printf '\n'
			done
		done
	} >"$work/chart.dat"
	if gnuplot -e "datafile='$work/chart.dat'; outfile='$png'; ncols=${#engines[@]}; \
		title='fio 4k random I/O, ${runtime}s per run, $(nproc) cores'" \
		perf/fio/compare.gp 2>"$work/gnuplot.err"; then
		echo "chart: $png"
	else
		cat "$work/gnuplot.err" >&2
		echo "compare.sh: gnuplot failed; no chart" >&2
	fi
else
	echo "compare.sh: gnuplot not installed; no chart" >&2
fi

if [ "$failures" -gt 0 ]; then
	echo "compare.sh: $failures run(s) failed" >&2
	exit 1
fi
exit 0
