#!/bin/bash
# perf/results/2core-batch2/commands.sh: the scripts behind this set, as run (under flock /tmp/coffer-bench.lock).
# BUILD dirs hold tools/coffer-store and perf/bench/coffer-bench of a release build:
#   base = 1e029db, n1 = e1cd12e (this set's store change), n2 = n1 + hotbit.diff, n3 = n1 + prefetchw.diff
cat > /tmp/perf7-ab.sh <<'EOS'
#!/bin/bash
# /tmp/perf7-ab.sh BUILD LABEL [threads] [batches] [workloads]
S=/tmp/perf7-$$.sock
b=$1; l=$2; th=${3:-1}; ba=${4:-1,32}; wl=${5:-create-seal,get-release}
"$b"/tools/coffer-store -m 1G -s $S -q 2>/dev/null &
sp=$!
sleep 0.7
echo "== $l load $(cut -d' ' -f1-3 /proc/loadavg)"
"$b"/perf/bench/coffer-bench store --socket $S --threads $th --batch $ba --workload $wl --seconds 1 2>&1 | grep -v '^#'
kill $sp; wait $sp
EOS
# /tmp/perf7-abrun.sh OLD NEW: 3 alternations, 1 thread, batch 1 and 32
cat > /tmp/perf7-abrun.sh <<'EOS'
#!/bin/bash
for i in 1 2 3; do /tmp/perf7-ab.sh "$1" base; /tmp/perf7-ab.sh "$2" new; done
EOS
# store-ab.txt:     flock /tmp/coffer-bench.lock /tmp/perf7-abrun.sh base n1
# hotbit-ab.txt:    flock /tmp/coffer-bench.lock /tmp/perf7-abrun.sh n1 n2   ("base" = n1)
# prefetchw-ab.txt: flock /tmp/coffer-bench.lock /tmp/perf7-abrun.sh n1 n3   (three times; "base" = n1;
#                   runs 1 and 3 were disturbed: batch 1 at 0.02-0.05 M ops/s for both builds)
# profile-prefetchw-client-create-seal.txt: as the profiles, client of n3 (a disturbed run)
# profiles: perf record -g -p STORE_PID during, and perf record -g around,
#   coffer-bench store --socket S --threads 1 --batch 32 --workload create-seal --seconds 2
#   (store -m 1G); perf report --no-children --sort sym -g none; perf annotate --stdio -s SYM
