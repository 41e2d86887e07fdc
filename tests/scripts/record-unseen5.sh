#!/usr/bin/env bash
# Records tests/scripts/unseen5-workload.sh on a GPU host
# (record-cases.sh): $OUT/unseen5.ndjson, gzip -9 -n, is
# tests/fixtures/h100-580.159.04-unseen5.ndjson.gz and this script's
# output tests/fixtures/gpu-host/h100-unseen5.txt.
set -u
bash tests/scripts/record-cases.sh tests/scripts/unseen5-workload.sh unseen5
echo "--- verdict texts"
grep '"type":"cuinit"' "$OUT/unseen5.ndjson" | python3 -c '
import json, sys
for l in sys.stdin:
    v = json.loads(l)
    print(v["pid"], v.get("result"), v.get("class"), v.get("severity"), [d.get("id") for d in v.get("diagnoses", [])])
    print("   ", v.get("text", "")[:700])
    for d in v.get("diagnoses", []):
        print("    -", d.get("id"), d.get("severity"), (d.get("evidence") or "")[:600])
'
