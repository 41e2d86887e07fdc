#!/usr/bin/env bash
# Issue 37: what the raw sys_exit program (every failed system call of a
# start-up) costs the host, on a GPU host with prebuilt binaries in
# .dev/bin (this build) and .dev/before (the build before it, which
# watched five calls through their own exit tracepoints):
#   1. bench-startup-facts.py --set start-calls: untraced, before, after,
#      interleaved, ROUNDS rounds, nvprobe on CPUs 0-3 and the loop on CPU 8;
#   2. one `watch --bpf-stats` run around getppid and failing lseek loops
#      and a cuInit: each program's hits and ns per hit.
# Writes $OUT/bench-failed-exit.txt and $OUT/bpf-stats.ndjson.
set -u
OUT=${OUT:?}
ROUNDS=${ROUNDS:-7}
BIN=$PWD/.dev/bin
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
{
  echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, rounds $ROUNDS"
  taskset -c 0-3 python3 tests/scripts/bench-startup-facts.py --set start-calls \
    --before .dev/before/nvprobe --after $BIN/nvprobe --nvbench $BIN/nvbench \
    --rounds "$ROUNDS" --cpu 8
} >$OUT/bench-failed-exit.txt 2>&1
REC=$OUT/bpf-stats.ndjson
taskset -c 0-3 $BIN/nvprobe watch --json --bpf-stats -o $REC 2>$OUT/bpf-stats.stderr &
p=$!
for _ in $(seq 300); do grep -q '"type":"start"' $REC 2>/dev/null && break; sleep 0.05; done
taskset -c 8 $BIN/nvbench --iters 1000000 --batches 5 getppid >>$OUT/bench-failed-exit.txt
taskset -c 8 $BIN/nvbench --iters 1000000 --batches 5 start-call ebadf >>$OUT/bench-failed-exit.txt
python3 tests/scripts/cudawork.py ctx 1 >>$OUT/bench-failed-exit.txt
kill -INT $p; wait $p
python3 - "$REC" >>$OUT/bench-failed-exit.txt <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("type") == "summary":
        for b in r.get("bpf", []):
            print(f"{b['program']}: {b['run_count']} runs, {b['ns_per_run']:.1f} ns per run")
PY
cat $OUT/bench-failed-exit.txt
