#!/usr/bin/env bash
# cuInit verdicts on the real driver: a clean cuInit, a harness timeout
# killing cuInit mid-way, and the same with SIGALRM from the process itself.
# $OUT/verdicts.ndjson is tests/fixtures/h200-580.159.04-verdicts.ndjson.
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
PY=${PY:-python3}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
$BIN/nvprobe watch --json --raw -o $OUT/verdicts.ndjson 2>$OUT/verdicts.stderr &
p=$!
for _ in $(seq 300); do grep -q '"type":"start"' $OUT/verdicts.ndjson 2>/dev/null && break; sleep 0.05; done
$PY tests/scripts/cudawork.py cuinit
timeout -s TERM 0.15 $PY tests/scripts/cudawork.py cuinit; echo "timeout exit=$?"
$PY -c "import signal,ctypes; signal.setitimer(signal.ITIMER_REAL, 0.12); ctypes.CDLL('libcuda.so.1').cuInit(0)"; echo "itimer exit=$?"
sleep 0.5
kill -INT $p; wait $p
cat $OUT/verdicts.stderr
$BIN/nvprobe decode --summary-only $OUT/verdicts.ndjson; $BIN/nvprobe decode $OUT/verdicts.ndjson | grep -E "sends|killed by|exited with" | head -20
