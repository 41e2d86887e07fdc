#!/usr/bin/env python3
"""What `--libcuda-hooks` costs a CUDA program, on the GPU machine.

Runs every workload untraced and under `nvprobe watch` with the start-up
hooks (the default), with every exported function hooked (`all`), and with
`all` plus `--events failures` (the kernel drops successful calls of
processes past their verdict), in rounds that rotate the order of the modes.
nvprobe is started and stopped around each traced run; its attach time
(launch to the start record) is reported on its own. Prints a markdown
table of medians and writes the raw samples as JSON.

  bench-libcuda-hooks.py --nvprobe .dev/bin/nvprobe --python PY --rounds 3 --json-out F
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
    p.send_signal(signal.SIGINT)
    p.wait(timeout=120)
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
    return stats, lost, events, hooked


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvprobe", required=True)
    ap.add_argument("--python", default="python3")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json-out")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="nvbench-hooks-")
    samples = {}
    extra_info = {}
    for rnd in range(a.rounds):
        order = MODES[rnd % len(MODES):] + MODES[:rnd % len(MODES)]
        for wname, unit, cmd, key in workloads(a.python):
            for mname, args in order:
                p = None
                out = os.path.join(tmp, "t.ndjson")
                if args is not None:
                    p, attach_s = start_nvprobe(a.nvprobe, args, out)
                t0 = time.monotonic()
                r = subprocess.run(cmd, capture_output=True, text=True)
                wall = time.monotonic() - t0
                val = wall
                if key:
                    try:
                        val = json.loads(r.stdout.strip().splitlines()[-1])[key]
                    except Exception:
                        print(f"{wname} {mname}: {r.stdout[-500:]} {r.stderr[-500:]}", file=sys.stderr)
                        val = float("nan")
                samples.setdefault((wname, unit), {}).setdefault(mname, []).append(val)
                if p is not None:
                    stats, lost, events, hooked = stop_nvprobe(p, out)
                    info = extra_info.setdefault((wname, mname), [])
                    info.append({"attach_s": attach_s, "lost": lost, "events": events,
                                 "hooked": hooked, "bpf": stats})
        if a.json_out:
            # After every round: a run cut short keeps what it measured.
            with open(a.json_out, "w") as f:
                json.dump({"rounds": rnd + 1,
                           "samples": {f"{w}|{u}": v for (w, u), v in samples.items()},
                           "nvprobe": {f"{w}|{m}": v for (w, m), v in extra_info.items()}}, f, indent=1)
    names = [m for m, _ in MODES]
    print("| workload | unit | " + " | ".join(names) + " | " +
          " | ".join(f"{m} / untraced" for m in names[1:]) + " |")
    print("|---" * (2 + 2 * len(names) - 1) + "|")
    for (wname, unit), by in samples.items():
        med = {m: statistics.median(by[m]) for m in names}
        fmt = (lambda v: f"{v:.3f}") if unit == "s" else (lambda v: f"{v:.0f}")
        print(f"| {wname} | {unit} | " + " | ".join(fmt(med[m]) for m in names) + " | " +
              " | ".join(f"{med[m] / med['untraced']:.2f}x" for m in names[1:]) + " |")
    print()
    print("| workload | mode | attach (s, median) | functions hooked | events | lost | cuda enter ns/hit | cuda return ns/hit | hits |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (wname, mname), infos in extra_info.items():
        att = statistics.median(i["attach_s"] for i in infos)
        last = infos[-1]
        e = last["bpf"].get("nvprobe_cuda_enter", (0, 0))
        r = last["bpf"].get("nvprobe_cuda_return", (0, 0))
        print(f"| {wname} | {mname} | {att:.2f} | {last['hooked']} | {last['events']} | {last['lost']} | "
              f"{e[1]:.0f} | {r[1]:.0f} | {e[0]} |")


main()
