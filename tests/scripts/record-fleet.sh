#!/usr/bin/env bash
# Issue 12 on a GPU host (root, the real driver), with nvprobe, nvbench,
# xtask and strace in .dev/bin and strace's libraries in .dev/lib:
#   1. two nvprobes at once over the failure catalogue (catalogue-workload.sh,
#      with docker- and Kubernetes-named cgroups) and a steady allocation
#      loop: `--json --raw` (everything: the fixture) and the always-on set-up
#      `--events verdicts --format otlp-json --metrics` (what a fleet ships);
#      /metrics scraped while both run; the OTLP file rotated and SIGHUP sent
#      before the last start-up;
#   2. (BENCH=1) `xtask bench --gpu`: untraced, nvprobe, nvprobe --events
#      verdicts and strace, interleaved.
# Everything lands in $OUT/fleet.tar.gz (one archive to copy back).
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
PY=${PY:-python3}
export PY
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
D=$(mktemp -d /tmp/fleet.XXXXXX)
wait_for() { # $1 file, $2 pattern
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  echo "timed out waiting for $2 in $1" >&2
}
scrape() { $PY -c 'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:9477/metrics", timeout=5).read().decode())'; }

$BIN/nvprobe watch --json --raw --stall-after 2 -o $D/all.ndjson 2>$D/all.stderr &
pa=$!
$BIN/nvprobe watch --events verdicts --format otlp-json --stall-after 2 \
  --metrics 127.0.0.1:9477 -o $D/verdicts.otlp.json 2>$D/verdicts.stderr &
pv=$!
wait_for $D/all.ndjson '"type":"start"'
wait_for $D/verdicts.otlp.json 'nvprobe.start'
scrape >$D/metrics-start.txt
bash tests/scripts/catalogue-workload.sh 2>$D/workload.log
# A steady loop after a successful cuInit: its calls stay in the kernel at
# --events verdicts.
$PY tests/scripts/cudawork.py mem 2000 --case steady >>$D/workload.log 2>&1
sleep 1.5
scrape >$D/metrics.txt
# logrotate's way: move the file away, SIGHUP, go on.
mv $D/verdicts.otlp.json $D/verdicts.otlp.json.1
kill -HUP $pv
wait_for $D/verdicts.otlp.json '.'   # the new file exists once reopened
sleep 0.3
env CUDA_VISIBLE_DEVICES=-1 $PY tests/scripts/cudawork.py cuinit --case after_rotation >>$D/workload.log 2>&1
sleep 1.5
kill -INT $pa $pv
wait $pa $pv
ls -la $D >$D/ls.txt
$BIN/nvprobe decode $D/all.ndjson >$D/all.txt 2>&1
$BIN/nvprobe decode $D/all.ndjson --events verdicts --json -o $D/all-as-verdicts.ndjson --force 2>&1
echo "== verdicts in containers (text)"
grep -E "^==|^   (process|gpu|!|~)" $D/all.txt | grep -B1 -A3 -E "docker|kubernetes|containerd" | cut -c1-600 | head -60
echo "== metrics"
grep -E "^nvprobe_(verdicts|quieted|processes|ringbuf|lost|stalls|signals)" $D/metrics.txt | head -40
echo "== sizes"; wc -c $D/all.ndjson $D/verdicts.otlp.json.1 $D/verdicts.otlp.json $D/all-as-verdicts.ndjson
tail -3 $D/verdicts.stderr
if [ "${BENCH:-0}" = 1 ]; then
  $BIN/xtask bench --gpu --rounds ${ROUNDS:-3} --bin-dir $BIN --strace $BIN/strace \
    --strace-libs $PWD/.dev/lib:/usr/local/nvidia/lib64 --python $PY \
    --cudawork tests/scripts/cudawork.py --json-out $D/bench-gpu.json >$D/bench-gpu.md 2>$D/bench-gpu.log
  echo "bench rc=$?"; cat $D/bench-gpu.md
fi
tar -C $D -czf $OUT/fleet.tar.gz .
