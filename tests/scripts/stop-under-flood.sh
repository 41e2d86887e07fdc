#!/usr/bin/env bash
# Issue 11: how long nvprobe takes from SIGINT to exit while 8 processes
# flood it with traced ioctls (on /dev/null declared ctl). nvprobe and
# nvbench in .dev/bin. Prints one line per run; if nvprobe is still there
# after 60 s, what its threads are doing, and then it is killed.
set -u
B=.dev/bin/nvbench
NV=.dev/bin/nvprobe
FL=${TMPDIR:-/tmp}/nvprobe-flood
mkdir -p $FL
for run in 1 2; do
  rm -f $FL/fl.ndjson
  $NV watch --json -o $FL/fl.ndjson --force --device /dev/null=ctl 2>$FL/fl.err & p=$!
  for i in $(seq 200); do grep -q '"type":"start"' $FL/fl.ndjson 2>/dev/null && break; sleep 0.05; done
  fl=()
  for i in 1 2 3 4 5 6 7 8; do $B --iters 1000000000000 --batches 1 ioctl --path /dev/null --cmd c020462a >/dev/null & fl+=($!); done
  sleep 3
  t0=$(date +%s.%N); kill -INT $p
  for i in $(seq 600); do kill -0 $p 2>/dev/null || break; sleep 0.1
    if [ $((i % 100)) = 0 ]; then
      echo "  after $((i / 10)) s: nvprobe still running, $(du -m $FL/fl.ndjson | cut -f1) MB written; threads:"
      for t in /proc/$p/task/*; do echo "    $(cat $t/comm) $(awk '{print $3}' $t/stat) $(cat $t/wchan 2>/dev/null)"; done
    fi
  done
  if kill -0 $p 2>/dev/null; then echo "  run $run: still running 60 s after SIGINT; killed"; kill -9 $p; fi
  wait $p; rc=$?; t1=$(date +%s.%N)
  echo "run $run: SIGINT -> exit $(python3 -c "print(round($t1 - $t0, 2))") s, exit code $rc, $(grep -c . $FL/fl.ndjson) records; $(grep -E "stopped|lost|unread" $FL/fl.err | tr '\n' ' ')"
  kill ${fl[@]} 2>/dev/null; wait ${fl[@]} 2>/dev/null
done
rm -rf $FL
