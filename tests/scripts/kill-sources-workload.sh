#!/usr/bin/env bash
# Issue 37: who ends a start-up, and the limits it meets at its first
# context. The kernel's OOM killer in a memory cgroup (cgroup v2
# memory.max, no swap) around a context (cudawork.py ctx) and PyTorch's
# CUDA start-up (cudawork.py torch), the open-files limit (prlimit
# --nofile) at the first context, a process stopped (SIGSTOP, then
# SIGCONT 2 s later) during cuInit, and the process's own alarm(1). Each
# case is tagged `--case NAME` and prints "== NAME: {…}".
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
run() { local n=$1; shift; echo "== $n: $("$@" 2>&1 | tail -1)"; }
run ok $PY $W ctx 1 --case ok
CG=/sys/fs/cgroup
if [ -f $CG/cgroup.controllers ]; then
  grep -qw memory $CG/cgroup.subtree_control || echo +memory >$CG/cgroup.subtree_control 2>/dev/null
  for m in 48 96 192 384; do
    mkdir -p $CG/nvprobe-mem
    if echo $((m << 20)) >$CG/nvprobe-mem/memory.max 2>/dev/null; then
      echo 0 >$CG/nvprobe-mem/memory.swap.max 2>/dev/null
      run oom_ctx_${m}m sh -c "echo \$\$ >$CG/nvprobe-mem/cgroup.procs; exec $PY $W ctx 1 --case oom_ctx_${m}m"
      if [ $m -ge 192 ]; then
        run oom_torch_${m}m sh -c "echo \$\$ >$CG/nvprobe-mem/cgroup.procs; exec $PY $W torch --case oom_torch_${m}m"
      fi
      grep -E '^(oom|oom_kill) ' $CG/nvprobe-mem/memory.events | tr '\n' ' '; echo
    else
      echo "== oom_ctx_${m}m: not run: no memory controller"
    fi
    rmdir $CG/nvprobe-mem 2>/dev/null
  done
fi
for n in 12 16 24 32 48; do
  run nofile_$n prlimit --nofile=$n:$n $PY $W ctx 1 --case nofile_$n
done
# Stopped for 2 s, 0.1 s into its start-up.
$PY $W ctx 1 --case stopped >/tmp/stopped.out 2>&1 &
p=$!
sleep 0.1; kill -STOP $p; sleep 2; kill -CONT $p; wait $p
echo "== stopped: $(tail -1 /tmp/stopped.out)"
# Its own alarm(1) around a start-up that takes longer (a context on every GPU, ten times).
run alarm $PY -c "import signal, runpy, sys; signal.alarm(1); sys.argv=['$W','ctx','200','--case','alarm']; runpy.run_path('$W', run_name='__main__')"
exit 0
