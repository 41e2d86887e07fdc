#!/usr/bin/env python3
"""Print one line per verdict of a recording whose process ran with
`--case NAME` (tests/scripts/catalogue-workload.sh, cudawork.py):
"NAME class result id:severity ...", sorted, so that two recordings of the
same workload (the committed fixture and a new run) can be diffed.

usage: verdicts-by-case.py RECORDING.ndjson [--decoded] [--text]
With --text each line also carries the verdict's text and its diagnoses'
evidence.
With --decoded the file is `nvprobe decode --json` output (the verdicts
made again by this nvprobe); otherwise the verdicts as recorded live."""
import json
import sys

rows = []
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    try:
        v = json.loads(line)
    except ValueError:
        continue
    if v.get("type") != "cuinit":
        continue
    cmd = (v.get("process") or {}).get("cmdline") or []
    case = next((cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "--case"), None)
    if case is None:
        continue
    diags = " ".join(f"{d['id']}:{d.get('severity', 'error')}" for d in v.get("diagnoses", []))
    row = f"{case} {v.get('class', 'cuda')} {v['result']} {diags}".rstrip()
    if "--text" in sys.argv:
        row += "\n    " + v.get("text", "")
        for d in v.get("diagnoses", []):
            row += f"\n    [{d['id']}] {d.get('evidence', '')}"
    rows.append(row)
for r in sorted(rows):
    print(r)
