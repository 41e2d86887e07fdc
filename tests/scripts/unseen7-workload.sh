#!/usr/bin/env bash
# The seventh batch of start-ups under conditions no rule was written for
# (written before the device run): strace answering libcuda's calls itself
# (-e inject: the open of nvidiactl, nvidia-uvm or nvidia0 refused; an
# escape or UVM_INITIALIZE failed with EIO; thread creation refused; a
# mapping of nvidiactl refused; a signal injected at an escape; a 6 s
# delay before an escape, past the 5 s stall report); a user namespace
# mapping root; CUDA_VISIBLE_DEVICES as a UUID prefix and with a leading
# space; an MPS control socket that never answers, or closes at once. Each case is tagged `--case NAME` and prints "== NAME: {…}" (its
# last line of output, or why it ended). Recorded by record-unseen.sh 7.
# $STRACE names a strace binary (its libraries in $STRACE_LIB): the cases
# that need one are left out without it.
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
CASE_TIMEOUT=12
. "$D/case-run.sh"
run ok $PY $W ctx 1 --case ok
if [ -n "${STRACE:-}" ] && [ -x "$STRACE" ]; then
  SLP=${STRACE_LIB:+$STRACE_LIB:}${LD_LIBRARY_PATH:-}
  st() { # st NAME STRACE-OPTIONS… -- : the workload under strace
    local n=$1; shift
    local opts=()
    while [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    run "$n" env LD_LIBRARY_PATH="$SLP" "$STRACE" -f -qq -o /dev/null "${opts[@]}" \
      $PY $W ctx 1 --case "$n"
  }
  st strace_ctl_open -e trace=openat -P /dev/nvidiactl -e inject=openat:error=EACCES --
  st strace_uvm_open -e trace=openat -P /dev/nvidia-uvm -e inject=openat:error=ENOENT --
  st strace_gpu_open -e trace=openat -P /dev/nvidia0 -e inject=openat:error=EPERM --
  st strace_escape -e trace=ioctl -P /dev/nvidiactl -e inject=ioctl:error=EIO:when=3 --
  st strace_uvm_init -e trace=ioctl -P /dev/nvidia-uvm -e inject=ioctl:error=EIO:when=1 --
  st strace_clone -e trace=clone,clone3 -e inject=clone3:error=EAGAIN -e inject=clone:error=EAGAIN --
  st strace_mmap -e trace=mmap -P /dev/nvidiactl -e inject=mmap:error=ENOMEM --
  st strace_signal -e trace=ioctl -P /dev/nvidiactl -e inject=ioctl:signal=SIGUSR1:when=10 --
  st strace_delay -e trace=ioctl -P /dev/nvidiactl -e inject=ioctl:delay_enter=6000000:when=5 --
fi
run userns_root unshare -U -r $PY $W ctx 1 --case userns_root
U=$(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null | head -1)
if [ -n "$U" ]; then
  run visible_prefix env CUDA_VISIBLE_DEVICES="${U:0:12}" $PY $W ctx 1 --case visible_prefix
fi
run visible_space env CUDA_VISIBLE_DEVICES=" 0" $PY $W ctx 1 --case visible_space
# An MPS pipe directory whose control socket a process listens on but
# never answers (a hung daemon), or accepts and closes (one that crashed
# mid-handshake); the first under a harness's 6 s timeout.
mps() { # mps NAME MODE: MODE mute or close
  local n=$1 mode=$2 T l
  T=$(mktemp -d)
  $PY -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1] + "/control")
s.listen(16)
end = time.time() + 20
while time.time() < end:
    if sys.argv[2] == "close":
        s.settimeout(1)
        try:
            c, _ = s.accept()
            c.close()
        except OSError:
            pass
    else:
        time.sleep(0.5)
' "$T" "$mode" &
  l=$!
  for _ in $(seq 50); do [ -S "$T/control" ] && break; sleep 0.05; done
  run "$n" timeout -s TERM 6 env CUDA_MPS_PIPE_DIRECTORY="$T" $PY $W ctx 1 --case "$n"
  kill $l 2>/dev/null; wait $l 2>/dev/null
  rm -rf "$T"
}
mps mps_mute mute
mps mps_closed close
exit 0
