#!/usr/bin/env bash
# Records tests/scripts/late-context-workload.sh on a GPU host
# (record-cases.sh): $OUT/late.ndjson is
# tests/fixtures/h200-580.159.04-late-context.ndjson.
set -u
exec bash tests/scripts/record-cases.sh tests/scripts/late-context-workload.sh late
