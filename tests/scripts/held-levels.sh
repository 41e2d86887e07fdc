#!/usr/bin/env bash
# A CUDA process that already holds a context when nvprobe starts (issue
# 40: processes found by the start's scan of /proc), traced by two
# nvprobes at once (each ignores the other): one at --events all (--raw),
# one at --events verdicts, where such a process is quiet from the start.
# It then makes N allocations and frees (RM and UVM calls) and one
# allocation larger than the GPU. Both must count the same calls of it;
# the verdicts one must have counted its successes in the kernel (unsent)
# and written the same failures. Run from the repository root as root,
# with nvprobe in .dev/bin. Writes into $OUT: held-full.ndjson,
# held-verdicts.ndjson, held.txt.
set -u
OUT=${OUT:?}
B=$PWD/.dev/bin
PY=${PY:-python3}
N=${N:-200}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
fifo=$(mktemp -u /tmp/held.XXXXXX); mkfifo -m 600 "$fifo"
$PY tests/scripts/cudawork.py heldwork "$N" < "$fifo" > $OUT/held-work.txt 2>&1 &
w=$!
exec 3>"$fifo"
for _ in $(seq 200); do grep -q cuCtxCreate $OUT/held-work.txt 2>/dev/null && break; sleep 0.05; done
$B/nvprobe watch --json --raw -o $OUT/held-full.ndjson 2>$OUT/held-full.stderr &
a=$!
$B/nvprobe watch --json --events verdicts -o $OUT/held-verdicts.ndjson 2>$OUT/held-verdicts.stderr &
b=$!
for f in full verdicts; do
  for _ in $(seq 300); do grep -q '"type":"start"' $OUT/held-$f.ndjson 2>/dev/null && break; sleep 0.05; done
done
# The scan of /proc runs on its own thread after the start.
sleep 2
echo go >&3; exec 3>&-
wait $w
sleep 1
kill -INT $a $b; wait $a $b
rm -f "$fifo"
$PY - "$OUT" "$w" > $OUT/held.txt <<'PYEOF'
import json, sys
out, pid = sys.argv[1], int(sys.argv[2])
work = [json.loads(l) for l in open(f"{out}/held-work.txt") if l.startswith("{")]
print("work:", json.dumps(work[-1]))
for lvl in ("full", "verdicts"):
    recs = [json.loads(l) for l in open(f"{out}/held-{lvl}.ndjson")]
    s = [r for r in recs if r["type"] == "summary"][-1]
    row = [p for p in s["processes"] if p["pid"] == pid]
    failed = [(r.get("name"), (r.get("status") or {}).get("name"), r.get("errno"))
              for r in recs if r["type"] == "ioctl" and r["pid"] == pid and not r["ok"]]
    verdicts = [(r["result"], r["class"], r["text"]) for r in recs
                if r["type"] == "cuinit" and r["pid"] == pid]
    print(f"{lvl}: gate {json.dumps(s.get('descriptor_gate'))}")
    print(f"{lvl}: row {json.dumps(row)}")
    print(f"{lvl}: quieted {s.get('quieted')}")
    print(f"{lvl}: failed ioctls written {failed}")
    print(f"{lvl}: verdicts {verdicts}")
PYEOF
cat $OUT/held.txt
