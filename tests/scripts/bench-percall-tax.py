#!/usr/bin/env python3
"""The per-call tax of nvprobe's kernel side, and where it goes (issue 28).

Interleaved rounds of: untraced, empty BPF programs where nvprobe's
syscall-layer programs sit (`nvbench empty-tracepoints --all`: each
watched call's entry and exit tracepoints and the raw tracepoint sys_exit,
the floor any tracer built on these tracepoints pays), `watch --json` (full)
and `watch --json --events verdicts`, syscall and process layers only,
each round in another order. In each, `nvbench` loops the RM NULL control on /dev/nvidiactl (a
cheap real RM call) and TCGETS on /dev/null (any other process's ioctl);
per run the median and the fastest of its batches. With --bpf-stats the
traced runs also say each BPF program's run count and ns per run, so the
tax splits into the entry and exit programs and what is left (the
tracepoints' own dispatch).

With --same-loop, each call's loop runs once, in one process, for the whole
measurement (`nvbench --stream`: each batch printed as it ends), and the
tracers are started and stopped under it, each mode for --window seconds in
turn; a batch belongs to the mode whose window holds it whole. On hosts
whose timing is bimodal from one process to the next (the H200 machines:
the same untraced loop runs at 690 or 1,070 ns depending on the run), this
compares the modes in one state of the machine.

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


def start_tracer(nvprobe, cpus, out, extra, skip=0, stats=False, cuda=False):
    # The libcuda layer only for a loop that starts CUDA first (rm_quiet):
    # its first context is what makes a process quiet.
    layers = "syscall,process,cuda" if cuda else "syscall,process"
    cmd = [nvprobe, "watch", "--json", "--layers", layers,
           "-o", out, "--force"] + (["--bpf-stats"] if stats else []) + extra
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
    """Empty programs where every one of nvprobe's syscall-layer programs
    sits (`nvbench empty-tracepoints --all`: each watched call's entry and
    exit, and the raw tracepoint sys_exit)."""
    p = subprocess.Popen([nvbench, "empty-tracepoints", "--all"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    try:
        n = json.loads(line).get("attached", 0)
    except ValueError:
        n = 0
    if n < 3:
        sys.exit("nvbench empty-tracepoints --all did not attach: " + line)
    return p


def stop_tracer(p, out):
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    summary = None
    with open(out) as f:
        for line in f:
            if '"type":"summary"' in line:
                summary = json.loads(line)
    # Records the ring buffer had no room for: a mode that loses records
    # writes fewer of them, and its figures are not that mode's cost.
    lost = ((summary or {}).get("lost") or {}).get("total", 0)
    if lost:
        print("lost records in this run:", lost, file=sys.stderr)
    return {b["program"]: b for b in (summary or {}).get("bpf", [])}


def same_loop(a, nvprobe, nvbench, calls, modes, binary, skips):
    """Tracers swapped under one running loop per call (see the module doc)."""
    import threading
    rows = {}
    for name, what in calls.items():
        cmd = [nvbench, "--iters", str(a.iters), "--batches", "4000000000", "--stream"] + what
        if a.workload_cpu is not None:
            cmd = ["taskset", "-c", str(a.workload_cpu)] + cmd
        loop = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        batches = []
        def read():
            for line in loop.stdout:
                try:
                    v = json.loads(line)
                except ValueError:
                    continue
                if "end_ns" in v:
                    batches.append((v["end_ns"], v["ns_per_op"]))
        t = threading.Thread(target=read, daemon=True)
        t.start()
        time.sleep(1.0)
        windows = []
        stats = {}
        order = list(modes)
        for r in range(a.rounds):
            for mode in order[r % len(order):] + order[:r % len(order)]:
                rec = os.path.join(a.out, f"tax-{mode}.ndjson")
                p = None if modes[mode] is None else start_tracer(
                    binary[mode], a.tracer_cpus, rec, modes[mode], skips.get(mode, 0),
                    a.bpf_stats)
                empty = start_empty(nvbench) if mode == "empty" else None
                time.sleep(0.2)
                t0 = time.monotonic_ns()
                time.sleep(a.window)
                t1 = time.monotonic_ns()
                windows.append((mode, r, t0, t1))
                if empty is not None:
                    empty.stdin.close()
                    empty.wait(timeout=30)
                if p is not None:
                    bpf = stop_tracer(p, rec)
                    os.remove(rec)
                    if a.bpf_stats:
                        stats.setdefault(mode, []).append(bpf)
                time.sleep(0.3)
        loop.kill()
        loop.wait()
        t.join(timeout=5)
        per = {}
        # A batch ends at end_ns and began about ns_per_op * iters before.
        for mode, r, t0, t1 in windows:
            got = [ns for end, ns in batches if end <= t1 and end - ns * a.iters >= t0]
            per.setdefault(mode, []).append(got)
        rows[name] = per
        # --bpf-stats: each program's ns per run, median over the rounds.
        for mode, runs in stats.items():
            for prog in sorted({k for b in runs for k in b}):
                ns = [b[prog]["ns_per_run"] for b in runs if prog in b]
                print(f"  {name:<8} {mode:<18} {prog:<26} {statistics.median(ns):6.0f} ns/run")
    # The host drifts between slower and faster phases even within one
    # process: per round, each mode against that round's untraced window
    # (its fastest batch against the untraced fastest, its median against
    # the untraced median), then the median of those over the rounds.
    print("\npaired by round (median over rounds of the mode's tax in its round):")
    print("call      mode               tax (medians)  tax (fastest batches)")
    for name, per in rows.items():
        base = per.get("untraced") or []
        for mode in modes:
            if mode == "untraced" or mode not in per:
                continue
            med_d, min_d = [], []
            for w, b in zip(per[mode], base):
                if w and b:
                    med_d.append(statistics.median(w) - statistics.median(b))
                    min_d.append(min(w) - min(b))
            if med_d:
                print(f"{name:<9} {mode:<18} {statistics.median(med_d):+12.0f}  {statistics.median(min_d):+12.0f}")
    print("\ncall      mode               batches  median ns  min ns   tax (median)  tax (min-to-min)")
    for name, per in rows.items():
        allb = {m: [x for w in ws for x in w] for m, ws in per.items()}
        base = allb.get("untraced") or [0]
        bmed, bmin = statistics.median(base), min(base)
        for mode in modes:
            b = allb.get(mode) or []
            if not b:
                continue
            med, mn = statistics.median(b), min(b)
            tax = "" if mode == "untraced" else f"{med - bmed:+10.0f}  {mn - bmin:+10.0f}"
            print(f"{name:<9} {mode:<18} {len(b):7d} {med:9.0f} {mn:8.0f}   {tax}")
    with open(os.path.join(a.out, "percall-tax-same-loop.json"), "w") as f:
        json.dump(rows, f)


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
    ap.add_argument("--bpf-stats", action="store_true",
                    help="run the tracers with --bpf-stats (ns per program run; its two "
                         "clock reads per run are then in every traced figure)")
    ap.add_argument("--before", default=None,
                    help="another nvprobe binary (an earlier build) run side by side: "
                         "modes full_before and verdicts_before")
    ap.add_argument("--mode", action="append", default=[],
                    help="another traced mode: NAME=ARGS (watch arguments, split on spaces), "
                         "e.g. full_rb1m='--ringbuf-size 1048576'")
    ap.add_argument("--only", default=None,
                    help="run only these modes (comma-separated; untraced always runs)")
    ap.add_argument("--same-loop", action="store_true",
                    help="one loop per call for the whole run, the tracers swapped under it")
    ap.add_argument("--window", type=float, default=1.5,
                    help="--same-loop: seconds each mode runs in each round")
    ap.add_argument("--calls", default="rm_null,tcgets",
                    help="which loops, of rm_null (needs a real /dev/nvidiactl), rm_quiet "
                         "(the same after cuInit and a first context: needs libcuda), tcgets, "
                         "getppid, pipe2 (and its two closes), mmap (anonymous, 64 KiB, "
                         "and munmap), dup (of /dev/null, and its close), filemap (64 KiB "
                         "of a file mapped and unmapped)")
    a = ap.parse_args()
    nvprobe = os.path.join(a.bin, "nvprobe")
    nvbench = os.path.join(a.bin, "nvbench")
    loops = {
        "rm_null": ["rm-null-control"],
        # The same loop in a process past its start-up (cuInit and a first
        # context first): quiet at --events verdicts, its calls untimed.
        "rm_quiet": ["rm-null-control", "--cuda-first"],
        "tcgets": ["tcgets"],
        "getppid": ["getppid"],
        "pipe2": ["start-call", "pipe2"],
        "mmap": ["start-call", "mmap"],
        "dup": ["start-call", "dup"],
        "filemap": ["start-call", "filemap"],
    }
    calls = {c: loops[c] for c in a.calls.split(",")}
    modes = {"untraced": None, "empty": None, "full": [], "verdicts": ["--events", "verdicts"]}
    # Where the full mode's cost goes: each variant stops the ioctl
    # programs at one point (the bits of nvprobe_common::bench_skip).
    skips = {"entry_filter": 1, "entry_resolve": 2, "exit_state": 4} if a.variants else {}
    for v in skips:
        modes[v] = []
    binary = {m: nvprobe for m in modes}
    if a.before:
        modes["full_before"] = []
        modes["verdicts_before"] = ["--events", "verdicts"]
        binary["full_before"] = binary["verdicts_before"] = a.before
    for m in a.mode:
        name, _, args = m.partition("=")
        modes[name] = args.split()
        binary[name] = nvprobe
    if a.only:
        keep = set(a.only.split(",")) | {"untraced"}
        modes = {k: v for k, v in modes.items() if k in keep}
    if a.same_loop:
        same_loop(a, nvprobe, nvbench, calls, modes, binary, skips)
        return
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
                    binary[mode], a.tracer_cpus, rec, modes[mode], skips.get(mode, 0),
                    a.bpf_stats, cuda="--cuda-first" in what)
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
        for mode in [m for m in modes if modes[m] is not None]:
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
