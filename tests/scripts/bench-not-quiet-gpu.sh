#!/usr/bin/env bash
# Issue 40, seventh session: a not-yet-quiet process's counted call at
# `--events verdicts` (left_out: its status and RM control number in one
# read, before the head), this build (.dev/bin) against the build before
# (.dev/before/nvprobe), RM NULL control on a fresh start; the same loop
# (a held process: the quiet path, unchanged); then the failure
# catalogue under both levels at once (level-equivalence.sh); then two
# more fresh-start runs of `verdicts` alone, the host being bimodal from
# one process to the next. Run on the GPU host from the repository root
# as root; writes into $OUT. Fixtures:
# tests/fixtures/gpu-host/h100-bench-not-quiet*,
# tests/fixtures/gpu-host/h100-level-equivalence-not-quiet.txt.
set -u
OUT=${OUT:?}
{ nvidia-smi -L; uname -r; cat /sys/devices/system/clocksource/clocksource0/current_clocksource; } > "$OUT/host.txt" 2>&1
E=$(mktemp -d /tmp/nvprobe-lo.XXXXXX)
T=(--calls rm_null --tracer-cpus 0-3 --workload-cpu 8)
python3 tests/scripts/bench-percall-tax.py --bin .dev/bin --before .dev/before/nvprobe --rounds 4 "${T[@]}" \
  --only empty,full,verdicts,full_before,verdicts_before --out "$E" >"$OUT/fresh.txt" 2>"$OUT/fresh.err"
cp "$E/percall-tax.json" "$OUT/fresh.json"
python3 tests/scripts/bench-percall-tax.py --bin .dev/bin --before .dev/before/nvprobe --same-loop --rounds 2 --window 1.5 "${T[@]}" \
  --only empty,verdicts,verdicts_before --out "$E" >"$OUT/same.txt" 2>"$OUT/same.err"
rm -rf "$E"
E=$(mktemp -d /tmp/nvprobe-eq.XXXXXX)
OUT=$E CATALOGUE_ONLY=1 CATALOGUE_SECS=80 timeout 130 bash tests/scripts/level-equivalence.sh > "$E/equiv.txt" 2>&1
echo "rc $?" >> "$E/equiv.txt"
cp "$E/equiv.txt" "$E/full.cases" "$E/verdicts.cases" "$OUT/" 2>/dev/null
tar -C "$E" -czf "$OUT/equiv-ndjson.tgz" full.ndjson verdicts.ndjson
rm -rf "$E"
for run in "7 empty,verdicts,verdicts_before" "10 verdicts,verdicts_before"; do
  set -- $run
  E=$(mktemp -d /tmp/nvprobe-lo.XXXXXX)
  python3 tests/scripts/bench-percall-tax.py --bin .dev/bin --before .dev/before/nvprobe --rounds "$1" "${T[@]}" \
    --only "$2" --out "$E" >"$OUT/fresh-$1.txt" 2>&1
  cp "$E/percall-tax.json" "$OUT/fresh-$1.json"
  rm -rf "$E"
done
