#!/usr/bin/env python3
"""Print the kernel log's records as JSON lines (seq, the kernel's own
timestamp in µs, priority, facility, message): what /dev/kmsg holds, for
putting next to a recording. `kmsgdump.py --since-us T` keeps records
stamped after T (CLOCK_MONOTONIC µs, the clock the records are stamped
with on x86 with a stable TSC)."""
import json
import os
import sys

since = 0
if "--since-us" in sys.argv:
    since = int(sys.argv[sys.argv.index("--since-us") + 1])
fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
while True:
    try:
        rec = os.read(fd, 8192)
    except BlockingIOError:
        break
    except BrokenPipeError:
        continue
    head, _, rest = rec.decode("utf-8", "replace").partition(";")
    f = head.split(",")
    if len(f) < 3:
        continue
    prio, seq, ts = int(f[0]), int(f[1]), int(f[2])
    if ts < since:
        continue
    msg = rest.split("\n", 1)[0]
    print(json.dumps({"seq": seq, "ts_us": ts, "level": prio & 7,
                      "facility": prio >> 3, "msg": msg}))
