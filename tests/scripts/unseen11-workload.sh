#!/usr/bin/env bash
# The eleventh batch of start-ups under conditions no rule was written for
# (written before the device run): more of the start-up disturbed from
# inside its own process: a double close that lands on /dev/nvidiactl's
# descriptor, subprocesses spawned with close_fds all through the start-up
# (their close_range is the child's, not the start-up's), and the
# open-file limit lowered by another thread once /dev/nvidiactl is open.
# Each case is tagged `--case NAME` and prints "== NAME: {…}". Recorded by
# record-unseen.sh 11 (unseenwork10.py's modes).
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
P=$D/unseenwork10.py
CASE_TIMEOUT=30
. "$D/case-run.sh"
run ok $PY $W ctx 1 --case ok
run double_close $PY $P double_close --case double_close
run double_close2 $PY $P double_close --case double_close2
run spawn_closefds $PY $P spawn_closefds --case spawn_closefds
run nofile_lowered $PY $P nofile_lowered --case nofile_lowered
exit 0
