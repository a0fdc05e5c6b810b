#!/usr/bin/env bash
# tests/fio/fio_test.sh - end-to-end tests of the fio engine "coffer" against a real
# coffer-store (suite 'fio'). One case per invocation:
#
#   fio_test.sh CASE
#
#   exports       the module exports only `ioengine`, and nothing of libcoffer is left
#                 undefined (a lazily bound missing symbol would kill fio mid-run)
#   enghelp       fio --enghelp lists the engine's six options, and coffer_missing's values
#   options       bad option values are refused while fio parses them, each with one line
#                 that says what is wrong: coffer_spin_us=-1 (before, fio's parser let it
#                 through and the engine refused it only at init), coffer_socket= (empty:
#                 before, fio's bare "failed parsing"); 0 and 1000000 are accepted
#   env           a bad COFFER_* variable fails the job with a line that leads with the
#                 variable and its value (before: "cannot connect to coffer-store at ...");
#                 COFFER_HHASH_LOCKS_LOG2 above the bucket count says so, not "not a
#                 decimal number in its range"; an empty COFFER_SOCKET means the default
#                 path, as for libcoffer (before: "cannot connect ... at : invalid argument")
#   verify-fork   perf/fio/jobs/verify.fio (numjobs 2, crc32c, write then read back) passes
#                 in fio's default fork mode; every block was read back and checked
#   verify-thread the same with --thread
#   store-down    with no store at the socket, fio exits non-zero with a clear message,
#                 and no job crashed (no signal, no core)
#   quickstart    tools/quickstart.sh (README's main job) on this build, without setup or
#                 build, 2 s of randrw: exits 0, prints read and write IOPS, the depth row,
#                 "verify=crc32c passed" and the obj_open rows
#   depth         the randrw job (perf/fio/jobs/randrw.fio, shortened) reaches an I/O depth
#                 of 32 most of the time, per fio's "IO depths" (iodepth_level); prints IOPS
#   missing       a read of a never-written block fails with ENOENT by default (its line
#                 names the fix: coffer_prefill=1 or coffer_missing=zeros, and the other
#                 causes: a read bs unlike the written one, eviction), returns zeros
#                 with coffer_missing=zeros, and coffer_prefill=1 creates the blocks; a
#                 prefilled job whose blocks another job's prefill evicted is told so
#                 (eviction, a larger -m), not advised coffer_prefill=1
#   store-dies    the store is killed (SIGKILL) while two jobs have I/O in flight: every
#                 job fails with ENOTCONN within seconds, fio exits non-zero, nothing crashed
#   store-stopped the same with the store stopped (SIGSTOP) instead: alive but silent, it
#                 fails the liveness probe (COFFER_STORE_TIMEOUT_MS=500), so fio does not hang
#   overwrite     random writes over 16 blocks at iodepth 32 (so the same block is written
#                 by several I/Os in flight at once: create -EEXIST, retried) finish
#                 without errors, and every block is then readable
#   offset        jobs that start past the size the engine reports (offset=2m, and numjobs 3
#                 splitting one file with offset_increment=1m) do all their I/O and verify
#                 it, as with a real file; before, fio skipped it silently and exited 0
#   quickstart-reldir  a relative COFFER_BUILD_DIR (with a space, a build without the
#                 engine) is taken from the caller's directory and the engine is NOT THERE
#                 YET; before, it was looked for in the repository: "not built", exit 1
#   size-remainder  size= not a multiple of bs: the engine's files let fio write (and verify)
#                 exactly what fio's null engine does, never a block past size=; before,
#                 size=100k bs=12k wrote 108 KiB where null and psync write 96 KiB; a
#                 filesize=16k-64k range gives each file a random size in it, as null does
#                 (before, every file was 64 KiB: 256 KiB written where null writes 132 KiB)
#   unlink        unlink=1 and unlink_each_loop=1 never delete a local file that has the
#                 name of a fio file (the engine's files live in the store); before, fio's
#                 default unlink removed it
#   write-busy    a write of a block that another client keeps created and unsealed gives
#                 up after 5 s with ETIMEDOUT and says why; before, it retried (busy, a
#                 core's worth of CPU) for as long as that client held the block
#   io-error      an I/O the store refuses says why in coffer's words once per job (a block
#                 larger than the arena: "object larger than the store's capacity"), not
#                 only fio's strerror ("Argument list too long")
#   no-size       a job without size= or filesize= (or with size=N%, a share of a file size
#                 a coffer file does not have) fails saying so; before, fio's bare
#                 "func=total_file_size, error=Invalid argument"
#   pre-read      pre_read=1, which fio implements with read(2) on the file's descriptor (a
#                 coffer file has none), fails with a message that says so; before, fio's
#                 own "failed to lseek pre-read file: Bad file descriptor"
#   create-only   create_only=1 with coffer_prefill=1 fails saying it creates no blocks (fio
#                 opens no file of such a job, and the prefill runs at open) and how to
#                 prefill; before, it created nothing and exited 0, and the next job's reads
#                 failed with ENOENT. A write job's create_only=1 still exits 0
#   fill-device   fill_device=1 without size= fails saying it would never end (the store
#                 evicts rather than fill up: no ENOSPC); before, it wrote on until its
#                 runtime (here 2 s) or 16 EiB and exited 0. With size= it runs to size=
#   readonly      fio --readonly with coffer_prefill=1 creates no block (fio lays out no file
#                 under --readonly either): a read of a missing block fails, and its line
#                 does not advise coffer_prefill=1; blocks written before are read back.
#                 Before, the prefill wrote every missing block under --readonly
#   file-append   file_append=1 fails saying a coffer file has no end to append at, and
#                 writes nothing; before, every run wrote [size, 2 x size) (the engine's
#                 file size is size=), past blocks nobody wrote, where psync appends at the
#                 file's end (offset 0 for a new file)
#   trim-busy     a trim of a block another client has created and not sealed yet succeeds
#                 (it is ordered before that write, as a trim of a missing block is);
#                 before, the job failed with EBUSY
#   prefill-align coffer_prefill=1 creates a block at every offset a read may start at: with
#                 blockalign=4k below bs=8k, reads start at every 4 KiB; before, the prefill
#                 made blocks only every bs and half of the reads failed with ENOENT
#   prefill-bssplit  coffer_prefill=1 with several read sizes (bssplit=64k/50:4k/50, random;
#                 bssplit=12k/50:8k/50, sequential; bsrange=4k-16k) reads the whole file,
#                 as psync does, with no short read; before, the prefill made blocks of
#                 bs= (4k), the longer reads came back short and fio, which counts none of a
#                 requeued short read once the job issued its size, read 32 KiB of 2 MiB
#                 and exited 0
#   short-read    a read longer than its block (written with bs=4k, read with bs=16k) says
#                 so, once per job: it comes back short and fio 3.33 counts none of a
#                 requeued short read once the job issued its size (about 192 KiB of 2 MiB,
#                 exit 0); before, those numbers passed for a full run without a word
#   prefill-unaligned  coffer_prefill=1 for sequential reads with bs_unaligned=1 and a
#                 bsrange (reads start at any byte: no blocks can serve them) fails saying
#                 so; before, the second read failed with ENOENT and its line blamed
#                 eviction or a trim. Random reads of that shape still read the whole file
#   index-latency a read the object index answers is copied inside commit: its copy must
#                 count in clat (issue to completion), as a get's does, not in slat (start to
#                 issue). 8 MiB blocks make the copy the largest part of either: clat's mean
#                 is above slat's. Before, the issue time was stamped after the copy: slat
#                 held it and clat was the wait for the next getevents (70 ns at the least)
#   allow-create  allow_file_create=0 fails a job (read or write, and with coffer_prefill=1)
#                 whose file has no block in the store where it starts, saying so, and
#                 writes nothing, as psync fails one whose file does not exist; once the
#                 file was written, the same jobs run. Before, the option was ignored: the
#                 write job created the file, the read job read zeros, and both exited 0
#   prefill-runtime  the prefill is not the job's I/O: with block 0 held unsealed by another
#                 client for 4 s (the prefill waits for it), a time-based 1 s randread job
#                 still reads for its second and reports a runtime well under the 4 s
#                 wait; before, the prefill ran at the file's first open inside the job's
#                 clocks: its runtime was over when it ended (1 read, ~2.5-3.5 s of
#                 job runtime). With create_serialize=0 (fio sets files up in the job) it
#                 stays timed, as documented
#   put-number-ios  a job that stops at number_ios=4 writes reserves no more blocks than
#                 those 4: over a 7 MiB file written before in an 8 MiB store, the whole
#                 file still reads back after it, with coffer_put=1 as with 0. Before, the
#                 pool reserved 32 blocks of 64 KiB (sized by size=2m, not number_ios=),
#                 which are not evictable, and evicted the file's first blocks: ENOENT
#   trim-verify-zero  trim_percentage=50 with trim_verify_zero=1: the blocks fio trimmed
#                 read back as zeros (the trim deleted them) and the job passes; before,
#                 ENOENT under the default coffer_missing=error. Never-written blocks
#                 still fail
#   overlap-notice  a job whose blocks may overlap at different offsets (random writes
#                 aligned below their size, reads of another size than the writes) says
#                 once per job that a read gets the block at its own offset, whole; jobs
#                 of one shape say nothing. Before, stale blocks passed unmentioned
#   fsync-on-close  fsync_on_close=1 with files closed before the job's end (nrfiles=8,
#                 file_service_type=sequential) writes and verifies every block; before,
#                 fio's fsync(2) of the file's descriptor (-1) failed the first close with
#                 EBADF (error 9), silently, after 48 KiB
#   sync-latency  a sync (fsync=1 at iodepth 1) reports its own latency, below a write's;
#                 before, the stale issue time of its io_u's previous use, above a write's
#   prefill-busy  coffer_prefill=1 while another client is still writing a block of the file
#                 (created, not sealed yet: what a second job prefilling the same file
#                 looks like): the prefill waits for that seal, so no read fails with ENOENT
#   prefill-creator-dies  the client holding a block the prefill waits for is killed: the
#                 prefill creates the block soon after; before, it waited out a 5 s get first
#   put-fits      a write + verify job whose data fits the store when written by create +
#                 seal (7 MiB in an 8 MiB store, iodepth 16, bs 64k) passes with coffer_put=1
#                 as well; before, the pool of reserved blocks (up to 2 x iodepth, idle at the
#                 end of the writes) evicted the job's own first blocks and verify failed
#                 with ENOENT; a time-based randrw over prefilled 6 MiB there (no last write
#                 to stop reserving at) as well: before, its pool evicted blocks it then read;
#                 and a randrw over 16 MiB there runs (before: its pool of 128 reserved
#                 blocks pinned the whole arena and the first writes, creates, got ENOMEM)
#
# Environment (set by tests/fio/meson.build): COFFER_STORE (coffer-store binary),
# COFFER_FIO_ENGINE (the module), COFFER_FIO_JOBS (perf/fio/jobs), COFFER_FIO_BLOCK
# (tests/fio/fio_block: one block of a fio file, named by the engine's mapping). COFFER_FIO_TEST_SECONDS
# overrides the time-based runs' length (default 2).
# Exit status: 0 pass, 1 fail, 77 skip (with the reason printed).
set -uo pipefail

case_name=${1:-}
store_bin=${COFFER_STORE:-}
engine=${COFFER_FIO_ENGINE:-}
jobs=${COFFER_FIO_JOBS:-}
block=${COFFER_FIO_BLOCK:-}
seconds=${COFFER_FIO_TEST_SECONDS:-2}

skip() {
	printf 'SKIP: %s\n' "$*"
	exit 77
}
fail() {
	printf 'FAIL [%s]: %s\n' "$case_name" "$*" >&2
	exit 1
}
say() { printf '[%s] %s\n' "$case_name" "$*"; }

command -v fio >/dev/null || skip "fio is not installed"
command -v jq >/dev/null || skip "jq is not installed (tools/setup.sh installs it)"
[ -n "$engine" ] && [ -f "$engine" ] || skip "the fio engine is not built (configure with -Dfio_source)"

src_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d /tmp/coffer-fio-test.XXXXXX)
sock=$work/store.sock
# shellcheck source=../../tools/lib/store.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/store.sh"
cleanup() {
	coffer_store_stop
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
cd "$work" || exit 1

start_store() {
	[ -n "$store_bin" ] && [ -x "$store_bin" ] || skip "coffer-store is not built"
	coffer_store_start "$store_bin" "$sock" "$work/store.log" -m "${1:-512M}" && return 0
	cat "$work/store.log" >&2
	fail "coffer-store did not start"
}

# Copy of the job files with a short runtime and small files (the shapes stay the same).
short_jobs() {
	mkdir -p "$work/jobs"
	cp "$jobs"/*.fio "$jobs"/*.inc "$work/jobs/" || fail "cannot copy $jobs"
	sed -i -e "s/^runtime=.*/runtime=$seconds/" -e 's/^ramp_time=.*/ramp_time=0/' \
		-e 's/^size=256m/size=32m/' "$work/jobs"/*.fio "$work/jobs"/*.inc
}

# A run must not have crashed: fio reports a job killed by a signal as "got signal", and
# its own death shows as an exit status above 128.
no_crash() {
	local rc=$1 log=$2
	[ "$rc" -lt 128 ] || fail "fio died of signal $((rc - 128))"
	if grep -Eq 'got signal|Segmentation|Aborted|core dumped|AddressSanitizer|runtime error' "$log"; then
		cat "$log" >&2
		fail "a job crashed"
	fi
	ls "$work"/core* >/dev/null 2>&1 && fail "a core file was written"
	return 0
}

fio_engine() {
	fio --ioengine="external:$engine" "$@"
}

# fails_saying LOG PATTERN FIO_ARGS...: fio with the engine must fail without crashing, and
# a line of LOG (its output) must match PATTERN (grep basic regex): it says why.
fails_saying() {
	local log=$1 pat=$2 rc
	shift 2
	fio_engine "$@" >"$log" 2>&1
	rc=$?
	no_crash "$rc" "$log"
	[ "$rc" -ne 0 ] || fail "fio succeeded: $*"
	grep -q "$pat" "$log" || fail "no line says why ($pat): $(cat "$log")"
}

# hold_block FILE MS: another client (fio_block) creates block 0 of FILE in namespace "busy"
# and holds it unsealed for MS milliseconds or until `kill -USR1 $holder`, then seals it; its
# pid is left in $holder.
hold_block() {
	"$block" "$sock" busy "$1" 0 hold 4096 "$2" >"$work/hold.out" 2>&1 &
	holder=$!
	for _ in $(seq 1 200); do
		grep -q held "$work/hold.out" && break
		sleep 0.05
	done
	grep -q held "$work/hold.out" || fail "fio_block did not hold the block: $(cat "$work/hold.out")"
}

case_exports() {
	command -v nm >/dev/null || skip "nm is not installed"
	local defined undefined
	defined=$(nm -D --defined-only "$engine" | awk '{ print $3 }' | sort | tr '\n' ' ')
	[ "$defined" = "ioengine " ] || fail "exported symbols are '$defined', want only 'ioengine'"
	undefined=$(nm -D --undefined-only "$engine" | awk '{ print $2 }' | grep -E '^coffer' || true)
	[ -z "$undefined" ] || fail "libcoffer symbols left undefined in the module: $undefined"
	say "only 'ioengine' exported; libcoffer fully linked in"
}

case_enghelp() {
	local out
	out=$(fio --enghelp="$engine" 2>&1) || fail "fio --enghelp failed: $out"
	for o in coffer_socket coffer_namespace coffer_prefill coffer_missing coffer_spin_us \
		coffer_index coffer_put; do
		grep -q "^$o" <<<"$out" || fail "--enghelp does not list $o: $out"
	done
	# fio prints an option's valid values only when it is given a bad one
	grep "^coffer_missing" <<<"$out" | grep -q "error.*zeros" ||
		fail "--enghelp does not list coffer_missing's values: $(grep '^coffer_missing' <<<"$out")"
	say "--enghelp lists the seven options and coffer_missing's values error and zeros"
}

# bad_option ARG MESSAGE: fio refuses ARG while parsing (no job starts) and says MESSAGE
bad_option() {
	local rc
	fio_engine --coffer_socket="$sock" "$1" --name=b --rw=write --bs=4k --size=64k \
		>"$work/b.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/b.log"
	[ "$rc" -ne 0 ] || fail "$1 was accepted: $(cat "$work/b.log")"
	grep -q "Starting" "$work/b.log" && fail "$1 was refused only after a job started: $(cat "$work/b.log")"
	grep "^fio: coffer: " "$work/b.log" | grep -qF "$2" ||
		fail "$1: no clear message: $(cat "$work/b.log")"
	return 0
}

case_options() {
	local v
	start_store 64M
	bad_option --coffer_spin_us=-1 "coffer_spin_us=-1 is not a number of microseconds in 0..1000000"
	bad_option --coffer_spin_us=1000001 "coffer_spin_us=1000001 is not a number"
	bad_option --coffer_spin_us=5ms "coffer_spin_us=5ms is not a number"
	bad_option --coffer_socket= "coffer_socket is empty"
	bad_option --coffer_socket="$work/$(printf 'x%.0s' $(seq 1 120))" "a Unix socket path has at most 107"
	for v in 0 1000000; do
		fio_engine --coffer_socket="$sock" --coffer_spin_us=$v --name=g --rw=write --bs=4k \
			--size=64k >"$work/g.log" 2>&1 || fail "coffer_spin_us=$v: $(cat "$work/g.log")"
	done
	say "$(grep -m1 'fio: coffer:' "$work/b.log"); spin 0 and 1000000 run"
}

case_env() {
	start_store 64M
	COFFER_BATCH=0 fails_saying "$work/e1.log" \
		'^fio: coffer: environment variable COFFER_BATCH="0" is not a decimal number in its range' \
		--coffer_socket="$sock" --name=e --rw=write --bs=4k --size=64k
	COFFER_HHASH_LOCKS_LOG2=20 fails_saying "$work/e2.log" \
		'^fio: coffer: environment variable COFFER_HHASH_LOCKS_LOG2="20" is above COFFER_HHASH_BUCKETS_LOG2 (18, the default): more lock stripes than hash buckets' \
		--coffer_socket="$sock" --name=e --rw=write --bs=4k --size=64k
	# An empty COFFER_SOCKET is unset, as for libcoffer and coffer-store: the default path
	# ($XDG_RUNTIME_DIR/coffer.sock, here a link to the store). Before, the engine passed ""
	# to coffer_connect(): "cannot connect to coffer-store at : invalid argument (...)".
	mkdir -p "$work/xdg" "$work/nostore"
	ln -s "$sock" "$work/xdg/coffer.sock"
	COFFER_SOCKET='' XDG_RUNTIME_DIR=$work/xdg fio_engine --name=s --rw=write --bs=4k \
		--size=64k >"$work/e3.log" 2>&1 || fail "COFFER_SOCKET='': $(cat "$work/e3.log")"
	# no store at the default path: the line names that path, and no variable (nothing
	# points at coffer_env_check() when no variable is at fault)
	COFFER_SOCKET='' XDG_RUNTIME_DIR=$work/nostore fails_saying "$work/e4.log" \
		"^fio: coffer: cannot connect to coffer-store at $work/nostore/coffer.sock: " \
		--name=s --rw=write --bs=4k --size=64k
	grep -q 'coffer_env_check' "$work/e4.log" && fail "points at a variable: $(cat "$work/e4.log")"
	say "$(grep -m1 'fio: coffer:' "$work/e2.log")"
}

# verify.fio: 2 jobs x 64 MiB of 4 KiB blocks written once, then read back and checked.
run_verify() {
	local mode_args=("$@") rc
	start_store 512M
	fio_engine --coffer_socket="$sock" --output-format=json --output="$work/verify.json" \
		"${mode_args[@]}" "$jobs/verify.fio" >"$work/verify.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/verify.log"
	if [ "$rc" -ne 0 ]; then
		cat "$work/verify.log" "$work/verify.json" >&2
		fail "fio exited with $rc"
	fi
	local njobs errors written read
	njobs=$(jq '.jobs | length' "$work/verify.json")
	errors=$(jq '[.jobs[].error] | add' "$work/verify.json")
	written=$(jq '[.jobs[].write.io_bytes] | add' "$work/verify.json")
	read=$(jq '[.jobs[].read.io_bytes] | add' "$work/verify.json")
	[ "$njobs" -eq 2 ] || fail "expected 2 jobs, got $njobs"
	[ "$errors" -eq 0 ] || fail "jobs reported errors: $errors"
	# every written block must have been read back (that is what verify checks)
	[ "$written" -eq $((2 * 64 << 20)) ] || fail "wrote $written bytes, expected $((2 * 64 << 20))"
	[ "$read" -eq "$written" ] || fail "verified $read of $written bytes"
	coffer_store_stop
	say "verify=crc32c passed: 2 jobs wrote and read back $((written >> 20)) MiB"
}

case_verify_fork() {
	run_verify
}

case_verify_thread() {
	run_verify --thread
}

case_store_down() {
	local rc
	# a socket path where nothing listens (a store that was stopped)
	start_store 64M
	coffer_store_stop
	fio_engine --coffer_socket="$sock" --name=down --rw=randread --bs=4k --size=1m \
		--iodepth=4 --numjobs=2 >"$work/down.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/down.log"
	[ "$rc" -ne 0 ] || fail "fio succeeded without a store"
	grep -q "cannot connect to coffer-store" "$work/down.log" ||
		fail "no clear message: $(cat "$work/down.log")"
	# thread mode takes the same path
	fio_engine --coffer_socket="$sock" --thread --name=down --rw=randwrite --bs=4k \
		--size=1m --iodepth=4 --numjobs=2 >"$work/down2.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/down2.log"
	[ "$rc" -ne 0 ] || fail "fio (thread mode) succeeded without a store"
	say "no store: fio exits $rc with: $(grep -m1 'cannot connect' "$work/down.log")"
}

case_depth() {
	local rc
	short_jobs
	start_store 512M
	fio_engine --coffer_socket="$sock" --output-format=json --output="$work/randrw.json" \
		"$work/jobs/randrw.fio" >"$work/randrw.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/randrw.log"
	if [ "$rc" -ne 0 ]; then
		cat "$work/randrw.log" "$work/randrw.json" >&2
		fail "fio exited with $rc"
	fi
	local err riops wiops d32 deep
	err=$(jq '.jobs[0].error' "$work/randrw.json")
	riops=$(jq '.jobs[0].read.iops | floor' "$work/randrw.json")
	wiops=$(jq '.jobs[0].write.iops | floor' "$work/randrw.json")
	# iodepth_level: % of I/Os submitted while this many were in flight ("1".."32", ">=64")
	d32=$(jq '.jobs[0].iodepth_level["32"]' "$work/randrw.json")
	deep=$(jq '[.jobs[0].iodepth_level | to_entries[] | select(.key != "1") | .value] | add' \
		"$work/randrw.json")
	[ "$err" -eq 0 ] || fail "job error $err"
	[ "$riops" -gt 0 ] && [ "$wiops" -gt 0 ] || fail "no I/O: read $riops, write $wiops IOPS"
	awk -v d="$deep" 'BEGIN { exit !(d > 50) }' ||
		fail "depth > 1 for only $deep% of I/Os: $(jq -c '.jobs[0].iodepth_level' "$work/randrw.json")"
	say "randrw 70/30 iodepth 32: read $riops IOPS, write $wiops IOPS;" \
		"IO depths: 32 for $d32%, > 1 for $deep% of I/Os"
}

# README's main job on this build: tools/quickstart.sh (no setup, no build; 2 s of randrw)
# starts its own store, runs obj_open, the randrw job and the verify job, and prints IOPS.
case_quickstart() {
	local bdir rc line
	[ -n "$store_bin" ] && [ -x "$store_bin" ] || skip "coffer-store is not built"
	bdir=$(cd "$(dirname "$store_bin")/.." && pwd)
	COFFER_SKIP_SETUP=1 COFFER_SKIP_BUILD=1 COFFER_BUILD_DIR="$bdir" COFFER_FIO_RUNTIME=2 \
		COFFER_STORE_SIZE=512M COFFER_OBJ_OPEN_THREADS=1 \
		bash "$src_root/tools/quickstart.sh" >"$work/qs.out" 2>&1
	rc=$?
	no_crash "$rc" "$work/qs.out"
	[ "$rc" -eq 0 ] || { cat "$work/qs.out" >&2; fail "quickstart exited with $rc"; }
	for line in 'fio 4k randrw read IOPS  *[1-9][0-9]*$' \
		'fio 4k randrw write IOPS  *[1-9][0-9]*$' \
		'fio I/Os submitted with >= 16 in flight  *[0-9]' \
		'fio verify=crc32c  *passed$' \
		'obj_open open, 1 thread(s) (ops/s)  *[1-9][0-9]*$'; do
		grep -q "^$line" "$work/qs.out" || { cat "$work/qs.out" >&2; fail "no line '$line'"; }
	done
	! grep -q 'NOT THERE YET\|FAILED' "$work/qs.out" || { cat "$work/qs.out" >&2; fail "a part failed"; }
	say "$(grep '^fio 4k randrw' "$work/qs.out" | tr -s ' ' | paste -sd ';')"
}

case_missing() {
	local rc
	start_store 128M
	# default: never-written blocks are an error (ENOENT)
	fails_saying "$work/m1.log" \
		"coffer: read of .* failed: .*never written.*set coffer_prefill=1 .*coffer_missing=zeros" \
		--coffer_socket="$sock" --coffer_namespace=missing --name=m --rw=randread \
		--bs=4k --size=1m --iodepth=8 --output-format=json --output="$work/m1.json"
	[ "$(jq '.jobs[0].error' "$work/m1.json")" -eq 2 ] ||
		fail "expected ENOENT (2), got $(jq '.jobs[0].error' "$work/m1.json")"
	# blocks written with bs=8k, read with bs=4k (one object per block): the line also names
	# the block size and eviction (a larger -m), not only "never written"
	fio_engine --coffer_socket="$sock" --coffer_namespace=bs8k --name=w --rw=write --bs=8k \
		--size=1m >"$work/w8.log" 2>&1 || fail "bs=8k write: $(cat "$work/w8.log")"
	fails_saying "$work/m3.log" \
		"coffer: read of .* failed: .*never written.*another block size.*evicted.*coffer-store.*larger -m.*coffer_prefill=1 .*coffer_missing=zeros" \
		--coffer_socket="$sock" --coffer_namespace=bs8k --name=w --rw=read --bs=4k --size=1m
	# coffer_missing=zeros: such reads return zeros. verify_only skips the writes of a write
	# job and reads every block back against the pattern, here all zeros.
	fio_engine --coffer_socket="$sock" --coffer_namespace=missing --coffer_missing=zeros \
		--name=m --rw=randwrite --bs=4k --size=1m --iodepth=8 --verify=pattern \
		--verify_pattern=0 --verify_only=1 --output-format=json --output="$work/m2.json" \
		>"$work/m2.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/m2.log"
	[ "$rc" -eq 0 ] || fail "coffer_missing=zeros: $(cat "$work/m2.log" "$work/m2.json")"
	[ "$(jq '.jobs[0].read.io_bytes' "$work/m2.json")" -eq $((1 << 20)) ] ||
		fail "coffer_missing=zeros: not every block was read back"
	# coffer_prefill=1: every block exists before the reads start, so no read fails
	fio_engine --coffer_socket="$sock" --coffer_namespace=prefilled --coffer_prefill=1 \
		--name=p --rw=randread --bs=4k --size=4m --iodepth=16 --output-format=json \
		--output="$work/p.json" >"$work/p.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/p.log"
	[ "$rc" -eq 0 ] || fail "coffer_prefill=1: $(cat "$work/p.log" "$work/p.json")"
	[ "$(jq '.jobs[0].read.io_bytes' "$work/p.json")" -eq $((4 << 20)) ] ||
		fail "coffer_prefill=1: not every block was read"
	# prefill into a store too small for the jobs' data set (64 MiB and 128 MiB, 128 MiB
	# store): the second job's prefill evicts the first's blocks; the line must blame
	# eviction and the store's size, not advise coffer_prefill=1, which the job sets. The
	# first job reads slowly (100 reads/s, up to 10 s) and the second starts 1 s later, so
	# its prefill falls among the first's reads: two jobs of 100 MiB at full speed, as
	# before, let the first finish its reads before the eviction in about 1 run of 4
	printf '[global]\nrw=randread\nbs=64k\niodepth=8\n[s]\nsize=64m\nrate_iops=100\nruntime=20\n[t]\nsize=128m\nstartdelay=1\n' >"$work/small.fio"
	fails_saying "$work/p2.log" \
		"coffer: read of s.0.0 .* failed: .*coffer_prefill=1 created every block.*evicted.*larger -m" \
		--coffer_socket="$sock" --coffer_namespace=small --coffer_prefill=1 "$work/small.fio"
	grep -q "set coffer_prefill=1" "$work/p2.log" &&
		fail "coffer_prefill=1 set, yet the line advises it: $(cat "$work/p2.log")"
	say "missing block: ENOENT by default, zeros with coffer_missing=zeros; prefill works"
}

# case_store_dies SIGNAL: KILL (the store dies: its socket closes) or STOP (it stays alive
# but silent: the connection's liveness probe, COFFER_STORE_TIMEOUT_MS = 500 here, fails it)
case_store_dies() {
	local sig=$1 rc t0 t1 killer
	local stat_bin
	stat_bin=$(dirname "$store_bin")/coffer-stat
	[ -x "$stat_bin" ] || skip "coffer-stat is not built"
	start_store 256M
	# kill the store once both jobs are connected and doing I/O (three clients: the two
	# jobs and coffer-stat itself; then half a second more), or after 10 s regardless
	(
		for _ in $(seq 1 200); do
			c=$("$stat_bin" -s "$sock" --json 2>/dev/null | jq -r '.clients // 0' 2>/dev/null)
			[ "${c:-0}" -ge 3 ] && break
			sleep 0.05
		done
		sleep 0.5
		kill "-$sig" "$store_pid"
	) &
	killer=$!
	t0=$(date +%s)
	COFFER_STORE_TIMEOUT_MS=500 timeout 60 fio --ioengine="external:$engine" \
		--coffer_socket="$sock" --name=sd \
		--rw=randrw --bs=4k --size=16m --iodepth=32 --numjobs=2 --time_based=1 \
		--runtime=20 --coffer_prefill=1 --output-format=json --output="$work/sd.json" \
		>"$work/sd.log" 2>&1
	rc=$?
	t1=$(date +%s)
	wait "$killer"
	if [ "$sig" = STOP ]; then
		kill -CONT "$store_pid"
	else
		wait "$store_pid" 2>/dev/null
		store_pid=""
	fi
	[ "$rc" -ne 124 ] || fail "fio hung after the store got SIG$sig"
	no_crash "$rc" "$work/sd.log"
	[ "$rc" -ne 0 ] || fail "fio succeeded although the store got SIG$sig"
	[ $((t1 - t0)) -lt 15 ] || fail "fio took $((t1 - t0))s to notice SIG$sig"
	[ "$(jq '[.jobs[].error] | map(select(. == 107)) | length' "$work/sd.json")" -eq 2 ] ||
		fail "expected both jobs to fail with ENOTCONN (107): $(jq -c '[.jobs[].error]' "$work/sd.json")"
	say "store got SIG$sig: both jobs failed with ENOTCONN, fio exited $rc after $((t1 - t0))s"
}

case_overwrite() {
	local rc
	start_store 64M
	fio_engine --coffer_socket="$sock" --coffer_namespace=overwrite --name=o --rw=randwrite \
		--bs=4k --size=64k --iodepth=32 --time_based=1 --runtime="$seconds" \
		--output-format=json --output="$work/o.json" >"$work/o.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/o.log"
	[ "$rc" -eq 0 ] || fail "overwrite run: $(cat "$work/o.log" "$work/o.json")"
	local ios
	ios=$(jq '.jobs[0].write.total_ios' "$work/o.json")
	[ "$ios" -gt 1000 ] || fail "only $ios writes in ${seconds}s"
	# every block must be sealed and readable (missing blocks would fail with ENOENT)
	fio_engine --coffer_socket="$sock" --coffer_namespace=overwrite --name=o --rw=read \
		--bs=4k --size=64k --iodepth=8 >"$work/o2.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/o2.log"
	[ "$rc" -eq 0 ] || fail "read-back after overwrites: $(cat "$work/o2.log")"
	say "$ios overwrites of 16 blocks at iodepth 32, all blocks readable afterwards"
}

# offset=/offset_increment= move a job's start past the size the engine reported (size= split
# over the files): fio asks for that size before it computes the start, and drops every I/O
# that would end past it without a word. Each job must do and verify all of its size=.
case_offset() {
	local rc bytes
	start_store 64M
	fio_engine --coffer_socket="$sock" --coffer_namespace=offset --name=o --rw=randwrite \
		--bs=4k --size=1m --offset=2m --iodepth=8 --verify=crc32c --output-format=json \
		--output="$work/o1.json" >"$work/o1.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/o1.log"
	[ "$rc" -eq 0 ] || fail "offset=2m: $(cat "$work/o1.log" "$work/o1.json")"
	bytes=$(jq '.jobs[0].write.io_bytes' "$work/o1.json")
	[ "$bytes" -eq $((1 << 20)) ] || fail "offset=2m: wrote $bytes bytes, expected 1 MiB"
	bytes=$(jq '.jobs[0].read.io_bytes' "$work/o1.json")
	[ "$bytes" -eq $((1 << 20)) ] || fail "offset=2m: verified $bytes bytes, expected 1 MiB"
	# three jobs share one file, each its own MiB of it (the usual way to split a file);
	# fio warns on stdout that writers may overlap, so the JSON is what follows that line
	fio_engine --coffer_socket="$sock" --coffer_namespace=offset --name=s --filename=split \
		--rw=write --bs=4k --size=1m --numjobs=3 --offset_increment=1m --iodepth=8 \
		--verify=crc32c --output-format=json --output="$work/o2.out" >"$work/o2.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/o2.log"
	sed -n '/^{/,$p' "$work/o2.out" >"$work/o2.json"
	[ "$rc" -eq 0 ] || fail "offset_increment: $(cat "$work/o2.log" "$work/o2.out")"
	local wrote verified
	wrote=$(jq -c '[.jobs[].write.io_bytes]' "$work/o2.json")
	verified=$(jq -c '[.jobs[].read.io_bytes]' "$work/o2.json")
	[ "$wrote" = "[1048576,1048576,1048576]" ] ||
		fail "offset_increment=1m: jobs wrote $wrote bytes, expected 1 MiB each"
	[ "$verified" = "[1048576,1048576,1048576]" ] ||
		fail "offset_increment=1m: jobs verified $verified bytes, expected 1 MiB each"
	say "offset=2m and offset_increment=1m (3 jobs): every job wrote and verified its 1 MiB"
}

# size= that is not a multiple of bs: the engine's file must not let fio issue a block that
# ends past size= (fio's null engine and psync on a file stop before it); the same shapes
# through the null engine give the expected byte counts. A filesize=LOW-HIGH range gives each
# file a random size in it, as fio's null engine and psync on new files do (before, the
# engine's files were all HIGH long: 256 KiB written where null writes 132 KiB).
case_size_remainder() {
	local i=0 shape want got rc
	start_store 64M
	for shape in "--size=100k --bs=12k --rw=write" "--size=100k --bs=4k --nrfiles=3 --rw=write" \
		"--size=100k --bs=12k --nrfiles=2 --rw=write" "--size=1m --bs=12k --rw=randwrite" \
		"--size=100k --bs=12k --offset=2m --rw=write" \
		"--filesize=16k-64k --nrfiles=4 --bs=4k --rw=write" \
		"--filesize=16k-64k --nrfiles=4 --bs=4k --rw=randwrite"; do
		i=$((i + 1))
		# shellcheck disable=SC2086 # the shape is a list of options
		fio --name=r --ioengine=null $shape --output-format=json --output="$work/n$i.json" \
			>"$work/n$i.log" 2>&1 || fail "null engine, $shape: $(cat "$work/n$i.log")"
		want=$(jq '.jobs[0].write.io_bytes' "$work/n$i.json")
		# shellcheck disable=SC2086
		fio_engine --coffer_socket="$sock" --coffer_namespace="rem$i" --name=r $shape \
			--verify=crc32c --output-format=json --output="$work/c$i.json" >"$work/c$i.log" 2>&1
		rc=$?
		no_crash "$rc" "$work/c$i.log"
		[ "$rc" -eq 0 ] || fail "$shape: $(cat "$work/c$i.log" "$work/c$i.json")"
		got=$(jq '.jobs[0].write.io_bytes' "$work/c$i.json")
		[ "$got" -eq "$want" ] || fail "$shape: wrote $got bytes, fio's null engine $want"
		got=$(jq '.jobs[0].read.io_bytes' "$work/c$i.json")
		[ "$got" -eq "$want" ] || fail "$shape: verified $got bytes, expected $want"
	done
	say "size= not a multiple of bs: the same bytes as fio's null engine, verified"
}

# A relative COFFER_BUILD_DIR is the caller's, here a build in "$work/my build" (a space in
# it) that has the store and coffer-stat but no engine and no bench: quickstart runs from
# $work, starts that store and says the rest is NOT THERE YET. Before, the path was taken in
# the repository: "coffer-store is not built (my build/tools/coffer-store missing)", exit 1.
case_quickstart_reldir() {
	local rc
	[ -n "$store_bin" ] && [ -x "$store_bin" ] || skip "coffer-store is not built"
	mkdir -p "$work/my build/tools" || fail "cannot make $work/my build"
	cp "$store_bin" "$(dirname "$store_bin")/coffer-stat" "$work/my build/tools/" ||
		fail "cannot copy the store"
	(cd "$work" && COFFER_SKIP_SETUP=1 COFFER_SKIP_BUILD=1 COFFER_BUILD_DIR="my build" \
		COFFER_FIO_RUNTIME=1 COFFER_STORE_SIZE=64M COFFER_OBJ_OPEN_THREADS=1 \
		bash "$src_root/tools/quickstart.sh") >"$work/qs.out" 2>&1
	rc=$?
	no_crash "$rc" "$work/qs.out"
	[ "$rc" -eq 0 ] || { cat "$work/qs.out" >&2; fail "quickstart exited with $rc"; }
	if ! grep -q "^quickstart: using $work/my build as built" "$work/qs.out" ||
		! grep -q '^store arena  *64M' "$work/qs.out" ||
		! grep -q '^NOT THERE YET  *fio coffer engine' "$work/qs.out"; then
		cat "$work/qs.out" >&2
		fail "not the store of $work/my build, or no NOT THERE YET"
	fi
	say "relative COFFER_BUILD_DIR with a space, no engine: its store ran, the engine NOT THERE YET"
}

# Several jobs prefilling one file (filename= shared, numjobs > 1) race: a job whose create
# finds a block that another job has created but not sealed yet (-EEXIST) must not read it
# before that seal, or the read fails with ENOENT. Made deterministic with fio_block, which
# holds block 0 unsealed for a while as such a job does.
case_prefill_busy() {
	local rc holder
	[ -n "$block" ] && [ -x "$block" ] || skip "fio_block is not built"
	start_store 64M
	# fio_block must name the blocks the engine writes, or this case would prove nothing
	fio_engine --coffer_socket="$sock" --coffer_namespace=busy --name=w --filename=mapped \
		--rw=write --bs=4k --size=8k --offset=4k >"$work/w.log" 2>&1 ||
		fail "writing a block: $(cat "$work/w.log")"
	"$block" "$sock" busy mapped 4096 exists ||
		fail "fio_block does not find the block fio wrote (mapping differs from the engine's)"
	"$block" "$sock" busy mapped 0 exists && fail "fio_block finds a block fio never wrote"
	# block 0 of 'shared' is being written by another client for 2 s
	hold_block shared 2000
	fio_engine --coffer_socket="$sock" --coffer_namespace=busy --coffer_prefill=1 --name=r \
		--filename=shared --rw=read --bs=4k --size=64k --iodepth=4 --output-format=json \
		--output="$work/r.json" >"$work/r.log" 2>&1
	rc=$?
	wait "$holder" || fail "fio_block could not seal its block: $(cat "$work/hold.out")"
	no_crash "$rc" "$work/r.log"
	[ "$rc" -eq 0 ] || fail "reads after the prefill failed: $(cat "$work/r.log" "$work/r.json")"
	[ "$(jq '.jobs[0].read.io_bytes' "$work/r.json")" -eq $((64 << 10)) ] ||
		fail "not every block was read: $(jq '.jobs[0].read.io_bytes' "$work/r.json") bytes"
	say "prefill waited for a block another client was still writing; every read succeeded"
}

# A prefill waiting for another client's seal of a block must stop waiting soon after that
# client dies (the store then aborts its unsealed block, and the create succeeds): it used to
# wait out a whole 5 s get first. The holder is killed while the prefill waits; the job must
# end well before such a get could have timed out.
case_prefill_creator_dies() {
	local rc fiopid t1 t2 ms
	[ -n "$block" ] && [ -x "$block" ] || skip "fio_block is not built"
	start_store 64M
	hold_block orphan 60000
	timeout 60 fio --ioengine="external:$engine" --coffer_socket="$sock" \
		--coffer_namespace=busy --coffer_prefill=1 --name=r --filename=orphan --rw=read \
		--bs=4k --size=64k --iodepth=4 --output-format=json --output="$work/r.json" \
		>"$work/r.log" 2>&1 &
	fiopid=$!
	sleep 1.5 # fio starts and its prefill waits for block 0
	kill -KILL "$holder"
	wait "$holder" 2>/dev/null
	t1=$(date +%s%N)
	wait "$fiopid"
	rc=$?
	t2=$(date +%s%N)
	ms=$(((t2 - t1) / 1000000))
	no_crash "$rc" "$work/r.log"
	[ "$rc" -eq 0 ] || fail "the prefill failed after its block's creator died: $(cat "$work/r.log" "$work/r.json")"
	[ "$(jq '.jobs[0].read.io_bytes' "$work/r.json")" -eq $((64 << 10)) ] ||
		fail "not every block was read: $(jq '.jobs[0].read.io_bytes' "$work/r.json") bytes"
	[ "$ms" -lt 2500 ] || fail "fio ended $ms ms after the block's creator died: the prefill waited on"
	"$block" "$sock" busy orphan 0 exists || fail "the prefill did not create the orphaned block"
	say "the prefill stopped waiting $ms ms after the block's creator died; every read succeeded"
}

# fio unlinks a job's files at its end (unlink=1) or after each loop (unlink_each_loop=1)
# through the engine, or with unlink(2) of the file's name when the engine has no hook. A
# coffer file is blocks in the store: a local file that happens to have its name (in the
# directory fio runs in, or named by filename=) is someone else's and must survive.
case_unlink() {
	local rc
	start_store 64M
	printf 'not fio data\n' >"$work/u.0.0"
	printf 'not fio data either\n' >"$work/named"
	fio_engine --coffer_socket="$sock" --coffer_namespace=unlink --name=u --rw=write \
		--bs=4k --size=64k --unlink=1 >"$work/u.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/u.log"
	[ "$rc" -eq 0 ] || fail "unlink=1 run: $(cat "$work/u.log")"
	[ "$(cat "$work/u.0.0" 2>/dev/null)" = "not fio data" ] ||
		fail "unlink=1 deleted or changed the local file u.0.0"
	fio_engine --coffer_socket="$sock" --coffer_namespace=unlink --name=n \
		--filename="$work/named" --rw=write --bs=4k --size=64k --loops=2 \
		--unlink_each_loop=1 --unlink=1 >"$work/n.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/n.log"
	[ "$rc" -eq 0 ] || fail "unlink_each_loop=1 run: $(cat "$work/n.log")"
	[ "$(cat "$work/named" 2>/dev/null)" = "not fio data either" ] ||
		fail "unlink_each_loop=1 deleted or changed the local file named by filename="
	say "unlink=1 and unlink_each_loop=1 left local files of the same names alone"
}

# A write replaces its block: create(REPLACE), which answers -EEXIST while another create of
# the block is pending; the engine retries until that one is sealed. A client that keeps
# the block created and unsealed (stopped, wedged) must not hold fio forever: fio's runtime
# is 1 s, the block is held 12 s, and the write fails with ETIMEDOUT well before that.
case_write_busy() {
	local rc holder t0 t1
	[ -n "$block" ] && [ -x "$block" ] || skip "fio_block is not built"
	start_store 64M
	hold_block held 12000
	t0=$(date +%s)
	timeout 60 fio --ioengine="external:$engine" --coffer_socket="$sock" \
		--coffer_namespace=busy --name=w --filename=held --rw=write --bs=4k --size=64k \
		--time_based=1 --runtime=1 --output-format=json --output="$work/w.json" \
		>"$work/w.log" 2>&1
	rc=$?
	t1=$(date +%s)
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	[ "$rc" -ne 124 ] || fail "fio hung on the held block"
	no_crash "$rc" "$work/w.log"
	[ "$rc" -ne 0 ] || fail "the write of a block held unsealed for 12 s succeeded after $((t1 - t0)) s"
	[ $((t1 - t0)) -lt 11 ] || fail "fio took $((t1 - t0)) s: it waited for the holder"
	[ "$(jq '.jobs[0].error' "$work/w.json")" -eq 110 ] ||
		fail "expected ETIMEDOUT (110), got $(jq '.jobs[0].error' "$work/w.json"): $(cat "$work/w.log")"
	grep -q "being created by another client" "$work/w.log" ||
		fail "no message says why: $(cat "$work/w.log")"
	say "a write of a block held unsealed by another client failed with ETIMEDOUT after $((t1 - t0)) s"
}

case_pre_read() {
	start_store 64M
	fails_saying "$work/p.log" "coffer: pre_read=1 is not supported" \
		--coffer_socket="$sock" --coffer_namespace=preread --coffer_prefill=1 \
		--name=p --rw=randread --bs=4k --size=64k --pre_read=1
	say "pre_read=1: $(grep -m1 'pre_read=1' "$work/p.log")"
}

case_io_error() {
	local n
	start_store 64M
	fails_saying "$work/b.log" \
		"coffer: write of big.0.0 at offset 0 failed: object larger than the store's capacity" \
		--coffer_socket="$sock" --coffer_namespace=ioerr --name=big --rw=write \
		--bs=128m --size=256m --iodepth=2 --output-format=json --output="$work/b.json"
	[ "$(jq '.jobs[0].error' "$work/b.json")" -eq 7 ] ||
		fail "expected E2BIG (7), got $(jq '.jobs[0].error' "$work/b.json")"
	n=$(grep -c "coffer: .* failed:" "$work/b.log")
	[ "$n" -eq 1 ] || fail "expected one such line per job, got $n: $(cat "$work/b.log")"
	say "$(grep -m1 'coffer: write of' "$work/b.log")"
}

case_no_size() {
	start_store 64M
	fails_saying "$work/n1.log" "coffer: .*has no size of its own" \
		--coffer_socket="$sock" --coffer_namespace=nosize --name=n --rw=write --bs=4k
	fails_saying "$work/n2.log" "coffer: .*has no size of its own" \
		--coffer_socket="$sock" --coffer_namespace=nosize --name=n --rw=write --bs=4k \
		--size=50%
	say "$(grep -m1 'has no size of its own' "$work/n1.log")"
}

case_trim_busy() {
	local rc holder
	[ -n "$block" ] && [ -x "$block" ] || skip "fio_block is not built"
	start_store 64M
	# held until fio is done (SIGUSR1), not for a fixed time: a fio that starts slowly on a
	# loaded machine must still meet the block unsealed
	hold_block trimmed 120000
	fio_engine --coffer_socket="$sock" --coffer_namespace=busy --name=t --filename=trimmed \
		--rw=trim --bs=4k --size=64k --output-format=json --output="$work/t.json" \
		>"$work/t.log" 2>&1
	rc=$?
	kill -USR1 "$holder"
	wait "$holder" || fail "fio_block could not seal its block: $(cat "$work/hold.out")"
	no_crash "$rc" "$work/t.log"
	[ "$rc" -eq 0 ] || fail "trim beside a block being written: $(cat "$work/t.log" "$work/t.json")"
	[ "$(jq '.jobs[0].trim.io_bytes' "$work/t.json")" -eq $((64 << 10)) ] ||
		fail "not every block was trimmed: $(jq '.jobs[0].trim.io_bytes' "$work/t.json") bytes"
	"$block" "$sock" busy trimmed 0 exists || fail "the other client's block is gone after its seal"
	say "trim of a block another client was writing succeeded; that block stays once sealed"
}

case_prefill_align() {
	local rc
	start_store 64M
	fio_engine --coffer_socket="$sock" --coffer_namespace=align --coffer_prefill=1 \
		--name=a --rw=randread --bs=8k --blockalign=4k --size=256k --iodepth=8 \
		--output-format=json --output="$work/a.out" >"$work/a.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/a.log"
	sed -n '/^{/,$p' "$work/a.out" >"$work/a.json" # after fio's randommap notice
	[ "$rc" -eq 0 ] || fail "reads after the prefill failed: $(cat "$work/a.log" "$work/a.out")"
	[ "$(jq '.jobs[0].read.io_bytes' "$work/a.json")" -eq $((256 << 10)) ] ||
		fail "not every read was done: $(jq '.jobs[0].read.io_bytes' "$work/a.json") bytes"
	say "bs=8k blockalign=4k: every read found its prefilled block"
}

# iodepth 1024 fills the channel's ring: an I/O that finds it full must wait in the engine.
# Answered with FIO_Q_BUSY, fio 3.33 fills a requeued write's verify header a second time,
# drawing one more verify seed, and every later block of a read/write job fails verify
# ("bad header rand_seed") although its data is right. Both read paths (object index on and
# off) must pass.
case_deep_verify() {
	local rc idx put
	start_store 256M
	# the object index on and off, writes by put of a reserved block and by create + seal
	for idx in 0 1; do
		for put in 0 1; do
			fio_engine --coffer_socket="$sock" --coffer_namespace="deep$idx$put" --name=d \
				--rw=randrw --bs=4k --size=32m --iodepth=1024 --coffer_prefill=1 \
				--coffer_index="$idx" --coffer_put="$put" --verify=crc32c \
				--verify_fatal=1 --output-format=json --output="$work/d$idx$put.json" \
				>"$work/d$idx$put.log" 2>&1
			rc=$?
			no_crash "$rc" "$work/d$idx$put.log"
			[ "$rc" -eq 0 ] || fail "coffer_index=$idx coffer_put=$put: verify at iodepth 1024 failed: $(head -c 2000 "$work/d$idx$put.log" "$work/d$idx$put.json")"
		done
	done
	say "randrw at iodepth 1024 with verify=crc32c passes, with and without the object index, writing by put and by create + seal"
}

# Reserved blocks are not evictable and a reserve evicts like a create: blocks reserved ahead
# beyond what the job still writes would push its own sealed data out of a store that holds
# all of it when every write is a create and a seal.
# fits_run TAG WHAT FIO-ARGS...: the job runs with coffer_put=0 and =1 against the store
# already started, and must succeed both times (WHAT says what failed).
fits_run() {
	local tag=$1 what=$2 rc put
	shift 2
	for put in 0 1; do
		fio_engine --coffer_socket="$sock" --coffer_namespace="$tag$put" --name="$tag" \
			--coffer_put="$put" --output-format=json --output="$work/$tag$put.json" \
			"$@" >"$work/$tag$put.log" 2>&1
		rc=$?
		no_crash "$rc" "$work/$tag$put.log"
		[ "$rc" -eq 0 ] || fail "coffer_put=$put: $what: $(head -c 2000 "$work/$tag$put.log")"
	done
}

case_put_fits() {
	start_store 8M
	fits_run fits "7 MiB written in an 8 MiB store did not verify" --rw=write --bs=64k \
		--size=7m --iodepth=16 --verify=crc32c --verify_fatal=1
	# a job with no end (time_based) over prefilled blocks, reads and writes mixed: 6 MiB
	# and 16 writes of 64k in flight leave room for 16 reserved blocks, not 32
	fits_run fitt "time-based randrw over 6 MiB in an 8 MiB store did not verify" \
		--rw=randrw --bs=64k --size=6m --iodepth=16 --coffer_prefill=1 --time_based=1 \
		--runtime=1 --verify=crc32c --verify_fatal=1
	# a job twice the store's size (a cache that evicts its own blocks; missing ones read as
	# zeros): 64 writes of 64k in flight must stay possible by create, whatever is reserved
	fits_run fito "randrw over 16 MiB in an 8 MiB store failed" --rw=randrw --bs=64k \
		--size=16m --iodepth=64 --coffer_missing=zeros --time_based=1 --runtime=1
	say "7 MiB written and verified in an 8 MiB store, by create + seal and by put; so is a time-based randrw over 6 MiB; one over 16 MiB runs without -ENOMEM"
}

# examples/kvcache.c against a store that fio has filled with sealed blocks: its creates
# must evict them (the store is a cache), and its end-of-run leak check must tell those
# evictions from a leak. It compared used_bytes before and after and failed: "kvcache:
# store used 66846720 bytes (0 unsealed), 67108864 before the run".
case_kvcache_full() {
	[ -n "${COFFER_KVCACHE:-}" ] && [ -x "$COFFER_KVCACHE" ] || skip "kvcache is not built"
	start_store 64M
	fio_engine --coffer_socket="$sock" --name=fill --rw=write --bs=64k --size=64m \
		--iodepth=8 >fill.log 2>&1 ||
		fail "fio could not fill the store: $(cat fill.log)"
	"$COFFER_KVCACHE" "$sock" 16 300 16 >kv.log 2>&1 || fail "kvcache failed: $(cat kv.log)"
	grep -q 'objects of other clients evicted' kv.log ||
		fail "kvcache evicted nothing of a full store: $(cat kv.log)"
	say "kvcache ran in a store full of fio's blocks: $(cat kv.log)"
}

# norandommap: fio draws every offset afresh, so one block is written by several I/Os in
# flight at once; fio's verify expects the last one issued (its header's numberio). The
# engine must keep this job's writes of one block in issue order: before, a write whose
# create found an earlier one of the block unsealed (-EEXIST) was retried after that seal,
# and a later write of the block issued meanwhile could seal first and be overwritten by
# the older data ("verify: bad header numberio 985, wanted 1001"; io_uring and libaio on a
# tmpfs file pass the same job).
case_overwrite_order() {
	start_store 64M
	fits_run ordr "overlapping writes of 16 blocks at iodepth 32 did not verify" \
		--rw=randwrite --norandommap=1 --bs=4k --size=64k --io_size=4m --iodepth=32 \
		--verify=crc32c --verify_fatal=1
	say "4 MiB of norandommap writes over 16 blocks at iodepth 32 verified, by create + seal and by put"
}

# Several jobs on one store: each job sized its pool of reserved (unevictable) blocks as if
# it were alone on the store, so four jobs of 3 MiB (12 MiB of data in a 16 MiB store) held
# 4 x 32 blocks of 64 KiB reserved, evicted each other's prefilled blocks, and reads failed
# with ENOENT where create + seal fits them all. The same with four job sections.
case_put_shared() {
	start_store 16M
	fits_run shrn "numjobs=4 time-based randrw over 4 x 3 MiB in a 16 MiB store failed" \
		--rw=randrw --bs=64k --size=3m --iodepth=16 --numjobs=4 --coffer_prefill=1 \
		--time_based=1 --runtime=2 --verify=crc32c --verify_fatal=1
	printf '[global]\nrw=randrw\nbs=64k\nsize=3m\niodepth=16\ncoffer_prefill=1\ntime_based=1\nruntime=2\nverify=crc32c\nverify_fatal=1\n[s1]\n[s2]\n[s3]\n[s4]\n' >"$work/shared.fio"
	local put rc
	for put in 0 1; do
		fio_engine --coffer_socket="$sock" --coffer_namespace="shrs$put" --coffer_put="$put" \
			"$work/shared.fio" >"$work/shrs$put.log" 2>&1
		rc=$?
		no_crash "$rc" "$work/shrs$put.log"
		[ "$rc" -eq 0 ] ||
			fail "coffer_put=$put: four job sections of 3 MiB in a 16 MiB store failed: $(tail -c 1500 "$work/shrs$put.log")"
	done
	say "four jobs of 3 MiB each, time-based randrw, verified in a 16 MiB store, by create + seal and by put"
}

case_readonly() {
	local rc
	[ -n "$block" ] && [ -x "$block" ] || skip "fio_block is not built"
	start_store 64M
	# nothing written yet: the prefill must not create the blocks, so the reads fail
	fails_saying "$work/r1.log" "coffer: --readonly: coffer_prefill=1 creates no blocks" \
		--readonly --coffer_socket="$sock" --coffer_namespace=busy --coffer_prefill=1 \
		--name=ro --filename=ro --rw=randread --bs=4k --size=64k --iodepth=4
	grep -q "coffer: read of .* failed: .*--readonly creates no blocks" "$work/r1.log" ||
		fail "the missing block's line does not say why: $(cat "$work/r1.log")"
	grep -q "set coffer_prefill=1" "$work/r1.log" &&
		fail "under --readonly the line advises coffer_prefill=1: $(cat "$work/r1.log")"
	for off in 0 61440; do
		"$block" "$sock" busy ro "$off" exists &&
			fail "--readonly created the block at offset $off (the prefill wrote the store)"
	done
	# written without --readonly, the same job reads every block back under it
	fio_engine --coffer_socket="$sock" --coffer_namespace=busy --name=ro --filename=ro \
		--rw=write --bs=4k --size=64k --verify=crc32c --do_verify=0 >"$work/w.log" 2>&1 ||
		fail "writing the blocks: $(cat "$work/w.log")"
	fio_engine --readonly --coffer_socket="$sock" --coffer_namespace=busy --coffer_prefill=1 \
		--name=ro --filename=ro --rw=randread --bs=4k --size=64k --iodepth=4 \
		--verify=crc32c --output-format=json --output="$work/r2.json" >"$work/r2.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/r2.log"
	[ "$rc" -eq 0 ] || fail "--readonly read of written blocks: $(cat "$work/r2.log" "$work/r2.json")"
	[ "$(jq '.jobs[0].read.io_bytes' "$work/r2.json")" -eq 65536 ] ||
		fail "--readonly read back $(jq '.jobs[0].read.io_bytes' "$work/r2.json") bytes, want 65536"
	say "--readonly: the prefill created nothing; blocks written before were read and verified"
}

case_file_append() {
	[ -n "$block" ] && [ -x "$block" ] || skip "fio_block is not built"
	start_store 64M
	fails_saying "$work/a.log" "coffer: file_append=1 is not supported" \
		--coffer_socket="$sock" --coffer_namespace=busy --name=ap --filename=ap \
		--rw=write --bs=4k --size=64k --file_append=1
	for off in 0 65536; do
		"$block" "$sock" busy ap "$off" exists &&
			fail "file_append=1 wrote the block at offset $off"
	done
	say "file_append=1: $(grep -m1 'file_append=1' "$work/a.log")"
}

case_prefill_bssplit() {
	local rc n=0 shape
	start_store 256M
	for shape in "--rw=randread --bssplit=64k/50:4k/50" "--rw=read --bssplit=12k/50:8k/50" \
		"--rw=randread --bsrange=4k-16k"; do
		n=$((n + 1))
		# shellcheck disable=SC2086 # the shape is several options
		fio_engine --coffer_socket="$sock" --coffer_namespace="split$n" --coffer_prefill=1 \
			--name=s --size=2m --iodepth=8 $shape --output-format=json \
			--output="$work/s$n.json" >"$work/s$n.log" 2>&1
		rc=$?
		no_crash "$rc" "$work/s$n.log"
		[ "$rc" -eq 0 ] || fail "$shape: $(cat "$work/s$n.log" "$work/s$n.json")"
		[ "$(jq '.jobs[0].read.io_bytes' "$work/s$n.json")" -eq $((2 << 20)) ] ||
			fail "$shape read $(jq '.jobs[0].read.io_bytes' "$work/s$n.json") bytes of 2 MiB ($(jq '.jobs[0].read.short_ios' "$work/s$n.json") short reads)"
		[ "$(jq '.jobs[0].read.short_ios' "$work/s$n.json")" -eq 0 ] ||
			fail "$shape: $(jq '.jobs[0].read.short_ios' "$work/s$n.json") short reads"
	done
	say "prefilled bssplit/bsrange reads: 2 MiB each, no short read"
}

case_short_read() {
	local rc
	start_store 64M
	fio_engine --coffer_socket="$sock" --coffer_namespace=short --name=s --filename=s \
		--rw=write --bs=4k --size=2m >"$work/w.log" 2>&1 || fail "write: $(cat "$work/w.log")"
	for index in 1 0; do
		fio_engine --coffer_socket="$sock" --coffer_namespace=short --coffer_index=$index \
			--name=s --filename=s --rw=randread --bs=16k --size=2m --iodepth=8 \
			>"$work/r$index.log" 2>&1
		rc=$?
		no_crash "$rc" "$work/r$index.log"
		[ "$(grep -c 'its block holds 4096 of the 16384 bytes read' "$work/r$index.log")" -eq 1 ] ||
			fail "coffer_index=$index: no single line says the reads were short: $(cat "$work/r$index.log")"
	done
	say "$(grep -m1 'its block holds' "$work/r1.log")"
}

case_create_only() {
	local rc
	[ -n "$block" ] && [ -x "$block" ] || skip "fio_block is not built"
	start_store 64M
	for cs in 1 0; do
		fails_saying "$work/c$cs.log" "coffer: create_only=1 creates no blocks" \
			--coffer_socket="$sock" --coffer_namespace=busy --coffer_prefill=1 \
			--name=co --filename=co --rw=randread --bs=4k --size=64k --create_only=1 \
			--create_serialize=$cs
	done
	"$block" "$sock" busy co 0 exists && fail "create_only=1 created a block after all"
	fio_engine --coffer_socket="$sock" --coffer_namespace=busy --name=cw --filename=cw \
		--rw=write --bs=4k --size=64k --create_only=1 >"$work/w.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/w.log"
	[ "$rc" -eq 0 ] || fail "a write job's create_only=1: $(cat "$work/w.log")"
	say "create_only=1: $(grep -m1 'create_only=1' "$work/c1.log")"
}

case_fill_device() {
	local rc
	start_store 16M
	fails_saying "$work/f.log" "coffer: fill_device=1 would never end" \
		--coffer_socket="$sock" --coffer_namespace=fill --name=f --rw=write --bs=64k \
		--iodepth=8 --fill_device=1 --runtime=2
	fio_engine --coffer_socket="$sock" --coffer_namespace=fill --name=f --rw=write --bs=64k \
		--iodepth=8 --fill_device=1 --size=8m --output-format=json \
		--output="$work/f2.json" >"$work/f2.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/f2.log"
	[ "$rc" -eq 0 ] || fail "fill_device=1 size=8m: $(cat "$work/f2.log" "$work/f2.json")"
	[ "$(jq '.jobs[0].write.io_bytes' "$work/f2.json")" -eq $((8 << 20)) ] ||
		fail "fill_device=1 size=8m wrote $(jq '.jobs[0].write.io_bytes' "$work/f2.json") bytes"
	say "fill_device=1: $(grep -m1 'fill_device=1' "$work/f.log")"
}

case_prefill_unaligned() {
	local rc
	start_store 64M
	fails_saying "$work/u.log" "coffer: coffer_prefill=1 cannot serve sequential reads" \
		--coffer_socket="$sock" --coffer_namespace=unaligned --coffer_prefill=1 --name=u \
		--rw=read --bsrange=1k-9k --bs_unaligned=1 --size=1m --iodepth=8
	grep -q "evicted" "$work/u.log" && fail "the line blames eviction: $(cat "$work/u.log")"
	fio_engine --coffer_socket="$sock" --coffer_namespace=unaligned --coffer_prefill=1 \
		--name=u --rw=randread --bsrange=1k-9k --bs_unaligned=1 --size=1m --iodepth=8 \
		>"$work/r.log" 2>&1
	rc=$?
	no_crash "$rc" "$work/r.log"
	[ "$rc" -eq 0 ] || fail "random bs_unaligned reads: $(cat "$work/r.log")"
	say "$(grep -m1 'cannot serve' "$work/u.log")"
}

# Reads answered by the object index are copied inside commit. fio's issue time (this engine
# sets it) must be stamped before that copy, so clat (issue to reap) holds the read as it
# does for a get and for other engines, and slat (start to issue) only fio's own preparation.
# 8 MiB blocks at iodepth 1 make the copy dwarf the rest: stamped after the copy (before the
# fix), slat's mean was the copy's time and clat's a few microseconds of waiting for the reap.
case_index_latency() {
	local rc idx slat clat
	start_store 256M
	fio_engine --coffer_socket="$sock" --coffer_namespace=lat --name=l --filename=l \
		--rw=write --bs=8m --size=64m >"$work/w.log" 2>&1 || fail "write: $(cat "$work/w.log")"
	for idx in 1 0; do
		fio_engine --coffer_socket="$sock" --coffer_namespace=lat --coffer_index=$idx \
			--name=l --filename=l --rw=read --bs=8m --size=64m --loops=4 \
			--output-format=json --output="$work/r$idx.json" >"$work/r$idx.log" 2>&1
		rc=$?
		no_crash "$rc" "$work/r$idx.log"
		[ "$rc" -eq 0 ] || fail "coffer_index=$idx: $(cat "$work/r$idx.log" "$work/r$idx.json")"
		slat=$(jq '.jobs[0].read.slat_ns.mean | floor' "$work/r$idx.json")
		clat=$(jq '.jobs[0].read.clat_ns.mean | floor' "$work/r$idx.json")
		# the get path (0) is shown for comparison; the index path (1) is the one at stake
		[ "$idx" -eq 0 ] || [ "$clat" -gt "$slat" ] ||
			fail "coffer_index=$idx: 8 MiB reads' copy is not in clat: clat mean $clat ns, slat mean $slat ns"
		say "coffer_index=$idx: 8 MiB reads, clat mean $clat ns, slat mean $slat ns"
	done
}

case_allow_create() {
	local rc shape
	[ -n "$block" ] && [ -x "$block" ] || skip "fio_block is not built"
	start_store 64M
	for shape in "--rw=write" "--rw=read --coffer_missing=zeros" "--rw=randread --coffer_prefill=1"; do
		# shellcheck disable=SC2086 # the shape is several options
		fails_saying "$work/a.log" "coffer: ac has no block at offset 0 in the store, and allow_file_create=0" \
			--coffer_socket="$sock" --coffer_namespace=busy --name=ac --filename=ac \
			--bs=4k --size=64k --allow_file_create=0 $shape
		"$block" "$sock" busy ac 0 exists && fail "$shape with allow_file_create=0 created the file"
	done
	fio_engine --coffer_socket="$sock" --coffer_namespace=busy --name=ac --filename=ac \
		--rw=write --bs=4k --size=64k >"$work/w.log" 2>&1 || fail "write: $(cat "$work/w.log")"
	for shape in "--rw=randwrite --verify=crc32c" "--rw=read --loops=2"; do
		# shellcheck disable=SC2086
		fio_engine --coffer_socket="$sock" --coffer_namespace=busy --name=ac --filename=ac \
			--bs=4k --size=64k --allow_file_create=0 $shape >"$work/e.log" 2>&1
		rc=$?
		no_crash "$rc" "$work/e.log"
		[ "$rc" -eq 0 ] || fail "$shape on a written file: $(cat "$work/e.log")"
	done
	say "$(grep -m1 'allow_file_create=0' "$work/a.log")"
}

# The prefill runs before fio starts the job's clocks (post_init), as psync's file layout
# does, not at the file's first open inside them. Another client holds block 0 unsealed for
# 4 s, so the prefill lasts about that long: a job of 1 s (time_based) must still read
# for its runtime and report a runtime well below those 4 s.
case_prefill_runtime() {
	local rc ios ms
	[ -n "$block" ] && [ -x "$block" ] || skip "fio_block is not built"
	start_store 64M
	hold_block timed 4000
	fio_engine --coffer_socket="$sock" --coffer_namespace=busy --coffer_prefill=1 --name=r \
		--filename=timed --rw=randread --bs=4k --size=1m --iodepth=8 --time_based=1 \
		--runtime=1 --output-format=json --output="$work/r.json" >"$work/r.log" 2>&1
	rc=$?
	wait "$holder" || fail "fio_block could not seal its block: $(cat "$work/hold.out")"
	no_crash "$rc" "$work/r.log"
	[ "$rc" -eq 0 ] || fail "the job failed: $(cat "$work/r.log" "$work/r.json")"
	ios=$(jq '.jobs[0].read.total_ios' "$work/r.json")
	ms=$(jq '.jobs[0].job_runtime' "$work/r.json")
	[ "$ms" -lt 2500 ] || fail "the prefill's 4 s wait was timed as the job's I/O: runtime $ms ms, $ios reads"
	[ "$ios" -gt 64 ] || fail "the job did not read for its runtime: $ios reads in $ms ms"
	say "a prefill that waited 4 s left the job its 1 s of reads: $ios reads in $ms ms"
}

# Reserved blocks are not evictable: a job must not reserve more than it will write. fio
# stops a job at number_ios= too, not only at size= or io_size=.
case_put_number_ios() {
	local put rc
	for put in 0 1; do
		# a store of its own each: another file's older blocks would be evicted first
		start_store 8M
		fio_engine --coffer_socket="$sock" --coffer_namespace="nios$put" --name=n --rw=write \
			--bs=64k --size=7m --iodepth=16 >"$work/w$put.log" 2>&1 ||
			fail "writing the file: $(cat "$work/w$put.log")"
		# 4 writes into its first 2 MiB: the pool may hold 2 x iodepth blocks, no more
		# than the job writes, and the 7 MiB already there leave room for 4, not 32
		fio_engine --coffer_socket="$sock" --coffer_namespace="nios$put" --coffer_put=$put \
			--name=n --rw=randwrite --bs=64k --size=2m --iodepth=16 --number_ios=4 \
			>"$work/n$put.log" 2>&1
		rc=$?
		no_crash "$rc" "$work/n$put.log"
		[ "$rc" -eq 0 ] || fail "coffer_put=$put number_ios=4: $(cat "$work/n$put.log")"
		fio_engine --coffer_socket="$sock" --coffer_namespace="nios$put" --name=n --rw=read \
			--bs=64k --size=7m --iodepth=16 >"$work/r$put.log" 2>&1 ||
			fail "coffer_put=$put: the file lost blocks to a job of 4 writes: $(grep -m1 'fio: coffer' "$work/r$put.log")"
		coffer_store_stop
	done
	say "4 writes (number_ios=4) into a 7 MiB file in an 8 MiB store left every block readable, by create + seal and by put"
}

# A sync (fsync=1 at iodepth 1: every write is done when it comes) completes at once in the
# engine's queue, so its latency is below a write's, a round trip to the store. The engine
# stamps fio's issue times itself (FIO_ASYNCIO_SETS_ISSUE_TIME), and before, it left a
# sync's stale: its latency ran from the io_u's previous use, above the write's own (fsync=4
# randwrite at iodepth 8: mean ~1 ms, max 133 ms, where psync's syncs take ~1.3 us).
case_sync_latency() {
	local rc put sync_lat write_lat
	start_store 64M
	for put in 0 1; do
		fio_engine --coffer_socket="$sock" --coffer_namespace="lat$put" --coffer_put=$put \
			--name=l --rw=write --bs=4k --size=2m --iodepth=1 --fsync=1 \
			--output-format=json --output="$work/l$put.json" >"$work/l$put.log" 2>&1
		rc=$?
		no_crash "$rc" "$work/l$put.log"
		[ "$rc" -eq 0 ] || fail "coffer_put=$put fsync=1: $(cat "$work/l$put.log")"
		[ "$(jq '.jobs[0].sync.lat_ns.N' "$work/l$put.json")" -gt 0 ] || fail "no sync was issued"
		sync_lat=$(jq '.jobs[0].sync.lat_ns.mean | floor' "$work/l$put.json")
		write_lat=$(jq '.jobs[0].write.clat_ns.mean | floor' "$work/l$put.json")
		[ "$sync_lat" -lt "$write_lat" ] ||
			fail "coffer_put=$put: a sync that waits for nothing took $sync_lat ns on average, a write $write_lat ns: the sync's issue time is stale"
		say "coffer_put=$put: syncs mean $sync_lat ns, writes $write_lat ns"
	done
}

# trim_percentage with trim_verify_zero=1: fio trims some of the blocks it wrote and reads
# them back expecting zeros (a device that zeroes discarded blocks). A trim deletes the
# block's object, so the engine must read such a block (fio flags the read
# IO_U_F_TRIMMED) as zeros, whatever coffer_missing says. Before, the job failed with
# ENOENT under the default coffer_missing=error. A read fio does not flag stays a read of
# a missing block.
case_trim_verify_zero() {
	local rc idx
	start_store 64M
	for idx in 1 0; do
		fio_engine --coffer_socket="$sock" --coffer_namespace="tz$idx" --coffer_index=$idx \
			--name=t --rw=trimwrite --bs=4k --size=1m --iodepth=4 --trim_percentage=50 \
			--trim_verify_zero=1 --trim_backlog=8 --verify=crc32c --verify_fatal=1 \
			--output-format=json --output="$work/t$idx.json" >"$work/t$idx.log" 2>&1
		rc=$?
		no_crash "$rc" "$work/t$idx.log"
		[ "$rc" -eq 0 ] ||
			fail "coffer_index=$idx: trim_verify_zero=1 failed: $(grep -m3 'coffer\|verify\|error' "$work/t$idx.log")"
		[ "$(jq '.jobs[0].error' "$work/t$idx.json")" -eq 0 ] || fail "coffer_index=$idx: job error"
	done
	# a block fio did not trim is still an error when missing: never-written reads fail
	fails_saying "$work/m.log" "coffer: read of .* failed: .*never written" \
		--coffer_socket="$sock" --coffer_namespace=tzmiss --name=m --rw=randread --bs=4k \
		--size=64k --iodepth=4
	say "trimwrite, trim_percentage=50, trim_verify_zero=1: $(jq '.jobs[0].read.io_bytes' "$work/t1.json") bytes read back and verified, trimmed blocks as zeros"
}

# Blocks never merge: a job whose blocks may overlap at different offsets says so once at
# init, and still runs (exit 0): random writes aligned below their size (bs=8k
# blockalign=4k; bssplit=4k/50:64k/50, which fio aligns to 4k), and a read/write job whose
# reads have another size (bs=4k,16k). Jobs of one size, a sequential bsrange (one pass never
# overlaps itself), reads alone, and bssplit aligned to its largest size say nothing. Then
# what the line is about: 16k written at 0 with 0xaa, 4k at 4k with 0xbb; a 16k read at 0
# still verifies 0xaa (psync's fails: 0xbb at 4k). Before, nothing was said: fio's verify
# drops a logged block a later write overlaps, so stale blocks passed unmentioned.
case_overlap_notice() {
	local rc shape n=0 want
	start_store 64M
	for shape in "1 --rw=randwrite --bs=8k --blockalign=4k" \
		"1 --rw=randwrite --bssplit=4k/50:64k/50" "1 --rw=randrw --bs=4k,16k" \
		"0 --rw=randwrite --bs=4k" "0 --rw=randrw --bs=4k" "0 --rw=write --bsrange=4k-16k" \
		"0 --rw=randread --bs=4k,16k" \
		"0 --rw=randrw --bssplit=4k/50:16k/50 --blockalign=16k"; do
		n=$((n + 1))
		want=${shape%% *}
		# shellcheck disable=SC2086 # the shape is several options
		fio_engine --coffer_socket="$sock" --coffer_namespace="ov$n" --coffer_missing=zeros \
			--name=o ${shape#* } --size=256k --iodepth=4 --numjobs=2 >"$work/o$n.log" 2>&1
		rc=$?
		no_crash "$rc" "$work/o$n.log"
		[ "$rc" -eq 0 ] || fail "${shape#* }: $(cat "$work/o$n.log")"
		[ "$(grep -c "coffer: .*blocks overlap at different offsets" "$work/o$n.log")" -eq $((want * 2)) ] ||
			fail "${shape#* }: want the overlap line $want time(s) per job (numjobs=2): $(grep -c 'blocks overlap' "$work/o$n.log")"
	done
	fio_engine --coffer_socket="$sock" --coffer_namespace=ovp --name=p --filename=p \
		--rw=write --bs=16k --size=16k --verify=pattern --verify_pattern=0xaa --do_verify=0 \
		>"$work/p1.log" 2>&1 || fail "16k write: $(cat "$work/p1.log")"
	fio_engine --coffer_socket="$sock" --coffer_namespace=ovp --name=p --filename=p \
		--rw=write --bs=4k --offset=4k --size=4k --verify=pattern --verify_pattern=0xbb \
		--do_verify=0 >"$work/p2.log" 2>&1 || fail "4k write: $(cat "$work/p2.log")"
	fio_engine --coffer_socket="$sock" --coffer_namespace=ovp --name=p --filename=p \
		--rw=read --bs=16k --size=16k --verify=pattern --verify_pattern=0xaa \
		>"$work/p3.log" 2>&1 ||
		fail "the 16k block at 0 no longer reads whole (README must change): $(cat "$work/p3.log")"
	say "$(grep -m1 'blocks overlap' "$work/o1.log" | cut -c1-120)..."
}

# fsync_on_close=1: fio fsyncs a file's descriptor when it closes the file (put_file), and a
# store file had none (-1): every close failed with EBADF. A job that closes files before
# its end (nrfiles=8, file_service_type=sequential, openfiles=2, and the default openfiles)
# stopped at the first close with error 9 after 48 KiB, saying nothing, where psync's
# writes and verifies all 256 KiB. Fork and thread mode. A failed open still fails cleanly.
case_fsync_on_close() {
	local rc n=0 shape
	start_store 64M
	for shape in "--openfiles=2" "--openfiles=8" "--thread --numjobs=2"; do
		n=$((n + 1))
		# shellcheck disable=SC2086 # the shape is several options
		fio_engine --coffer_socket="$sock" --coffer_namespace="fc$n" --name=f --rw=randwrite \
			--bs=4k --size=256k --iodepth=4 --nrfiles=8 --file_service_type=sequential \
			--fsync_on_close=1 --verify=crc32c $shape --output-format=json \
			--output="$work/f$n.json" >"$work/f$n.log" 2>&1
		rc=$?
		no_crash "$rc" "$work/f$n.log"
		[ "$rc" -eq 0 ] ||
			fail "$shape: fsync_on_close=1 failed (error $(jq '.jobs[0].error' "$work/f$n.json")): $(cat "$work/f$n.log")"
		[ "$(jq '[.jobs[] | .write.io_bytes == 262144 and .read.io_bytes == 262144] | all' "$work/f$n.json")" = true ] ||
			fail "$shape: not every block was written and verified: $(jq -c '[.jobs[] | [.write.io_bytes, .read.io_bytes]]' "$work/f$n.json")"
	done
	# An open that fails (allow_file_create=0 on a missing file, checked at the open with
	# create_serialize=0) must fail the job with its error: the engine had set the file's
	# descriptor before the check, and fio asserts a failed open leaves it at -1 (SIGABRT).
	fails_saying "$work/ac.log" "coffer: fcm has no block at offset 0 in the store, and allow_file_create=0" \
		--coffer_socket="$sock" --coffer_namespace=fcm --name=fcm --filename=fcm --rw=write \
		--bs=4k --size=64k --allow_file_create=0 --create_serialize=0 --fsync_on_close=1
	say "fsync_on_close=1 over 8 files closed one by one: 256 KiB written and verified per job"
}

case "$case_name" in
exports) case_exports ;;
sync-latency) case_sync_latency ;;
trim-verify-zero) case_trim_verify_zero ;;
overlap-notice) case_overlap_notice ;;
fsync-on-close) case_fsync_on_close ;;
put-number-ios) case_put_number_ios ;;
prefill-runtime) case_prefill_runtime ;;
allow-create) case_allow_create ;;
index-latency) case_index_latency ;;
prefill-unaligned) case_prefill_unaligned ;;
fill-device) case_fill_device ;;
create-only) case_create_only ;;
short-read) case_short_read ;;
prefill-bssplit) case_prefill_bssplit ;;
readonly) case_readonly ;;
file-append) case_file_append ;;
quickstart) case_quickstart ;;
quickstart-reldir) case_quickstart_reldir ;;
overwrite-order) case_overwrite_order ;;
put-shared) case_put_shared ;;
kvcache-full) case_kvcache_full ;;
put-fits) case_put_fits ;;
deep-verify) case_deep_verify ;;
prefill-align) case_prefill_align ;;
trim-busy) case_trim_busy ;;
no-size) case_no_size ;;
io-error) case_io_error ;;
pre-read) case_pre_read ;;
write-busy) case_write_busy ;;
unlink) case_unlink ;;
prefill-busy) case_prefill_busy ;;
prefill-creator-dies) case_prefill_creator_dies ;;
offset) case_offset ;;
size-remainder) case_size_remainder ;;
overwrite) case_overwrite ;;
store-dies) case_store_dies KILL ;;
store-stopped) case_store_dies STOP ;;
enghelp) case_enghelp ;;
options) case_options ;;
env) case_env ;;
verify-fork) case_verify_fork ;;
verify-thread) case_verify_thread ;;
store-down) case_store_down ;;
depth) case_depth ;;
missing) case_missing ;;
*)
	echo "usage: $0 exports|put-number-ios|prefill-runtime|allow-create|index-latency|prefill-unaligned|fill-device|create-only|short-read|prefill-bssplit|readonly|file-append|kvcache-full|deep-verify|put-fits|overwrite-order|put-shared|enghelp|options|env|verify-fork|verify-thread|store-down|depth|missing|overwrite|offset|size-remainder|prefill-align|trim-busy|no-size|io-error|pre-read|prefill-busy|prefill-creator-dies|write-busy|unlink|store-dies|store-stopped|quickstart|quickstart-reldir" >&2
	exit 2
	;;
esac
exit 0
