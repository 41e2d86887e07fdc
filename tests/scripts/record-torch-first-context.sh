#!/usr/bin/env bash
# Records a PyTorch start-up whose first context comes from the CUDA runtime
# (cudart retains the primary context at the first tensor on the GPU) on a
# GPU host, with nvprobe in .dev/bin: `cudawork.py torchloop 10` untraced,
# then under `nvprobe watch --json --raw`. Writes into $OUT:
#   bare.txt, traced.txt   the workload's own result
#   torch.ndjson           the recording (tests/fixtures/h200-580.159.04-torch-first-context.ndjson)
#   verdicts.txt           verdicts-by-case.py --text of it
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
PY=${PY:-/opt/torch/.venv/bin/python3}
W=tests/scripts/cudawork.py
$PY $W torchloop 10 --case torch_first_context >$OUT/bare.txt 2>&1
REC=$OUT/torch.ndjson
$BIN/nvprobe watch --json --raw -o $REC 2>$OUT/watch.stderr &
p=$!
for _ in $(seq 300); do grep -q '"type":"start"' $REC 2>/dev/null && break; sleep 0.05; done
$PY $W torchloop 10 --case torch_first_context >$OUT/traced.txt 2>&1
sleep 1
kill -INT $p; wait $p
python3 tests/scripts/verdicts-by-case.py $REC --text >$OUT/verdicts.txt
tail -n 2 $OUT/bare.txt $OUT/traced.txt; cat $OUT/verdicts.txt; tail -3 $OUT/watch.stderr
