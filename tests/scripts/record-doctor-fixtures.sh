#!/usr/bin/env bash
# Record the doctor and hooks fixtures on the real H200 host: doctor text
# and JSON (tests/fixtures/gpu-host/h200-*-doctor.{txt,json}), its timing,
# another user's view, a snapshot (unpacked as tests/fixtures/hosts/h200-snapshot)
# read back with --root, the hook table against the live kallsyms and module
# BTF (h200-*-hooks.txt), the driver-layer refusal, --layers without the
# syscall layer, watch's start and warning records, and one cuInit.
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
PY=${PY:-python3}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
exec > >(tee -a "$OUT/log.txt") 2>&1
t0=$(date +%s%N); RUST_LOG=nvprobe=debug $BIN/nvprobe doctor > $OUT/doctor.txt 2>$OUT/doctor-debug.txt; echo "doctor rc=$? wall_ms=$(( ($(date +%s%N)-t0)/1000000 ))"
for i in 1 2 3; do t0=$(date +%s%N); $BIN/nvprobe doctor >/dev/null 2>&1; echo "doctor again wall_ms=$(( ($(date +%s%N)-t0)/1000000 ))"; done
$BIN/nvprobe doctor --json > $OUT/doctor.json; echo "doctor --json rc=$?"
$BIN/nvprobe doctor --user nobody 2>&1 | grep -E " nodes " ; echo
$BIN/nvprobe doctor --snapshot $OUT/h200-snapshot.tar.gz > /dev/null 2>&1; echo "snapshot rc=$?"
$BIN/nvprobe doctor --root $OUT/h200-snapshot.tar.gz > /tmp/doctor-root.txt 2>&1; echo "doctor --root rc=$?"
$BIN/nvprobe hooks > $OUT/hooks.txt 2>&1; echo "hooks rc=$?"; cat $OUT/hooks.txt
echo "== --layers driver,process"; $BIN/nvprobe watch --layers driver,process --duration 1 2>&1 | tail -3; echo "rc=$?"
echo "== watch start-up (start and warning records)"; $BIN/nvprobe watch --duration 1 --json -o $OUT/watch-start.ndjson; echo "rc=$?"
grep -E '"type":"(start|warning)"' $OUT/watch-start.ndjson | cut -c1-3000
echo "== watch + cuInit"
$BIN/nvprobe watch --summary-only -o $OUT/watch.txt 2>$OUT/watch.stderr & p=$!
for _ in $(seq 300); do grep -q "Ctrl-C" $OUT/watch.stderr 2>/dev/null && break; sleep 0.05; done
$PY tests/scripts/cudawork.py cuinit; sleep 0.5; kill -INT $p; wait $p; echo "watch rc=$?"
cat $OUT/watch.stderr; head -5 $OUT/watch.txt
cat $OUT/doctor-debug.txt; cat $OUT/doctor.txt
