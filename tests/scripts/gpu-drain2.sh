#!/usr/bin/env bash
# Drain rate with the final collector (correlator on), --json to a file.
set -u
BIN=$PWD/.dev/bin
for rate in 500000 750000 1000000 0; do
  rm -f /tmp/drain.ndjson
  $BIN/nvprobe watch --json -o /tmp/drain.ndjson --device /dev/null=ctl 2>/dev/null &
  p=$!
  sleep 1.5
  $BIN/nvbench --threads 1 --iters 4000000 --batches 1 --rate $rate ioctl --path /dev/null --cmd c020462a > /tmp/nb.json
  sleep 1
  kill -INT $p; wait $p
  echo "rate=$rate nvbench=$(cut -c1-28 /tmp/nb.json) summary=$(tail -1 /tmp/drain.ndjson | grep -o '"events":{[^}]*}\|"lost":{"total":[0-9]*')"
done
