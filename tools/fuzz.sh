#!/usr/bin/env bash
# tools/fuzz.sh - build and run the libFuzzer target on coffer-store's message decoder and
# request dispatch (tests/reliability/fuzz_store.c) for a bounded time.
#
# usage: tools/fuzz.sh [--seconds N] [--jobs J] [--replay FILE...]
#   --seconds N   fuzz for N seconds (default 60; tools/check.sh passes its --fuzz-seconds)
#   --jobs J      J fuzzing processes (libFuzzer -fork=J; default 1: CI machines are small)
#   --replay F... run the target once on each file (a crash reproducer) and exit
#
# Builds with clang -fsanitize=fuzzer,address,undefined into build/fuzz/ (the store's
# decoder and object table compiled from source, so they are instrumented too), writes the
# seed corpus (valid batches) with the same target built as an ordinary program, keeps the
# growing corpus in build/fuzz/corpus and crash reproducers in build/fuzz/artifacts.
# Prints "fuzz: N executions in S s, ..."; exit 0 when nothing crashed, 1 on a finding,
# 2 on a usage error, 77 when clang with libFuzzer is missing (counted as skipped).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

seconds=60
jobs=1
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
	--replay)
		shift
		replay=("$@")
		break
		;;
	-h | --help)
		sed -n '2,17p' "$0"
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
mkdir -p "$out/corpus" "$out/seeds" "$out/artifacts"
srcs=(tests/reliability/fuzz_store.c tools/objtab.c tools/arena.c runtime/proto.c)
flags=(-std=gnu11 -g -O1 -D_GNU_SOURCE -D_LGPL_SOURCE -Iinclude -I. -Wall -Wextra)

# Rebuild when a source is newer than the binary.
need_build() {
	local bin=$1 s
	[ -x "$bin" ] || return 0
	for s in "${srcs[@]}" tools/*.h runtime/proto.h runtime/proto_util.h; do
		[ "$s" -nt "$bin" ] && return 0
	done
	return 1
}

if need_build "$out/fuzz_store"; then
	echo "fuzz.sh: building $out/fuzz_store with $cc"
	if ! "$cc" "${flags[@]}" -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined "${srcs[@]}" -o "$out/fuzz_store.tmp"; then
		# A clang without compiler-rt's libFuzzer cannot link -fsanitize=fuzzer.
		if ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){return 0;}' |
			"$cc" -x c - -fsanitize=fuzzer -o "$out/probe" 2>/dev/null; then
			echo "fuzz.sh: skipped: $cc cannot link -fsanitize=fuzzer (install libclang-rt-dev)"
			exit 77
		fi
		echo "fuzz.sh: build failed" >&2
		exit 1
	fi
	mv "$out/fuzz_store.tmp" "$out/fuzz_store"
fi
if need_build "$out/fuzz_store_main"; then
	"$cc" "${flags[@]}" -DREL_FUZZ_MAIN "${srcs[@]}" -o "$out/fuzz_store_main"
fi
"$out/fuzz_store_main" gen "$out/seeds" >/dev/null

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

if [ "${#replay[@]}" -gt 0 ]; then
	exec "$out/fuzz_store" "${replay[@]}"
fi

log="$out/last-run.log"
fork=()
[ "$jobs" -gt 1 ] && fork=(-fork="$jobs")
echo "fuzz.sh: fuzzing the store's decoder for ${seconds}s (corpus $out/corpus, seeds $out/seeds)"
set +e
"$out/fuzz_store" "${fork[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
	-max_len=16384 -print_final_stats=1 -artifact_prefix="$out/artifacts/" \
	"$out/corpus" "$out/seeds" >"$log" 2>&1
rc=$?
set -e
execs=$(sed -n 's/^stat::number_of_executed_units:[[:space:]]*//p' "$log" | tail -1)
if [ -z "$execs" ]; then # -fork mode prints progress lines only
	execs=$(grep -o 'exec/s[^#]*\|#[0-9]*' "$log" | sed -n 's/^#//p' | tail -1)
fi
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
corp=$(find "$out/corpus" -type f | wc -l)
if [ "$rc" -ne 0 ]; then
	tail -60 "$log"
	echo "fuzz: FAILED after ${execs:-?} executions: reproducer in $out/artifacts/" \
		"(replay: tools/fuzz.sh --replay FILE)"
	exit 1
fi
echo "fuzz: ${execs:-?} executions in ${seconds} s, ${cov:-cov: ?}, corpus $corp inputs, 0 crashes"
