#!/usr/bin/env bash
# The fourth batch of start-ups under conditions no rule was written for
# (written before any rule for them): a harness's timer whose handler
# raises (pytest-timeout's signal method), a graceful stop (a SIGTERM
# handler that exits), the main thread returning while a thread is in
# cuInit, a fault in another thread (SIGSEGV at address 0, SIGBUS past a
# mapped file's end), a child that asked for SIGKILL at its parent's death
# when the parent exits, a harness whose SIGTERM the process ignores and
# whose SIGKILL follows (timeout -k), and eight start-ups at once. Each
# case is tagged `--case NAME` and prints "== NAME: {…}" (its last line of
# output, or why it ended). Recorded by record-unseen.sh 4.
set -u
PY=${PY:-python3}
D=$(cd "$(dirname "$0")" && pwd)
W=$D/cudawork.py
U4=$D/unseenwork4.py
. "$D/case-run.sh"
run ok $PY $W ctx 1 --case ok
for m in alarm_raise term_exit main_exits segv_thread bus_thread pdeath; do
  run $m $PY $U4 $m --case $m
done
# (pdeath's child outlives the run's own process: give it its time.)
sleep 2
# SIGTERM ignored (inherited through the exec), then timeout's SIGKILL.
run term_ignored_kill timeout -s TERM -k 0.1 0.05 sh -c "trap '' TERM; exec $PY $W ctx 1 --case term_ignored_kill"
# Eight start-ups at once.
for i in 1 2 3 4 5 6 7 8; do
  $PY $W ctx 1 --case parallel_$i >/tmp/nvprobe-u4-$i.txt 2>&1 &
done
wait
for i in 1 2 3 4 5 6 7 8; do
  echo "== parallel_$i: $(tail -1 /tmp/nvprobe-u4-$i.txt)"
  rm -f /tmp/nvprobe-u4-$i.txt
done
exit 0
