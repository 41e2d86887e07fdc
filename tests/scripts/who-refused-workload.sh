#!/usr/bin/env bash
# Failed start-ups refused by a Linux mechanism, not by the driver (issue
# 22), each tagged `--case NAME`, reproduced without changing the driver or
# the GPU: seccomp filters (tests/scripts/seccomp-cuinit.py), the open-file
# limit, nodes whose device number no driver answers (in a private mount
# namespace) or a regular file at a node's path, the device cgroup (v2, nvbench deny-device), the cgroup's
# task limit (pids.max), a read-only /dev and a user namespace (mknod
# refused), and an `nvprobe doctor` run (nvprobe is never a start-up).
# Each case's own output (its CUresult) goes to stdout as "== NAME: ...".
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
run() { local n=$1; shift; echo "== $n: $("$@" 2>&1 | tail -1)"; }
run ok $PY $W cuinit --case ok
for n in 5 7 9 12; do
  run emfile_$n sh -c "ulimit -n $n; exec $PY $W cuinit --case emfile_$n"
done
run seccomp_open $PY $D/seccomp-cuinit.py open --case seccomp_open
run seccomp_escapes $PY $D/seccomp-cuinit.py escapes --case seccomp_escapes
UVM=$(awk '$2=="nvidia-uvm"{print $1}' /proc/devices)
cp $W /tmp/cudawork.py && chmod 644 /tmp/cudawork.py
in_ns() { # $1 case, $2 shell lines that make the nodes in a tmpfs /dev, $3 its mount options
  # As nobody: root's libcuda would replace a wrong node itself (mknod).
  run "$1" unshare -m --propagation private sh -c "
    mount -t tmpfs -o ${3:-mode=755} tmpfs /dev; mknod -m 666 /dev/null c 1 3
    mknod -m 666 /dev/nvidiactl c 195 255
    $2
    exec setpriv --reuid=65534 --regid=65534 --clear-groups \
      env LD_LIBRARY_PATH=\${LD_LIBRARY_PATH:-} /usr/bin/python3 /tmp/cudawork.py cuinit --case $1"
}
# /dev/nvidia-uvm made with a major no driver has (60: for local use).
in_ns stale_uvm "mknod -m 666 /dev/nvidia0 c 195 0; mknod -m 666 /dev/nvidia-uvm c 60 0"
# /dev/nvidia0 made with a GPU minor this one-GPU host does not have.
in_ns stale_gpu "mknod -m 666 /dev/nvidia0 c 195 7; mknod -m 666 /dev/nvidia-uvm c $UVM 0"
# /dev/nvidia-uvm a regular file (mode 0666): no device at the path.
in_ns file_uvm "mknod -m 666 /dev/nvidia0 c 195 0; : >/dev/nvidia-uvm; chmod 666 /dev/nvidia-uvm"
# /dev/nvidia-uvm mode 000: the mode refuses nobody.
in_ns perm_mode "mknod -m 666 /dev/nvidia0 c 195 0; mknod -m 000 /dev/nvidia-uvm c $UVM 0"
# Every node 0666, but the tmpfs /dev is mounted nodev: the mount refuses.
in_ns perm_nodev "mknod -m 666 /dev/nvidia0 c 195 0; mknod -m 666 /dev/nvidia-uvm c $UVM 0" nodev,mode=755
# The device cgroup (v2): a device program refusing char 195:* on a cgroup
# of its own (nvbench deny-device); the open of /dev/nvidiactl gets EPERM.
CG=/sys/fs/cgroup
if [ -n "${NVBENCH:-}" ] && [ -f $CG/cgroup.controllers ]; then
  mkdir -p $CG/nvprobe-devcg
  if "$NVBENCH" deny-device --cgroup $CG/nvprobe-devcg --major 195 >/dev/null; then
    run devcg_deny sh -c "echo \$\$ >$CG/nvprobe-devcg/cgroup.procs; exec $PY $W cuinit --case devcg_deny"
  else
    echo "== devcg_deny: not run: the device program was refused"
  fi
  rmdir $CG/nvprobe-devcg 2>/dev/null
  # The cgroup's task limit: pids.max 1 leaves libcuda no thread.
  grep -qw pids $CG/cgroup.subtree_control || echo +pids >$CG/cgroup.subtree_control 2>/dev/null
  mkdir -p $CG/nvprobe-pids
  if echo 1 >$CG/nvprobe-pids/pids.max 2>/dev/null; then
    run pids_max sh -c "echo \$\$ >$CG/nvprobe-pids/cgroup.procs; exec $PY $W cuinit --case pids_max"
  else
    echo "== pids_max: not run: no pids controller"
  fi
  rmdir $CG/nvprobe-pids 2>/dev/null
fi
# A read-only /dev without the nodes, as root: libcuda's mknod gets EROFS.
run ro_dev unshare -m --propagation private sh -c "
  mount -t tmpfs -o ro,mode=755 tmpfs /dev
  exec $PY /tmp/cudawork.py cuinit --case ro_dev"
# A user namespace: its own /dev without the nodes; mknod is refused there.
run userns_mknod unshare -U -r -m --propagation private sh -c "
  mount -t tmpfs tmpfs /dev && mknod -m 666 /dev/null c 1 3 2>/dev/null; : >/dev/null
  exec env LD_LIBRARY_PATH=\${LD_LIBRARY_PATH:-} $PY /tmp/cudawork.py cuinit --case userns_mknod"
if [ -n "${NVPROBE:-}" ]; then
  run doctor "$NVPROBE" doctor
fi
exit 0
