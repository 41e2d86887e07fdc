#!/usr/bin/env bash
# The fifth batch of start-ups under conditions no rule was written for
# (written before any rule for them): a seccomp filter refusing one UVM
# command (UVM_INITIALIZE, UVM_REGISTER_GPU) with EPERM, or mprotect or
# madvise; a libcuda.so.1 first on the library path that is a dangling
# link or a directory; a HOME that cannot be written; the start-up under
# strace -f (ptrace); a SIGINT to the whole process group (Ctrl-C in a
# terminal). Each case is tagged `--case NAME` and prints "== NAME: {…}".
# Recorded by record-unseen.sh 5.
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
SC=$D/seccomp-cuinit.py
. "$D/case-run.sh"
run ok $PY $W ctx 1 --case ok
run uvm_init_eperm $PY $SC ioctl:0x30000001:1 --case uvm_init_eperm
run uvm_register_eperm $PY $SC ioctl:37:1 --case uvm_register_eperm
run mprotect_eperm $PY $SC nr:10:1 --case mprotect_eperm
run madvise_eperm $PY $SC nr:28:1 --case madvise_eperm
T=$(mktemp -d)
mkdir -p "$T/dangling" "$T/dir/libcuda.so.1"
ln -s /nonexistent/libcuda.so.1 "$T/dangling/libcuda.so.1"
run lib_dangling env LD_LIBRARY_PATH="$T/dangling:${LD_LIBRARY_PATH:-}" $PY $W ctx 1 --case lib_dangling
run lib_dir env LD_LIBRARY_PATH="$T/dir:${LD_LIBRARY_PATH:-}" $PY $W ctx 1 --case lib_dir
rm -rf "$T"
run home_unwritable env HOME=/proc/1/nonexistent $PY $W ctx 1 --case home_unwritable
command -v strace >/dev/null && run strace_f strace -f -o /dev/null $PY $W ctx 1 --case strace_f
# Ctrl-C: SIGINT to the process group, 0.12 s in.
# (The shell's background job ignores SIGINT, as a non-interactive
# shell's does; Python, exec'd in the foreground, takes it.)
run sigint_pgrp setsid sh -c "(sleep 0.12; kill -INT -\$\$) & exec $PY $W ctx 1 --case sigint_pgrp"
exit 0
