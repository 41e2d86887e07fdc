#!/usr/bin/env bash
# The verdicts of --events verdicts against --events all, live on a GPU
# host: the failure catalogue's cases (catalogue-workload.sh), the
# who-refused cases (who-refused-workload.sh) and a torch start-up, run
# once under two nvprobes at once (each ignores the other: peers), one
# sending everything (--raw, as the fixtures are recorded), one at
# --events verdicts, where the kernel side counts the successful calls no
# verdict reads instead of sending them. verdicts-by-case.py --text of each
# (class, result, diagnoses, text and evidence per case) must be the same.
# Run from the repository root as root, with nvprobe and nvbench in
# .dev/bin. Writes into $OUT: full.ndjson, verdicts.ndjson, *.cases,
# cases.diff.
set -u
OUT=${OUT:?}
B=$PWD/.dev/bin
export PY=${PY:-python3}
export NVPROBE=$B/nvprobe NVBENCH=$B/nvbench
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
$B/nvprobe watch --json --raw --stall-after 2 -o $OUT/full.ndjson 2>$OUT/full.stderr &
a=$!
$B/nvprobe watch --json --events verdicts --stall-after 2 -o $OUT/verdicts.ndjson 2>$OUT/verdicts.stderr &
b=$!
for f in full verdicts; do
  for _ in $(seq 300); do grep -q '"type":"start"' $OUT/$f.ndjson 2>/dev/null && break; sleep 0.05; done
done
# CATALOGUE_ONLY=1 CATALOGUE_SECS=N: the catalogue's cases alone, for at
# most N seconds (a short device call).
timeout "${CATALOGUE_SECS:-200}" bash tests/scripts/catalogue-workload.sh 2>$OUT/workload.log
if [ "${CATALOGUE_ONLY:-0}" != 1 ]; then
  timeout 120 bash tests/scripts/who-refused-workload.sh 2>>$OUT/workload.log
  timeout 60 $PY tests/scripts/cudawork.py torch --case torch >>$OUT/workload.log 2>&1
fi
sleep 1.5
kill -INT $a $b; wait $a $b
for f in full verdicts; do
  $PY tests/scripts/verdicts-by-case.py $OUT/$f.ndjson --text > $OUT/$f.cases
  echo "$f: $(grep -c '"type":"cuinit"' $OUT/$f.ndjson) verdicts, $(wc -l < $OUT/$f.ndjson) lines"
  grep '"type":"summary"' $OUT/$f.ndjson | grep -o '"quieted":[0-9]*'
done
if diff $OUT/full.cases $OUT/verdicts.cases > $OUT/cases.diff; then
  echo "cases: the same"
else
  echo "cases differ:"; head -40 $OUT/cases.diff; exit 1
fi
