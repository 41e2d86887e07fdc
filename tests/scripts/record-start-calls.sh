#!/usr/bin/env bash
# Records tests/scripts/start-calls-workload.sh on a GPU host
# (record-cases.sh): $OUT/startcalls.ndjson is
# tests/fixtures/h200-580.159.04-start-calls.ndjson.
set -u
bash tests/scripts/record-cases.sh tests/scripts/start-calls-workload.sh startcalls --stall-after 2
echo "--- call_failed records:"; grep -c '"op":"call_failed"' "$OUT/startcalls.ndjson"
