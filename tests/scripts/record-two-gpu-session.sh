#!/usr/bin/env bash
# One run on a host with two GPUs (two H200s), in the order
# that keeps the kernel's slow uprobe removal out of the way of what follows:
#   1. host facts (host.txt)
#   2. issue 11: SIGINT -> exit under an 8-process ioctl flood (flood.txt)
#   3. issues 13/15: real recordings (recordings.tgz):
#      rec.ndjson      --json --raw, one nvprobe: cudawork.py ctxall on both
#                      GPUs (--case two-gpu), the same with
#                      CUDA_VISIBLE_DEVICES=0 (--case one-gpu), nvidia-smi -L
#      text.txt        a two-GPU start-up in text mode
#   4. issue 10: tests/scripts/bench-libcuda-hooks.py (bench.md, bench.json)
# Runs from the repository root, nvprobe and nvbench in .dev/bin.
# Usage: OUT=dir [PHASES=host,flood,record,bench] tests/scripts/record-two-gpu-session.sh [rounds] [bench deadline s]
set -u
OUT=${OUT:?OUT must be set}
ROUNDS=${1:-3}
DEADLINE=${2:-200}
NV=$PWD/.dev/bin/nvprobe
PY=${PY:-/opt/torch/.venv/bin/python3}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
W=tests/scripts/cudawork.py
T=$(mktemp -d)
exec > >(tee -a "$OUT/log.txt") 2>&1
PHASES=,${PHASES:-host,flood,record,bench},
on() { case $PHASES in *,$1,*) return 0;; esac; return 1; }
if on host; then
echo "== $(date -u +%T) host"
{ uname -a; cat /proc/driver/nvidia/version; nvidia-smi -L; nproc; } > "$OUT/host.txt" 2>&1
cat "$OUT/host.txt"
fi

if on flood; then
echo "== $(date -u +%T) stop under flood"
timeout -s KILL 200 tests/scripts/stop-under-flood.sh > "$OUT/flood.txt" 2>&1
cat "$OUT/flood.txt"
fi

# Wait (at most $1 s) until no nvprobe is left: the child that removes the
# last one's libcuda uprobes. Every attach queues behind that removal in the
# kernel (event_mutex), so the next nvprobe starts after it.
settle() {
  local t0=$(date +%s.%N)
  for i in $(seq $(($1 * 5))); do pgrep -x nvprobe >/dev/null || break; sleep 0.2; done
  echo "  (uprobe removal: waited $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s)"
}
if on record; then
echo "== $(date -u +%T) recordings"
# One nvprobe for all: the two-GPU start-up, the same with one GPU visible,
# an NVML client.
rm -f "$T/rec.ndjson"
$NV watch --json --raw -o "$T/rec.ndjson" --force 2>"$T/rec.err" & p=$!
for i in $(seq 1200); do grep -q '"type":"start"' "$T/rec.ndjson" 2>/dev/null && break; sleep 0.05; done
for c in "$PY $W ctxall --case two-gpu" "CUDA_VISIBLE_DEVICES=0 $PY $W ctxall --case one-gpu" "nvidia-smi -L"; do
  timeout -s KILL 60 bash -c "$c" >>"$T/rec.out" 2>&1
done
sleep 1.5
t0=$(date +%s.%N); kill -INT $p; timeout -s KILL 60 tail --pid=$p -f /dev/null
echo "recording: $(grep -c . "$T/rec.ndjson") records, stop $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s"
cat "$T/rec.err" "$T/rec.out"
(cd "$T" && tar -czf "$OUT/recordings.tgz" rec.*)
grep -o '"driver_version":"[^"]*"\|"gpu_name":"[^"]*"\|"gpu_uuid":"[^"]*"\|"pci":"[^"]*"\|"numa_id":[-0-9]*' "$T/rec.ndjson" | sort | uniq -c
settle 120
$NV watch 2>"$T/text.err" >"$T/text.txt" & p=$!
sleep 5; $PY $W ctxall --case text >/dev/null 2>&1; sleep 1.5; kill -INT $p; timeout -s KILL 60 tail --pid=$p -f /dev/null
(cd "$T" && tar -czf "$OUT/recordings.tgz" rec.* text.*)
settle 120
fi

if on bench; then
echo "== $(date -u +%T) bench"
timeout -s KILL 420 $PY tests/scripts/bench-libcuda-hooks.py --nvprobe $NV --python $PY --rounds $ROUNDS \
  --deadline $DEADLINE --json-out "$OUT/bench.json" > "$OUT/bench.md"
cat "$OUT/bench.md"
fi
echo "== $(date -u +%T) done"
rm -rf "$T"
