#!/usr/bin/env python3
"""What issue 22's start-up facts cost processes past their start-up, on
a GPU host: untraced, the build before them (--before) and this one
(--after), interleaved A B C per round, each traced run under its own
`nvprobe watch --json -o FILE` started and stopped around the workload.
Workloads: a real RM call in a loop (nvbench rm-null-control: a driver
client past its first calls), cuCtxGetCurrent in a loop after the first
context (a CUDA process past its start-up), a first context made and
destroyed 20 times, and a python process's cuInit (process wall: a start-up,
which the new facts do touch). Prints a markdown table of medians and the
samples. With `--set start-calls`: the calls whose failures the kernel side
watches in start-ups (threads, mprotect, pipes, anonymous mmaps, a call
that fails, getppid, TCGETS on /dev/null and the RM NULL control of
issue 40's table: since every failed call of a start-up is watched
through the raw tracepoint sys_exit, every system call of the host runs
its program) made in a loop by a process past any start-up (`nvbench
start-call`, the median of 5 batches per run).

  bench-startup-facts.py --before OLD/nvprobe --after .dev/bin/nvprobe --nvbench .dev/bin/nvbench --rounds 3
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

W = "tests/scripts/cudawork.py"


def workloads(nvbench, which="facts"):
    py = sys.executable
    if which == "start-calls":
        def nb(call, iters):
            return [nvbench, "--iters", str(iters), "--batches", "5", "start-call", call]
        return [
            ("thread start + join (clone3), 5 x 4,000", "ns/op", nb("thread", 4000), "ns_per_op"),
            ("mprotect, 5 x 200,000", "ns/op", nb("mprotect", 200000), "ns_per_op"),
            ("pipe2 + 2 close, 5 x 100,000", "ns/op", nb("pipe2", 100000), "ns_per_op"),
            ("anonymous mmap + munmap (64 KiB), 5 x 100,000", "ns/op", nb("mmap", 100000),
             "ns_per_op"),
            ("lseek(-1) failing with EBADF, 5 x 400,000", "ns/op", nb("ebadf", 400000), "ns_per_op"),
            ("getppid(), 5 x 400,000", "ns/op",
             [nvbench, "--iters", "400000", "--batches", "5", "getppid"], "ns_per_op"),
            ("TCGETS on /dev/null (ENOTTY), 5 x 400,000", "ns/op",
             [nvbench, "--iters", "400000", "--batches", "5", "tcgets"], "ns_per_op"),
            ("RM_CONTROL (NULL) on /dev/nvidiactl, 5 x 100,000", "ns/op",
             [nvbench, "--iters", "100000", "--batches", "5", "rm-null-control"], "ns_per_op"),
        ]
    return [
        ("RM_CONTROL (NULL) loop, 100,000 calls", "ns/call",
         [nvbench, "--iters", "100000", "--batches", "3", "rm-null-control"], "ns_per_op"),
        ("cuCtxGetCurrent after the first context, 100,000 calls", "ns/call",
         [py, W, "apiloop", "100000"], "per_call_ns"),
        ("20 x cuCtxCreate/Destroy", "s", [py, W, "ctx", "20"], "seconds"),
        ("python + cuInit (process wall)", "s", [py, W, "cuinit"], None),
        ("cuInit itself (inside that process)", "s", [py, W, "cuinit"], "cuInit_seconds"),
    ]


def run_one(cmd, key):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - t0
    if key is None:
        return wall
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    return float(json.loads(line)[key])


def traced(nvprobe, cmd, key, tmp):
    out = os.path.join(tmp, "rec.ndjson")
    if os.path.exists(out):
        os.unlink(out)
    w = subprocess.Popen([nvprobe, "watch", "--json", "-o", out],
                         stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    for _ in range(600):
        if os.path.exists(out) and '"type":"start"' in open(out).read(4096):
            break
        time.sleep(0.02)
    try:
        return run_one(cmd, key)
    finally:
        w.send_signal(signal.SIGINT)
        w.wait(timeout=60)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--before", required=True)
    a.add_argument("--after", required=True)
    a.add_argument("--nvbench", required=True)
    a.add_argument("--rounds", type=int, default=3)
    a.add_argument("--only", help="run only the workloads whose name contains this")
    a.add_argument("--set", default="facts", choices=["facts", "start-calls"])
    a.add_argument("--cpu", help="run each workload on this CPU only (taskset -c), for steadier figures")
    args = a.parse_args()
    samples = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, unit, cmd, key in workloads(args.nvbench, args.set):
                if args.only and args.only not in name:
                    continue
                if args.cpu is not None:
                    cmd = ["taskset", "-c", args.cpu] + cmd
                for mode in ("untraced", "before", "after"):
                    if mode == "untraced":
                        v = run_one(cmd, key)
                    else:
                        v = traced(args.before if mode == "before" else args.after, cmd, key, tmp)
                    samples.setdefault(name, {}).setdefault(mode, []).append(v)
    print("| workload | unit | untraced | before | after | after / before |")
    print("|---|---|---|---|---|---|")
    for name, unit, _, _ in workloads(args.nvbench, args.set):
        if name not in samples:
            continue
        m = {k: statistics.median(v) for k, v in samples[name].items()}
        fmt = (lambda x: f"{x:.0f}") if unit.startswith("ns") else (lambda x: f"{x:.3f}")
        print(f"| {name} | {unit} | {fmt(m['untraced'])} | {fmt(m['before'])} | {fmt(m['after'])} | "
              f"{m['after'] / m['before']:.2f}x |")
    print()
    print(json.dumps(samples))


main()
