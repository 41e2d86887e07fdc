#!/usr/bin/env bash
# The third batch of start-ups under conditions no rule was written for
# (written before any rule for them, none in docs/FAILURE-CATALOGUE.md
# before this run): the process ending itself mid-cuInit (abort, _exit
# from a thread, SIGPIPE at a pipe with no reader, SIGXFSZ at the file
# size limit, SIGXCPU at the CPU-time limit, an exec from a thread); a
# forked child starting CUDA again without an exec; eight threads in
# cuInit at once; a harness that stops the process mid-start-up and then
# kills it or lets it go on; a cgroup killed whole (cgroup.kill); /proc or
# /sys hidden by an empty mount; a private /dev whose nvidia-uvm node has
# a major no driver has (a node left from an earlier load of the module),
# whose nvidiactl is the modeset node, or whose nvidia0 is a GPU minor
# the host does not have; seccomp profiles refusing memfd_create, eventfd,
# socket or prctl, or killing at memfd_create; no capabilities as root; the address space reserved
# whole again (its counts now read by the kernel at the failure); CUDA_VISIBLE_DEVICES idioms (a leading space, a trailing comma,
# the same UUID twice, a UUID's prefix, a UUID in upper case).
# Each case is tagged `--case NAME` and prints "== NAME: {…}" (its last
# line of output, or why it ended). Recorded by record-unseen.sh 3.
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
U3=$D/unseenwork3.py
SC=$D/seccomp-cuinit.py
. "$D/case-run.sh"
run ok $PY $W ctx 1 --case ok
for m in abort exit3 sigpipe xfsz xcpu forkinit threads8 execthread; do
  run $m $PY $U3 $m --case $m
done
# A harness stops the process 0.15 s in, then kills it 1.5 s later
# (SIGKILL while stopped), or lets it go on (SIGCONT).
stopped() { # $1 case, $2 the signal after the stop
  local n=$1 then=$2 p rc
  $PY $W ctx 1 --case "$n" >/tmp/nvprobe-u3-$n.txt 2>&1 &
  p=$!
  sleep 0.15; kill -STOP $p; sleep 1.5; kill -$then $p
  wait $p; rc=$?
  echo "== $n: $(tail -1 /tmp/nvprobe-u3-$n.txt) (exit $rc)"
  rm -f /tmp/nvprobe-u3-$n.txt
}
stopped stop_kill KILL
stopped stop_cont CONT
CG=/sys/fs/cgroup
if [ -f $CG/cgroup.controllers ] && mkdir -p $CG/nvprobe-u3 2>/dev/null \
   && [ -f $CG/nvprobe-u3/cgroup.kill ]; then
  sh -c "echo \$\$ >$CG/nvprobe-u3/cgroup.procs; exec $PY $W ctx 1 --case cgroup_kill" \
    >/tmp/nvprobe-u3-cg.txt 2>&1 &
  p=$!
  sleep 0.25; echo 1 >$CG/nvprobe-u3/cgroup.kill
  wait $p; rc=$?
  echo "== cgroup_kill: $(tail -1 /tmp/nvprobe-u3-cg.txt) (exit $rc)"
  rm -f /tmp/nvprobe-u3-cg.txt
  sleep 0.2; rmdir $CG/nvprobe-u3 2>/dev/null
fi
hide() { # $1 case, $2 mount command, then the workload
  local n=$1 m=$2; shift 2
  run "$n" unshare -m --propagation private sh -c "$m && exec $* --case $n"
}
hide proc_hidden "mount -t tmpfs none /proc" $PY $W ctx 1
hide sys_hidden "mount -t tmpfs none /sys" $PY $W ctx 1
# A private /dev holding the nodes a container runtime makes, one of
# them wrong. A major no driver registered: the first of 200-239 that
# /proc/devices does not list.
FREE=$(awk '/^Character/{c=1;next} /^Block/{c=0} c{print $1}' /proc/devices \
  | sort -n | awk 'BEGIN{m=200} $1==m{m++} END{print m}')
UVM=$(awk '$2=="nvidia-uvm"{print $1}' /proc/devices)
devtree() { # extra mknod commands for the private /dev
  echo "mount -t tmpfs -o mode=755 none /dev && mkdir /dev/shm /dev/pts && \
mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 && mknod -m 666 /dev/urandom c 1 9 && $1"
}
GOOD_CTL="mknod -m 666 /dev/nvidiactl c 195 255"
GOOD_GPU="mknod -m 666 /dev/nvidia0 c 195 0"
GOOD_UVM="mknod -m 666 /dev/nvidia-uvm c ${UVM:-0} 0 && mknod -m 666 /dev/nvidia-uvm-tools c ${UVM:-0} 1"
hide dev_private_ok "$(devtree "$GOOD_CTL && $GOOD_GPU && $GOOD_UVM")" $PY $W ctx 1
hide uvm_stale_major "$(devtree "$GOOD_CTL && $GOOD_GPU && mknod -m 666 /dev/nvidia-uvm c $FREE 0 && mknod -m 666 /dev/nvidia-uvm-tools c $FREE 1")" $PY $W ctx 1
hide ctl_is_modeset "$(devtree "mknod -m 666 /dev/nvidiactl c 195 254 && $GOOD_GPU && $GOOD_UVM")" $PY $W ctx 1
hide gpu_minor_wrong "$(devtree "$GOOD_CTL && mknod -m 666 /dev/nvidia0 c 195 7 && $GOOD_UVM")" $PY $W ctx 1
# Seccomp profiles (x86_64 numbers) refusing calls no earlier batch
# refused: memfd_create (319: EPERM, and ENOSYS as a profile older than
# the call answers), eventfd and eventfd2 (284, 290: ENOSYS), socket (41:
# EACCES), prctl (157: EPERM).
run memfd_eperm $PY $SC nr:319:1 --case memfd_eperm
run memfd_enosys $PY $SC nr:319:38 --case memfd_enosys
run eventfd_enosys $PY $SC nr:284,290:38 --case eventfd_enosys
run socket_eacces $PY $SC nr:41:13 --case socket_eacces
run prctl_eperm $PY $SC nr:157:1 --case prctl_eperm
# A profile whose action at memfd_create is a kill (SIGSYS), as a
# systemd unit's SystemCallFilter= is for a call it does not list.
run memfd_kill $PY $SC nr:319:kill --case memfd_kill
run vafull $PY $D/unseenwork.py vafull --case vafull
command -v setpriv >/dev/null && run caps_none setpriv --bounding-set=-all --inh-caps=-all \
  $PY $W ctx 1 --case caps_none
SMI=$(command -v nvidia-smi || echo /usr/local/nvidia/bin/nvidia-smi)
UUID=$($SMI --query-gpu=uuid --format=csv,noheader 2>/dev/null | head -1)
vis() { run "$1" env CUDA_VISIBLE_DEVICES="$2" $PY $W ctx 1 --case "$1"; }
vis visible_space " 0"
vis visible_trailing_comma "0,"
if [ -n "$UUID" ]; then
  vis visible_uuid_twice "$UUID,$UUID"
  vis visible_uuid_prefix "${UUID:0:12}"
  vis visible_uuid_upper "GPU-$(printf '%s' "${UUID#GPU-}" | tr a-f A-F)"
fi
exit 0
