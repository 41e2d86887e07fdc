#!/usr/bin/env bash
# The reproducible entries of docs/FAILURE-CATALOGUE.md, one process each,
# run under nvprobe by record-verdict-catalogue.sh on a GPU host (root,
# the real driver; nothing here changes the driver, its module parameters or
# the GPU's state: namespaces, tmpfs /dev, bind mounts, permissions,
# environment, library paths, signals and cgroups only).
#
# Each scenario's command line carries `--case NAME` (cudawork.py ignores
# it), so the recorded `process` records and verdicts can be matched to it.
set -u
PY=${PY:-python3}
W=tests/scripts/cudawork.py
STUB=${STUB:-$(ls /usr/local/cuda*/targets/x86_64-linux/lib/stubs/libcuda.so 2>/dev/null | head -1)}
run() { echo "== case $1" >&2; shift; "$@" >&2 || true; }

# A healthy start-up.
run ok $PY $W cuinit --case ok
# The toolkit's link-time stub instead of the driver's libcuda.
run stub env CUDAWORK_LIB="$STUB" $PY $W cuinit --case stub
# Visibility lists that hide every GPU.
run visible_none env CUDA_VISIBLE_DEVICES=-1 $PY $W cuinit --case visible_none
run visible_uuid env CUDA_VISIBLE_DEVICES=GPU-00000000-dead-beef-0000-000000000000 $PY $W cuinit --case visible_uuid
# A fork after cuInit; the child calls the driver API without cuInit.
run fork $PY $W forkchild --case fork
# A harness timeout during start-up (the original report's "hang").
run timeout timeout -s TERM 0.15 $PY $W cuinit --case timeout
# nvidia-smi (a driver client, not a CUDA start-up) and `ls` (a lookup).
run nvml /usr/local/nvidia/bin/nvidia-smi -L
run probe ls -l /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia0 /dev/nvidia9

# Container-like start-ups: a private mount namespace with a tmpfs /dev that
# holds only some NVIDIA nodes, in a cgroup of its own named as docker
# names its containers' scopes.
CG=/sys/fs/cgroup/system.slice/docker-$(printf 'c0ffee%058d' 7).scope
mkdir -p "$CG" 2>/dev/null || true
nodes() { # $1: which nodes to create in the tmpfs /dev
  echo 'mount -t tmpfs tmpfs /dev; mknod -m 666 /dev/null c 1 3'
  for n in $1; do
    case $n in
      ctl) echo 'mknod -m 666 /dev/nvidiactl c 195 255';;
      gpu0) echo 'mknod -m 666 /dev/nvidia0 c 195 0';;
      uvm) echo "mknod -m 666 /dev/nvidia-uvm c $(awk '$2=="nvidia-uvm"{print $1}' /proc/devices) 0";;
      uvm000) echo "mknod -m 000 /dev/nvidia-uvm c $(awk '$2=="nvidia-uvm"{print $1}' /proc/devices) 0";;
      uvmnull) echo 'mknod -m 666 /dev/nvidia-uvm c 1 3';;
      uvmbind) echo "mknod -m 666 /dev/nvidia-uvm c $(awk '$2=="nvidia-uvm"{print $1}' /proc/devices) 0; mount --bind /dev/null /dev/nvidia-uvm";;
    esac
  done
}
# The namespaced cases run the system python on a copy of the workload that
# any user can read.
cp $W /tmp/cudawork.py && chmod 644 /tmp/cudawork.py
SYSPY=/usr/bin/python3
in_ns() { # $1 case, $2 nodes, $3 user (root or nobody), $4 cgroup (default: the docker one)
  local setup; setup=$(nodes "$2")
  local as=""; [ "$3" = nobody ] && as="setpriv --reuid=65534 --regid=65534 --clear-groups"
  local cg=${4:-$CG}
  run "$1" unshare -m --propagation private sh -c "
    echo \$\$ > $cg/cgroup.procs 2>/dev/null
    $setup
    exec $as env LD_LIBRARY_PATH=\$LD_LIBRARY_PATH $SYSPY /tmp/cudawork.py cuinit --case $1"
}
# As root, libcuda creates the missing nodes itself (mknod) and succeeds.
in_ns missing_nodes_root "" root
# As nobody, it cannot: the uvm node is missing.
in_ns missing_uvm_user "ctl gpu0" nobody
# The uvm node exists but is not readable by the user.
in_ns uvm_perm_user "ctl gpu0 uvm000" nobody
# Another device node sits where /dev/nvidia-uvm should be: as root,
# libcuda replaces it.
in_ns uvm_wrong_node "ctl gpu0 uvmnull" root
# Another device is bind-mounted over /dev/nvidia-uvm (a container's bad
# device mount): it cannot be replaced.
in_ns uvm_bind "ctl gpu0 uvmbind" root
# A Kubernetes pod's container (containerd, burstable QoS), named as the
# kubelet's systemd cgroup driver names them: the uvm node is missing.
POD=0f1e2d3c-4b5a-4697-8877-665544332211
K8S=/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${POD//-/_}.slice/cri-containerd-$(printf 'beef%060d' 42).scope
mkdir -p "$K8S" 2>/dev/null || true
in_ns k8s_missing_uvm_user "ctl gpu0" nobody "$K8S"
rmdir "$K8S" "${K8S%/*}" "${K8S%/*/*}" "${K8S%/*/*/*}" 2>/dev/null || true
rmdir "$CG" 2>/dev/null || true
exit 0
