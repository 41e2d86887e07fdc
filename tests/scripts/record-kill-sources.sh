#!/usr/bin/env bash
# Records tests/scripts/kill-sources-workload.sh on a GPU host
# (record-cases.sh): $OUT/killsources.ndjson is
# tests/fixtures/h200-580.159.04-kill-sources.ndjson (gzip -9 -n: .ndjson.gz).
set -u
bash tests/scripts/record-cases.sh tests/scripts/kill-sources-workload.sh killsources
echo "--- oom_victim records:"; grep -c '"op":"oom_victim"' "$OUT/killsources.ndjson"
echo "--- call_failed records:"; grep -o '"op":"call_failed"[^}]*' "$OUT/killsources.ndjson" | cut -c1-200 | sort | uniq -c | head -20
echo "--- kernel log OOM lines:"; dmesg 2>/dev/null | grep -i "killed process\|out of memory" | tail -8
