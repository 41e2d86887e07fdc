#!/usr/bin/env bash
# Records tests/scripts/start-calls-workload.sh on the GPU machine, with
# nvprobe in .dev/bin: first untraced (each case's own result), then under
# `nvprobe watch --json --raw`. Writes into $OUT:
#   bare.txt           the untraced results ("== CASE: {cuInit …}")
#   traced.txt         the same cases' results under nvprobe
#   startcalls.ndjson  the recording (tests/fixtures/h200-580.159.04-start-calls.ndjson)
#   startcalls.txt     `nvprobe decode` of it (verdict text)
#   verdicts.txt       one line per case: class, result, diagnoses (verdicts-by-case.py)
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
export NVPROBE=$BIN/nvprobe
export NVBENCH=$BIN/nvbench
bash tests/scripts/start-calls-workload.sh >$OUT/bare.txt 2>&1
REC=$OUT/startcalls.ndjson
$BIN/nvprobe watch --json --raw --stall-after 2 -o $REC 2>$OUT/watch.stderr &
p=$!
for _ in $(seq 300); do grep -q '"type":"start"' $REC 2>/dev/null && break; sleep 0.05; done
bash tests/scripts/start-calls-workload.sh >$OUT/traced.txt 2>&1
sleep 1
kill -INT $p; wait $p
$BIN/nvprobe decode $REC >$OUT/startcalls.txt 2>&1
python3 tests/scripts/verdicts-by-case.py $REC >$OUT/verdicts.txt
echo "--- bare"; cat $OUT/bare.txt | cut -c1-200
echo "--- traced"; cat $OUT/traced.txt | cut -c1-200
echo "--- verdicts"; cat $OUT/verdicts.txt
echo "--- nvprobe verdicts (must be none):"; grep -c '"type":"cuinit","pid":[0-9]*,"comm":"nvprobe"' $REC
grep -E "^==|^   [!~]" $OUT/startcalls.txt | grep -A2 "thread_limit\|address_space_limit\|not_permitted\|os_call_failed\|call_failed" | cut -c1-420 | head -60
echo "--- call_failed records:"; grep -c '"op":"call_failed"' $REC
