#!/usr/bin/env bash
# Issue 37: how often a libcuda copy loaded at start-up is hooked too late
# for its cuInit to be seen, before and after the collector hands the
# loader's open to the hooking thread at once (the kernel side wakes it for
# that open; the attach of the loaded copy comes before anything else).
#
# For each build in .dev/bin (nvprobe-base: the build before; nvprobe: this
# one), one `watch --json --raw` around N start-ups, each loading a fresh
# copy of the host's libcuda (a new file, so that no earlier hook reaches
# it) and calling cuInit at once: cudawork.py cuinit through ctypes, the
# tightest race a program makes. Writes into $OUT:
#   late-BUILD.ndjson   the recordings
#   late.txt            per build: cuInit returns seen / not seen, the
#                       milliseconds from the loader's open to the hooks
#                       being in place, and from the open to the process's
#                       first driver call (the window the hook has)
set -u
OUT=${OUT:?}
N=${N:-20}
BIN=$PWD/.dev/bin
W=tests/scripts/cudawork.py
PY=${PY:-python3}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
REAL=$(ls /usr/local/nvidia/lib64/libcuda.so.5* 2>/dev/null | head -1)
[ -n "$REAL" ] || { echo "no libcuda.so.5* in /usr/local/nvidia/lib64"; exit 1; }
for b in nvprobe-base nvprobe; do
  rec=$OUT/late-$b.ndjson
  $BIN/$b watch --json --raw -o $rec 2>$OUT/late-$b.stderr &
  p=$!
  for _ in $(seq 600); do grep -q '"type":"start"' $rec 2>/dev/null && break; sleep 0.05; done
  for i in $(seq $N); do
    d=$(mktemp -d /var/tmp/nvprobe-late-XXXXXX)
    cp $REAL $d/libcuda.so.1
    sync -f $d/libcuda.so.1
    CUDAWORK_LIB=$d/libcuda.so.1 $PY $W cuinit --case late-$i >>$OUT/late-workload.log 2>&1
    rm -rf $d
  done
  sleep 1.5
  kill -INT $p
  wait $p
done
$PY - $OUT/late-nvprobe-base.ndjson $OUT/late-nvprobe.ndjson >$OUT/late.txt <<'PYEOF'
import json, re, statistics, sys

def med(v):
    return f"{statistics.median(v):.1f}" if v else "-"

for path in sys.argv[1:]:
    recs = [json.loads(l) for l in open(path)]
    lib_open = {}   # pid -> open of its libcuda (ns)
    first_call = {}  # pid -> its first driver call (ns)
    for r in recs:
        pid = r.get("pid")
        if r["type"] == "open" and r.get("path", "").endswith("/libcuda.so.1") and r.get("ret", -1) >= 0:
            lib_open.setdefault(pid, r["start_ns"] + r.get("duration_ns", 0))
        if r["type"] == "ioctl" and pid in lib_open:
            first_call.setdefault(pid, r["start_ns"])
    seen = unseen = 0
    for r in recs:
        if r["type"] == "cuinit" and r.get("class") == "cuda" and r["pid"] in lib_open:
            if "curesult" in r:
                seen += 1
            else:
                unseen += 1
    hooked = [float(m.group(1)) for r in recs if r["type"] == "warning" and r.get("id") == "libcuda_late"
              for m in [re.search(r"([0-9.]+) ms after pid", r["message"])] if m]
    window = [(first_call[p] - lib_open[p]) / 1e6 for p in first_call]
    print(f"{path.rsplit('/', 1)[-1]}: cuInit's return seen {seen}, not seen {unseen}; "
          f"hooked after the open: median {med(hooked)} ms (min {min(hooked, default=0):.1f}, max {max(hooked, default=0):.1f}, n {len(hooked)}); "
          f"open to first driver call: median {med(window)} ms (min {min(window, default=0):.1f}, n {len(window)})")
PYEOF
cat $OUT/late.txt
