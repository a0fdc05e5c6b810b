#!/usr/bin/env bash
# tools/setup.sh - prepare a fresh Debian bookworm machine for building, testing and running
# coffer. Idempotent; run as root (or with sudo available).
#
#  1. installs every Debian package the build, the tests and the benchmarks need;
#  2. fetches the source of exactly the installed fio version from Debian's source package
#     (adding deb-src entries when missing) into subprojects/fio-src and configures it, so the
#     fio ioengine plugin compiles against the same struct layouts as /usr/bin/fio;
#  3. reserves 2 MiB hugepages when the kernel lets us (COFFER_HUGEPAGES; default: a quarter
#     of RAM, at least 512 and at most 1536 pages = 3 GiB, enough for perf/fio/compare.sh's
#     numjobs-2 store of 2.25 GiB) and says plainly when it cannot: nothing in coffer needs
#     them to work.
#
# Environment: COFFER_HUGEPAGES=N (0 = do not touch vm.nr_hugepages), COFFER_SKIP_APT=1.
set -euo pipefail

case "${1:-}" in
-h | --help)
	sed -n '2,/^$/s/^# \{0,1\}//p' "$0"
	exit 0
	;;
"") ;;
*)
	echo "setup: unknown argument '$1' (it takes none; see --help)" >&2
	exit 2
	;;
esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

log() { printf 'setup: %s\n' "$*"; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		log "not root and no sudo: cannot install packages" >&2
		exit 1
	fi
fi

PACKAGES=(
	build-essential meson ninja-build pkg-config clang llvm libclang-rt-14-dev
	liburcu-dev libck-dev libhwloc-dev hwloc libcmocka-dev
	fio gnuplot-nox redis-server redis-tools dpkg-dev python3 jq procps psmisc
	clang-format
)

missing_packages() {
	local p
	for p in "${PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" ||
			printf '%s\n' "$p"
	done
}

apt_updated=0
apt_update() {
	if [ "$apt_updated" -eq 0 ]; then
		log "apt-get update"
		$SUDO apt-get update -qq
		apt_updated=1
	fi
}

if [ "${COFFER_SKIP_APT:-0}" != 1 ]; then
	mapfile -t need < <(missing_packages)
	if [ "${#need[@]}" -gt 0 ]; then
		apt_update
		log "installing: ${need[*]}"
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
	else
		log "all packages present"
	fi
fi

# --- fio source of exactly the installed version ---------------------------------------
fio_ver=$(dpkg-query -W -f='${Version}' fio)     # e.g. 3.33-3
fio_upstream=${fio_ver%-*}                         # 3.33
fio_upstream=${fio_upstream#*:}
src_dir="subprojects/fio-$fio_upstream"

enable_deb_src() {
	local changed=0 f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -e "$f" ] || continue
		if grep -q '^Types: deb$' "$f"; then
			$SUDO sed -i 's/^Types: deb$/Types: deb deb-src/' "$f"
			changed=1
		fi
	done
	if [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list &&
		! grep -q '^deb-src ' /etc/apt/sources.list; then
		grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' |
			$SUDO tee -a /etc/apt/sources.list >/dev/null
		changed=1
	fi
	if [ "$changed" -eq 1 ]; then
		log "added deb-src entries for the configured suites"
		apt_updated=0
	fi
}

if [ ! -f "$src_dir/config-host.h" ]; then
	mkdir -p subprojects
	if [ ! -d "$src_dir" ]; then
		enable_deb_src
		apt_update
		log "fetching Debian source of fio $fio_ver"
		(cd subprojects && apt-get source -qq "fio=$fio_ver" >/dev/null 2>&1) || {
			log "apt-get source fio=$fio_ver failed (is deb-src reachable?)" >&2
			exit 1
		}
		rm -f subprojects/fio_*.tar.* subprojects/fio_*.dsc
	fi
	log "configuring $src_dir (config-host.h only, no build)"
	(cd "$src_dir" && ./configure >/dev/null)
fi
# Only when it does not already name this version: `ln -sfn` replaces the link even when
# nothing changes, and a build reading subprojects/fio-src meanwhile finds nothing.
[ "$(readlink subprojects/fio-src 2>/dev/null)" = "fio-$fio_upstream" ] ||
	ln -sfn "fio-$fio_upstream" subprojects/fio-src
src_ver=$(sed -n 's/^FIO_VERSION := \(.*\)$/\1/p' "$src_dir/FIO-VERSION-GEN" 2>/dev/null || true)
installed=$(fio --version)
log "fio: installed $installed, source $src_dir (FIO_IOOPS_VERSION $(sed -n 's/^#define FIO_IOOPS_VERSION[[:space:]]*//p' "$src_dir/ioengines.h"))"
case "$installed" in
fio-"$fio_upstream"*) ;;
*)
	log "installed fio ($installed) does not match the fetched source ($fio_upstream)" >&2
	exit 1
	;;
esac
: "${src_ver:=}"

# --- hugepages ---------------------------------------------------------------------------
if [ -n "${COFFER_HUGEPAGES:-}" ]; then
	want=$COFFER_HUGEPAGES
else
	mem_kb=$(awk '/MemTotal/ {print $2}' /proc/meminfo)
	want=$((mem_kb / 4 / 2048))
	[ "$want" -le 1536 ] || want=1536
	[ "$want" -ge 512 ] || want=512
fi
hp=/proc/sys/vm/nr_hugepages
if [ "$want" -gt 0 ] && [ -r "$hp" ]; then
	have=$(cat "$hp")
	if [ "$have" -lt "$want" ]; then
		if { echo "$want" | $SUDO tee "$hp" >/dev/null; } 2>/dev/null; then
			have=$(cat "$hp")
		fi
	fi
	free_hp=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
	if [ "$have" -ge "$want" ]; then
		log "hugepages: $have x 2 MiB reserved ($free_hp free)"
	elif [ "$have" -gt 0 ]; then
		log "hugepages: only $have of $want x 2 MiB could be reserved ($free_hp free); coffer-store uses them when they suffice, else ordinary shared memory"
	else
		log "hugepages: none could be reserved here (vm.nr_hugepages not writable or no memory); coffer-store will use ordinary shared memory"
	fi
else
	log "hugepages: not requested (COFFER_HUGEPAGES=0) or not supported by this kernel"
fi
log "done"
