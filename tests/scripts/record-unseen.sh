#!/usr/bin/env bash
# Records tests/scripts/unseen-workload.sh on a GPU host
# (record-cases.sh): $OUT/unseen.ndjson, gzip -9 -n, is
# tests/fixtures/h100-580.159.04-unseen.ndjson.gz and this script's
# output tests/fixtures/gpu-host/h100-unseen.txt.
set -u
bash tests/scripts/record-cases.sh tests/scripts/unseen-workload.sh unseen
echo "--- call_failed records:"; grep -c '"op":"call_failed"' "$OUT/unseen.ndjson"
echo "--- verdict texts"
grep '"type":"cuinit"' "$OUT/unseen.ndjson" | python3 -c '
import json, sys
for l in sys.stdin:
    v = json.loads(l)
    print(v["pid"], v.get("result"), v.get("class"), [d.get("id") for d in v.get("diagnoses", [])])
    print("   ", v.get("text", "")[:600])
    for d in v.get("diagnoses", []):
        print("    -", d.get("id"), (d.get("evidence") or "")[:500])
'
