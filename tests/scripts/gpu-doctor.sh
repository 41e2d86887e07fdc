#!/usr/bin/env bash
# doctor and the driver-layer report on the real H200 host: text and JSON,
# a snapshot (for tests/fixtures/hosts/h200-snapshot), another user's view,
# timings, and watch's start-up lines.
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== doctor (text)"; /usr/bin/time -f "doctor wall %e s" $BIN/nvprobe doctor > $OUT/doctor.txt 2>&1; echo "rc=$?"; cat $OUT/doctor.txt
echo "== doctor --json"; $BIN/nvprobe doctor --json > $OUT/doctor.json; echo "rc=$?"
echo "== doctor --user nobody"; $BIN/nvprobe doctor --user nobody 2>&1 | grep -E "nodes|user"; 
echo "== timings"; for i in 1 2 3 4 5; do s=$(date +%s.%N); $BIN/nvprobe doctor >/dev/null 2>&1; e=$(date +%s.%N); echo "run $i: $(echo "$e - $s" | bc) s"; done
echo "== snapshot"; $BIN/nvprobe doctor --snapshot $OUT/h200-snapshot.tar.gz >/dev/null; echo "rc=$?"; tar tzf $OUT/h200-snapshot.tar.gz | head -80
echo "== doctor --root snapshot"; $BIN/nvprobe doctor --root $OUT/h200-snapshot.tar.gz; echo "rc=$?"
echo "== watch start-up"; $BIN/nvprobe watch --duration 1 --json -o $OUT/watch-start.ndjson; echo "rc=$?"
grep -E '"type":"(start|warning)"' $OUT/watch-start.ndjson | cut -c1-3000
