#!/usr/bin/env bash
# Diagnosis rules on the real driver: no visible devices, and a fork after
# cuInit (the child calls cuInit again on inherited state).
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
PY=${PY:-python3}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
$BIN/nvprobe watch --json --raw -o $OUT/rules.ndjson 2>$OUT/rules.stderr &
p=$!
for _ in $(seq 300); do grep -q '"type":"start"' $OUT/rules.ndjson 2>/dev/null && break; sleep 0.05; done
env CUDA_VISIBLE_DEVICES= $PY tests/scripts/cudawork.py cuinit
$PY - <<'PYEOF'
import ctypes, os, json
cu = ctypes.CDLL("libcuda.so.1")
r = cu.cuInit(0)
pid = os.fork()
if pid == 0:
    n = ctypes.c_int(-1)
    r2 = cu.cuInit(0)
    r3 = cu.cuDeviceGetCount(ctypes.byref(n))
    ctx = ctypes.c_void_p(); dev = ctypes.c_int()
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    r4 = cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)
    print(json.dumps({"child_cuInit": r2, "count": r3, "n": n.value, "ctx": r4}))
    os._exit(0)
os.waitpid(pid, 0)
print(json.dumps({"parent_cuInit": r}))
PYEOF
sleep 0.5
kill -INT $p; wait $p
cat $OUT/rules.stderr
$BIN/nvprobe decode --summary-only $OUT/rules.ndjson | grep -E "^==|   !|hint" | cut -c1-300
