#!/usr/bin/env bash
# Run-time GPU faults on a GPU host, recorded (issue 24): one
# `nvprobe watch --json --raw` (default hooks: faults) and one text
# `--events verdicts` beside it, while tests/scripts/gpufault.py makes each
# fault in its own process (tagged `--case NAME` in its command line), a
# kernel that spins is killed after 4 s, and PyTorch trips a device-side
# assertion. Afterwards the kernel log's records since the start
# (kmsgdump.py), and each case's own call log.
#   OUT=DIR NVPROBE=path/to/nvprobe record-faults.sh
set -u
S=$(cd "$(dirname "$0")" && pwd)
NVPROBE=${NVPROBE:-nvprobe}
OUT=${OUT:-.}
PY=${PY:-python3}
TORCH_PY=${TORCH_PY:-/opt/torch/.venv/bin/python3}
T0=$($PY -c 'import time;print(time.clock_gettime_ns(time.CLOCK_MONOTONIC)//1000)')
rm -f "$OUT/faults.ndjson" "$OUT/faults.txt"
$NVPROBE watch --json --raw -o "$OUT/faults.ndjson" 2>"$OUT/faults.err" & J=$!
$NVPROBE watch --events verdicts --metrics 127.0.0.1:9477 -o "$OUT/faults.txt" 2>"$OUT/faults-text.err" & T=$!
$NVPROBE watch --events verdicts --format otlp-json -o "$OUT/faults.otlp.ndjson" 2>"$OUT/faults-otlp.err" & O=$!
for i in $(seq 200); do
  grep -q '"type":"start"' "$OUT/faults.ndjson" 2>/dev/null && [ -s "$OUT/faults.txt" ] && [ -s "$OUT/faults.otlp.ndjson" ] && break
  sleep 0.1
done
for c in ok write read misaligned trap; do
  timeout 60 $PY "$S/gpufault.py" $c --case $c >"$OUT/case-$c.json" 2>"$OUT/case-$c.calls"
  echo "case $c rc=$?"
done
timeout -s KILL 4 $PY "$S/gpufault.py" spin --case spin >"$OUT/case-spin.json" 2>"$OUT/case-spin.calls"
echo "case spin rc=$?"
if [ -x "$TORCH_PY" ]; then
  timeout 120 "$TORCH_PY" - --case torch-assert >"$OUT/case-torch-assert.out" 2>&1 <<'PYEOF'
import torch
x = torch.zeros(4, device="cuda")
i = torch.tensor([9], device="cuda")
x[i] = 1
torch.cuda.synchronize()
PYEOF
  echo "case torch-assert rc=$?"
fi
# The verdicts of the last process wait 0.5 s after its exit.
sleep 2
$PY -c 'import urllib.request;print(urllib.request.urlopen("http://127.0.0.1:9477/metrics").read().decode())' >"$OUT/metrics.txt" 2>&1
kill -INT $J $T $O; wait $J; echo "nvprobe json rc=$?"; wait $T; echo "nvprobe text rc=$?"; wait $O; echo "nvprobe otlp rc=$?"
$PY "$S/kmsgdump.py" --since-us "$T0" >"$OUT/kmsg.ndjson"
