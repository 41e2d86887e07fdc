#!/usr/bin/env bash
# Always-on memory and CPU (issue 12), on a GPU host (root, the real
# driver): two nvprobes side by side on the same host for $SECS seconds, one
# as a fleet would run it (--events verdicts --format otlp-json --metrics),
# one with everything (--json -o), while three loops start short CUDA
# processes back to back (python ctypes: cuInit, then exit) and a fourth
# runs nvidia-smi -L (a driver client). Each nvprobe's VmRSS and VmHWM (kB),
# open fds and CPU seconds (user+system) are sampled every 10 s.
# nvprobe in .dev/bin. Writes $OUT/always-on.tar.gz.
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
PY=${PY:-python3}
SECS=${SECS:-540}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
D=$(mktemp -d /tmp/always.XXXXXX)
$BIN/nvprobe watch --events verdicts --format otlp-json --metrics 127.0.0.1:9477 \
  -o $D/always.otlp.json 2>$D/stderr &
p=$!
$BIN/nvprobe watch --json -o $D/all.ndjson 2>$D/all.stderr &
pa=$!
for _ in $(seq 600); do grep -q nvprobe.start $D/always.otlp.json 2>/dev/null && break; sleep 0.05; done
for _ in $(seq 600); do grep -q '"type":"start"' $D/all.ndjson 2>/dev/null && break; sleep 0.05; done
TCK=$(getconf CLK_TCK)
sample() { # pid -> "VmRSS VmHWM fds cpu_s"
  echo "$(awk '/^VmRSS|^VmHWM/{printf "%s ", $2}' /proc/$1/status)$(ls /proc/$1/fd | wc -l) $(awk -v t=$TCK '{printf "%.2f", ($14+$15)/t}' /proc/$1/stat)"
}
end=$((SECONDS + SECS))
for w in 1 2 3; do
  ( n=0; while [ $SECONDS -lt $end ]; do
      $PY tests/scripts/cudawork.py cuinit --case loop$w >/dev/null 2>&1; n=$((n + 1))
    done; echo $n >$D/count.py$w ) &
done
( n=0; while [ $SECONDS -lt $end ]; do
    /usr/local/nvidia/bin/nvidia-smi -L >/dev/null 2>&1; n=$((n + 1))
  done; echo $n >$D/count.smi ) &
echo "# seconds | verdicts: VmRSS_kB VmHWM_kB fds cpu_s | all: VmRSS_kB VmHWM_kB fds cpu_s" >$D/rss.txt
while [ $SECONDS -lt $end ]; do
  echo "$SECONDS | $(sample $p) | $(sample $pa)" >>$D/rss.txt
  sleep 10
done
wait $(jobs -p | grep -v -e "^$p$" -e "^$pa$") 2>/dev/null
$PY -c 'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:9477/metrics", timeout=5).read().decode())' >$D/metrics.txt
echo "$SECONDS | $(sample $p) | $(sample $pa)" >>$D/rss.txt
kill -INT $p $pa
wait $p; echo "exit $?" >>$D/stderr
wait $pa; echo "exit $?" >>$D/all.stderr
tail -1 $D/always.otlp.json >$D/summary.otlp.json
tail -1 $D/all.ndjson >$D/summary-all.ndjson
wc -c $D/all.ndjson $D/always.otlp.json >$D/sizes.txt
rm -f $D/all.ndjson
cat $D/count.*; cat $D/rss.txt
grep -E "^nvprobe_(verdicts_total|quieted|processes|ringbuf|lost|events_total)" $D/metrics.txt | head -30
wc -l $D/always.otlp.json; wc -c $D/always.otlp.json
tail -3 $D/stderr
gzip -1 $D/always.otlp.json
tar -C $D -czf $OUT/always-on.tar.gz .
