#!/usr/bin/env bash
# The second batch of start-ups under conditions no rule was written for
# (written before any rule for them, none in docs/FAILURE-CATALOGUE.md
# before this run): CUDA_VISIBLE_DEVICES idioms (-1, a list past the
# host's GPUs, a bare "GPU-", a MIG UUID that is no instance, the same
# GPU by index and UUID), /proc/driver/nvidia hidden, a read-only
# /dev/shm, a process's own descriptors 0-2 closed or every descriptor
# closed after the first context, its mappings at vm.max_map_count, its
# address space reserved whole, a seccomp profile that kills at the
# first NVIDIA escape, SIGINT from a harness while Python is in cuInit,
# a child that execs its own start-up, a new PID or user namespace, an
# unprivileged user, a missing LD_PRELOAD library, an unlimited stack
# (the legacy mmap layout), and a cgroup that allows 5 % of a CPU (with
# and without a harness's 2 s timeout). Each case is tagged `--case NAME`
# and prints "== NAME: {…}" (its last line of output, or why it ended).
# Recorded by record-unseen.sh 2.
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
U2=$D/unseenwork.py
. "$D/case-run.sh"
run ok $PY $W ctx 1 --case ok
# (nvidia-smi may be off PATH: /usr/local/nvidia/bin on the GPU host.)
SMI=$(command -v nvidia-smi || echo /usr/local/nvidia/bin/nvidia-smi)
UUID=$($SMI --query-gpu=uuid --format=csv,noheader 2>/dev/null | head -1)
N=$(ls /proc/driver/nvidia/gpus 2>/dev/null | wc -l)
vis() { run "$1" env CUDA_VISIBLE_DEVICES="$2" $PY $W ctx 1 --case "$1"; }
vis visible_minus1 -1
vis visible_past "0,$N"
vis visible_past_first "$N,0"
vis visible_gpu_prefix GPU-
vis visible_mig_bogus MIG-00000000-0000-0000-0000-000000000000
[ -n "$UUID" ] && vis visible_0_uuid "0,$UUID"
hide() { # $1 case, $2 mount command, then the workload
  local n=$1 m=$2; shift 2
  run "$n" unshare -m --propagation private sh -c "$m && exec $* --case $n"
}
hide no_proc_driver "mount -t tmpfs none /proc/driver/nvidia" $PY $W ctx 1
hide shm_ro "mount -t tmpfs -o ro none /dev/shm" $PY $W ctx 1
for m in closed012 closefds mapcount vafull forkexec; do
  run $m $PY $U2 $m --case $m
done
run seccomp_kill $PY $D/seccomp-cuinit.py escapes-kill --case seccomp_kill
# SIGINT from a harness 0.12 s in (in cuInit or the first context on
# the H100): Python takes it when the call returns and ends by raising
# it again at itself.
run sigint_py timeout -s INT 0.12 $PY $W ctx 1 --case sigint_py
run pidns unshare -p -f --mount-proc $PY $W ctx 1 --case pidns
run userns unshare -U -r $PY $W ctx 1 --case userns
T=$(mktemp -d)
chmod 755 "$T"
cp "$W" "$T/"
# (The system's Python: one under root's home is not nobody's to run.)
PYN=/usr/bin/python3
[ -x $PYN ] || PYN=$PY
run nobody setpriv --reuid=65534 --regid=65534 --clear-groups $PYN "$T/cudawork.py" ctx 1 --case nobody
rm -rf "$T"
run preload_missing env LD_PRELOAD=/nonexistent/libnvtrace.so $PY $W ctx 1 --case preload_missing
run stack_unlimited prlimit --stack=unlimited $PY $W ctx 1 --case stack_unlimited
CG=/sys/fs/cgroup
if [ -f $CG/cgroup.controllers ]; then
  grep -qw cpu $CG/cgroup.subtree_control || echo +cpu >$CG/cgroup.subtree_control 2>/dev/null
  mkdir -p $CG/nvprobe-cpu
  echo "5000 100000" >$CG/nvprobe-cpu/cpu.max
  run cpu_5pct sh -c "echo \$\$ >$CG/nvprobe-cpu/cgroup.procs; exec $PY $W ctx 1 --case cpu_5pct"
  # A harness's timeout of 2 s under the same quota.
  run cpu_5pct_timeout sh -c "echo \$\$ >$CG/nvprobe-cpu/cgroup.procs; exec timeout 2 $PY $W ctx 1 --case cpu_5pct_timeout"
  rmdir $CG/nvprobe-cpu 2>/dev/null
fi
exit 0
