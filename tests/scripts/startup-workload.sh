#!/usr/bin/env bash
# Start-ups that get past cuInit and stop at the first device or context,
# and libraries that load in libcuda's place or not at all (issue 22, items
# 2 and 3), each tagged `--case NAME` (or run as a program of its own),
# reproduced without changing the driver or the GPU. Each case's own output
# goes to stdout as "== NAME: ...". Needs .dev/bin/libfake-cuda.so and
# .dev/bin/cuinit-linked (tests/scripts/build-interposer.sh) and, for
# late_copy_535, OTHER_LIBCUDA=/path/to/libcuda.so.535.x.
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
BIN=${BIN:-$PWD/.dev/bin}
run() { local n=$1; shift; echo "== $n: $("$@" 2>&1 | tail -1)"; }
run ctx_ok $PY $W device 0 --case ctx_ok
# An ordinal past the one GPU, with and without a visibility list.
run bad_ordinal $PY $W device 5 --case bad_ordinal
run bad_ordinal_visible env CUDA_VISIBLE_DEVICES=0 $PY $W device 1 --case bad_ordinal_visible
# Another process takes all of the GPU's memory; then a first context.
$PY $W hold 60 --case holder >/tmp/holder.out 2>&1 &
h=$!
for _ in $(seq 600); do grep -q holding /tmp/holder.out 2>/dev/null && break; sleep 0.1; done
echo "== holder: $(head -1 /tmp/holder.out)"
run ctx_oom $PY $W device 0 --case ctx_oom
kill $h; wait $h 2>/dev/null
# A libcuda.so.1 first on the library path that the loader cannot load.
mk() { rm -rf /tmp/lib_$1; mkdir -p /tmp/lib_$1; }
mk empty; : >/tmp/lib_empty/libcuda.so.1
mk text; echo "this is not a library" >/tmp/lib_text/libcuda.so.1
mk trunc; head -c 4096 "$(readlink -f /usr/local/nvidia/lib64/libcuda.so.1)" >/tmp/lib_trunc/libcuda.so.1
for c in empty text trunc; do
  run lib_$c env LD_LIBRARY_PATH=/tmp/lib_$c $PY -c "
import ctypes, json, sys
try:
    cu = ctypes.CDLL('libcuda.so.1')
    print(json.dumps({'cuInit': cu.cuInit(0)}))
except OSError as e:
    print(json.dumps({'dlopen': str(e)})); sys.exit(1)
" --case lib_$c
done
# A libcuda of another driver version than the module (535 against 580).
if [ -n "${OTHER_LIBCUDA:-}" ] && [ -f "$OTHER_LIBCUDA" ]; then
  run late_copy_535 env CUDAWORK_LIB=$OTHER_LIBCUDA $PY $W cuinit --case late_copy_535
fi
# A program linked with -lcuda under an LD_PRELOAD library that exports
# cuInit. It answers in libcuda's place within a millisecond: the first
# such run is over before nvprobe can read it (its preload is unknown), so
# a run that forwards to libcuda's cuInit (200 ms) comes first, and its
# preload is hooked; the runs after it are seen through those hooks.
run interposer_first env LD_PRELOAD=$BIN/libfake-cuda.so $BIN/cuinit-linked --case interposer_first
run interposer_forward env FAKE_CUDA_FORWARD=1 LD_PRELOAD=$BIN/libfake-cuda.so $BIN/cuinit-linked --case interposer_forward
sleep 0.5
run interposer_hooked env LD_PRELOAD=$BIN/libfake-cuda.so $BIN/cuinit-linked --case interposer_hooked
exit 0
