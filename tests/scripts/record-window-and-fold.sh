#!/usr/bin/env bash
# Issue 38 on a GPU host (2026-12-06, fourth session): the uretprobe
# window's behaviour on the real driver, and text's search lines. nvprobe
# in .dev/bin. Writes into $OUT:
#   hooked.ndjson / window.ndjson   watch --json, the same workloads, with
#                    libcuda hooked and with NVPROBE_URETPROBE_GATE=closed
#                    (no return probe: libcuda not hooked, NCCL only at its
#                    collectives' entries), each decoded as .txt
#   verdicts-hooked.txt / verdicts-window.txt   verdicts-by-case.py --text
#                    of each: what the verdicts say with and without
#                    libcuda's own results
#   nccl-check.txt   the NCCL records of each mode
#   fold.txt         text while loaders look for a libcuda that is not
#                    there: each search one line
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
PY=${PY:-$( [ -x /opt/torch/.venv/bin/python3 ] && echo /opt/torch/.venv/bin/python3 || echo python3)}
W=tests/scripts/cudawork.py
H=tests/scripts/gpuhang.py
S=tests/scripts/seccomp-cuinit.py
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
uname -r >$OUT/kernel.txt

workloads() {
  $PY $W cuinit --case ok
  $PY $S escapes --case escapes-eperm
  $PY $S escapes-eacces --case escapes-eacces
  $PY $S threads --case threads
  $PY $S open --case open-eperm
  CUDA_VISIBLE_DEVICES=7 $PY $W cuinit --case no-visible-device
  $PY $W torch --case torch
  $PY $H nccl 20 1 --case nccl
}

for mode in hooked window; do
  if [ $mode = window ]; then export NVPROBE_URETPROBE_GATE=closed; else unset NVPROBE_URETPROBE_GATE; fi
  $BIN/nvprobe watch --json -o $OUT/$mode.ndjson 2>$OUT/$mode.stderr &
  NVP=$!
  for _ in $(seq 600); do grep -q '"type":"start"' $OUT/$mode.ndjson 2>/dev/null && break; sleep 0.05; done
  workloads >>$OUT/workload-$mode.log 2>&1
  sleep 1
  kill -INT $NVP
  wait $NVP
  unset NVPROBE_URETPROBE_GATE
  $BIN/nvprobe decode $OUT/$mode.ndjson >$OUT/$mode.txt 2>&1
  python3 tests/scripts/verdicts-by-case.py $OUT/$mode.ndjson --text >$OUT/verdicts-$mode.txt
done
python3 - $OUT/hooked.ndjson $OUT/window.ndjson <<'PY' >$OUT/nccl-check.txt
import json, sys
for f in sys.argv[1:]:
    recs = [json.loads(l) for l in open(f)]
    warn = [(r["id"], r.get("message", "")[:160]) for r in recs if r.get("type") == "warning"
            and r["id"] in ("probe_refused", "libcuda_late", "libcuda_refused")]
    nccl = [r for r in recs if r.get("type") == "nccl"]
    cuda = [r for r in recs if r.get("type") == "cuda"]
    print(f.rsplit("/", 1)[-1], "cuda records", len(cuda), "nccl records", len(nccl))
    print("  funcs", [r["func"] for r in nccl][:6], "...")
    print("  seqs", [r.get("seq") for r in nccl if r["func"] == "ncclAllReduce"][:25])
    print("  comm_hash", sorted({str(r.get("comm_hash")) for r in nccl}))
    for w in warn:
        print("  warning", w)
PY
diff $OUT/verdicts-hooked.txt $OUT/verdicts-window.txt >$OUT/verdicts-diff.txt

# Text: a search is one line, however the collector's batches cut it.
nodriver() {
  env LD_LIBRARY_PATH= unshare -m sh -c "mount -t tmpfs nvprobe-empty /usr/local/nvidia/lib64 && exec \"\$@\"" sh "$@"
}
$BIN/nvprobe watch -o $OUT/fold.txt 2>$OUT/fold.stderr &
NVP=$!
for _ in $(seq 200); do grep -q 'Ctrl-C to stop' $OUT/fold.stderr 2>/dev/null && break; sleep 0.05; done
for i in 1 2 3; do
  nodriver $PY $W cuinit --case notfound-$i >>$OUT/workload.log 2>&1
done
nodriver $PY $W torch --case torch-nodriver >>$OUT/workload.log 2>&1
sleep 1.5; kill -INT $NVP; wait $NVP
grep -c ' places = ' $OUT/fold.txt >$OUT/fold-count.txt
grep ' places = ' $OUT/fold.txt >>$OUT/fold-count.txt
