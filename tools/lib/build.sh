# SPDX-License-Identifier: BSD-2-Clause
# shellcheck shell=sh
# tools/lib/build.sh - sourced (POSIX sh) by the scripts that run what a meson build made
# (perf/store-compare.sh, perf/fio/compare.sh, perf/bench/sweep.sh), run from the
# repository root, so that all find the build README.md's commands make and give the same
# advice when it is missing:
#   coffer_find_build FILE...    print the first of build/release, build, build-* that holds
#       every FILE (paths inside a build directory, e.g. tools/coffer-store); return 1 when
#       none does.
#   coffer_check_build DIR FILE...  return 0 when DIR holds every FILE; else print on stderr
#       which one is missing and how to build it, and return 1.
#   coffer_build_advice          print (stdout) how to make a build, as README.md does.
# Messages start with "$coffer_build_who: " when the caller sets it (its own name).

coffer_build_advice() {
	echo "build as README.md says: meson setup build/release -Dbuildtype=release" \
		"-Dfio_source=\$PWD/subprojects/fio-src && ninja -C build/release" \
		"(tools/setup.sh fetches fio-src)"
}

coffer_find_build() {
	for _cb_dir in build/release build build-*; do
		[ -d "$_cb_dir" ] || continue
		_cb_ok=1
		for _cb_f in "$@"; do
			[ -e "$_cb_dir/$_cb_f" ] || {
				_cb_ok=0
				break
			}
		done
		if [ "$_cb_ok" = 1 ]; then
			echo "$_cb_dir"
			return 0
		fi
	done
	return 1
}

coffer_check_build() {
	_cb_who=${coffer_build_who:+$coffer_build_who: }
	_cb_dir=$1
	shift
	for _cb_f in "$@"; do
		[ -e "$_cb_dir/$_cb_f" ] && continue
		if [ ! -f "$_cb_dir/build.ninja" ]; then
			echo "$_cb_who$_cb_dir is not a meson build directory (no $_cb_dir/$_cb_f);" \
				"$(coffer_build_advice), or give the build directory you made" >&2
		elif [ "$_cb_f" = perf/fio/libcoffer_fio.so ]; then
			echo "$_cb_who$_cb_dir/$_cb_f is not built: the fio engine needs fio's source:" \
				"meson configure $_cb_dir -Dfio_source=\$PWD/subprojects/fio-src &&" \
				"ninja -C $_cb_dir" >&2
		else
			echo "$_cb_who$_cb_dir/$_cb_f is not built: ninja -C $_cb_dir" >&2
		fi
		return 1
	done
	return 0
}
