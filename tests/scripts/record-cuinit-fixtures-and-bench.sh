#!/usr/bin/env bash
# Record the first real-driver fixtures (syscall layer) and run the
# benchmarks on a GPU host: host facts, cuInit / 3 contexts / 20
# allocations / torch start-up, cuInit's failure scenarios, cargo xtask bench
# --gpu.
#
# Runs from the repository root, with prebuilt binaries in
# .dev/bin (nvprobe, nvbench, xtask, strace) and strace's libraries in
# .dev/lib. Writes into $OUT:
#   host.txt          driver, nodes, kernel, hook symbols, module BTF presence
#   fixtures.tar.gz   nvprobe --json --raw recordings of real CUDA start-ups
#                     (record: cuinit-ctypes, ctx3-ctypes, mem20-ctypes, torch-init)
#   fixtures2.tar.gz  failure scenarios (scenarios: novisible, uvm-masked,
#                     timeout-kill, concurrent16)
#   cuinit.txt        the same cuInit in text mode
#   bench-gpu.md/json interleaved benchmarks (cargo xtask bench --gpu)
#   btf.tar.gz        /sys/kernel/btf/nvidia{,_uvm} (for the driver-hook tier)
#   log.txt           everything else
# Usage: tests/scripts/record-cuinit-fixtures-and-bench.sh [record,scenarios,bench] [rounds]
# (default: record,bench; 5 rounds)
set -u
OUT=${OUT:?OUT must be set}
BIN=$PWD/.dev/bin
export PATH=$BIN:$PATH
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
PY=${PY:-python3}
WHAT=${1:-record,bench}
ROUNDS=${2:-5}
exec > >(tee -a "$OUT/log.txt") 2>&1

{
  echo "== date"; date -u
  echo "== uname"; uname -a
  echo "== driver"; cat /proc/driver/nvidia/version
  echo "== /sys/module/nvidia/version"; cat /sys/module/nvidia/version 2>&1
  echo "== nvidia-smi"; nvidia-smi -L 2>&1; nvidia-smi --query-gpu=name,pci.bus_id,persistence_mode,driver_version --format=csv 2>&1
  echo "== /proc/devices"; cat /proc/devices
  echo "== nodes"; ls -l /dev/nvidia* /dev/nvidia-caps 2>&1
  echo "== uvm params"; grep -r . /sys/module/nvidia_uvm/parameters/ 2>&1 | head -50
  echo "== /proc/driver/nvidia/params"; cat /proc/driver/nvidia/params 2>&1 | head -80
  echo "== btf"; ls -la /sys/kernel/btf/ | grep -i nv
  echo "== kallsyms hook symbols"
  grep -wE 'nvidia_unlocked_ioctl|nvidia_frontend_unlocked_ioctl|nvidia_ioctl|rm_ioctl|RmIoctl|nvidia_open|nvidia_close|rm_init_adapter|uvm_unlocked_ioctl_entry|uvm_unlocked_ioctl|uvm_ioctl|uvm_va_space_create|uvm_api_register_gpu|uvm_va_space_register_gpu|uvm_gpu_retain_by_uuid|uvm_pmm_devmem_init|uvm_hmm_va_space_initialize|uvm_hmm_is_enabled|nvUvmInterfaceRegisterGpu|uvm_api_initialize|uvm_api_mm_initialize|hmm_range_fault|memremap_pages|request_free_mem_region|__mmu_notifier_register' /proc/kallsyms 2>&1 | awk '{print $2, $3, $4}'
  echo "== uvm_hmm symbols: $(grep -c ' uvm_hmm_' /proc/kallsyms)"
  echo "== kprobe PMU"; ls /sys/bus/event_source/devices/
  echo "== libcuda"; ls -la /usr/local/nvidia/lib64/libcuda* 2>&1
  echo "== tracefs"; mount | grep -E 'tracefs|debugfs' || echo "not mounted"
} > "$OUT/host.txt" 2>&1

if [[ $WHAT == *record* ]]; then
  mkdir -p /tmp/fx
  record() { # name, command...
    local name=$1; shift
    nvprobe watch --json --raw -o /tmp/fx/$name.ndjson 2>/tmp/fx/$name.stderr &
    local p=$!
    for _ in $(seq 300); do grep -q '"type":"start"' /tmp/fx/$name.ndjson 2>/dev/null && break; sleep 0.05; done
    echo "== record $name: $*"
    "$@" 2>&1 | tail -3
    sleep 0.5
    kill -INT $p; wait $p; echo "nvprobe rc=$?"
    cat /tmp/fx/$name.stderr
    tail -c 1500 /tmp/fx/$name.ndjson; echo
  }
  record cuinit-ctypes $PY tests/scripts/cudawork.py cuinit
  record ctx3-ctypes $PY tests/scripts/cudawork.py ctx 3
  record mem20-ctypes $PY tests/scripts/cudawork.py mem 20
  record torch-init $PY tests/scripts/cudawork.py torch
  # Text mode, as a person sees it.
  nvprobe watch -o $OUT/cuinit.txt 2>>$OUT/cuinit.txt & p=$!
  sleep 2; $PY tests/scripts/cudawork.py cuinit; sleep 0.5; kill -INT $p; wait $p
  # Error paths on the real machine: not root, bad flags.
  echo "== not root"; setpriv --reuid=65534 --regid=65534 --clear-groups nvprobe watch --duration 1; echo "rc=$?"
  echo "== bad ringbuf"; nvprobe watch --ringbuf-size 1000; echo "rc=$?"
  tar -C /tmp/fx -czf $OUT/fixtures.tar.gz .
  tar -C /sys/kernel/btf -czf $OUT/btf.tar.gz nvidia nvidia_uvm 2>/dev/null || echo "no module BTF"
fi

if [[ $WHAT == *scenarios* ]]; then
  # Failure scenarios (real driver, real libcuda) for the cuInit stage
  # tracker: no visible devices, /dev/nvidia-uvm masked by another device,
  # a harness timeout killing cuInit, 16 processes at once.
  mkdir -p /tmp/fx2
  rec2() {
    local name=$1; shift
    nvprobe watch --json --raw -o /tmp/fx2/$name.ndjson 2>/tmp/fx2/$name.stderr &
    local p=$!
    for _ in $(seq 300); do grep -q '"type":"start"' /tmp/fx2/$name.ndjson 2>/dev/null && break; sleep 0.05; done
    echo "== scenario $name: $*"
    "$@" 2>&1 | tail -3; echo "exit=${PIPESTATUS[0]}"
    sleep 0.5
    kill -INT $p; wait $p
    cat /tmp/fx2/$name.stderr
  }
  rec2 novisible env CUDA_VISIBLE_DEVICES= $PY tests/scripts/cudawork.py cuinit
  rec2 uvm-masked unshare -m sh -c "mount --bind /dev/null /dev/nvidia-uvm && exec $PY tests/scripts/cudawork.py cuinit"
  rec2 timeout-kill timeout -s TERM 0.15 $PY tests/scripts/cudawork.py cuinit
  rec2 concurrent16 sh -c "for i in \$(seq 16); do $PY tests/scripts/cudawork.py cuinit & done; wait"
  # The masked node as a person sees it.
  nvprobe decode /tmp/fx2/uvm-masked.ndjson | grep -E 'nvidia-uvm|!!' | head -20
  tar -C /tmp/fx2 -czf $OUT/fixtures2.tar.gz .
fi

if [[ $WHAT == *bench* ]]; then
  echo "== bench"
  xtask bench --gpu --rounds $ROUNDS --bin-dir $BIN --strace $BIN/strace \
    --strace-libs $PWD/.dev/lib:/usr/local/nvidia/lib64 --python $PY \
    --cudawork tests/scripts/cudawork.py --json-out $OUT/bench-gpu.json > $OUT/bench-gpu.md
  echo "bench rc=$?"
  cat $OUT/bench-gpu.md
fi
