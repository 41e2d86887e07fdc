#!/usr/bin/env bash
# The tenth batch of start-ups under conditions no rule was written for
# (written before the device run): the start-up disturbed from inside its
# own process (another thread closing every descriptor, or putting
# /dev/null in the place of /dev/nvidiactl; every later mapping locked by
# mlockall, as nobody under RLIMIT_MEMLOCK and as root; a profiling timer
# every 200 us; a thread forking all along), the map count at the
# kernel's default limit, and "gpu-" in lower case before the GPU's UUID.
# Each case is tagged `--case NAME` and prints "== NAME: {…}" (its last
# line of output, or why it ended). Recorded by record-unseen.sh 10
# (twice: the build before the close records, then the build with them).
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
P=$D/unseenwork10.py
CASE_TIMEOUT=30
. "$D/case-run.sh"
run ok $PY $W ctx 1 --case ok
run close_range $PY $P close_range --case close_range
run dup2_over $PY $P dup2_over --case dup2_over
run mlock_nobody prlimit --memlock=8388608 $PY $P mlock_nobody --case mlock_nobody
run sigstorm $PY $P sigstorm --case sigstorm
run forkstorm $PY $P forkstorm --case forkstorm
# The kernel's default map-count limit for this case only, the process's
# own mappings brought to 10 short of it (unseenwork.py mapcount).
MMC=/proc/sys/vm/max_map_count
was=$(cat $MMC)
if echo 65530 >$MMC 2>/dev/null; then
  run mapcount_default $PY $D/unseenwork.py mapcount --case mapcount_default
  echo "$was" >$MMC
else
  echo "== mapcount_default: vm.max_map_count cannot be set here (exit 0)"
fi
SMI=$(command -v nvidia-smi || echo /usr/local/nvidia/bin/nvidia-smi)
UUID=$($SMI --query-gpu=uuid --format=csv,noheader 2>/dev/null | head -1)
if [ -n "$UUID" ]; then
  run visible_lower_prefix env CUDA_VISIBLE_DEVICES="gpu-${UUID#GPU-}" $PY $W ctx 1 --case visible_lower_prefix
fi
# Everything locked as root: inside a 4 GiB memory cgroup, so that what
# the locking populates cannot take the host's memory.
CG=/sys/fs/cgroup
if mkdir -p $CG/nvprobe-u10 2>/dev/null && [ -f $CG/nvprobe-u10/memory.max ]; then
  echo 4G >$CG/nvprobe-u10/memory.max
  echo 0 >$CG/nvprobe-u10/memory.swap.max 2>/dev/null
  run mlock_root sh -c "echo \$\$ >$CG/nvprobe-u10/cgroup.procs; exec $PY $P mlock_root --case mlock_root"
  sleep 0.2; rmdir $CG/nvprobe-u10 2>/dev/null
else
  echo "== mlock_root: no cgroup v2 memory controller (exit 0)"
fi
# Recorded in the second run only (h100-580.159.04-unseen10-closes):
# the dup2 again (it races libcuda's own calls on the descriptor), and
# no lockable memory at all without mlockall.
run dup2_over2 $PY $P dup2_over --case dup2_over2
run dup2_over3 $PY $P dup2_over --case dup2_over3
run memlock_zero prlimit --memlock=0 $PY $P nobody --case memlock_zero
exit 0
