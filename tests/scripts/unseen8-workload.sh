#!/usr/bin/env bash
# The eighth batch of start-ups under conditions no rule was written for
# (written before the device run): per-process kernel settings a process
# or its launcher gives itself (prctl: memory-deny-write-execute, rdtsc
# faulting, no transparent huge pages); personalities (no address
# randomisation, the legacy mmap layout, a 3 GiB address limit); stdin
# closed, so libcuda's first descriptor is 0; a read-only bind of /dev;
# a visibility list whose second entry, or first, names no GPU; a cgroup
# memory.max of 48 MiB with no swap. Each case is tagged `--case NAME` and
# prints "== NAME: {…}" (its last line of output, or why it ended).
# Recorded by record-unseen.sh 8.
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
P=$D/unseenwork8.py
CASE_TIMEOUT=20
. "$D/case-run.sh"
run ok $PY $W ctx 1 --case ok
run mdwe $PY $P mdwe --case mdwe
run tsc_sigsegv $PY $P tsc --case tsc_sigsegv
run thp_off $PY $P thp --case thp_off
run no_aslr setarch -R $PY $W ctx 1 --case no_aslr
run legacy_layout setarch -L $PY $W ctx 1 --case legacy_layout
run addr_3gb setarch -3 $PY $W ctx 1 --case addr_3gb
run stdin_closed sh -c "exec $PY $W ctx 1 --case stdin_closed 0<&-"
run dev_ro unshare -m --propagation private sh -c "mount --bind -o ro /dev /dev && exec $PY $W ctx 1 --case dev_ro"
run visible_second_bad env CUDA_VISIBLE_DEVICES=0,99 $PY $W ctx 1 --case visible_second_bad
run visible_first_bad env CUDA_VISIBLE_DEVICES=99,0 $PY $W ctx 1 --case visible_first_bad
CG=/sys/fs/cgroup
if mkdir -p $CG/nvprobe-u8 2>/dev/null && [ -f $CG/nvprobe-u8/memory.max ]; then
  echo 48M >$CG/nvprobe-u8/memory.max
  echo 0 >$CG/nvprobe-u8/memory.swap.max 2>/dev/null
  run memory_48m sh -c "echo \$\$ >$CG/nvprobe-u8/cgroup.procs; exec $PY $W ctx 1 --case memory_48m"
  sleep 0.2; rmdir $CG/nvprobe-u8 2>/dev/null
else
  echo "== memory_48m: no cgroup v2 memory controller (exit 0)"
fi
exit 0
