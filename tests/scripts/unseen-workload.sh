#!/usr/bin/env bash
# Start-ups under conditions no rule was written for (none of them is in
# docs/FAILURE-CATALOGUE.md before this run): the data-size limit
# (RLIMIT_DATA, ulimit -d) at four sizes, a small stack limit (the size
# glibc gives new threads), a cgroup that allows 5 % of a CPU, odd
# CUDA_VISIBLE_DEVICES values, /proc and /sys hidden whole in a private
# mount namespace, a search path whose libcuda.so.1 is not a library, and
# an MPS pipe directory with no daemon behind its socket.
# Each case is tagged `--case NAME` and prints "== NAME: {…}" (its last
# line of output, or why it ended). Recorded by record-unseen.sh.
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
. "$D/case-run.sh"
run ok $PY $W ctx 1 --case ok
for m in 64 256 1024 4096; do
  run data_${m}m prlimit --data=$((m << 20)) $PY $W ctx 1 --case data_${m}m
done
run stack_64k prlimit --stack=65536 $PY $W ctx 1 --case stack_64k
run stack_16k prlimit --stack=16384 $PY $W ctx 1 --case stack_16k
for v in 1 0,0 "" junk; do
  n=visible_$(printf '%s' "${v:-empty}" | tr -c 'a-z0-9' _)
  run "$n" env CUDA_VISIBLE_DEVICES="$v" $PY $W ctx 1 --case "$n"
done
hide() { # $1 case, $2 mount command(s), then the workload
  local n=$1 m=$2; shift 2
  run "$n" unshare -m --propagation private sh -c "$m && exec $* --case $n"
}
hide no_proc "mount -t tmpfs none /proc" $PY $W ctx 1
hide no_sys "mount -t tmpfs none /sys" $PY $W ctx 1
BAD=$(mktemp -d)
head -c 4096 /dev/urandom >"$BAD/libcuda.so.1"
run bad_lib_first env LD_LIBRARY_PATH="$BAD:${LD_LIBRARY_PATH:-}" $PY $W ctx 1 --case bad_lib_first
run bad_lib_only env CUDAWORK_LIB="$BAD/libcuda.so.1" $PY $W ctx 1 --case bad_lib_only
rm -rf "$BAD"
# An MPS pipe directory whose control socket has no daemon behind it (a
# daemon that died, or one in another container), and one with none.
M=$(mktemp -d)
$PY -c "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1] + '/control')" "$M"
run mps_stale env CUDA_MPS_PIPE_DIRECTORY="$M" $PY $W ctx 1 --case mps_stale
rm -f "$M/control"
run mps_empty env CUDA_MPS_PIPE_DIRECTORY="$M" $PY $W ctx 1 --case mps_empty
rm -rf "$M"
CG=/sys/fs/cgroup
if [ -f $CG/cgroup.controllers ]; then
  grep -qw cpu $CG/cgroup.subtree_control || echo +cpu >$CG/cgroup.subtree_control 2>/dev/null
  mkdir -p $CG/nvprobe-cpu
  echo "5000 100000" >$CG/nvprobe-cpu/cpu.max
  run cpu_5pct timeout 60 sh -c "echo \$\$ >$CG/nvprobe-cpu/cgroup.procs; exec $PY $W ctx 1 --case cpu_5pct"
  rmdir $CG/nvprobe-cpu 2>/dev/null
fi
exit 0
