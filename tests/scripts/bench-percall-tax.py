#!/usr/bin/env python3
"""The per-call tax of nvprobe's kernel side, and where it goes (issue 28).

Interleaved rounds of: untraced, an empty BPF program on the ioctl
syscall's entry and exit tracepoints (`nvbench empty-tracepoints`: the
floor any tracer built on these tracepoints pays), `watch --json` (full)
and `watch --json --events verdicts`, syscall and process layers only,
each round in another order. In each, `nvbench` loops the RM NULL control on /dev/nvidiactl (a
cheap real RM call) and TCGETS on /dev/null (any other process's ioctl);
per run the median and the fastest of its batches. With --bpf-stats the
traced runs also say each BPF program's run count and ns per run, so the
tax splits into the entry and exit programs and what is left (the
tracepoints' own dispatch).

Run on a GPU host from the repository root, as root, with prebuilt binaries:
  python3 tests/scripts/bench-percall-tax.py --bin .dev/bin --rounds 9 --out DIR
Pin the tracer and the workload apart (taskset) on a host whose timing is
bimodal: --tracer-cpus 0-3 --workload-cpu 8.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time


def run_bench(nvbench, cpu, what, iters, batches):
    cmd = [nvbench, "--iters", str(iters), "--batches", str(batches)] + what
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    v = json.loads(out.strip().splitlines()[-1])
    b = v["batches_ns_per_op"]
    return {"median": statistics.median(b), "min": min(b)}


def start_tracer(nvprobe, cpus, out, extra, skip=0):
    cmd = [nvprobe, "watch", "--json", "--bpf-stats", "--layers", "syscall,process",
           "-o", out, "--force"] + extra
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    env = dict(os.environ, NVPROBE_BENCH_SKIP=str(skip))
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    t0 = time.time()
    while time.time() - t0 < 60:
        try:
            with open(out) as f:
                if '"type":"start"' in f.readline():
                    return p
        except FileNotFoundError:
            pass
        if p.poll() is not None:
            sys.exit("nvprobe exited before attaching: " + p.stderr.read().decode())
        time.sleep(0.05)
    sys.exit("nvprobe did not start in 60 s")


def start_empty(nvbench):
    p = subprocess.Popen([nvbench, "empty-tracepoints"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if '"attached":2' not in line:
        sys.exit("nvbench empty-tracepoints did not attach: " + line)
    return p


def stop_tracer(p, out):
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    summary = None
    with open(out) as f:
        for line in f:
            if '"type":"summary"' in line:
                summary = json.loads(line)
    return {b["program"]: b for b in (summary or {}).get("bpf", [])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=".dev/bin")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--tracer-cpus", default=None)
    ap.add_argument("--workload-cpu", type=int, default=None)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--variants", action="store_true",
                    help="also full mode with parts of the ioctl programs switched off "
                         "(NVPROBE_BENCH_SKIP, nvprobe_common::bench_skip)")
    ap.add_argument("--calls", default="rm_null,tcgets",
                    help="which loops (rm_null needs a real /dev/nvidiactl)")
    a = ap.parse_args()
    nvprobe = os.path.join(a.bin, "nvprobe")
    nvbench = os.path.join(a.bin, "nvbench")
    loops = {"rm_null": ["rm-null-control"], "tcgets": ["tcgets"]}
    calls = {c: loops[c] for c in a.calls.split(",")}
    modes = {"untraced": None, "empty": None, "full": [], "verdicts": ["--events", "verdicts"]}
    # Where the full mode's cost goes: each variant stops the ioctl
    # programs at one point (the bits of nvprobe_common::bench_skip).
    skips = {"entry_filter": 1, "entry_resolve": 2, "exit_state": 4} if a.variants else {}
    for v in skips:
        modes[v] = []
    runs = []
    order = list(modes)
    for r in range(a.rounds):
        for mode in order[r % len(order):] + order[:r % len(order)]:
            row = {"round": r, "mode": mode, "bpf": {}}
            # One tracer run per call: a program's ns per run is then that
            # call's alone.
            for name, what in calls.items():
                rec = os.path.join(a.out, f"tax-{mode}.ndjson")
                p = None if modes[mode] is None else start_tracer(
                    nvprobe, a.tracer_cpus, rec, modes[mode], skips.get(mode, 0))
                empty = start_empty(nvbench) if mode == "empty" else None
                row[name] = run_bench(nvbench, a.workload_cpu, what, a.iters, a.batches)
                if empty is not None:
                    empty.stdin.close()
                    empty.wait(timeout=30)
                if p is not None:
                    row["bpf"][name] = stop_tracer(p, rec)
                    os.remove(rec)
            runs.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "bpf"}), flush=True)
    with open(os.path.join(a.out, "percall-tax.json"), "w") as f:
        json.dump(runs, f, indent=1)
    # Medians over rounds; the tax against untraced, median and min-to-min.
    print("\ncall      mode      median ns  min ns   tax (median)  tax (min-to-min)")
    base = {}
    for name in calls:
        for mode in modes:
            rs = [x[name] for x in runs if x["mode"] == mode]
            med = statistics.median(x["median"] for x in rs)
            mn = min(x["min"] for x in rs)
            if mode == "untraced":
                base[name] = (med, mn)
            tax = "" if mode == "untraced" else f"{med - base[name][0]:+10.0f}  {mn - base[name][1]:+10.0f}"
            print(f"{name:<9} {mode:<18} {med:9.0f} {mn:8.0f}   {tax}")
    print("\nBPF programs per call (median ns per run over the rounds; runs in the last round):")
    for name in calls:
        for mode in ["full", "verdicts"] + list(skips):
            progs = {}
            for x in runs:
                if x["mode"] == mode:
                    for prog, b in x["bpf"].get(name, {}).items():
                        progs.setdefault(prog, []).append(b)
            for prog, bs in sorted(progs.items()):
                if bs[-1]["run_count"] < a.iters:
                    continue
                ns = statistics.median(b["ns_per_run"] for b in bs)
                print(f"  {name:<8} {mode:<18} {prog:<22} {ns:6.0f} ns/run  {bs[-1]['run_count']:>8} runs")


if __name__ == "__main__":
    main()
