#!/usr/bin/env bash
# Builds the interposer case's programs (tests/interposer) into $1 (default
# .dev/bin): libfake-cuda.so (exports cuInit), cuinit-linked (linked with
# -lcuda against a link-time libcuda.so.1 made here, which is not shipped:
# at run time the loader finds the driver's libcuda.so.1), libnvshim.so
# (nvshim.c: libc's open and ioctl wrappers failing a call with no system
# call, for unseen6-workload.sh). gcc only.
set -eu
OUT=${1:-.dev/bin}
D=$(cd "$(dirname "$0")/../interposer" && pwd)
mkdir -p "$OUT"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
printf 'int cuInit(unsigned int f){return 999;}\nint cuDeviceGetCount(int *c){return 999;}\n' >"$T/link.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$T/libcuda.so" "$T/link.c"
gcc -O2 -Wall -Werror -shared -fPIC -o "$OUT/libfake-cuda.so" "$D/fake-cuda.c" -ldl
gcc -O2 -Wall -Werror -o "$OUT/cuinit-linked" "$D/cuinit-linked.c" -L"$T" -lcuda
gcc -O2 -Wall -Werror -shared -fPIC -o "$OUT/libnvshim.so" "$D/nvshim.c" -ldl
echo "built $OUT/libfake-cuda.so $OUT/cuinit-linked $OUT/libnvshim.so"
