#!/usr/bin/env bash
# Records tests/scripts/late-context-workload.sh on the GPU machine, with
# nvprobe in .dev/bin: first untraced (each case's own result), then under
# `nvprobe watch --json --raw`. Writes into $OUT:
#   bare.txt, traced.txt  each case's results, untraced and traced
#   late.ndjson           the recording (tests/fixtures/h200-580.159.04-late-context.ndjson)
#   late.txt              `nvprobe decode` of it
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
bash tests/scripts/late-context-workload.sh >$OUT/bare.txt 2>&1
REC=$OUT/late.ndjson
$BIN/nvprobe watch --json --raw -o $REC 2>$OUT/watch.stderr &
p=$!
for _ in $(seq 300); do grep -q '"type":"start"' $REC 2>/dev/null && break; sleep 0.05; done
bash tests/scripts/late-context-workload.sh >$OUT/traced.txt 2>&1
sleep 1
kill -INT $p; wait $p
$BIN/nvprobe decode $REC >$OUT/late.txt 2>&1
echo "--- bare"; cut -c1-220 $OUT/bare.txt
echo "--- traced"; cut -c1-220 $OUT/traced.txt
echo "--- verdicts and first contexts"
grep -E "cuInit (ok|failed)|first context|^   [!~]" $OUT/late.txt | cut -c1-500
