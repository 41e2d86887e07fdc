#!/usr/bin/env bash
# libcuda uprobes on the real driver: ctypes cuInit, torch (cudart through
# cuGetProcAddress), and cuInit with /dev/nvidia-uvm masked.
# $OUT/uprobes.ndjson is tests/fixtures/h200-580.159.04-uprobes.ndjson.
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
PY=${PY:-python3}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
$BIN/nvprobe watch --json --raw -o $OUT/uprobes.ndjson 2>$OUT/uprobes.stderr &
p=$!
for _ in $(seq 300); do grep -q '"type":"start"' $OUT/uprobes.ndjson 2>/dev/null && break; sleep 0.05; done
$PY tests/scripts/cudawork.py cuinit
$PY tests/scripts/cudawork.py torch
unshare -m sh -c "mount --bind /dev/null /dev/nvidia-uvm && exec $PY tests/scripts/cudawork.py cuinit"
sleep 0.5
kill -INT $p; wait $p
cat $OUT/uprobes.stderr
head -1 $OUT/uprobes.ndjson | grep -o '"libcuda":\[[^]]*\]'
grep '"type":"cuda"' $OUT/uprobes.ndjson | grep -o '"pid":[0-9]*\|"func":"[a-zA-Z_0-9]*"\|"phase":"[a-z]*"\|"result_name":"[A-Z_]*"\|"value":[0-9-]*' | paste -sd' ' | sed 's/"pid"/\n"pid"/g' | head -40
$BIN/nvprobe decode --summary-only $OUT/uprobes.ndjson | grep -E "^==|   !" | cut -c1-400
