#!/usr/bin/env bash
# Issue 40, seventh session: the collector's ring-buffer consumer giving
# space back once per batch (pipeline/ring.rs, this build in .dev/bin)
# against aya's RingBuf, which gives it back after every record (the build
# before, .dev/before/nvprobe): the RM NULL control on a fresh start and
# under one running loop, full mode and `--events verdicts`; the CPU
# topology first (no two of the tracer's CPUs 0-3 and the loop's CPU share
# a core). Then a second fresh-start run of six rounds (the first one's
# host was noisy), and `--bpf-stats` per program at both levels. Run on
# the GPU host from the repository root as root; writes into $OUT.
# Fixtures: tests/fixtures/gpu-host/h100-bench-ring-consumer*.
set -u
OUT=${OUT:?}
{ lscpu | head -30; for c in 0 1 2 3 8; do
  echo "cpu$c siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list)"; done; } > "$OUT/topo.txt" 2>&1
E=$(mktemp -d /tmp/nvprobe-ring.XXXXXX)
T=(--calls rm_null --tracer-cpus 0-3 --workload-cpu 8)
python3 tests/scripts/bench-percall-tax.py --bin .dev/bin --before .dev/before/nvprobe --rounds 3 "${T[@]}" \
  --only empty,full,verdicts,full_before,verdicts_before --out "$E" >"$OUT/fresh.txt" 2>"$OUT/fresh.err"
cp "$E/percall-tax.json" "$OUT/fresh.json"
python3 tests/scripts/bench-percall-tax.py --bin .dev/bin --before .dev/before/nvprobe --same-loop --rounds 3 --window 1.5 "${T[@]}" \
  --only empty,full,verdicts,full_before --out "$E" >"$OUT/same.txt" 2>"$OUT/same.err"
cp "$E/percall-tax-same-loop.json" "$OUT/same.json"
python3 tests/scripts/bench-percall-tax.py --bin .dev/bin --rounds 2 --bpf-stats "${T[@]}" \
  --only full,verdicts --out "$E" >"$OUT/fresh-stats.txt" 2>&1
python3 tests/scripts/bench-percall-tax.py --bin .dev/bin --before .dev/before/nvprobe --rounds 6 "${T[@]}" \
  --only empty,full,verdicts,full_before,verdicts_before --out "$E" >"$OUT/fresh2.txt" 2>"$OUT/fresh2.err"
cp "$E/percall-tax.json" "$OUT/fresh2.json"
rm -rf "$E"
