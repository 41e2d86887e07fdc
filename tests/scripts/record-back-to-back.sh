#!/usr/bin/env bash
# Ten back-to-back runs on a GPU host (start, one CUDA start-up, SIGINT), each start and stop timed;
# then what is left (nvprobe processes, uprobe events). nvprobe in .dev/bin (unpacked from .dev/pack/bins.tar.xz). Writes $OUT/b2b.txt.
set -u
tar -C .dev -xJf .dev/pack/bins.tar.xz
BIN=$PWD/.dev/bin
PY=/opt/torch/.venv/bin/python3; [ -x $PY ] || PY=python3
W=tests/scripts/cudawork.py
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
now() { date +%s.%N; }
for i in $(seq 10); do
  rm -f /tmp/r.ndjson
  t0=$(now)
  $BIN/nvprobe watch --json -o /tmp/r.ndjson 2>/tmp/r.err &
  P=$!
  for _ in $(seq 400); do grep -q '"type":"start"' /tmp/r.ndjson 2>/dev/null && break; sleep 0.01; done
  t1=$(now)
  $PY $W cuinit --case b2b >/dev/null 2>&1
  sleep 0.3
  t2=$(now)
  kill -INT $P; wait $P; rc=$?
  t3=$(now)
  v=$(grep -c '"type":"cuinit"' /tmp/r.ndjson)
  awk -v i=$i -v a=$t0 -v b=$t1 -v c=$t2 -v d=$t3 -v rc=$rc -v v=$v 'BEGIN{printf "run %d ready %.3f s exit %.3f s rc %d verdicts %d\n", i, b-a, d-c, rc, v}'
done > $OUT/b2b.txt
pgrep -a nvprobe >> $OUT/b2b.txt || echo "no nvprobe left running" >> $OUT/b2b.txt
T=/sys/kernel/tracing; [ -d $T/events ] || T=/sys/kernel/debug/tracing
echo "uprobe_events lines: $(cat $T/uprobe_events 2>/dev/null | wc -l) ($T)" >> $OUT/b2b.txt
bpftool prog 2>/dev/null | grep -c nvprobe >> $OUT/b2b.txt || echo "bpftool: none" >> $OUT/b2b.txt
