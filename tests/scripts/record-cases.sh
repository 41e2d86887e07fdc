#!/usr/bin/env bash
# Records a case workload (tests/scripts/*-workload.sh: each case tagged
# `--case NAME`, printing "== NAME: …") on a GPU host, with nvprobe in
# .dev/bin: first untraced (each case's own result), then under
# `nvprobe watch --json --raw`. Writes into $OUT:
#   bare.txt, traced.txt  each case's results, untraced and traced
#   NAME.ndjson           the recording (the fixture)
#   NAME.txt              `nvprobe decode` of it
#   verdicts.txt          one line per case: class, result, diagnoses
# Usage: OUT=dir tests/scripts/record-cases.sh WORKLOAD.sh NAME [watch options]
set -u
OUT=${OUT:?}
W=${1:?workload script}
NAME=${2:?recording name}
shift 2
BIN=$PWD/.dev/bin
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
export NVPROBE=$BIN/nvprobe
export NVBENCH=$BIN/nvbench
bash "$W" >$OUT/bare.txt 2>&1
REC=$OUT/$NAME.ndjson
$BIN/nvprobe watch --json --raw "$@" -o $REC 2>$OUT/watch.stderr &
p=$!
for _ in $(seq 300); do grep -q '"type":"start"' $REC 2>/dev/null && break; sleep 0.05; done
bash "$W" >$OUT/traced.txt 2>&1
sleep 1
kill -INT $p; wait $p
$BIN/nvprobe decode $REC >$OUT/$NAME.txt 2>&1
python3 tests/scripts/verdicts-by-case.py $REC >$OUT/verdicts.txt
echo "--- bare"; cut -c1-220 $OUT/bare.txt
echo "--- traced"; cut -c1-220 $OUT/traced.txt
echo "--- verdicts"; cat $OUT/verdicts.txt
echo "--- nvprobe verdicts (must be none):"; grep -c '"type":"cuinit","pid":[0-9]*,"comm":"nvprobe"' $REC
echo "--- failed verdicts and first contexts"
grep -E "cuInit failed|first context|^   [!~]" $OUT/$NAME.txt | cut -c1-500 | head -80
