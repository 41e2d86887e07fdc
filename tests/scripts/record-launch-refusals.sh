#!/usr/bin/env bash
# Issue 37: launches the driver refuses at once, on a GPU host, with
# nvprobe in .dev/bin. Writes into $OUT:
#   launches.ndjson  `watch --json --raw --libcuda-hooks launches` around
#                    gpufault.py bigblock, bigshared and ok (the fixture
#                    tests/fixtures/h200-580.159.04-launch-refusals.ndjson)
#   faults.ndjson    the same cases under the default hooks (faults)
#   cost.txt         gpufault.py launch N (empty kernels) untraced, under
#                    the default hooks and under launches, interleaved
#                    ROUNDS rounds: ns per launch
# and prints the cases' results, the fault records and the cost table.
set -u
OUT=${OUT:?}
ROUNDS=${ROUNDS:-3}
N=${N:-200000}
BIN=$PWD/.dev/bin
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
G=tests/scripts/gpufault.py
watch_around() { # $1 recording, $2 hooks, then the command
  local rec=$1 hooks=$2; shift 2
  $BIN/nvprobe watch --json --raw --libcuda-hooks "$hooks" -o "$rec" 2>>$OUT/watch.stderr &
  local p=$!
  for _ in $(seq 300); do grep -q '"type":"start"' "$rec" 2>/dev/null && break; sleep 0.05; done
  "$@"
  sleep 1
  kill -INT $p; wait $p
}
cases() {
  for c in bigblock bigshared ok; do
    echo "== $c: $(python3 $G $c --case $c 2>/dev/null | tail -1 | cut -c1-600)"
  done
}
echo "--- untraced"; cases
echo "--- launches"; watch_around $OUT/launches.ndjson launches cases
echo "--- faults (the default)"; watch_around $OUT/faults.ndjson faults cases
for f in launches faults; do
  echo "--- fault records under $f:"
  grep '"type":"fault"' $OUT/$f.ndjson | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print(r["comm"], r["class"], (r.get("call") or {}).get("func"), (r.get("call") or {}).get("result"), "|", r["hint"][:300])'
done
{
  echo "# ns per cuLaunchKernel of an empty kernel, $N launches, $ROUNDS rounds"
  for i in $(seq $ROUNDS); do
    u=$(python3 $G launch $N | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["per_call_ns"]))')
    for h in faults launches; do
      $BIN/nvprobe watch --json --libcuda-hooks $h -o $OUT/cost-$h.ndjson --force 2>/dev/null &
      p=$!
      for _ in $(seq 300); do grep -q '"type":"start"' $OUT/cost-$h.ndjson 2>/dev/null && break; sleep 0.05; done
      eval "$h=\$(python3 $G launch $N | python3 -c 'import json,sys; print(round(json.load(sys.stdin)[\"per_call_ns\"]))')"
      kill -INT $p; wait $p
    done
    echo "round $i: untraced $u, faults $faults, launches $launches"
  done
} >$OUT/cost.txt
rm -f $OUT/cost-*.ndjson
cat $OUT/cost.txt
