#!/usr/bin/env bash
# Issue 40, sixth session: the RM NULL control's tax on a fresh start and
# in the same loop, this build (.dev/bin: nvprobe, nvbench) against the one
# before (.dev/before/nvprobe), and what one BPF operation costs
# (nvbench unit-costs: bpf_ktime_get_ns against bpf_jiffies64). Run on the
# GPU host from the repository root as root; writes into $OUT: host.txt
# (GPU, kernel, clocksource, the coarse clock's tick), fresh.{txt,json},
# same.{txt,json}, unit.ndjson. Fixtures:
# tests/fixtures/gpu-host/h100-bench-percall-tax-ticks*.
set -u
OUT=${OUT:?}
E=$(mktemp -d /tmp/nvprobe-ticks.XXXXXX)
{ nvidia-smi -L; uname -r; cat /sys/devices/system/clocksource/clocksource0/current_clocksource;
  python3 -c "import time; print('coarse res ns', time.clock_getres(6)*1e9)"; } > "$OUT/host.txt" 2>&1
python3 tests/scripts/bench-percall-tax.py --bin .dev/bin --before .dev/before/nvprobe --rounds 3 \
  --calls rm_null --tracer-cpus 0-3 --workload-cpu 8 --only empty,full,verdicts,full_before,verdicts_before \
  --out "$E" >"$OUT/fresh.txt" 2>"$OUT/fresh.err"; cp "$E/percall-tax.json" "$OUT/fresh.json"
python3 tests/scripts/bench-percall-tax.py --bin .dev/bin --before .dev/before/nvprobe --same-loop --rounds 3 --window 1.5 \
  --calls rm_null --tracer-cpus 0-3 --workload-cpu 8 --only empty,full,verdicts,full_before,verdicts_before \
  --out "$E" >"$OUT/same.txt" 2>"$OUT/same.err"; cp "$E/percall-tax-same-loop.json" "$OUT/same.json"
timeout 40 .dev/bin/nvbench --iters 20000 --batches 5 unit-costs --rounds 1 --cpu 8 > "$OUT/unit.ndjson" 2>&1
rm -rf "$E"
