#!/usr/bin/env python3
"""Draw an nvprobe Perfetto trace as a timeline picture (the README's), read
with Perfetto's own protobuf definitions (PyPI `perfetto` 0.59.1), drawn
with matplotlib: one row per thread and GPU track, slices as bars (the
longest named), instants as ticks. Usage:

  nvprobe export --perfetto tests/fixtures/h200-580.159.04-uprobes.ndjson -o x.pftrace
  python3 tests/scripts/timeline-picture.py x.pftrace docs/img/h200-startup.png [PID]

PID keeps one process (and the GPU tracks); default: the process with the
most slices. This is not Perfetto's UI (a web application): open the
trace in ui.perfetto.dev for that."""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent  # noqa: E402

trace = Trace()
with open(sys.argv[1], "rb") as f:
    trace.ParseFromString(f.read())

tracks, pid_of = {}, {}
for p in trace.packet:
    if p.HasField("track_descriptor"):
        d = p.track_descriptor
        tracks[d.uuid] = d
for u, d in tracks.items():
    t, pid = d, None
    while t is not None:
        if t.HasField("process"):
            pid = t.process.pid
        if t.HasField("thread"):
            pid = t.thread.pid
        t = tracks.get(t.parent_uuid) if t.HasField("parent_uuid") else None
    pid_of[u] = pid

open_, slices, instants = {}, [], []
for p in trace.packet:
    if not p.HasField("track_event"):
        continue
    e, ts = p.track_event, p.timestamp
    if e.type == TrackEvent.TYPE_SLICE_BEGIN:
        open_.setdefault(e.track_uuid, []).append((ts, e.name))
    elif e.type == TrackEvent.TYPE_SLICE_END:
        if open_.get(e.track_uuid):
            b, name = open_[e.track_uuid].pop()
            slices.append((e.track_uuid, b, ts, name, len(open_[e.track_uuid])))
    elif e.type == TrackEvent.TYPE_INSTANT:
        instants.append((e.track_uuid, ts, e.name))

count = {}
for u, *_ in slices:
    if pid_of.get(u) is not None:
        count[pid_of[u]] = count.get(pid_of[u], 0) + 1
want = int(sys.argv[3]) if len(sys.argv) > 3 else max(count, key=count.get)
# The process's thread tracks, and its threads' tracks under each GPU
# (named "comm[pid/tid]").
keep = [
    u
    for u in tracks
    if (pid_of.get(u) == want or (pid_of.get(u) is None and f"[{want}/" in tracks[u].name))
    and any(s[0] == u for s in slices)
]
if not keep:
    sys.exit(f"no slices for pid {want}")


def label(u):
    d = tracks[u]
    if d.HasField("thread"):
        return f"{d.thread.thread_name or 'thread'} {d.thread.tid}"
    parent = tracks.get(d.parent_uuid) if d.HasField("parent_uuid") else None
    gpu = parent.name if parent is not None and parent.name else ""
    return f"{gpu[:24]}: {d.name}" if gpu else (d.name or str(u))


keep.sort(key=lambda u: (pid_of.get(u) is None, label(u)))
t0 = min(b for u, b, *_ in slices if u in keep)
# Enclosing slices first: the ones inside are drawn over them.
slices.sort(key=lambda x: x[4])
fig, ax = plt.subplots(figsize=(14, 1.2 + 0.55 * len(keep)))
colors = {}
palette = plt.get_cmap("tab20").colors
for row, u in enumerate(keep):
    for su, b, e, name, depth in slices:
        if su != u:
            continue
        key = name.split(" ")[0]
        c = colors.setdefault(key, palette[len(colors) % len(palette)])
        h = 0.8 - 0.2 * depth
        ax.broken_barh([((b - t0) / 1e6, max((e - b) / 1e6, 0.02))], (row - h / 2, h), color=c)
        if (e - b) / 1e6 > 12:
            ax.text((b - t0) / 1e6 + 0.5, row, name[:40], va="center", fontsize=7, clip_on=True)
    for iu, ts, name in instants:
        if iu == u:
            ax.plot([(ts - t0) / 1e6] * 2, [row - 0.45, row + 0.45], color="black", lw=0.6)
ax.set_yticks(range(len(keep)))
ax.set_yticklabels([label(u) for u in keep], fontsize=8)
ax.invert_yaxis()
ax.set_xlabel("ms since the first call")
ax.set_title(f"nvprobe: pid {want}'s start-up on the H200 (driver 580.159.04), from `nvprobe export --perfetto`")
ax.grid(axis="x", alpha=0.3)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
print(f"{sys.argv[2]}: pid {want}, {len(keep)} tracks")
