#!/usr/bin/env python3
"""What `--libcuda-hooks` costs a CUDA program, on a GPU host.

Runs every workload `--rounds` times untraced, then under one `nvprobe
watch` with the start-up hooks (the default), then under one with every
exported function hooked (`all`) and, with --with-failures, under one with
`all` plus `--events failures` (the kernel drops successful calls of
processes past their verdict). The modes run one after the other, not
interleaved, and each traced one starts only once the kernel has removed
the previous one's uprobes: that removal takes an RCU grace period per
uprobe under the kernel's event_mutex, and any attach queues behind it.
nvprobe's attach time (launch to the start record), stop time (SIGINT to
exit) and the background removal's time are reported on their own. Prints
markdown tables of medians and writes the raw samples as JSON.

  bench-libcuda-hooks.py --nvprobe .dev/bin/nvprobe --python PY --rounds 3 --json-out F [--deadline S]
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
MODES = [
    ("untraced", None),
    ("startup", []),
    ("all", ["--libcuda-hooks", "all"]),
    ("all, --events failures", ["--libcuda-hooks", "all", "--events", "failures"]),
]


def workloads(py):
    return [
        ("cuCtxGetCurrent (100,000 calls)", "ns/call", [py, W, "apiloop", "100000"], "per_call_ns"),
        ("empty kernel launch (20,000)", "ns/launch", [py, W, "launch", "20000"], "per_call_ns"),
        ("torch x = x + 1 (20,000)", "ns/op", [py, W, "torchloop", "20000"], "per_call_ns"),
        ("python + cuInit (process wall)", "s", [py, W, "cuinit"], None),
        ("torch.cuda.init() (process wall)", "s", [py, W, "torch"], None),
    ]


def start_nvprobe(nv, extra, out):
    t0 = time.monotonic()
    p = subprocess.Popen([nv, "watch", "--json", "--bpf-stats", "-o", out, "--force"] + extra,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(1200):
        try:
            with open(out, "rb") as f:
                if b'"type":"start"' in f.read(1 << 20):
                    return p, time.monotonic() - t0
        except FileNotFoundError:
            pass
        if p.poll() is not None:
            raise SystemExit(f"nvprobe exited: {p.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)
    raise SystemExit("nvprobe did not start in 60 s")


def stop_nvprobe(p, out):
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    p.wait(timeout=120)
    stop_s = time.monotonic() - t0
    stats, lost, events, start = {}, 0, 0, {}
    with open(out) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "summary":
                lost = (r.get("lost") or {}).get("total", 0)
                events = sum((r.get("events") or {}).values())
                for s in r.get("bpf", []) or []:
                    if s.get("run_count"):
                        stats[s["program"]] = (s["run_count"], s["ns_per_run"])
            elif r.get("type") == "start":
                start = r
    os.unlink(out)
    hooked = sum(len(l.get("functions", [])) for l in start.get("libcuda", []))
    return stats, lost, events, hooked, stop_s


def session(a, tmp, mname, args, reps, samples, info):
    """One nvprobe (or none, untraced) around `reps` passes of every workload."""
    p = None
    out = os.path.join(tmp, "t.ndjson")
    attach_s = 0.0
    if args is not None:
        p, attach_s = start_nvprobe(a.nvprobe, args, out)
    for _ in range(reps):
        for wname, unit, cmd, key in workloads(a.python):
            t0 = time.monotonic()
            r = subprocess.run(cmd, capture_output=True, text=True)
            val = time.monotonic() - t0
            if key:
                try:
                    val = json.loads(r.stdout.strip().splitlines()[-1])[key]
                except Exception:
                    print(f"{wname} {mname}: {r.stdout[-500:]} {r.stderr[-500:]}", file=sys.stderr)
                    val = float("nan")
            samples.setdefault((wname, unit), {}).setdefault(mname, []).append(val)
    if p is not None:
        stats, lost, events, hooked, stop_s = stop_nvprobe(p, out)
        info.setdefault(mname, []).append({"attach_s": attach_s, "stop_s": stop_s, "lost": lost,
                                           "events": events, "hooked": hooked, "bpf": stats})


def wait_removal(limit):
    """Seconds until no nvprobe process is left (the child that removes the
    uprobes in the background), at most `limit`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if subprocess.run(["pgrep", "-x", "nvprobe"], capture_output=True).returncode != 0:
            break
        time.sleep(0.2)
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvprobe", required=True)
    ap.add_argument("--python", default="python3")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json-out")
    ap.add_argument("--deadline", type=float, default=1e9,
                    help="seconds after which no further traced session starts")
    ap.add_argument("--with-failures", action="store_true",
                    help="also `all` with --events failures (waits minutes for the removal before it)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="nvbench-hooks-")
    samples, info = {}, {}
    t_begin = time.monotonic()

    def save(phase):
        if a.json_out:
            # After every session: a run cut short keeps what it measured.
            with open(a.json_out, "w") as f:
                json.dump({"phase": phase,
                           "samples": {f"{w}|{u}": v for (w, u), v in samples.items()},
                           "nvprobe": info}, f, indent=1)

    # One nvprobe per mode around all the rounds, and the next one only
    # once the kernel has removed the last one's uprobes: each removal takes
    # the kernel's event_mutex and an RCU grace period per uprobe, and every
    # attach (tracepoints included) queues behind it (docs/BENCHMARKS.md).
    # So the modes run one after the other, not interleaved.
    modes = MODES if a.with_failures else MODES[:3]
    for i, (mname, args) in enumerate(modes):
        if args is not None and time.monotonic() - t_begin > a.deadline:
            print(f"skipped {mname}: past the deadline", file=sys.stderr)
            continue
        session(a, tmp, mname, args, a.rounds, samples, info)
        if args is not None and i + 1 < len(modes):
            info[mname][-1]["removal_s"] = wait_removal(300)
        save(mname)
    names = [m for m, _ in MODES if any(m in by for by in samples.values())]
    print("| workload | unit | " + " | ".join(names) + " | " +
          " | ".join(f"{m} / untraced" for m in names[1:]) + " |")
    print("|---" * (2 + 2 * len(names) - 1) + "|")
    for (wname, unit), by in samples.items():
        med = {m: statistics.median(by[m]) for m in names if m in by}
        fmt = (lambda v: f"{v:.3f}") if unit == "s" else (lambda v: f"{v:.0f}")
        print(f"| {wname} | {unit} | " + " | ".join(fmt(med[m]) if m in med else "-" for m in names) + " | " +
              " | ".join(f"{med[m] / med['untraced']:.2f}x" if m in med else "-" for m in names[1:]) + " |")
    print()
    print("| mode | sessions | attach (s) | stop (s) | background removal (s) | functions hooked | events | lost | cuda enter ns/hit | cuda return ns/hit | hits |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for mname, infos in info.items():
        att = statistics.median(i["attach_s"] for i in infos)
        stop = statistics.median(i["stop_s"] for i in infos)
        last = infos[-1]
        e = last["bpf"].get("nvprobe_cuda_enter", (0, 0))
        r = last["bpf"].get("nvprobe_cuda_return", (0, 0))
        rem = last.get("removal_s")
        rem = f"{rem:.1f}" if rem is not None else "not waited for"
        print(f"| {mname} | {len(infos)} | {att:.2f} | {stop:.2f} | {rem} | {last['hooked']} | {last['events']} | "
              f"{last['lost']} | {e[1]:.0f} | {r[1]:.0f} | {e[0]} |")


main()
