#!/usr/bin/env bash
# Records tests/scripts/who-refused-workload.sh on a GPU host, with
# nvprobe in .dev/bin: first untraced (each case's own result), then under
# `nvprobe watch --json --raw`. Writes into $OUT:
#   bare.txt           the untraced results ("== CASE: {cuInit …}")
#   traced.txt         the same cases' results under nvprobe
#   refused.ndjson     the recording (tests/fixtures/h200-580.159.04-who-refused.ndjson)
#   refused.txt        `nvprobe decode` of it (verdict text)
#   verdicts.txt       one line per case: class, result, diagnoses (verdicts-by-case.py)
# With CATALOGUE=1 it also records the failure catalogue
# (record-verdict-catalogue.sh) and compares its verdicts per case with the
# committed fixture's (catalogue-compare.txt).
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
export NVPROBE=$BIN/nvprobe
export NVBENCH=$BIN/nvbench
bash tests/scripts/who-refused-workload.sh >$OUT/bare.txt 2>&1
REC=$OUT/refused.ndjson
$BIN/nvprobe watch --json --raw --stall-after 2 -o $REC 2>$OUT/watch.stderr &
p=$!
for _ in $(seq 300); do grep -q '"type":"start"' $REC 2>/dev/null && break; sleep 0.05; done
bash tests/scripts/who-refused-workload.sh >$OUT/traced.txt 2>&1
sleep 1
kill -INT $p; wait $p
$BIN/nvprobe decode $REC >$OUT/refused.txt 2>&1
python3 tests/scripts/verdicts-by-case.py $REC >$OUT/verdicts.txt
echo "--- bare"; cat $OUT/bare.txt | cut -c1-200
echo "--- traced"; cat $OUT/traced.txt | cut -c1-200
echo "--- verdicts"; cat $OUT/verdicts.txt
echo "--- nvprobe verdicts (must be none):"; grep -c '"type":"cuinit","pid":[0-9]*,"comm":"nvprobe"' $REC
grep -E "^==|^   [!~]" $OUT/refused.txt | grep -B1 -A1 "not_permitted\|file_limit\|node_stale\|node_permission" | cut -c1-420 | head -60
if [ "${CATALOGUE:-0}" = 1 ]; then
  mkdir -p $OUT/cat
  OUT=$OUT/cat bash tests/scripts/record-verdict-catalogue.sh >/dev/null 2>&1
  python3 tests/scripts/verdicts-by-case.py $OUT/cat/catalogue.ndjson >/tmp/cat-new.txt
  python3 tests/scripts/verdicts-by-case.py tests/fixtures/h200-580.159.04-catalogue.ndjson >/tmp/cat-old.txt
  { echo "live verdicts of this nvprobe vs the committed catalogue fixture's (as recorded):";
    diff /tmp/cat-old.txt /tmp/cat-new.txt && echo "identical: $(wc -l </tmp/cat-new.txt) cases"; } >$OUT/catalogue-compare.txt
  cat $OUT/catalogue-compare.txt
  cp $OUT/cat/catalogue.ndjson $OUT/catalogue.ndjson
  rm -rf $OUT/cat
fi
