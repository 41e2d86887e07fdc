#!/usr/bin/env bash
# The kernel log followed through syslog(2) on the real driver (issue 38:
# Xid alerts on Kubernetes), beside one that reads /dev/kmsg: one `nvprobe
# watch --json` as a container runs it (its own mount namespace, where
# /dev/kmsg cannot be opened: a unix socket is bound over it; exactly the
# DaemonSet's capabilities, by setpriv), and one as the host runs it, while
# tests/scripts/gpufault.py makes an Xid 31 (write through a bad pointer)
# and an Xid 13/43 (misaligned). Then each one's kernel_log records and
# fault verdicts side by side.
#   OUT=DIR NVPROBE=path/to/nvprobe record-kmsg-syslog.sh
set -u
S=$(cd "$(dirname "$0")" && pwd)
NVPROBE=$(readlink -f "${NVPROBE:-nvprobe}")
OUT=${OUT:-.}
PY=${PY:-python3}
SOCK=$(mktemp -d)/kmsg.sock
$PY -c "import socket,sys;socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$SOCK"
CAPS=-all,+bpf,+perfmon,+sys_admin,+sys_ptrace,+dac_read_search,+syslog
rm -f "$OUT/syslog.ndjson" "$OUT/kmsg.ndjson"
unshare -m sh -c "mount --make-rprivate / && mount --bind '$SOCK' /dev/kmsg && \
  exec setpriv --inh-caps=-all --ambient-caps=-all --bounding-set=$CAPS -- \
  '$NVPROBE' watch --json -o '$OUT/syslog.ndjson'" 2>"$OUT/syslog.err" & C=$!
$NVPROBE watch --json -o "$OUT/kmsg.ndjson" 2>"$OUT/kmsg.err" & H=$!
for i in $(seq 200); do
  grep -q '"type":"start"' "$OUT/syslog.ndjson" 2>/dev/null \
    && grep -q '"type":"start"' "$OUT/kmsg.ndjson" 2>/dev/null && break
  sleep 0.1
done
for c in write misaligned; do
  timeout 60 $PY "$S/gpufault.py" $c --case $c >"$OUT/case-$c.json" 2>"$OUT/case-$c.calls"
  echo "case $c rc=$?"
done
# Two of the follower's reads, and the last verdict's wait.
sleep 2
# CPU time so far (utime + stime, clock ticks) of each: what the reads of
# the whole buffer every 250 ms cost against the /dev/kmsg follower.
for p in $(pgrep -f "watch --json -o $OUT/syslog.ndjson" | tail -1) $H; do
  echo "cpu ticks pid $p: $(awk '{print $14 + $15}' /proc/$p/stat) after $(awk '{print $22}' /proc/$p/stat) ticks from boot"
done
echo "log buffer: $(dmesg -S 2>/dev/null | wc -c) bytes of text, $(dmesg -S 2>/dev/null | wc -l) lines"
kill -INT $C $H; wait $C; echo "nvprobe (syslog) rc=$?"; wait $H; echo "nvprobe (kmsg) rc=$?"
$PY - "$OUT/syslog.ndjson" "$OUT/kmsg.ndjson" <<'PYEOF'
import json, sys
def load(p):
    return [json.loads(l) for l in open(p) if l.strip()]
a, b = load(sys.argv[1]), load(sys.argv[2])
for name, rs in (("syslog(2)", a), ("/dev/kmsg", b)):
    start = next(r for r in rs if r["type"] == "start")
    print(f"== {name}: capabilities_kept {start.get('capabilities_kept')}")
    for r in rs:
        if r["type"] == "warning" and r["id"].startswith("kernel_log"):
            print(f"   warning {r['id']}: {r['message']}")
    for r in rs:
        if r["type"] == "kernel_log":
            print(f"   kernel_log seq={r['seq']} ts_us={r['kernel_ts_us']} mono_ns={r['mono_ns']} kind={r.get('kind')} {r['message'][:90]}")
    for r in rs:
        if r["type"] == "fault":
            print(f"   fault pid={r.get('pid')} {r.get('text', '')[:160]}")
ka = {r["kernel_ts_us"]: r for r in a if r["type"] == "kernel_log"}
kb = {r["kernel_ts_us"]: r for r in b if r["type"] == "kernel_log"}
print(f"kernel_log records: syslog(2) {len(ka)}, /dev/kmsg {len(kb)}, same stamps {len(set(ka) & set(kb))}")
for t in sorted(set(ka) & set(kb)):
    d = (ka[t]["mono_ns"] - kb[t]["mono_ns"]) / 1e6
    same = ka[t]["message"] == kb[t]["message"]
    print(f"  ts_us={t}: mono_ns syslog - kmsg = {d:+.3f} ms, same message {same}")
PYEOF
