#!/usr/bin/env bash
# A process that holds an NVIDIA descriptor when nvprobe starts, then
# starts CUDA while traced (cudawork.py heldstart: /dev/nvidiactl opened
# by hand, an RM client and failing RM controls before nvprobe starts, one
# more failing control while traced, then cuInit and a context), under two
# nvprobes at once: --events all (--raw) and --events verdicts. Its
# start-up must be judged from its own first step (cuInit's entry) at both
# levels, with the same verdict: the failed control made on the descriptor
# it held before is not the start-up's cause. Run from the repository root
# as root, with nvprobe in .dev/bin. Writes into $OUT:
# held-start-full.ndjson, held-start-verdicts.ndjson, held-start.txt.
set -u
OUT=${OUT:?}
B=$PWD/.dev/bin
PY=${PY:-python3}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
fifo=$(mktemp -u /tmp/heldstart.XXXXXX); mkfifo -m 600 "$fifo"
$PY tests/scripts/cudawork.py heldstart 3 < "$fifo" > $OUT/held-start-work.txt 2>&1 &
w=$!
exec 3>"$fifo"
for _ in $(seq 200); do grep -q held_statuses $OUT/held-start-work.txt 2>/dev/null && break; sleep 0.05; done
$B/nvprobe watch --json --raw -o $OUT/held-start-full.ndjson 2>$OUT/held-start-full.stderr &
a=$!
$B/nvprobe watch --json --events verdicts -o $OUT/held-start-verdicts.ndjson 2>$OUT/held-start-verdicts.stderr &
b=$!
for f in full verdicts; do
  for _ in $(seq 300); do grep -q '"type":"start"' $OUT/held-start-$f.ndjson 2>/dev/null && break; sleep 0.05; done
done
# The scan of /proc runs on its own thread after the start.
sleep 2
echo go >&3; exec 3>&-
wait $w
sleep 1
kill -INT $a $b; wait $a $b
rm -f "$fifo"
$PY - "$OUT" "$w" > $OUT/held-start.txt <<'PYEOF'
import json, sys
out, pid = sys.argv[1], int(sys.argv[2])
work = [json.loads(l) for l in open(f"{out}/held-start-work.txt") if l.startswith("{")]
print("work:", json.dumps(work[-1]))
for lvl in ("full", "verdicts"):
    recs = [json.loads(l) for l in open(f"{out}/held-start-{lvl}.ndjson")]
    s = [r for r in recs if r["type"] == "summary"][-1]
    row = [p for p in s["processes"] if p["pid"] == pid]
    failed = [(r.get("name"), (r.get("args") or {}).get("control"),
               (r.get("status") or {}).get("name"), r.get("errno"))
              for r in recs if r["type"] == "ioctl" and r["pid"] == pid and not r["ok"]]
    print(f"{lvl}: row {json.dumps(row)}")
    print(f"{lvl}: failed ioctls written {failed}")
    for r in recs:
        if r["type"] == "cuinit" and r["pid"] == pid:
            print(f"{lvl}: verdict {r['result']} / {r['class']} / {r['text']}")
            print(f"{lvl}:   stages {[(x['name'], x['at_ms']) for x in r.get('stages', [])]}")
            print(f"{lvl}:   failed_call {r.get('failed_call')}")
            print(f"{lvl}:   diagnoses {[d['id'] for d in r.get('diagnoses', [])]}")
            print(f"{lvl}:   held_at_start {(r.get('process') or {}).get('held_at_start')}")
PYEOF
cat $OUT/held-start.txt
