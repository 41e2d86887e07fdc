#!/usr/bin/env bash
# Issue 39 on a GPU host: run-time hangs that end, under one `nvprobe
# watch --json --raw --hang-after 3 --libcuda-hooks launches`, nvprobe in
# .dev/bin. Writes into $OUT:
#   hangs.ndjson     the recording (tests/fixtures/…-hangs.ndjson.gz):
#                    gpuhang.py spin 8 (cuCtxSynchronize spinning in user
#                    space), blocking 8 (asleep in the driver), spin 10
#                    stopped with SIGSTOP 1.5 s in for 5 s, nccl 20 8 (a
#                    single-rank communicator: 20 all-reduces, a grouped
#                    send/receive, then cuStreamSynchronize held 8 s)
#   hangs.txt        the same recording decoded as text
#   nccl-debug.PID.txt  NCCL_DEBUG=INFO of the nccl case (its commId)
#   workload.log     each case's own JSON
#   ncclcost.txt     ns per ncclAllReduce of one float, untraced and under
#                    the default watch, ROUNDS interleaved rounds
set -u
OUT=${OUT:?}
ROUNDS=${ROUNDS:-3}
BIN=$PWD/.dev/bin
PY=${PY:-python3}
H=tests/scripts/gpuhang.py
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
REC=$OUT/hangs.ndjson
$BIN/nvprobe watch --json --raw --hang-after 3 --libcuda-hooks launches -o $REC 2>$OUT/watch.stderr &
NVP=$!
for _ in $(seq 600); do grep -q '"type":"start"' $REC 2>/dev/null && break; sleep 0.05; done
$PY $H spin 8 --case spin >>$OUT/workload.log 2>&1
$PY $H blocking 8 --case blocking >>$OUT/workload.log 2>&1
$PY $H spin 10 --case stopped >>$OUT/workload.log 2>&1 &
P=$!
sleep 1.5
kill -STOP $P
sleep 5
kill -CONT $P
wait $P
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE=$OUT/nccl-debug.%p.txt $PY $H nccl 20 8 --case nccl >>$OUT/workload.log 2>&1
sleep 1
kill -INT $NVP
wait $NVP
cat $OUT/watch.stderr
$BIN/nvprobe decode $REC >$OUT/hangs.txt 2>&1
grep -E '"type":"(hang|hang_end)"' $REC | cut -c1-400
grep -h "commId\|Init START\|NCCL version" $OUT/nccl-debug.*.txt | head -5
{
  echo "# ns per ncclAllReduce of one float (20000 calls, one stream), $ROUNDS rounds"
  for i in $(seq $ROUNDS); do
    u=$($PY $H ncclbench 20000 2>/dev/null | $PY -c 'import json,sys; print(round(json.load(sys.stdin)["per_call_ns"]))')
    $BIN/nvprobe watch --json -o $OUT/cost.ndjson --force 2>/dev/null &
    p=$!
    for _ in $(seq 600); do grep -q '"type":"start"' $OUT/cost.ndjson 2>/dev/null && break; sleep 0.05; done
    t=$($PY $H ncclbench 20000 2>/dev/null | $PY -c 'import json,sys; print(round(json.load(sys.stdin)["per_call_ns"]))')
    kill -INT $p
    wait $p
    echo "round $i: untraced $u, traced $t"
  done
} >$OUT/ncclcost.txt
rm -f $OUT/cost.ndjson
cat $OUT/ncclcost.txt
