#!/bin/bash
# Large-put baseline A/B (issue 6): 3 alternating runs of a BEFORE and an AFTER build, the
# arena on hugepages, then on ordinary pages; each run is one fresh 1 GiB store and
# `coffer-bench store --workload put --put-max 256M --put-bytes 2G` (1000 / 512 / 128 / 32
# / 8 puts of 1 / 4 / 16 / 64 / 256 MiB per mode; the before build takes 8 at 256 MiB too),
# ratio taken in the same run. Each output's first line is the load average.
# Usage: commands.sh BEFORE_BUILD AFTER_BUILD [OUTDIR]   (OUTDIR default /tmp/meas-put5)
set -u
before=$1 after=$2 out=${3:-/tmp/meas-put5}
mkdir -p "$out"
run() { # run BUILD HUGEPAGES
	local d S sp
	d=$(mktemp -d) S=$d/s.sock
	"$1"/tools/coffer-store -m 1G --hugepages="$2" -s "$S" 2>"$d/store.log" &
	sp=$!
	for _ in $(seq 50); do [ -S "$S" ] && break; sleep 0.1; done
	uptime
	"$1"/perf/bench/coffer-bench store --socket "$S" --workload put --put-max 256M \
		--put-bytes 2G
	kill "$sp"
	wait "$sp" 2>/dev/null
	rm -rf "$d"
}
for h in on off; do
	for r in 1 2 3; do
		for v in before after; do
			b=$before
			[ "$v" = after ] && b=$after
			flock /tmp/coffer-bench.lock bash -c "$(declare -f run); run $b $h" \
				>"$out/$v-$h-$r.txt" 2>&1
		done
	done
done
