#!/usr/bin/env bash
# The sixth batch of start-ups under conditions no rule was written for
# (written before any rule for them): seccomp filters that kill at
# libcuda's socket or at the first ioctl (the process, or the calling
# thread alone), or trap at the socket (SIGSYS generated, no handler);
# Landlock sandboxes refusing ioctls on device files or opens under /dev;
# /dev mounted nodev; an LD_PRELOAD library whose libc wrappers fail an
# open of an NVIDIA node or an escape with no system call at all; the
# process under strace, plain and with an ioctl error injected (the
# kernel never runs the call); its cgroup frozen mid-cuInit for 6 s (past
# the 5 s stall report), then thawed
# or killed (docker pause, a pod's freeze); no lockable memory as an
# unprivileged user. Each case is tagged `--case NAME` and prints
# "== NAME: {…}" (its last line of output, or why it ended). Recorded by
# record-unseen.sh 6. $NVSHIM names libnvshim.so (build-interposer.sh),
# $STRACE a strace binary (its libraries in $STRACE_LIB): the cases that
# need one are left out without it.
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
U6=$D/unseenwork6.py
SC=$D/seccomp-cuinit.py
CASE_TIMEOUT=8
. "$D/case-run.sh"
run ok $PY $W ctx 1 --case ok
run socket_kill $PY $SC nr:41:kill --case socket_kill
run ioctl_kill $PY $SC nr:16:kill --case ioctl_kill
run socket_trap $PY $SC nr:41:trap --case socket_trap
run ioctl_killthread $PY $SC nr:16:killthread --case ioctl_killthread
for m in landlock_ioctl landlock_open; do
  run $m $PY $U6 $m --case $m
done
run dev_nodev unshare -m --propagation private sh -c \
  "mount --bind /dev /dev && mount -o remount,bind,nodev /dev && exec $PY $W ctx 1 --case dev_nodev"
if [ -n "${NVSHIM:-}" ] && [ -f "$NVSHIM" ]; then
  run preload_uvm_open env LD_PRELOAD="$NVSHIM" NVSHIM_OPEN=/dev/nvidia-uvm:13 $PY $W ctx 1 --case preload_uvm_open
  run preload_ctl_open env LD_PRELOAD="$NVSHIM" NVSHIM_OPEN=/dev/nvidiactl:1 $PY $W ctx 1 --case preload_ctl_open
  run preload_escape env LD_PRELOAD="$NVSHIM" NVSHIM_ESCAPE=30:5 $PY $W ctx 1 --case preload_escape
fi
if [ -n "${STRACE:-}" ] && [ -x "$STRACE" ]; then
  SLP=${STRACE_LIB:+$STRACE_LIB:}${LD_LIBRARY_PATH:-}
  run strace_plain env LD_LIBRARY_PATH="$SLP" "$STRACE" -f -o /dev/null $PY $W ctx 1 --case strace_plain
  run strace_inject env LD_LIBRARY_PATH="$SLP" "$STRACE" -f -o /dev/null -e trace=ioctl \
    -e inject=ioctl:error=EIO:when=60 $PY $W ctx 1 --case strace_inject
fi
CG=/sys/fs/cgroup
freeze() { # $1 case, $2 what follows the freeze: thaw or kill
  local n=$1 then=$2 g=$CG/nvprobe-u6-$1 p rc
  mkdir -p $g 2>/dev/null && [ -f $g/cgroup.freeze ] || { echo "== $n: no cgroup v2 freezer"; return; }
  sh -c "echo \$\$ >$g/cgroup.procs; exec $PY $W ctx 1 --case $n" >/tmp/nvprobe-u6-$n.txt 2>&1 &
  p=$!
  sleep 0.15; echo 1 >$g/cgroup.freeze
  sleep 6
  if [ "$then" = kill ]; then echo 1 >$g/cgroup.kill; else echo 0 >$g/cgroup.freeze; fi
  wait $p; rc=$?
  echo "== $n: $(tail -1 /tmp/nvprobe-u6-$n.txt) (exit $rc)"
  rm -f /tmp/nvprobe-u6-$n.txt
  sleep 0.2; rmdir $g 2>/dev/null
}
freeze freeze_thaw thaw
freeze freeze_kill kill
T=$(mktemp -d)
chmod 755 "$T"
cp "$W" "$T/"
PYN=/usr/bin/python3
[ -x $PYN ] || PYN=$PY
run memlock0_nobody setpriv --reuid=65534 --regid=65534 --clear-groups prlimit --memlock=0 $PYN "$T/cudawork.py" ctx 1 --case memlock0_nobody
rm -rf "$T"
exit 0
