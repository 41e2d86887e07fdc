#!/usr/bin/env bash
# Record the process-layer fixtures on a GPU host: the cuInit tracker's
# process layer (and libcuda uprobes) on the real driver: signals with and
# without SA_RESTART (h200-*-signals), a fork after cuInit and no visible
# devices (h200-*-rules), 16 concurrent cuInits (h200-*-concurrent16), a
# SIGSTOPped cuInit seen by the stall detector (h200-*-stall-sigstop); and
# host facts for doctor (library version strings, PCI, cgroups, kernel
# config, lockdown) and for the driver-hook tier (BTF of vmlinux and the
# nvidia modules, for the prototypes of the hooked functions: see
# tests/fixtures/gpu-host/h200-*-hook-prototypes.txt).
#
# Writes into $OUT: fixtures3.tar.gz, facts.txt, btf-all.tar.gz, log.txt.
set -u
OUT=${OUT:?}
BIN=$PWD/.dev/bin
PY=${PY:-python3}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
exec > >(tee -a "$OUT/log.txt") 2>&1
mkdir -p /tmp/fx3

rec() { # name, watch-args..., --, command...
  local name=$1; shift
  local args=()
  while [[ $1 != -- ]]; do args+=("$1"); shift; done; shift
  $BIN/nvprobe watch --json --raw "${args[@]}" -o /tmp/fx3/$name.ndjson 2>/tmp/fx3/$name.stderr &
  local p=$!
  for _ in $(seq 300); do grep -q '"type":"start"' /tmp/fx3/$name.ndjson 2>/dev/null && break; sleep 0.05; done
  echo "== $name: $*"
  "$@" 2>&1 | tail -4; echo "exit=${PIPESTATUS[0]}"
  sleep 0.5
  kill -INT $p; wait $p; echo "nvprobe rc=$?"
  cat /tmp/fx3/$name.stderr
  $BIN/nvprobe decode --summary-only /tmp/fx3/$name.ndjson 2>&1 | grep -vE '^\s*$' | cut -c1-400 | head -40
}

# Signals: harness timeout (SIGTERM, default action), SIGALRM from an itimer,
# a handled SIGUSR1 with and without SA_RESTART during cuInit.
rec signals -- sh -c "
  timeout -s TERM 0.15 $PY tests/scripts/cudawork.py cuinit; echo timeout=\$?
  $PY -c \"import signal,ctypes; signal.setitimer(signal.ITIMER_REAL, 0.12); ctypes.CDLL('libcuda.so.1').cuInit(0)\"; echo itimer=\$?
  $PY tests/scripts/sigwork.py restart; $PY tests/scripts/sigwork.py norestart"
# Fork after cuInit; no visible devices.
rec rules -- bash tests/scripts/rules-workload.sh
# 16 at once, process layer and uprobes on.
rec concurrent16 -- sh -c "for i in \$(seq 16); do $PY tests/scripts/cudawork.py cuinit >/dev/null & done; wait"
# A cuInit stopped mid-way (SIGSTOP from another process) for 3 s: the stall
# detector reports it, names the stage, the call and the stop's sender.
rec stall --stall-after 1 -- sh -c "
  $PY tests/scripts/cudawork.py cuinit & c=\$!; sleep 0.12; kill -STOP \$c; sleep 3; kill -CONT \$c; wait \$c"
tar -C /tmp/fx3 -czf $OUT/fixtures3.tar.gz .

{
  echo "== doctor"; $BIN/nvprobe doctor; echo "rc=$?"
  echo "== lockdown"; cat /sys/kernel/security/lockdown 2>&1
  echo "== config"; ls -la /proc/config.gz /boot/config-* 2>&1
  zcat /proc/config.gz 2>/dev/null | grep -E '^(# )?CONFIG_(KPROBES|KPROBE_EVENTS|UPROBES|UPROBE_EVENTS|BPF|BPF_SYSCALL|BPF_JIT|DEBUG_INFO_BTF|DEBUG_INFO_BTF_MODULES|FTRACE|DYNAMIC_FTRACE|FUNCTION_TRACER|HMM_MIRROR|DEVICE_PRIVATE|ZONE_DEVICE|SECURITY_LOCKDOWN_LSM|BPF_LSM|CGROUP_BPF|TRACING|FPROBE)[ =]'
  echo "== event sources"; ls /sys/bus/event_source/devices/
  echo "== libs"; ldconfig -p | grep -E 'libcuda|libnvidia-ml'
  ls -la /usr/local/nvidia/lib64/ | grep -E 'libcuda|nvidia-ml'
  for f in /usr/local/nvidia/lib64/libcuda.so.580.159.04 /usr/local/nvidia/lib64/libnvidia-ml.so.580.159.04; do
    echo "== version strings in $f"
    $PY - "$f" <<'PYEOF'
import re, sys
d = open(sys.argv[1], 'rb').read()
print("size", len(d))
for m in list(re.finditer(rb'580\.159(\.04)?', d))[:12]:
    s = max(0, m.start() - 80); e = m.end() + 40
    print(m.start(), repr(d[s:e]))
for pat in (rb'NVRM version', rb'CUDA Driver', rb'r580', rb'NVIDIA UNIX'):
    for m in list(re.finditer(pat, d))[:3]:
        print(pat, m.start(), repr(d[m.start():m.start()+120]))
PYEOF
  done
  echo "== pci"
  for d in /sys/bus/pci/devices/*; do
    v=$(cat $d/vendor); c=$(cat $d/class)
    echo "$(basename $d) vendor=$v device=$(cat $d/device) class=$c sub=$(cat $d/subsystem_vendor):$(cat $d/subsystem_device) driver=$(basename "$(readlink $d/driver 2>/dev/null)" 2>/dev/null) enable=$(cat $d/enable 2>/dev/null) numa=$(cat $d/numa_node 2>/dev/null)"
  done
  echo "== gpus info"; for f in /proc/driver/nvidia/gpus/*/*; do echo "-- $f"; cat $f 2>&1 | head -30; done
  echo "== persistence"; nvidia-smi -q 2>/dev/null | grep -iE 'persistence|Product Name|Bus Id' | head
  echo "== container"; cat /proc/1/cgroup /proc/self/cgroup; ls -la /.dockerenv /run/.containerenv 2>&1
  cat /proc/1/environ 2>/dev/null | tr '\0' '\n' | grep -iE '^container' ; systemd-detect-virt 2>&1
  echo "== cgroup fs"; mount | grep cgroup; ls /sys/fs/cgroup | head -40
  cat /sys/fs/cgroup/devices.list 2>&1 | head; cat /sys/fs/cgroup/cgroup.controllers 2>&1
  echo "== kmsg"; (dmesg 2>&1 || cat /dev/kmsg) | grep -iE 'nvrm|nvidia|uvm' | tail -40
  echo "== kmsg raw head"; timeout 2 head -c 600 /dev/kmsg; echo
  echo "== module params"; for m in nvidia nvidia_uvm nvidia_modeset; do ls /sys/module/$m/parameters 2>/dev/null | head -80 | tr '\n' ' '; echo; done
  echo "== module taint/version"; cat /sys/module/nvidia/taint /sys/module/nvidia_uvm/version /sys/module/nvidia/srcversion 2>&1
  echo "== users"; getent group video render 2>&1; ls -ln /dev/nvidia* 2>&1
  echo "== /proc/driver/nvidia"; find /proc/driver/nvidia -maxdepth 3 2>&1 | head -40
  echo "== btf sizes"; ls -la /sys/kernel/btf | head; ls /sys/kernel/btf | wc -l
  echo "== kallsyms hook candidates"
  grep -E ' (nvidia_unlocked_ioctl|nvidia_frontend_unlocked_ioctl|nvidia_ioctl|rm_ioctl|nvidia_open|nvidia_close|nvidia_frontend_open|nvidia_frontend_close|rm_init_adapter|nv_open_device|nv_close_device|uvm_unlocked_ioctl_entry|uvm_unlocked_ioctl|uvm_ioctl|uvm_open|uvm_release|uvm_va_space_create|uvm_va_space_register_gpu|uvm_api_register_gpu|uvm_gpu_retain_by_uuid|uvm_api_initialize|uvm_api_mm_initialize|uvm_hmm_[a-z_]+|uvm_pmm_devmem_init|hmm_range_fault|memremap_pages|devm_memremap_pages|request_free_mem_region|mmu_notifier_register|__mmu_notifier_register|mmu_interval_notifier_insert)( |$)' /proc/kallsyms | awk '{print $2, $3, $4}' | sort -u -k2
  echo "== time"; date -u
} > $OUT/facts.txt 2>&1
tar -C /sys/kernel/btf -czf $OUT/btf-all.tar.gz vmlinux nvidia nvidia_uvm 2>&1
ls -la $OUT
