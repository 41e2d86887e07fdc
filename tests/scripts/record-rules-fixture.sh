#!/usr/bin/env bash
# Diagnosis rules on the real driver: no visible devices, and a fork after
# cuInit (the child calls cuInit again on inherited state).
# Re-records tests/fixtures/h200-580.159.04-rules.ndjson on its own ($OUT/rules.ndjson);
# the committed one came from record-process-layer-fixtures.sh (same workload).
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
PY=${PY:-python3}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
$BIN/nvprobe watch --json --raw -o $OUT/rules.ndjson 2>$OUT/rules.stderr &
p=$!
for _ in $(seq 300); do grep -q '"type":"start"' $OUT/rules.ndjson 2>/dev/null && break; sleep 0.05; done
bash tests/scripts/rules-workload.sh
sleep 0.5
kill -INT $p; wait $p
cat $OUT/rules.stderr
$BIN/nvprobe decode --summary-only $OUT/rules.ndjson | grep -E "^==|   !|hint" | cut -c1-300
