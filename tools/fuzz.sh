#!/usr/bin/env bash
# tools/fuzz.sh - build and run the libFuzzer target on coffer-store's message decoder and
# request dispatch (tests/reliability/fuzz_store.c) for a bounded time.
#
# usage: tools/fuzz.sh [--seconds N] [--target store|wire|all] [--jobs J] [--replay FILE...]
#   --seconds N   fuzz for N seconds in all (default 60; tools/check.sh passes its
#                 --fuzz-seconds); with --target all the time is split evenly
#   --target T    store: the decoder + object-table dispatch (tests/reliability/
#                 fuzz_store.c); wire: the whole store's event loop in a thread, fed by a
#                 fuzzed client connection and its rings (fuzz_wire.c); all (default): both
#   --jobs J      J fuzzing processes (libFuzzer -fork=J; default 1: CI machines are small)
#   --replay F... run the target (--target store or wire) once on each file and exit
#
# Builds with clang -fsanitize=fuzzer,address,undefined into build/fuzz/ (the store's sources
# compiled in, so they are instrumented too), writes the seed corpora (valid batches and
# sessions) with the same targets built as ordinary programs, keeps the growing corpora in
# build/fuzz/corpus-TARGET and crash reproducers in build/fuzz/artifacts.
# Prints one "fuzz[TARGET]: N executions ..." line per target and a total "fuzz: N
# executions in S s, 0 crashes"; exit 0 when nothing crashed, 1 on a finding, 2 on a usage
# error, 77 when clang with libFuzzer is missing (skipped).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

seconds=60
jobs=1
target=all
replay=()
while [ $# -gt 0 ]; do
	case "$1" in
	--seconds)
		seconds=${2:?--seconds needs a number}
		shift
		;;
	--jobs)
		jobs=${2:?--jobs needs a number}
		shift
		;;
	--target)
		target=${2:?--target needs store, wire or all}
		shift
		;;
	--replay)
		shift
		replay=("$@")
		break
		;;
	-h | --help)
		sed -n '2,24p' "$0"
		exit 0
		;;
	*)
		echo "fuzz.sh: unknown option $1 (try --help)" >&2
		exit 2
		;;
	esac
	shift
done
case "$seconds$jobs" in
*[!0-9]*)
	echo "fuzz.sh: --seconds and --jobs take whole numbers" >&2
	exit 2
	;;
esac
case "$target" in
store | wire) targets=("$target") ;;
all) targets=(store wire) ;;
*)
	echo "fuzz.sh: --target is store, wire or all" >&2
	exit 2
	;;
esac
if [ "${#replay[@]}" -gt 0 ] && [ "$target" = all ]; then
	echo "fuzz.sh: --replay needs --target store or --target wire" >&2
	exit 2
fi

cc=${CLANG:-}
if [ -z "$cc" ]; then
	for c in clang clang-16 clang-15 clang-14; do
		if command -v "$c" >/dev/null 2>&1; then
			cc=$c
			break
		fi
	done
fi
if [ -z "$cc" ]; then
	echo "fuzz.sh: skipped: clang not found (install clang for libFuzzer)"
	exit 77
fi

out=build/fuzz
mkdir -p "$out/artifacts"
flags=(-std=gnu11 -g -O1 -D_GNU_SOURCE -D_LGPL_SOURCE -Iinclude -I. -Wall -Wextra -pthread)
srcs_store=(tests/reliability/fuzz_store.c tools/objtab.c tools/arena.c runtime/proto.c)
srcs_wire=(tests/reliability/fuzz_wire.c tools/store.c tools/shm.c tools/log.c tools/objtab.c
	tools/arena.c runtime/proto.c)

# Rebuild when a source or header is newer than the binary.
need_build() {
	local bin=$1 s
	shift
	[ -x "$bin" ] || return 0
	for s in "$@" tools/*.h runtime/proto.h runtime/proto_util.h tools/fuzz.sh; do
		[ "$s" -nt "$bin" ] && return 0
	done
	return 1
}

# build TARGET: build/fuzz/fuzz_TARGET (libFuzzer) and fuzz_TARGET_main (seed writer).
build() {
	local t=$1 srcs
	if [ "$t" = store ]; then srcs=("${srcs_store[@]}"); else srcs=("${srcs_wire[@]}"); fi
	if need_build "$out/fuzz_$t" "${srcs[@]}"; then
		echo "fuzz.sh: building $out/fuzz_$t with $cc"
		if ! "$cc" "${flags[@]}" -fsanitize=fuzzer,address,undefined \
			-fno-sanitize-recover=undefined "${srcs[@]}" -lm -o "$out/fuzz_$t.tmp"; then
			# A clang without compiler-rt's libFuzzer cannot link -fsanitize=fuzzer.
			if ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){return 0;}' |
				"$cc" -x c - -fsanitize=fuzzer -o "$out/probe" 2>/dev/null; then
				echo "fuzz.sh: skipped: $cc cannot link -fsanitize=fuzzer (install libclang-rt-dev)"
				exit 77
			fi
			echo "fuzz.sh: build of the $t target failed" >&2
			exit 1
		fi
		mv "$out/fuzz_$t.tmp" "$out/fuzz_$t"
	fi
	if need_build "$out/fuzz_${t}_main" "${srcs[@]}"; then
		# The seed writer: the same sources with a main() instead of libFuzzer's.
		"$cc" "${flags[@]}" -DREL_FUZZ_MAIN "${srcs[@]}" -lm -o "$out/fuzz_${t}_main" ||
			exit 1
	fi
	mkdir -p "$out/seeds-$t" "$out/corpus-$t"
	"$out/fuzz_${t}_main" gen "$out/seeds-$t" >/dev/null || exit 1
}

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

for t in "${targets[@]}"; do
	build "$t"
done
if [ "${#replay[@]}" -gt 0 ]; then
	exec "$out/fuzz_$target" "${replay[@]}"
fi

per=$((seconds / ${#targets[@]}))
[ "$per" -ge 1 ] || per=1
total=0
fork=()
[ "$jobs" -gt 1 ] && fork=(-fork="$jobs")
for t in "${targets[@]}"; do
	log="$out/last-run-$t.log"
	echo "fuzz.sh: fuzzing target '$t' for ${per}s (corpus $out/corpus-$t, seeds $out/seeds-$t)"
	set +e
	"$out/fuzz_$t" "${fork[@]}" -max_total_time="$per" -timeout=20 -rss_limit_mb=2048 \
		-max_len=16384 -print_final_stats=1 -artifact_prefix="$out/artifacts/$t-" \
		"$out/corpus-$t" "$out/seeds-$t" >"$log" 2>&1
	rc=$?
	set -e
	execs=$(sed -n 's/^stat::number_of_executed_units:[[:space:]]*//p' "$log" | tail -1)
	if [ -z "$execs" ]; then # -fork mode prints progress lines only
		execs=$(grep -o '^#[0-9]*' "$log" | tr -d '#' | tail -1)
	fi
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
	corp=$(find "$out/corpus-$t" -type f | wc -l)
	if [ "$rc" -ne 0 ]; then
		tail -60 "$log"
		echo "fuzz[$t]: FAILED after ${execs:-?} executions: reproducer in $out/artifacts/" \
			"(replay: tools/fuzz.sh --target $t --replay FILE)"
		exit 1
	fi
	echo "fuzz[$t]: ${execs:-?} executions in ${per} s, ${cov:-cov: ?}, corpus $corp inputs, 0 crashes"
	total=$((total + ${execs:-0}))
done
echo "fuzz: $total executions in $((per * ${#targets[@]})) s, 0 crashes"
