#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
#
# tools/device-bundle.sh - packs what the 1..16-thread scaling runs need into one folder that
# can be copied to a bare machine with more cores (nothing installed there, no network): the
# release build's coffer-bench and coffer-store, every shared library they load (liburcu,
# Concurrency Kit, hwloc, glibc) and this host's dynamic loader, plus run.sh, which runs
# them through that loader. fio is not packed: its Debian binary loads about 60 libraries.
#
# usage: tools/device-bundle.sh [BUILD_DIR [BUNDLE_DIR]]   (defaults: build/release, .device)
#   then, on the machine with many cores:   bash BUNDLE_DIR/run.sh OUT_DIR [THREADS]
#   THREADS defaults to 1,2,4,8,16. run.sh writes into OUT_DIR:
#     NAME.csv / NAME.txt  coffer-bench hash (every impl and workload, 1 s x 2 repeats) and
#                          obj_open, as perf/bench/sweep.sh writes them (NAME = Ncore)
#     store.csv            coffer-bench store: create-seal and get-release, batch 1 and 32
#     machine.txt          nproc, lscpu, the kernel, hugepages
#   and takes about 5 minutes at 16 threads. Draw the charts and tables back here with
#   perf/plot.sh and perf/bench/summary.sh on the CSV.
# A bundle folder inside the repository is added to .git/info/exclude.
set -euo pipefail

build=${1:-build/release}
out=${2:-.device}
bench=$build/perf/bench/coffer-bench
store=$build/tools/coffer-store
for x in "$bench" "$store"; do
	[ -x "$x" ] || {
		echo "device-bundle.sh: $x not built (ninja -C $build)" >&2
		exit 2
	}
done

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$bench" "$store" "$out/bin/"
# every library ldd resolves, and the loader itself (the "=> /path" and the bare "/path" forms)
ldd "$bench" "$store" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
	sort -u | while read -r lib; do cp -L "$lib" "$out/lib/"; done
loader=$(ldd "$bench" | awk '$1 ~ /^\// { print $1 }' | head -1)
[ -n "$loader" ] || {
	echo "device-bundle.sh: no dynamic loader found in ldd's output" >&2
	exit 1
}
echo "${loader##*/}" >"$out/lib/LOADER"

cat >"$out/run.sh" <<'EOF'
#!/bin/bash
# run.sh OUT_DIR [THREADS]: the scaling runs, through the bundle's own loader and libraries.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
res=${1:?usage: run.sh OUT_DIR [THREADS]}
threads=${2:-1,2,4,8,16}
mkdir -p "$res"
ld=$here/lib/$(cat "$here/lib/LOADER")
run() { "$ld" --library-path "$here/lib" "$here/bin/$1" "${@:2}"; }
name=$(nproc)core
sock=/tmp/coffer-device-$$.sock
rc=0
{
	echo "nproc: $(nproc)"
	lscpu 2>/dev/null || true
	uname -a
	grep -i huge /proc/meminfo || true
	echo "threads: $threads"
} >"$res/machine.txt" 2>&1
run coffer-bench hash --threads "$threads" --seconds 1 --repeat 2 --csv "$res/$name.csv" \
	>"$res/$name.txt" 2>&1 || rc=1
# not through run(): $! must be the store itself, not a subshell that would outlive kill
"$ld" --library-path "$here/lib" "$here/bin/coffer-store" -m 1G -s "$sock" >"$res/store.log" 2>&1 &
spid=$!
for _ in $(seq 100); do
	grep -q 'coffer-store: ready' "$res/store.log" 2>/dev/null && break
	sleep 0.1
done
if grep -q 'coffer-store: ready' "$res/store.log"; then
	run coffer-bench obj_open --socket "$sock" --threads "$threads" --objects 100000 \
		--seconds 1 --csv "$res/$name.csv" >>"$res/$name.txt" 2>&1 || rc=1
	run coffer-bench store --socket "$sock" --threads "$threads" --batch 1,32 \
		--workload create-seal,get-release --seconds 1 --csv "$res/store.csv" \
		>>"$res/$name.txt" 2>&1 || rc=1
else
	echo "run.sh: coffer-store did not start (store.log)" >&2
	rc=1
fi
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
echo "run.sh: exit $rc; results in $res"
exit $rc
EOF
chmod +x "$out/run.sh"

# keep a bundle inside the repository out of git
top=$(git rev-parse --show-toplevel 2>/dev/null || true)
abs=$(cd "$out" && pwd)
if [ -n "$top" ] && [ "${abs#"$top"/}" != "$abs" ]; then
	rel=/${abs#"$top"/}/
	grep -qxF "$rel" "$top/.git/info/exclude" 2>/dev/null ||
		echo "$rel" >>"$(git rev-parse --git-common-dir)/info/exclude"
fi
echo "device-bundle.sh: $out ($(du -sh "$out" | cut -f1)): bash $out/run.sh OUT_DIR [THREADS]"
