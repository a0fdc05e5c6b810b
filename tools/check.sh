#!/usr/bin/env bash
# tools/check.sh - set up, build and run every coffer test suite; exits non-zero on any
# failure and ends with one line "N passed, N failed[, N skipped]" (totals over every run).
#
# Builds (under build/, one folder each):
#   release  -Dbuildtype=release            suites: unit stress integration fio
#   asan     -Db_sanitize=address,undefined suites: unit stress integration
#   tsan     -Db_sanitize=thread (clang)    suites: unit stress integration
# plus a bounded libFuzzer run of the store's message decoder when the fuzz target exists.
#
# Options: --quick (release build only), --no-setup (skip tools/setup.sh),
#          --fuzz-seconds N (default 60).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

quick=0
setup=1
fuzz_seconds=60
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	--no-setup) setup=0 ;;
	--fuzz-seconds)
		fuzz_seconds=$2
		shift
		;;
	-h | --help)
		sed -n '2,13p' "$0"
		exit 0
		;;
	*)
		echo "check.sh: unknown option $1" >&2
		exit 2
		;;
	esac
	shift
done

log() { printf '\n=== check: %s\n' "$*"; }

if [ "$setup" -eq 1 ]; then
	bash tools/setup.sh || {
		echo "check.sh: tools/setup.sh failed" >&2
		echo "0 passed, 1 failed"
		exit 1
	}
fi

fio_src="$here/subprojects/fio-src"
total_pass=0
total_fail=0
total_skip=0
failed_runs=()
jobs=$(nproc)

# configure NAME ARGS... : (re)configure build/NAME with the given meson options.
configure() {
	local name=$1
	shift
	local dir="build/$name"
	if [ -f "$dir/build.ninja" ]; then
		meson configure "$dir" "$@" >/dev/null
	else
		meson setup "$dir" "$@" >"build-$name-setup.log" 2>&1 || {
			cat "build-$name-setup.log"
			return 1
		}
		rm -f "build-$name-setup.log"
	fi
	ninja -C "$dir" -j "$jobs"
}

# add_counts LOGFILE : add meson's summary counts from a test log to the totals.
add_counts() {
	local f=$1 ok xf fail xp skip to
	ok=$(sed -n 's/^Ok:[[:space:]]*\([0-9]*\).*/\1/p' "$f" | tail -1)
	xf=$(sed -n 's/^Expected Fail:[[:space:]]*\([0-9]*\).*/\1/p' "$f" | tail -1)
	fail=$(sed -n 's/^Fail:[[:space:]]*\([0-9]*\).*/\1/p' "$f" | tail -1)
	xp=$(sed -n 's/^Unexpected Pass:[[:space:]]*\([0-9]*\).*/\1/p' "$f" | tail -1)
	skip=$(sed -n 's/^Skipped:[[:space:]]*\([0-9]*\).*/\1/p' "$f" | tail -1)
	to=$(sed -n 's/^Timeout:[[:space:]]*\([0-9]*\).*/\1/p' "$f" | tail -1)
	total_pass=$((total_pass + ${ok:-0} + ${xf:-0}))
	total_fail=$((total_fail + ${fail:-0} + ${xp:-0} + ${to:-0}))
	total_skip=$((total_skip + ${skip:-0}))
}

# run_suites NAME SUITES... : run the given suites of build/NAME, counting results.
run_suites() {
	local name=$1
	shift
	local args=() s
	for s in "$@"; do
		args+=(--suite "$s")
	done
	local out="build/$name/check-summary.log"
	log "meson test ($name): $*"
	meson test -C "build/$name" --print-errorlogs --num-processes "$jobs" "${args[@]}" 2>&1 |
		tee "$out"
	local rc=${PIPESTATUS[0]}
	add_counts "$out"
	if [ "$rc" -ne 0 ]; then
		failed_runs+=("$name")
	fi
}

build_failed() {
	echo "check.sh: build $1 failed" >&2
	total_fail=$((total_fail + 1))
	failed_runs+=("$1(build)")
}

finish() {
	echo
	if [ "${#failed_runs[@]}" -gt 0 ]; then
		echo "check: FAILED in: ${failed_runs[*]}"
	else
		echo "check: all suites passed"
	fi
	echo "$total_pass passed, $total_fail failed, $total_skip skipped"
	[ "${#failed_runs[@]}" -eq 0 ] && [ "$total_fail" -eq 0 ] && [ "$total_pass" -gt 0 ]
	exit $?
}

export TSAN_OPTIONS="suppressions=$here/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1"
export UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1 suppressions=$here/tests/ubsan.supp"
export ASAN_OPTIONS="detect_leaks=1 abort_on_error=0"

log "release build"
if configure release -Dbuildtype=release -Dfio_source="$fio_src"; then
	run_suites release unit stress integration fio
else
	build_failed release
fi

if [ "$quick" -eq 0 ]; then
	log "ASan+UBSan build"
	if configure asan -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false \
		-Dfio_source=""; then
		run_suites asan unit stress integration
	else
		build_failed asan
	fi

	# clang for TSan: gcc 12 warns (-Wtsan) on every atomic_thread_fence, which the channel's
	# cross-process doorbell handshake needs, and the tree is kept warning-free; and gcc 12's
	# libtsan kills a fork child whose new thread reuses a parent thread's pthread_t ("dup
	# thread with used id": it lacks LLVM's ThreadRegistry::OnFork(), README.md).
	log "TSan build (clang)"
	if CC=clang configure tsan -Dbuildtype=debug -Db_sanitize=thread -Db_lundef=false \
		-Dfio_source=""; then
		run_suites tsan unit stress
		# The integration tests fork children that start threads (the runtime's
		# call_rcu worker and connection monitor), as real clients may: glibc
		# supports it, TSan refuses it unless told not to.
		TSAN_OPTIONS="$TSAN_OPTIONS die_after_fork=0" run_suites tsan integration
	else
		build_failed tsan
	fi

	if [ -x tools/fuzz.sh ]; then
		log "libFuzzer: store message decoder, ${fuzz_seconds}s"
		bash tools/fuzz.sh --seconds "$fuzz_seconds"
		case $? in
		0) total_pass=$((total_pass + 1)) ;;
		77) total_skip=$((total_skip + 1)) ;; # clang's libFuzzer missing: said above
		*)
			total_fail=$((total_fail + 1))
			failed_runs+=("fuzz")
			;;
		esac
	fi
fi

finish
