#!/usr/bin/env bash
# Issue 10 on a GPU host: libcuda followed from the loader's open, the
# loader finding no libcuda, children forked after init judged from their
# first failing CUDA call, with the default start-up hooks and with
# --libcuda-hooks all. nvprobe (and nvbench) in .dev/bin. Writes into $OUT:
#   follow.ndjson / follow.txt     default hooks (tests/fixtures/h200-580.159.04-libcuda-follow.ndjson)
#   all.ndjson / all.txt           --libcuda-hooks all (…-libcuda-all.ndjson)
#   exports.txt                    the real libcuda's exported cu* functions (from the all start record)
#   env.txt                        where libcuda and libcudart are on the host
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
PY=${PY:-python3}
W=tests/scripts/cudawork.py
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
REAL=$(ls /usr/local/nvidia/lib64/libcuda.so.5* 2>/dev/null | head -1)
CUDART=$(find / -xdev -name 'libcudart.so.1[0-9]*' -not -path '/proc/*' 2>/dev/null | head -1)
STUB=$(ls /usr/local/cuda*/targets/x86_64-linux/lib/stubs/libcuda.so 2>/dev/null | head -1)
{
  echo "real libcuda: $REAL"; echo "cudart: $CUDART"; echo "stub: $STUB"
  ldconfig -p | grep -E 'libcuda|libcudart' || echo "(no libcuda in the loader cache)"
} >$OUT/env.txt

start() { # REC ARGS...: start nvprobe, wait for its start record
  local rec=$1; shift
  $BIN/nvprobe watch --json --raw --stall-after 2 -o $rec "$@" 2>$rec.stderr &
  NVP=$!
  for _ in $(seq 600); do grep -q '"type":"start"' $rec 2>/dev/null && break; sleep 0.05; done
}
stop() { sleep 1.5; kill -INT $NVP; wait $NVP; cat $1.stderr; }
# A mount namespace where the driver's user-space folder is empty: the
# loader finds no libcuda (a container started without the NVIDIA runtime).
nodriver() {
  env LD_LIBRARY_PATH= unshare -m sh -c "mount -t tmpfs nvprobe-empty /usr/local/nvidia/lib64 && exec \"\$@\"" sh "$@"
}

REC=$OUT/follow.ndjson
start $REC
nodriver $PY $W cuinit --case notfound >>$OUT/workload.log 2>&1
nodriver $PY $W torch --case torch-nodriver >>$OUT/workload.log 2>&1
$PY $W forkdrv --case forkdrv >>$OUT/workload.log 2>&1
[ -n "$CUDART" ] && CUDAWORK_CUDART=$CUDART $PY $W forkcudart --case forkcudart >>$OUT/workload.log 2>&1
[ -n "$STUB" ] && CUDAWORK_LIB=$STUB $PY $W cuinit --case stub >>$OUT/workload.log 2>&1
# A copy of the real libcuda nvprobe has never seen, loaded after it started.
mkdir -p /tmp/nvprobe-late && cp $REAL /tmp/nvprobe-late/libcuda.so.1
CUDAWORK_LIB=/tmp/nvprobe-late/libcuda.so.1 $PY $W cuinit --case late-copy >>$OUT/workload.log 2>&1
CUDAWORK_LIB=/tmp/nvprobe-late/libcuda.so.1 $PY $W cuinit --case late-copy-again >>$OUT/workload.log 2>&1
stop $REC
$BIN/nvprobe decode $REC >$OUT/follow.txt 2>&1

REC=$OUT/all.ndjson
start $REC --libcuda-hooks all
$PY $W forkdrv --case forkdrv-all >>$OUT/workload.log 2>&1
[ -n "$CUDART" ] && CUDAWORK_CUDART=$CUDART $PY $W forkcudart --case forkcudart-all >>$OUT/workload.log 2>&1
$PY $W torch --case torch-all >>$OUT/workload.log 2>&1
# PyTorch's steady state: which CUDA calls each small op makes.
$PY $W torchloop 1000 --case torchloop-all >>$OUT/workload.log 2>&1
stop $REC
$PY - $REC >$OUT/torchloop-calls.txt <<'PYEOF'
import collections, json, sys
pid, calls = None, collections.Counter()
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "process" and "torchloop-all" in " ".join(r.get("cmdline") or []):
        pid = r["pid"]
    if r.get("type") == "cuda" and r.get("pid") == pid and r.get("phase") == "return":
        calls[r["func"]] += 1
print(f"pid {pid}: CUDA driver calls over torch init + 1000 x (x = x + 1)")
for f, n in calls.most_common():
    print(f"{n:8d} {f}")
PYEOF
$BIN/nvprobe decode $REC >$OUT/all.txt 2>&1
$PY - $REC >$OUT/exports.txt <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "start":
        for l in r["libcuda"]:
            if "nvprobe-late" in l["path"] or "stubs" in l["path"]:
                continue
            print("#", l["path"], len(l["functions"]), "hooked", len(l.get("unknown", [])), "unknown")
            for f in sorted(set(l["functions"]) | set(l.get("unknown", []))):
                print(f)
        break
PYEOF
rm -rf /tmp/nvprobe-late
grep -E "^==|^   [!~]|^   (process|gpu)" $OUT/follow.txt $OUT/all.txt | cut -c1-400
