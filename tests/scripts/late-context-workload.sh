#!/usr/bin/env bash
# A first context made 12 s after cuInit, past the 10 s a verdict waits for
# one (issue 22): alone (it works), and while another process holds all of
# the GPU's memory (CUDA_ERROR_OUT_OF_MEMORY). Each case is tagged
# `--case NAME` and prints "== NAME: {…}" with its own CUresults.
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
run() { local n=$1; shift; echo "== $n: $("$@" 2>&1 | tail -1)"; }
run late_ok $PY $W late 12 --case late_ok
$PY $W hold 40 --case holder >/tmp/holder.out 2>&1 &
h=$!
for _ in $(seq 600); do grep -q holding /tmp/holder.out 2>/dev/null && break; sleep 0.1; done
echo "== holder: $(head -1 /tmp/holder.out)"
run late_oom $PY $W late 12 --case late_oom
kill $h; wait $h 2>/dev/null
exit 0
