#!/usr/bin/env bash
# Records issue 22's start-up cases on a GPU host, with nvprobe in
# .dev/bin: tests/scripts/startup-workload.sh untraced, then under
# `nvprobe watch --json --raw`; then the same for who-refused-workload.sh
# (record-who-refused.sh). Writes into $OUT:
#   startup-bare.txt, startup-traced.txt   each case's own result
#   startup.ndjson    the recording (tests/fixtures/h200-580.159.04-startup.ndjson)
#   startup.txt       `nvprobe decode` of it
#   startup-verdicts.txt  one line per case (verdicts-by-case.py)
# and record-who-refused.sh's files.
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
export OTHER_LIBCUDA=${OTHER_LIBCUDA:-$PWD/.dev/other/libcuda.so.535.261.03}
bash tests/scripts/startup-workload.sh >$OUT/startup-bare.txt 2>&1
REC=$OUT/startup.ndjson
$BIN/nvprobe watch --json --raw --stall-after 5 -o $REC 2>$OUT/startup-watch.stderr &
p=$!
for _ in $(seq 300); do grep -q '"type":"start"' $REC 2>/dev/null && break; sleep 0.05; done
bash tests/scripts/startup-workload.sh >$OUT/startup-traced.txt 2>&1
sleep 1
kill -INT $p; wait $p
$BIN/nvprobe decode $REC >$OUT/startup.txt 2>&1
python3 tests/scripts/verdicts-by-case.py $REC --text >$OUT/startup-verdicts.txt
echo "--- bare"; cut -c1-220 $OUT/startup-bare.txt
echo "--- traced"; cut -c1-220 $OUT/startup-traced.txt
echo "--- verdicts"; cat $OUT/startup-verdicts.txt
echo "--- watch stderr"; tail -5 $OUT/startup-watch.stderr
bash tests/scripts/record-who-refused.sh >$OUT/who-refused-run.txt 2>&1
tail -30 $OUT/who-refused-run.txt
