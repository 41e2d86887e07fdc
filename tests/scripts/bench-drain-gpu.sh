#!/usr/bin/env bash
# Drain rate on a GPU host: one nvbench thread issues traced ioctls on
# /dev/null declared an NVIDIA ctl node (--device /dev/null=ctl), paced at
# each target rate (0: as fast as one thread can), while nvprobe watch --json
# writes the events out. Prints, per destination and rate, nvprobe's CPU time
# (from /proc/PID/stat), its last stderr line, nvbench's result and the
# summary record's event and lost counts.
#
# The defaults give the "drain rate with the final collector" table of
# docs/BENCHMARKS.md (4,000,000 ioctls per rate, --json to a file on disk).
# The earlier single-thread experiment (same loss to /dev/null as to disk:
# the limit was CPU, not I/O) is
#   DESTS="/tmp/drain.ndjson /dev/shm/drain.ndjson /dev/null" \
#   RATES="500000 750000 1000000" ITERS=rate4 tests/scripts/bench-drain-gpu.sh
# (ITERS=rate4: four seconds' worth of calls at each rate).
#
# Runs from the repository root with nvprobe and nvbench in .dev/bin.
set -u
BIN=$PWD/.dev/bin
DESTS=${DESTS:-/tmp/drain.ndjson}
RATES=${RATES:-500000 750000 1000000 0}
ITERS=${ITERS:-4000000}
echo "== cpus $(nproc); $(grep MemTotal /proc/meminfo); /tmp: $(df -h /tmp | tail -1)"
for dest in $DESTS; do
  for rate in $RATES; do
    iters=$ITERS
    if [[ $ITERS == rate4 ]]; then iters=$((rate * 4)); ((iters > 0)) || iters=4000000; fi
    rm -f /tmp/drain.ndjson /dev/shm/drain.ndjson
    $BIN/nvprobe watch --json -o $dest --device /dev/null=ctl 2>/tmp/drain-err.txt &
    p=$!
    sleep 1.5
    $BIN/nvbench --threads 1 --iters $iters --batches 1 --rate $rate ioctl --path /dev/null --cmd c020462a > /tmp/nb.json
    sleep 1
    read -r ut st < <(awk '{print $14, $15}' /proc/$p/stat)
    kill -INT $p; wait $p
    summary=-
    [[ -f $dest ]] && summary=$(tail -1 $dest | grep -o '"events":{[^}]*}\|"lost":{"total":[0-9]*' | paste -sd' ')
    echo "dest=$dest rate=$rate iters=$iters cpu_user_s=$(echo "scale=2; $ut/100" | bc 2>/dev/null || echo $ut) cpu_sys_s=$(echo "scale=2; $st/100" | bc 2>/dev/null || echo $st) | $(tail -2 /tmp/drain-err.txt | head -1) | nvbench $(cut -c1-32 /tmp/nb.json) | summary $summary"
  done
done
rm -f /tmp/drain.ndjson /dev/shm/drain.ndjson
