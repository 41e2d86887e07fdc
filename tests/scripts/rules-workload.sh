#!/usr/bin/env bash
# The workloads of the rules fixture without the recorder (run under
# nvprobe by record-rules-fixture.sh and record-process-layer-fixtures.sh):
# no visible devices, and a fork after cuInit whose child calls cuInit again.
PY=${PY:-python3}
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
    print(json.dumps({"child_cuInit": r2, "count": r3, "n": n.value}))
    os._exit(0)
os.waitpid(pid, 0)
print(json.dumps({"parent_cuInit": r}))
PYEOF
