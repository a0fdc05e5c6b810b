#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# tests/client/pkgconfig_test.sh STORE_BIN BUILD_ROOT SOURCE_ROOT CC SANITIZE - coffer.pc (its
# uninstalled twin in BUILD_ROOT/meson-uninstalled) as a client sees it:
#  - `pkg-config --cflags coffer` names coffer's own include folders only: no installed
#    header includes ck or liburcu, so their Cflags (ck.pc's -D__x86_64__, liburcu's
#    -I/usr/include/<triplet>) must not reach every client's compile line;
#  - README's client example (docs/example.c) links fully statically with
#    `pkg-config --static --libs coffer` (ck and liburcu still come along, privately) and
#    runs against a fresh store. In a sanitizer build (SANITIZE: meson's b_sanitize, not
#    "none") the sanitizers cannot link -static: libcoffer.a is linked (-l:libcoffer.a for
#    -lcoffer) with -fsanitize=SANITIZE, and what Libs.private names, dynamically (TSan
#    knows liburcu's shared libraries only: tests/tsan.supp).
# Exit status: 0 pass, 1 fail, 77 skip (no pkg-config, or no static C library).
# shellcheck disable=SC2154 # $tmp and $sock are set by store_start (store_lib.sh)
set -eu
store=$1 build=$2 src=$3 cc=$4 san=$5
command -v pkg-config >/dev/null || { echo "SKIP: pkg-config is not installed"; exit 77; }
PKG_CONFIG_PATH=$build/meson-uninstalled
export PKG_CONFIG_PATH
cflags=$(pkg-config --cflags coffer)
for f in $cflags; do
	case "$f" in
	-I"$build" | -I"$build"/* | -I"$src" | -I"$src"/*) ;;
	*)
		echo "FAIL: pkg-config --cflags coffer has '$f', not one of coffer's include folders: $cflags" >&2
		exit 1
		;;
	esac
done
# shellcheck source=store_lib.sh
. "$(dirname "$0")/store_lib.sh"
store_start "$store" 16M
if [ "$san" = none ]; then
	printf 'int main(void) { return 0; }\n' >"$tmp/empty.c"
	"$cc" -static -o "$tmp/empty" "$tmp/empty.c" 2>/dev/null ||
		{ echo "SKIP: $cc cannot link a static program (no static C library)"; exit 77; }
	# shellcheck disable=SC2046,SC2086 # pkg-config's output is a list of words
	"$cc" -static -o "$tmp/example" "$src/docs/example.c" $cflags \
		$(pkg-config --static --libs coffer) ||
		{ echo "FAIL: docs/example.c does not link -static with pkg-config --static --libs coffer" >&2; exit 1; }
else
	# shellcheck disable=SC2046,SC2086
	"$cc" -fsanitize="$san" -o "$tmp/example" "$src/docs/example.c" $cflags \
		$(pkg-config --static --libs coffer | sed 's/-lcoffer /-l:libcoffer.a /') ||
		{ echo "FAIL: docs/example.c does not link libcoffer.a with pkg-config --static --libs coffer" >&2; exit 1; }
fi
"$tmp/example" "$sock"
echo "pkg-config --cflags coffer: $cflags; a static link of docs/example.c runs"
