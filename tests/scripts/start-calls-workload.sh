#!/usr/bin/env bash
# Failed start-ups whose cause is a call of the start-up's own, not a call
# on an NVIDIA file (issue 22): the thread libcuda starts refused by the
# cgroup's pids.max or the user's RLIMIT_NPROC or a seccomp filter, its
# address-space reservation refused by RLIMIT_AS (cuInit, then the first
# context), and clone3 answered ENOSYS by a profile older than it (glibc
# falls back to clone: the start-up succeeds). Each case is tagged
# `--case NAME` and prints "== NAME: {…}" with its own CUresults.
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
run() { local n=$1; shift; echo "== $n: $("$@" 2>&1 | tail -1)"; }
run ok $PY $W ctx --case ok
CG=/sys/fs/cgroup
if [ -f $CG/cgroup.controllers ]; then
  grep -qw pids $CG/cgroup.subtree_control || echo +pids >$CG/cgroup.subtree_control 2>/dev/null
  for m in 1 3; do
    mkdir -p $CG/nvprobe-pids
    if echo $m >$CG/nvprobe-pids/pids.max 2>/dev/null; then
      run pids_max_$m sh -c "echo \$\$ >$CG/nvprobe-pids/cgroup.procs; exec $PY $W ctx --case pids_max_$m"
    else
      echo "== pids_max_$m: not run: no pids controller"
    fi
    rmdir $CG/nvprobe-pids 2>/dev/null
  done
fi
# The user's process limit, as nobody (root is exempt): 1 task, its own.
cp $W /tmp/cudawork.py && chmod 644 /tmp/cudawork.py
run nproc_1 prlimit --nproc=1 setpriv --reuid=65534 --regid=65534 --clear-groups \
  env LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" $PY /tmp/cudawork.py ctx --case nproc_1
# A seccomp filter that refuses clone and clone3 with EPERM.
run seccomp_threads $PY $D/seccomp-cuinit.py threads --case seccomp_threads
# clone3 answered ENOSYS only: the start-up goes on with clone.
run seccomp_clone3 $PY $D/seccomp-cuinit.py clone3 --case seccomp_clone3
# The address-space limit (KiB for ulimit -v): where cuInit's reservation
# fails, and where only the first context's does.
for g in 1 4 16 64 256; do
  run as_${g}g sh -c "ulimit -v $((g * 1024 * 1024)); exec $PY $W ctx --case as_${g}g"
done
exit 0
