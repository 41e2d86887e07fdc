#!/usr/bin/env bash
# Issue 13: `nvprobe top` (plain tables, stdout not a terminal) while 16
# processes start CUDA at once on a GPU host. Writes $OUT/top16.txt.
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
PY=${PY:-python3}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
$BIN/nvprobe top --plain --interval 0.25 --duration 12 >$OUT/top16.txt 2>$OUT/top16.stderr &
p=$!
sleep 3
pids=()
for i in $(seq 16); do $PY tests/scripts/cudawork.py cuinit --case c$i >/dev/null 2>&1 & pids+=($!); done
wait "${pids[@]}"
wait $p
echo "top exit: $?" >>$OUT/top16.stderr
