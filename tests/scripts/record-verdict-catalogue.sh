#!/usr/bin/env bash
# Records the failure catalogue's reproducible entries (catalogue-workload.sh)
# and a torch start-up under `nvprobe watch --json --raw` on a GPU host,
# with nvprobe and xtask in .dev/bin. Writes into $OUT:
#   catalogue.ndjson     the recording (tests/fixtures/h200-580.159.04-catalogue.ndjson)
#   catalogue.txt        `nvprobe decode` of it (verdicts in text)
#   timely.txt           verdict records found in the stream BEFORE nvprobe was
#                        told to stop, against the processes that had ended
#   bench-gpu.md/json    `xtask bench --gpu` (optional: BENCH=1)
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
export PY=${PY:-python3}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
REC=$OUT/catalogue.ndjson
$BIN/nvprobe watch --json --raw --stall-after 2 -o $REC 2>$OUT/catalogue.stderr &
p=$!
for _ in $(seq 300); do grep -q '"type":"start"' $REC 2>/dev/null && break; sleep 0.05; done
bash tests/scripts/catalogue-workload.sh 2>$OUT/workload.log
$PY tests/scripts/cudawork.py torch --case torch >>$OUT/workload.log 2>&1
# Every process above has ended: its verdict must already be in the stream.
sleep 1.5
{
  echo "cuinit records before stop: $(grep -c '"type":"cuinit"' $REC)"
  echo "process records before stop: $(grep -c '"type":"process"' $REC)"
  grep -o '"type":"cuinit","pid":[0-9]*,"comm":"[^"]*","result":"[^"]*"' $REC
} >$OUT/timely.txt
kill -INT $p; wait $p
cat $OUT/catalogue.stderr
$BIN/nvprobe decode $REC >$OUT/catalogue.txt 2>&1
grep -E "^==|^   [!~]|^   (process|gpu)" $OUT/catalogue.txt | cut -c1-400
if [ "${BENCH:-0}" = 1 ]; then
  $BIN/xtask bench --gpu --rounds ${ROUNDS:-3} --bin-dir $BIN --json-out $OUT/bench-gpu.json \
    >$OUT/bench-gpu.md 2>$OUT/bench-gpu.log || tail -20 $OUT/bench-gpu.log
fi
