#!/usr/bin/env bash
# Live checks on the real driver of what a verdict says from outside the
# driver calls: the stall check's look in a verdict (strace's delay before
# an escape: a ptrace stop; a cgroup frozen 6 s then thawed, or killed),
# /proc and /sys hidden by a tmpfs (proc_unavailable; a driver file's
# hint), and the kernel's seccomp audit line naming the call at which a
# kill-thread action ended cuInit's thread. Each case is tagged `--case
# NAME` and prints "== NAME: {…}". Recorded by record-cases.sh (OUT=dir
# tests/scripts/record-cases.sh tests/scripts/stallcheck-workload.sh
# stallcheck) with $STRACE naming a strace binary (its libraries in
# $STRACE_LIB); the strace case is left out without one.
set -u
PY=${PY:-python3}
D=$PWD/tests/scripts
W=$D/cudawork.py
CASE_TIMEOUT=12
. "$D/case-run.sh"
if [ -n "${STRACE:-}" ] && [ -x "$STRACE" ]; then
  SLP=${STRACE_LIB:+$STRACE_LIB:}${LD_LIBRARY_PATH:-}
  run strace_delay env LD_LIBRARY_PATH="$SLP" "$STRACE" -f -qq -o /dev/null -e trace=ioctl -P /dev/nvidiactl \
    -e inject=ioctl:delay_enter=6000000:when=5 $PY $W ctx 1 --case strace_delay
fi
CG=/sys/fs/cgroup
freeze() {
  local n=$1 then=$2 g=$CG/nvprobe-sc-$1 p rc
  mkdir -p $g 2>/dev/null && [ -f $g/cgroup.freeze ] || { echo "== $n: no cgroup v2 freezer"; return; }
  sh -c "echo \$\$ >$g/cgroup.procs; exec $PY $W ctx 1 --case $n" >/tmp/nvprobe-sc-$n.txt 2>&1 &
  p=$!
  sleep 0.15; echo 1 >$g/cgroup.freeze
  sleep 6
  if [ "$then" = kill ]; then echo 1 >$g/cgroup.kill; else echo 0 >$g/cgroup.freeze; fi
  wait $p; rc=$?
  echo "== $n: $(tail -1 /tmp/nvprobe-sc-$n.txt) (exit $rc)"
  rm -f /tmp/nvprobe-sc-$n.txt
  sleep 0.2; rmdir $g 2>/dev/null
}
freeze freeze_thaw thaw
freeze freeze_kill kill
# /proc and /sys hidden (proc_unavailable, a driver file's hint).
hide() { # $1 case, $2 mount command, then the workload (unseen3's)
  local n=$1 m=$2; shift 2
  run "$n" unshare -m --propagation private sh -c "$m && exec $* --case $n"
}
hide proc_hidden "mount -t tmpfs none /proc" $PY $W ctx 1
hide sys_hidden "mount -t tmpfs none /sys" $PY $W ctx 1
# The kernel's audit line naming a kill-thread action's call.
run ioctl_killthread $PY $D/seccomp-cuinit.py nr:16:killthread --case ioctl_killthread
dmesg | grep 'type=1326' | tail -3
exit 0
