#!/usr/bin/env python3
"""The cost of `--libcuda-hooks faults` (the default) on the calls it hooks,
side by side with the start-up set alone and with no tracer, on a GPU host.

Each round runs every mode once, in turn (untraced, startup, faults), and
under each traced mode one `nvprobe watch` runs while every workload runs
once: gpufault.py sync/copy/launch/getdev loops (per-call ns, the loop's
own timer). Medians over the rounds, and each traced mode's ratio to the
untraced one.

  bench-fault-hooks.py --bin DIR [--rounds 5] [--out DIR]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = [("sync", 20000), ("copy", 20000), ("launch", 20000), ("getdev", 100000)]
MODES = ["untraced", "startup", "faults"]


def run_work(cpu):
    out = {}
    for name, n in WORK:
        cmd = ["taskset", "-c", cpu, sys.executable, os.path.join(HERE, "gpufault.py"), name, str(n)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        line = [l for l in p.stdout.splitlines() if l.startswith("{")]
        d = json.loads(line[-1]) if line else {}
        out[name] = d.get("per_call_ns")
        if d.get("failed"):
            out[name + "_failed"] = d["failed"]
    return out


def start(bin_dir, hooks, out):
    cmd = [os.path.join(bin_dir, "nvprobe"), "watch", "--json", "--force", "--bpf-stats",
           "--libcuda-hooks", hooks, "-o", out]
    p = subprocess.Popen(["taskset", "-c", "0-3"] + cmd, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if os.path.exists(out) and '"type":"start"' in open(out).read(65536):
            return p
        time.sleep(0.05)
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=".")
    ap.add_argument("--workload-cpu", default="8")
    a = ap.parse_args()
    res = {m: [] for m in MODES}
    for r in range(a.rounds):
        for m in MODES:
            if m == "untraced":
                res[m].append(run_work(a.workload_cpu))
                continue
            path = os.path.join(a.out, f"fault-hooks-{m}-{r}.ndjson")
            p = start(a.bin, m, path)
            res[m].append(run_work(a.workload_cpu))
            p.send_signal(signal.SIGINT)
            p.wait(timeout=60)
        print(f"round {r}: " + json.dumps({m: res[m][-1] for m in MODES}), flush=True)
    print()
    print("| workload | unit | untraced | startup | faults (default) | startup / untraced | faults / untraced |")
    print("|---|---|---|---|---|---|---|")
    table = {}
    for name, n in WORK:
        med = {m: statistics.median([x[name] for x in res[m] if x.get(name)]) for m in MODES}
        table[name] = med
        u = med["untraced"]
        print(f"| {name} ({n:,}) | ns/call | {u:,.0f} | {med['startup']:,.0f} | {med['faults']:,.0f} | "
              f"{med['startup'] / u:.2f}x | {med['faults'] / u:.2f}x |")
    json.dump({"rounds": res, "medians": table}, open(os.path.join(a.out, "fault-hooks.json"), "w"), indent=1)


main()
