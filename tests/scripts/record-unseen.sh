#!/usr/bin/env bash
# Records a batch of start-ups under conditions no rule was written for
# on a GPU host (record-cases.sh): batch N (none for the first) runs
# tests/scripts/unseenN-workload.sh into $OUT/unseenN.ndjson, which,
# gzip -9 -n, is tests/fixtures/h100-580.159.04-unseenN.ndjson.gz, and
# this script's output is tests/fixtures/gpu-host/h100-unseenN.txt.
# Usage: OUT=dir tests/scripts/record-unseen.sh [N]
set -u
NAME=unseen${1:-}
bash tests/scripts/record-cases.sh tests/scripts/$NAME-workload.sh $NAME
echo "--- call_failed records:"; grep -c '"op":"call_failed"' "$OUT/$NAME.ndjson"
echo "--- verdict texts"
grep '"type":"cuinit"' "$OUT/$NAME.ndjson" | python3 -c '
import json, sys
for l in sys.stdin:
    v = json.loads(l)
    print(v["pid"], v.get("result"), v.get("class"), v.get("severity"), [d.get("id") for d in v.get("diagnoses", [])])
    print("   ", v.get("text", "")[:700])
    for d in v.get("diagnoses", []):
        print("    -", d.get("id"), d.get("severity"), (d.get("evidence") or "")[:600])
'
