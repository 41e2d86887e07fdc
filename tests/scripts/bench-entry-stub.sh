#!/usr/bin/env bash
# The ioctl programs' own run time at `--events verdicts` on a machine
# without a GPU: the FUSE stand-in's nvidiactl (nvfixture serve) declared
# with --device, nvbench's RM NULL control loop (60,000 calls, counted in
# the kernel), two nvprobe builds in interleaved rounds, ns per program
# run from --bpf-stats. Indicative (docs/BENCHMARKS.md, issue 40's sixth
# session); the GPU host's bench-percall-tax.py is the measure.
# usage (root, repository root): tests/scripts/bench-entry-stub.sh BEFORE AFTER [ROUNDS]
# BEFORE and AFTER are nvprobe binaries; nvfixture and nvbench come from
# target/release (cargo build --release -p nvprobe-tests --bins).
set -u
BEFORE=${1:?before} AFTER=${2:?after} ROUNDS=${3:-5}
R=$PWD/target/release
D=$(mktemp -d /tmp/nvprobe-bench-entry.XXXXXX)
mkdir -p "$D/mnt"
coproc FS { "$R/nvfixture" serve "$D/mnt"; }
read -r -u "${FS[0]}" _
CTL=$D/mnt/nvidiactl
for round in $(seq "$ROUNDS"); do
  for b in "$BEFORE" "$AFTER"; do
    rm -f "$D/o.ndjson"
    "$b" watch --json --events verdicts --bpf-stats --layers syscall,process \
      --device "$CTL=ctl" --driver-version 580.159.04 -o "$D/o.ndjson" 2>"$D/err.txt" &
    p=$!
    for _ in $(seq 200); do grep -q '"type":"start"' "$D/o.ndjson" 2>/dev/null && break; sleep 0.05; done
    "$R/nvbench" --iters 20000 --batches 3 ioctl --path "$CTL" --cmd c020462a --size 32 >/dev/null
    kill -INT $p; wait $p
    python3 - "$round" "$b" "$D/o.ndjson" <<'PY'
import json, sys
for line in open(sys.argv[3]):
    v = json.loads(line)
    if v.get("type") == "summary":
        bp = {x["program"]: x for x in v.get("bpf", [])}
        row = {"round": int(sys.argv[1]), "nvprobe": sys.argv[2], "quieted": v.get("quieted")}
        for k in ("nvprobe_ioctl_enter", "nvprobe_ioctl_exit"):
            if k in bp:
                row[k] = round(bp[k]["ns_per_run"], 1)
        print(json.dumps(row))
PY
  done
done
kill "$FS_PID" 2>/dev/null
umount -l "$D/mnt" 2>/dev/null
rm -rf "$D"
