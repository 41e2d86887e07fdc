#!/usr/bin/env bash
# Drain-rate experiment on the GPU machine: where does the time go when
# nvprobe --json writes 500k-1M events/s? Output to a file on disk, to
# /dev/shm and to /dev/null, with nvprobe's CPU time (from /proc/PID/stat).
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
echo "== cpus $(nproc); $(grep MemTotal /proc/meminfo); /tmp: $(df -h /tmp | tail -1)"
for dest in /tmp/drain.ndjson /dev/shm/drain.ndjson /dev/null; do
  for rate in 500000 750000 1000000; do
    rm -f /tmp/drain.ndjson /dev/shm/drain.ndjson
    $BIN/nvprobe watch --json -o $dest --device /dev/null=ctl 2>/tmp/err.txt &
    p=$!
    sleep 1.5
    $BIN/nvbench --threads 1 --iters $((rate*4)) --batches 1 --rate $rate ioctl --path /dev/null --cmd c020462a > /tmp/nb.json
    sleep 1
    read -r ut st < <(awk '{print $14, $15}' /proc/$p/stat)
    kill -INT $p; wait $p
    echo "dest=$dest rate=$rate cpu_user_s=$(echo "scale=2; $ut/100" | bc 2>/dev/null || echo $ut) cpu_sys_s=$(echo "scale=2; $st/100" | bc 2>/dev/null || echo $st) | $(tail -2 /tmp/err.txt | head -1) | nvbench $(cut -c1-32 /tmp/nb.json)"
  done
done
rm -f /tmp/drain.ndjson /dev/shm/drain.ndjson
