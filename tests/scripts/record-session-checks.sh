#!/usr/bin/env bash
# Issue 38 and 40 on a GPU host (2026-12-06, third session): what this
# session changed, on the real driver. nvprobe and nvbench in .dev/bin, the
# build before the change in .dev/before. Writes into $OUT:
#   doctor.json            doctor --json (its uretprobe_seccomp check)
#   pidns.ndjson / .txt    watch in a pid namespace of its own (unshare) while
#                          a real cuInit runs on the host: its verdict, and
#                          no record of nvprobe's own calls
#   fold.txt               text while a loader looks for a libcuda that is not
#                          there (torch without the driver's libraries, and
#                          a ctypes dlopen): each search one line
#   bench/                 bench-percall-tax.py: rm_null, rm_quiet, tcgets,
#                          this build against the one before
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
PY=${PY:-$( [ -x /opt/torch/.venv/bin/python3 ] && echo /opt/torch/.venv/bin/python3 || echo python3)}
W=tests/scripts/cudawork.py
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
uname -r >$OUT/kernel.txt
$BIN/nvprobe doctor --json >$OUT/doctor.json 2>$OUT/doctor.stderr
python3 - $OUT/doctor.json <<'PY' >$OUT/doctor-uretprobe.txt
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["checks"]:
    if c["id"] in ("uretprobe_seccomp", "layers"):
        print(c["verdict"], c["id"], c["evidence"])
PY

# watch in its own pid namespace (and /proc), a real cuInit on the host.
unshare --pid --fork --mount-proc -- $BIN/nvprobe watch --json --duration 12 \
  -o $OUT/pidns.ndjson 2>$OUT/pidns.stderr &
NS=$!
for _ in $(seq 200); do grep -q '"type":"start"' $OUT/pidns.ndjson 2>/dev/null && break; sleep 0.05; done
sleep 1
$PY $W cuinit --case pidns-host >>$OUT/workload.log 2>&1
wait $NS
$BIN/nvprobe decode $OUT/pidns.ndjson >$OUT/pidns.txt 2>&1
python3 - $OUT/pidns.ndjson <<'PY' >$OUT/pidns-check.txt
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
own = [r for r in recs if r.get("comm") == "nvprobe"]
ver = [r for r in recs if r.get("type") == "cuinit" and r.get("class") == "cuda"]
warn = [r["id"] for r in recs if r.get("type") == "warning"]
print("records", len(recs), "own", len(own), "cuda verdicts", [(v["comm"], v["result"]) for v in ver], "warnings", warn)
PY

# Text: a search is one line.
nodriver() {
  env LD_LIBRARY_PATH= unshare -m sh -c "mount -t tmpfs nvprobe-empty /usr/local/nvidia/lib64 && exec \"\$@\"" sh "$@"
}
$BIN/nvprobe watch -o $OUT/fold.txt 2>$OUT/fold.stderr &
NVP=$!
for _ in $(seq 200); do grep -q 'Ctrl-C to stop' $OUT/fold.stderr 2>/dev/null && break; sleep 0.05; done
nodriver $PY $W cuinit --case notfound >>$OUT/workload.log 2>&1
nodriver $PY $W torch --case torch-nodriver >>$OUT/workload.log 2>&1
$PY -c 'import ctypes
try: ctypes.CDLL("libcuda.so.nvprobe-absent")
except OSError as e: print(e)' >>$OUT/workload.log 2>&1
sleep 1.5; kill -INT $NVP; wait $NVP

mkdir -p $OUT/bench
python3 tests/scripts/bench-percall-tax.py --bin .dev/bin --before .dev/before/nvprobe \
  --rounds 5 --calls rm_null,rm_quiet,tcgets --tracer-cpus 0-3 --workload-cpu 8 \
  --out $OUT/bench >$OUT/bench/stdout.txt 2>$OUT/bench/stderr.txt
tail -30 $OUT/bench/stdout.txt
