#!/usr/bin/env python3
"""Read an nvprobe Perfetto trace with Perfetto's own protobuf definitions
(PyPI `perfetto`: perfetto.protos.perfetto.trace.perfetto_trace_pb2) and
check it as trace processor would need it: every event on a described
track, timestamps in order, every track's slices balanced and nested.
Prints one JSON object: processes, threads, named tracks, slices per
name, instants per name, the deepest nesting."""
import json
import sys

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

trace = Trace()
with open(sys.argv[1], "rb") as f:
    trace.ParseFromString(f.read())

tracks, processes, threads, named = {}, {}, {}, {}
slices, instants = {}, {}
stacks, depth, last_ts = {}, 0, 0
for n, p in enumerate(trace.packet):
    if p.HasField("track_descriptor"):
        d = p.track_descriptor
        if d.uuid in tracks:
            sys.exit(f"packet {n}: track {d.uuid} described twice")
        if d.HasField("parent_uuid") and d.parent_uuid not in tracks:
            sys.exit(f"packet {n}: parent {d.parent_uuid} not described before")
        tracks[d.uuid] = d
        if d.HasField("process"):
            processes[d.process.pid] = d.process.process_name
        elif d.HasField("thread"):
            threads[d.thread.tid] = d.thread.pid
        else:
            named[d.name] = named.get(d.name, 0) + 1
        continue
    if not p.HasField("track_event"):
        sys.exit(f"packet {n}: neither a track nor a track event")
    if p.timestamp < last_ts:
        sys.exit(f"packet {n}: time goes back ({p.timestamp} < {last_ts})")
    last_ts = p.timestamp
    e = p.track_event
    if e.track_uuid not in tracks:
        sys.exit(f"packet {n}: event on undescribed track {e.track_uuid}")
    st = stacks.setdefault(e.track_uuid, [])
    if e.type == TrackEvent.TYPE_SLICE_BEGIN:
        st.append(e.name)
        depth = max(depth, len(st))
        slices[e.name] = slices.get(e.name, 0) + 1
    elif e.type == TrackEvent.TYPE_SLICE_END:
        if not st:
            sys.exit(f"packet {n}: END without BEGIN on track {e.track_uuid}")
        st.pop()
    elif e.type == TrackEvent.TYPE_INSTANT:
        instants[e.name] = instants.get(e.name, 0) + 1
    else:
        sys.exit(f"packet {n}: unexpected event type {e.type}")
open_ = {u: s for u, s in stacks.items() if s}
if open_:
    sys.exit(f"slices never ended: {open_}")
print(json.dumps({"processes": {str(k): v for k, v in processes.items()},
                  "threads": len(threads), "named_tracks": named,
                  "slices": slices, "instants": instants, "depth": depth,
                  "packets": len(trace.packet)}))
