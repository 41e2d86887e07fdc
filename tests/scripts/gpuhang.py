#!/usr/bin/env python3
"""Run-time hangs made on purpose (issue 39), for fixtures and benchmarks.

Only ctypes, libcuda and (for nccl) a libnccl: the kernel is PTX,
JIT-compiled by the driver. A kernel spins on a flag in host-mapped
memory, so the synchronisation after it waits until a thread of this
process sets the flag, RELEASE seconds later: a hang that ends.

  gpuhang.py spin RELEASE      cuCtxSynchronize after the spinning kernel
                               (libcuda's default: it spins in user space)
  gpuhang.py blocking RELEASE  the same in a context made with
                               CU_CTX_SCHED_BLOCKING_SYNC (it sleeps in the
                               driver)
  gpuhang.py nccl N RELEASE    a single-rank NCCL communicator: N
                               ncclAllReduce and a grouped send/receive to
                               itself, then the spinning kernel and one more
                               all-reduce on the same stream, then
                               cuStreamSynchronize
  gpuhang.py ncclbench N       N ncclAllReduce of one float on one stream,
                               then a synchronisation: "per_call_ns"

It prints one JSON line: each call with its result and CLOCK_MONOTONIC
times (ns). --case NAME anywhere is ignored (it tags the command line).
nccl and ncclbench wait 0.5 s between loading libnccl and using it, as a
framework that loaded it at import does; --nccl-at-once uses it at once
(its ncclCommInitRank then begins before nvprobe has hooked the copy).
"""
import ctypes
import glob
import json
import os
import sys
import threading
import time

PTX = b"""
.version 8.0
.target sm_90
.address_size 64

.visible .entry nvprobe_spin(.param .u64 p)
{
  .reg .u64 %rd<2>;
  .reg .u32 %r<2>;
  .reg .pred %q;
  ld.param.u64 %rd1, [p];
LOOP:
  ld.volatile.global.u32 %r1, [%rd1];
  setp.eq.u32 %q, %r1, 0;
  @%q bra LOOP;
  ret;
}
\0"""

CU_CTX_SCHED_BLOCKING_SYNC = 0x4
CU_MEMHOSTALLOC_PORTABLE = 0x1
CU_MEMHOSTALLOC_DEVICEMAP = 0x2
NCCL_FLOAT32 = 7
NCCL_SUM = 0


def now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Calls:
    def __init__(self):
        self.log = []

    def __call__(self, lib, name, *args):
        t0 = now()
        r = getattr(lib, name)(*args)
        self.log.append({"call": name, "result": r, "start_ns": t0, "end_ns": now()})
        return r


def libnccl():
    """The libnccl PyTorch's wheels carry (nvidia-nccl-cu12/13), else one
    the loader finds."""
    for pat in ("/opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl*/lib/libnccl.so*",
                "/usr/local/lib/python3*/dist-packages/nvidia/nccl*/lib/libnccl.so*",
                "/usr/lib/x86_64-linux-gnu/libnccl.so*"):
        for p in sorted(glob.glob(pat)):
            return ctypes.CDLL(p), p
    return ctypes.CDLL("libnccl.so.2"), "libnccl.so.2"


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def main():
    args = list(sys.argv[1:])
    if "--case" in args:
        i = args.index("--case")
        del args[i : i + 2]
    args = [a for a in args if a != "--nccl-at-once"]
    mode = args[0]
    cu = ctypes.CDLL("libcuda.so.1")
    cu.cuLaunchKernel.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
        ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
        ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
    ]
    cu.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
    c = Calls()
    out = {"mode": mode, "pid": os.getpid()}
    c(cu, "cuInit", 0)
    dev = ctypes.c_int()
    c(cu, "cuDeviceGet", ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p()
    if mode == "blocking":
        c(cu, "cuCtxCreate_v2", ctypes.byref(ctx), CU_CTX_SCHED_BLOCKING_SYNC, dev)
    else:
        # NCCL's runtime uses the primary context: make it current.
        c(cu, "cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        c(cu, "cuCtxSetCurrent", ctx)
    mod = ctypes.c_void_p()
    c(cu, "cuModuleLoadData", ctypes.byref(mod), PTX)
    fn = ctypes.c_void_p()
    c(cu, "cuModuleGetFunction", ctypes.byref(fn), mod, b"nvprobe_spin")
    host = ctypes.c_void_p()
    c(cu, "cuMemHostAlloc", ctypes.byref(host), ctypes.c_size_t(4),
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)
    flag = ctypes.c_uint32.from_address(host.value)
    flag.value = 0
    dflag = ctypes.c_uint64()
    c(cu, "cuMemHostGetDevicePointer_v2", ctypes.byref(dflag), host, 0)
    stream = ctypes.c_void_p()
    c(cu, "cuStreamCreate", ctypes.byref(stream), 0)

    def spin_on(s):
        v = ctypes.c_uint64(dflag.value)
        arr = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(v), ctypes.c_void_p))
        return c(cu, "cuLaunchKernel", fn, 1, 1, 1, 1, 1, 1, 0, s, arr, None)

    def release_after(secs):
        def go():
            time.sleep(secs)
            out["released_ns"] = now()
            flag.value = 1
        t = threading.Thread(target=go, daemon=True)
        t.start()
        return t

    if mode in ("spin", "blocking"):
        secs = float(args[1])
        spin_on(None)
        t = release_after(secs)
        c(cu, "cuCtxSynchronize")
        t.join()
    elif mode in ("nccl", "ncclbench"):
        nccl, path = libnccl()
        out["libnccl"] = path
        # A framework loads libnccl with itself (PyTorch at import), long
        # before its first communicator; a copy loaded and used at once
        # is hooked 17-33 ms after its open (the late-hook window of
        # docs/FAILURE-CATALOGUE.md), its ncclCommInitRank already begun.
        # --nccl-at-once keeps that case (the H100 recording of
        # 2026-12-06 03:35 was made so).
        if "--nccl-at-once" not in sys.argv:
            time.sleep(0.5)
        nccl.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                                          UniqueId, ctypes.c_int]
        ar_types = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        nccl.ncclAllReduce.argtypes = ar_types
        p2p = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
               ctypes.c_void_p]
        nccl.ncclSend.argtypes = p2p
        nccl.ncclRecv.argtypes = p2p
        uid = UniqueId()
        c(nccl, "ncclGetUniqueId", ctypes.byref(uid))
        comm = ctypes.c_void_p()
        c(nccl, "ncclCommInitRank", ctypes.byref(comm), 1, uid, 0)
        buf = ctypes.c_uint64()
        c(cu, "cuMemAlloc_v2", ctypes.byref(buf), ctypes.c_size_t(1 << 22))
        n = int(args[1])
        if mode == "ncclbench":
            t0 = time.perf_counter()
            bad = sum(nccl.ncclAllReduce(buf.value, buf.value, 1, NCCL_FLOAT32, NCCL_SUM,
                                         comm, stream) != 0 for _ in range(n))
            cu.cuStreamSynchronize(stream)
            out["seconds"] = time.perf_counter() - t0
            out["per_call_ns"] = out["seconds"] / max(n, 1) * 1e9
            out["failed"] = bad
            print(json.dumps(out))
            return
        for k in range(n):
            c(nccl, "ncclAllReduce", buf.value, buf.value, 1024 + k, NCCL_FLOAT32, NCCL_SUM,
              comm, stream)
        c(nccl, "ncclGroupStart")
        c(nccl, "ncclSend", buf.value, 16, NCCL_FLOAT32, 0, comm, stream)
        c(nccl, "ncclRecv", buf.value + 4096, 16, NCCL_FLOAT32, 0, comm, stream)
        c(nccl, "ncclGroupEnd")
        c(cu, "cuStreamSynchronize", stream)
        spin_on(stream)
        c(nccl, "ncclAllReduce", buf.value, buf.value, 1 << 20, NCCL_FLOAT32, NCCL_SUM, comm,
          stream)
        t = release_after(float(args[2]))
        c(cu, "cuStreamSynchronize", stream)
        t.join()
        c(nccl, "ncclCommDestroy", comm)
    else:
        raise SystemExit(json.dumps({"error": f"unknown mode {mode}"}))
    out["calls"] = c.log
    print(json.dumps(out))


main()
