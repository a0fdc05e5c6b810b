#!/bin/bash
# perf/results/2core-batch/commands.sh: the scripts behind this set, as run (under flock /tmp/coffer-bench.lock).
# BUILD dirs hold tools/coffer-store and perf/bench/coffer-bench of a release build.
# ab.sh BUILD LABEL [threads] [batches] [workloads]: one store, one coffer-bench store run
cat > /tmp/ab.sh <<'EOF'
#!/bin/bash
# /tmp/perf6-ab.sh BUILD LABEL [threads] [batches] [workloads]
S=/tmp/perf6-$$.sock
b=$1; l=$2; th=${3:-1,2}; ba=${4:-1,32,128}; wl=${5:-create-seal,get-release}
"$b"/tools/coffer-store -m 1G -s $S -q 2>/dev/null &
sp=$!
sleep 0.7
echo "== $l load $(cut -d' ' -f1-3 /proc/loadavg)"
"$b"/perf/bench/coffer-bench store --socket $S --threads $th --batch $ba --workload $wl --seconds 1 2>&1 | grep -v '^#'
kill $sp; wait $sp
EOF
# store-ab.txt: OLD = bb307c5, NEW = ed45e7e (perf-perf6 with both changes and the reserve-put workload)
for i in 1 2 3; do bash /tmp/ab.sh "$1" base 1,2 1,32,128; bash /tmp/ab.sh "$2" new 1,2 1,32,128; done
# store-ab2.txt: the same, 1 thread, batch 1 and 32
for i in 1 2 3; do bash /tmp/ab.sh "$1" base 1 1,32; bash /tmp/ab.sh "$2" new 1 1,32; done
# profiles: perf record -g on the store (-m 1G) and on coffer-bench store --threads 1 --batch 32 --seconds 2,
# per workload; perf stat -e task-clock for cpu-ab.txt (store: -p PID; client: the command).
# reserve-put.txt: for i in 1 2 3; do bash /tmp/ab.sh "$2" new 1 1,32 create-seal,reserve-put; done
