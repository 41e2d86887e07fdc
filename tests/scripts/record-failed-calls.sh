#!/usr/bin/env bash
# Records tests/scripts/failed-calls-workload.sh on a GPU host
# (record-cases.sh): $OUT/failedcalls.ndjson, gzip -9 -n, is
# tests/fixtures/h200-580.159.04-failed-calls.ndjson.gz and this script's
# output tests/fixtures/gpu-host/h200-failed-calls.txt; then the same
# workload under strace -f -Z (failed calls only, $OUT/strace/NAME.txt,
# tar them: the device brings back a few files only), to compare
# nvprobe's failed_syscalls with strace's answer.
set -u
bash tests/scripts/record-cases.sh tests/scripts/failed-calls-workload.sh failedcalls
# The GPU host has no strace: this machine's, with its libraries in
# .dev/lib, which the traced command does not inherit (-E).
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
S="env LD_LIBRARY_PATH=$PWD/.dev/lib $PWD/.dev/bin/strace -E LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
[ -x .dev/bin/strace ] || S=strace
STRACE=$S STRACE_OUT=$OUT/strace bash tests/scripts/failed-calls-workload.sh >$OUT/strace.txt 2>&1
echo "--- under strace"; cut -c1-200 $OUT/strace.txt
echo "--- call_failed records:"; grep -c '"op":"call_failed"' "$OUT/failedcalls.ndjson"
echo "--- verdicts with failed_syscalls:"; grep -c '"failed_syscalls"' "$OUT/failedcalls.ndjson"
