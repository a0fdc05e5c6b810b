#!/usr/bin/env bash
# tools/quickstart.sh - the main job on a fresh machine: set up, build (release), start
# coffer-store, run the obj_open benchmark and fio 4k random I/O through the coffer engine
# (a randrw job, then a crc32c verify job that must pass), print one summary table, stop the
# store.
#
# Environment: COFFER_STORE_SIZE (default 1G), COFFER_FIO_RUNTIME (whole seconds, default 10),
#              COFFER_OBJ_OPEN_THREADS (default: 1,<cores>), COFFER_SKIP_SETUP=1,
#              COFFER_BUILD_DIR (default build/release in the repository; a relative one is
#              taken from the current directory) and COFFER_SKIP_BUILD=1 (use it as built).
set -uo pipefail

case "${1:-}" in
-h | --help)
	sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
?*)
	echo "quickstart.sh: takes no arguments (try --help); settings are environment variables" >&2
	exit 2
	;;
esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# A relative COFFER_BUILD_DIR is the caller's, as a path given to any command is (before,
# it was taken inside the repository: "not built" for a build that was there, or a new
# build set up in the repository); the default is the repository's build/release.
case "${COFFER_BUILD_DIR:-}" in
'') bdir=$here/build/release ;;
/*) bdir=$COFFER_BUILD_DIR ;;
*) bdir=$PWD/$COFFER_BUILD_DIR ;;
esac
cd "$here"

size=${COFFER_STORE_SIZE:-1G}
runtime=${COFFER_FIO_RUNTIME:-10}
case "$runtime" in
'' | *[!0-9]* | 0)
	echo "quickstart.sh: COFFER_FIO_RUNTIME='$runtime': want whole seconds, at least 1" >&2
	exit 2
	;;
esac
cores=$(nproc)
threads=${COFFER_OBJ_OPEN_THREADS:-1,$cores}
[ "$threads" = "1,1" ] && threads=1

say() { printf 'quickstart: %s\n' "$*"; }
die() {
	printf 'quickstart: %s\n' "$*" >&2
	exit 1
}

if [ "${COFFER_SKIP_SETUP:-0}" != 1 ]; then
	bash tools/setup.sh || die "tools/setup.sh failed"
fi

if [ "${COFFER_SKIP_BUILD:-0}" = 1 ]; then
	# the fio suite's quickstart test runs it on the build it is part of (tests/fio)
	say "using $bdir as built (COFFER_SKIP_BUILD=1)"
else
	say "building $bdir (release; about 20 s on 2 cores from scratch)"
	if [ -f "$bdir/build.ninja" ]; then
		meson configure "$bdir" -Dbuildtype=release -Dfio_source="$here/subprojects/fio-src" >/dev/null
	else
		meson setup "$bdir" -Dbuildtype=release -Dfio_source="$here/subprojects/fio-src" >/dev/null ||
			die "meson setup failed"
	fi
	ninja -C "$bdir" >/dev/null || die "build failed (run: ninja -C $bdir)"
fi

store_bin=$bdir/tools/coffer-store
stat_bin=$bdir/tools/coffer-stat
bench_bin=$bdir/perf/bench/coffer-bench
engine=$(ls "$bdir"/perf/fio/*.so 2>/dev/null | head -1)
[ -n "$engine" ] && engine=$(realpath "$engine") # fio runs it from $work
jobs_dir=perf/fio/jobs

work=$(mktemp -d /tmp/coffer-quickstart.XXXXXX)
sock=$work/coffer.sock
# shellcheck source=lib/store.sh
. "$here/tools/lib/store.sh"
cleanup() {
	coffer_store_stop
	rm -rf "$work"
}
trap cleanup EXIT
# Interrupted: stop here (cleanup runs on EXIT) rather than go on against a removed store.
trap 'echo; say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

declare -A R
missing=()

# --- store -------------------------------------------------------------------------------
if [ ! -x "$store_bin" ]; then
	die "coffer-store is not built ($store_bin missing)"
fi
coffer_store_start "$store_bin" "$sock" "$work/store.log" -m "$size" || {
	cat "$work/store.log" >&2
	die "coffer-store did not start"
}
export COFFER_SOCKET=$sock
say "coffer-store running (pid $store_pid, $size, socket $sock)"
if [ -x "$stat_bin" ] && "$stat_bin" -s "$sock" --json >"$work/stat.json" 2>/dev/null; then
	R[hugepages]=$(jq -r 'if .hugepages == 1 or .hugepages == true then "on" else "off" end' "$work/stat.json")
else
	R[hugepages]=$(grep -qi 'hugepage' "$work/store.log" && echo "see store log" || echo "unknown")
fi

# --- obj_open benchmark ------------------------------------------------------------------
if [ -x "$bench_bin" ]; then
	say "coffer-bench obj_open --threads $threads"
	# --min-seconds 1: open and close repeat (fresh ObjectIDs) for about a second per thread
	# count; one pass of 100k opens takes 10-125 ms, too short to time steadily (its first
	# row swung 10x with the machine's load)
	if "$bench_bin" obj_open --socket "$sock" --threads "$threads" --min-seconds 1 \
		--csv "$work/obj_open.csv" >"$work/obj_open.out" 2>&1; then
		cat "$work/obj_open.out"
		while IFS=, read -r _ _ workload thr _ _ mops _ status; do
			[ "$status" = ok ] || continue
			R["obj_open/$workload/$thr"]=$(awk -v m="$mops" 'BEGIN {printf "%.0f", m * 1e6}')
		done < <(tail -n +2 "$work/obj_open.csv")
	else
		cat "$work/obj_open.out" >&2
		R[obj_open_error]=1
	fi
else
	missing+=("coffer-bench (obj_open benchmark)")
fi

# --- fio through the coffer engine ---------------------------------------------------------
fio_ok=0
if [ -n "$engine" ] && [ -f "$jobs_dir/randrw.fio" ]; then
	say "fio 4k randrw through the coffer engine (${runtime}s)"
	# fio gives a job file's values precedence over the command line, so the runtime is
	# set in a copy of the job files.
	cp "$jobs_dir/randrw.fio" "$jobs_dir/common.inc" "$work/"
	sed -i "s/^runtime=.*/runtime=$runtime/" "$work/common.inc"
	if (cd "$work" && fio --output-format=json --ioengine="external:$engine" \
		randrw.fio) >"$work/randrw.json" 2>"$work/randrw.err"; then
		R[fio_read_iops]=$(jq '[.jobs[].read.iops] | add | floor' "$work/randrw.json")
		R[fio_write_iops]=$(jq '[.jobs[].write.iops] | add | floor' "$work/randrw.json")
		R[fio_depth]=$(jq -r '.jobs[0].iodepth_level | ((.["16"] // 0) + (.[">=64"] // 0) + (.["32"] // 0)) | floor' "$work/randrw.json")
		fio_ok=1
	else
		cat "$work/randrw.err" >&2
		R[fio_error]=1
	fi
	if [ -f "$jobs_dir/verify.fio" ]; then
		say "fio verify=crc32c (write, then read back) through the coffer engine"
		if fio --ioengine="external:$engine" --verify_state_save=0 \
			"$jobs_dir/verify.fio" >"$work/verify.out" 2>&1 &&
			! grep -q "verify: bad" "$work/verify.out"; then
			R[verify]="passed"
		else
			tail -20 "$work/verify.out" >&2
			R[verify]="FAILED"
		fi
	fi
else
	missing+=("fio coffer engine (perf/fio)")
fi

# --- summary -----------------------------------------------------------------------------
if [ -x "$stat_bin" ]; then
	"$stat_bin" -s "$sock" >"$work/stat.txt" 2>&1 || true
fi
echo
echo "================ coffer quickstart summary ================"
printf '%-40s %s\n' "machine" "$cores cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
# the figures below swing with other work on the machine (README.md's "Measured here" were
# taken at load 1-2): say what the load was, so a low 2-thread row can be read
printf '%-40s %s\n' "load average (1, 5, 15 min)" "$(cut -d' ' -f1-3 /proc/loadavg) (README.md \"Measured here\": 1-2)"
printf '%-40s %s\n' "store arena" "$size, hugepages ${R[hugepages]}"
for wl in open close open-close; do
	for k in $(printf '%s\n' "${!R[@]}" | grep "^obj_open/$wl/" | sort -t/ -k3n); do
		thr=${k##*/}
		printf '%-40s %s\n' "obj_open $wl, $thr thread(s) (ops/s)" "${R[$k]}"
	done
done
[ -n "${R[obj_open_error]:-}" ] && printf '%-40s %s\n' "obj_open" "FAILED (see above)"
if [ "$fio_ok" -eq 1 ]; then
	echo "fio job: 4k random, 70% reads / 30% writes, iodepth 32, ${runtime} s (perf/fio/jobs/randrw.fio)"
	printf '%-40s %s\n' "fio 4k randrw read IOPS" "${R[fio_read_iops]}"
	printf '%-40s %s\n' "fio 4k randrw write IOPS" "${R[fio_write_iops]}"
	# fio's "IO depths" histogram: the share of I/Os submitted while 16 or more were in
	# flight; near 100% means the engine really keeps the queue full (not one at a time).
	printf '%-40s %s\n' "fio I/Os submitted with >= 16 in flight" \
		"${R[fio_depth]}% (of iodepth 32; near 100% = the queue is kept full)"
fi
[ -n "${R[fio_error]:-}" ] && printf '%-40s %s\n' "fio randrw" "FAILED (see above)"
[ -n "${R[verify]:-}" ] && printf '%-40s %s\n' "fio verify=crc32c" "${R[verify]}"
for m in "${missing[@]}"; do
	printf '%-40s %s\n' "NOT THERE YET" "$m"
done
echo "==========================================================="
if [ -n "${R[obj_open_error]:-}${R[fio_error]:-}" ] || [ "${R[verify]:-passed}" != passed ]; then
	exit 1
fi
exit 0
