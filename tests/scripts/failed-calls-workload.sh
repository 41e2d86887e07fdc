#!/usr/bin/env bash
# Issue 37: start-ups that fail for a reason outside the NVIDIA files, none
# of them written into a rule beforehand, to see what the layer beneath
# the rules (every failed system call of a start-up) shows: files and
# folders libcuda reads hidden in a private mount namespace (tmpfs over
# /proc/driver/nvidia, /sys/bus/pci/devices, /sys/devices/system/node,
# /dev/nvidia-caps; /dev/null over /proc/driver/nvidia/params), limits at
# the first context (address space, locked memory, the cgroup's task
# limit), and seccomp filters answering one system call with one errno
# (the NUMA policy calls a container profile refuses, readlink, the
# affinity calls, EACCES to the escapes as a security module's ioctl rule
# answers). Each case is tagged `--case NAME` and prints "== NAME: {…}".
# With STRACE_OUT=DIR each case also runs under `strace -f -Z` (failed
# calls only) into DIR/NAME.txt: what strace says, to compare ($STRACE:
# the strace command, `strace` by default).
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
run() {
  local n=$1; shift
  if [ -n "${STRACE_OUT:-}" ]; then
    mkdir -p "$STRACE_OUT"
    echo "== $n: $(${STRACE:-strace} -f -Z -qq -o "$STRACE_OUT/$n.txt" "$@" 2>&1 | tail -1)"
  else
    echo "== $n: $("$@" 2>&1 | tail -1)"
  fi
}
run ok $PY $W ctx 1 --case ok
hide() { # $1 case, $2 mount command(s), then the workload
  local n=$1 m=$2; shift 2
  run "$n" unshare -m --propagation private sh -c "$m && exec $* --case $n"
}
hide no_proc_driver "mount -t tmpfs none /proc/driver/nvidia" $PY $W ctx 1
hide null_params "mount --bind /dev/null /proc/driver/nvidia/params" $PY $W ctx 1
hide no_pci_sysfs "mount -t tmpfs none /sys/bus/pci/devices" $PY $W ctx 1
hide no_numa_sysfs "mount -t tmpfs none /sys/devices/system/node" $PY $W ctx 1
[ -d /dev/nvidia-caps ] && hide no_caps_nodes "mount -t tmpfs none /dev/nvidia-caps" $PY $W ctx 1
hide ro_dev_shm "mount -t tmpfs -o ro none /dev/shm" $PY $W ctx 1
run as_4g prlimit --as=$((4 << 30)) $PY $W ctx 1 --case as_4g
run memlock_0 prlimit --memlock=0:0 $PY $W ctx 1 --case memlock_0
CG=/sys/fs/cgroup
if [ -f $CG/cgroup.controllers ]; then
  grep -qw pids $CG/cgroup.subtree_control || echo +pids >$CG/cgroup.subtree_control 2>/dev/null
  for m in 2 4 6; do
    mkdir -p $CG/nvprobe-pids
    echo $m >$CG/nvprobe-pids/pids.max
    run pids_$m sh -c "echo \$\$ >$CG/nvprobe-pids/cgroup.procs; exec $PY $W ctx 1 --case pids_$m"
    rmdir $CG/nvprobe-pids 2>/dev/null
  done
fi
# x86_64 numbers: get_mempolicy 239, mbind 237, set_mempolicy 238,
# readlink 89, readlinkat 267, sched_getaffinity 204, sysinfo 99,
# uname 63 (EPERM 1, EACCES 13, ENOSYS 38).
for c in get_mempolicy:239:1 mbind:237:1 set_mempolicy:238:1 readlink:89:13 readlinkat:267:13 \
  sched_getaffinity:204:1 sysinfo:99:38 uname:63:1; do
  name=${c%%:*}; rest=${c#*:}
  run "seccomp_$name" $PY $D/seccomp-cuinit.py "nr:$rest" --case "seccomp_$name"
done
run seccomp_escapes_eacces $PY $D/seccomp-cuinit.py escapes-eacces --case seccomp_escapes_eacces
exit 0
