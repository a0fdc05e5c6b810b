#!/bin/bash
# perf/results/2core-h/commands.sh BUILD: fio reads through the object index (protocol v4).
# 1. index-ab.txt: the same coffer randread job with the engine's object index off
#    (coffer_index=0: every read is a get + release through the store) and on (the default),
#    numjobs 1 and 2, three alternations, in one store per run.
# 2. fio-full.{csv,png,txt}: perf/fio/compare.sh --runtime 5 (all engines, numjobs 1,2).
set -u
build=$1 here=$(cd "$(dirname "$0")" && pwd) S=/tmp/idx-ab-$$.sock
eng=$(cd "$build/perf/fio" && pwd)/libcoffer_fio.so
one() { # NUMJOBS INDEX
	"$build"/tools/coffer-store -m $(($1 * 512 + 256))M -s $S -q 2>/dev/null &
	sleep 0.7
	local e="--ioengine=external:$eng --coffer_socket=$S --coffer_namespace=ab"
	# shellcheck disable=SC2086
	fio --name=ab --bs=4k --size=512m --rw=write --numjobs="$1" $e --iodepth=32 \
		--iodepth_batch_submit=8 --output=/dev/null
	# shellcheck disable=SC2086
	fio --name=ab --bs=4k --size=512m --rw=randread --numjobs="$1" --group_reporting=1 \
		--time_based=1 --runtime=4 --ramp_time=1 $e --iodepth=32 --iodepth_batch_submit=8 \
		--iodepth_batch_complete_max=32 --coffer_index="$2" --output-format=terse |
		awk -F';' -v nj="$1" -v ix="$2" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
			'{print "randread numjobs=" nj " coffer_index=" ix " IOPS " $8 " load " l}'
	kill %1
	wait
}
for i in 1 2 3; do for nj in 1 2; do for ix in 0 1; do one "$nj" "$ix"; done; done; done \
	>"$here/index-ab.txt"
cd "$here/../../.." || exit 1
bash perf/fio/compare.sh --build "$build" --runtime 5 --csv "$here/fio-full.csv" \
	>"$here/fio-full.txt" 2>&1
