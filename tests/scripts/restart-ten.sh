#!/usr/bin/env bash
# Issue 26 on a GPU host: start, stop and restart without holding the
# host's tracing. Phases (PHASES=ten,all,flood,before; in that order, so
# that the old binary's slow removals come last):
#   ten     ten back-to-back runs (GAP=s: a pause between them): start nvprobe, one real cuInit (python
#           ctypes, cudawork.py cuinit), SIGINT; per run: start (spawn ->
#           "tracing" on stderr), the verdict's delay after the process's
#           exit, SIGINT -> exit, then another tracer's perf-event uprobe
#           attach (nvbench tracer-attach); nvprobe processes left 5 s
#           after the last exit; the first run's recording (ten-run1.ndjson)
#   all     two runs with --libcuda-hooks all (every exported function)
#   flood   tests/scripts/stop-under-flood.sh (SIGINT under 8 flooders)
#   before  the same as `ten`, 3 runs, with the old binary in $OLD
# The kernel log's "leaking uprobe" lines are counted before and after.
# Runs from the repository root; nvprobe and nvbench in .dev/bin.
# Usage: OUT=dir [PHASES=...] [OLD=path] tests/scripts/restart-ten.sh
set -u
OUT=${OUT:?OUT must be set}
NV=$PWD/.dev/bin/nvprobe
NVB=$PWD/.dev/bin/nvbench
PY=${PY:-/opt/torch/.venv/bin/python3}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
W=tests/scripts/cudawork.py
T=$(mktemp -d)
exec > >(tee -a "$OUT/restart.txt") 2>&1
PHASES=,${PHASES:-ten,all,flood},
on() { case $PHASES in *,$1,*) return 0;; esac; return 1; }
now() { date +%s.%N; }
d() { python3 -c "print(f'{$2 - $1:.3f}')"; }
leaks() { dmesg 2>/dev/null | grep -c 'leaking uprobe'; }

# One run with binary $1 and extra args $2: prints one line.
one() {
  local bin=$1 extra=$2 tag=$3
  rm -f "$T/r.ndjson" "$T/r.err"
  local t0 t1 t2 t3 t4 p c rc other
  t0=$(now)
  $bin watch --json -o "$T/r.ndjson" --force $extra 2>"$T/r.err" & p=$!
  for i in $(seq 12000); do grep -q "tracing NVIDIA" "$T/r.err" 2>/dev/null && break; kill -0 $p 2>/dev/null || break; sleep 0.005; done
  t1=$(now)
  $PY $W cuinit >"$T/c.out" 2>&1 & c=$!
  wait $c
  t2=$(now)
  for i in $(seq 4000); do grep -q "\"type\":\"cuinit\",\"pid\":$c," "$T/r.ndjson" 2>/dev/null && break; sleep 0.005; done
  t3=$(now)
  kill -INT $p
  # (tail --pid polls once a second: too coarse here)
  for i in $(seq 24000); do kill -0 $p 2>/dev/null || break; sleep 0.005; done
  kill -0 $p 2>/dev/null && kill -KILL $p
  wait $p; rc=$?
  t4=$(now)
  other=$($NVB tracer-attach 2>&1 | python3 -c 'import json,sys
try: print(round(json.load(sys.stdin)["attach_s"], 3))
except Exception as e: print("failed", e)')
  local info
  info=$(python3 - "$T/r.ndjson" "$c" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
st = recs[0] if recs else {}
v = [r for r in recs if r.get("type") == "cuinit" and r.get("pid") == int(sys.argv[2])]
v = v[0] if v else {}
print(f"attach={st.get('libcuda_attach')} removal={(st.get('probe_removal') or '')[:7]} "
      f"libcuda={sum(len(l.get('functions', [])) for l in st.get('libcuda', []))} functions; "
      f"verdict: {v.get('class')}/{v.get('result')} {v.get('curesult')} ({v.get('source')})")
EOF
)
  echo "$tag: start $(d $t0 $t1) s; verdict $(d $t2 $t3) s after the process's exit; exit $(d $t3 $t4) s after SIGINT (rc $rc); another tracer attached in $other s; $info"
  grep -E "removing|waiting|still" "$T/r.err" | sed 's/^/    /'
}

echo "== $(date -u +%T) $(uname -r), $(nproc) CPUs; leaking-uprobe lines: $(leaks)"
if on ten; then
  for i in $(seq 10); do
    one "$NV" "" "run $i"
    [ $i = 1 ] && cp "$T/r.ndjson" "$OUT/ten-run1.ndjson"
    sleep ${GAP:-0}
  done
  sleep 5
  echo "nvprobe processes 5 s after the last exit: $(pgrep -x nvprobe | wc -l)"
fi
if on all; then
  for i in 1 2; do one "$NV" "--libcuda-hooks all" "all $i"; done
fi
if on flood; then
  echo "== $(date -u +%T) stop under flood"
  timeout -s KILL 200 tests/scripts/stop-under-flood.sh 2>&1
fi
if on before; then
  echo "== $(date -u +%T) the old binary ($OLD)"
  for i in 1 2 3; do one "$OLD" "" "before $i"; done
  t0=$(now)
  for i in $(seq 1500); do pgrep -x nvprobe >/dev/null || break; sleep 0.2; done
  echo "old binary: its removal children gone $(d $t0 $(now)) s after the last exit"
fi
echo "== $(date -u +%T) leaking-uprobe lines: $(leaks)"
rm -rf "$T"
