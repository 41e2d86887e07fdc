#!/usr/bin/env bash
# The ninth batch of start-ups under conditions no rule was written for
# (written before the device run): odd shapes of process (the main thread
# gone while another starts CUDA; cpuid made to fault; a seccomp trap at
# the escapes with a SIGSYS handler; root dropping to nobody after loading
# libcuda) and odd settings (CUDA_MPS_PIPE_DIRECTORY a file,
# CUDA_DEVICE_ORDER junk, a 4 KiB /dev/shm, an LD_AUDIT library that does
# not exist, one CPU). Each case is tagged `--case NAME` and prints
# "== NAME: {…}" (its last line of output, or why it ended). Recorded by
# record-unseen.sh 9.
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
P=$D/unseenwork9.py
CASE_TIMEOUT=20
. "$D/case-run.sh"
run ok $PY $W ctx 1 --case ok
run main_exited $PY $P main_exited --case main_exited
run cpuid_fault $PY $P cpuid_fault --case cpuid_fault
run trap_handled $PY $P trap_handled --case trap_handled
run setuid $PY $P setuid --case setuid
run mps_pipe_file env CUDA_MPS_PIPE_DIRECTORY=/dev/null $PY $W ctx 1 --case mps_pipe_file
run device_order_junk env CUDA_DEVICE_ORDER=junk $PY $W ctx 1 --case device_order_junk
run shm_tiny unshare -m --propagation private sh -c "mount -t tmpfs -o size=4k none /dev/shm && exec $PY $W ctx 1 --case shm_tiny"
run ld_audit_missing env LD_AUDIT=/nonexistent/libaudit.so $PY $W ctx 1 --case ld_audit_missing
run one_cpu taskset -c 0 $PY $W ctx 1 --case one_cpu
exit 0
