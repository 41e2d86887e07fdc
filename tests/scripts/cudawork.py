#!/usr/bin/env python3
"""CUDA workloads for recording fixtures and benchmarks on the GPU machine.

Only ctypes and libcuda: no toolkit needed. Prints one JSON line with the
CUresult values and the time of the measured part (the loop, not Python's
start-up).

  cudawork.py cuinit            cuInit(0) + cuDeviceGetCount
  cudawork.py ctx N             N x cuCtxCreate/cuCtxDestroy on device 0
  cudawork.py mem N             N x cuMemAlloc(64 MiB)/cuMemFree in one context
  cudawork.py torch             torch.cuda.init() (torch reaches libcuda through cudart)
  cudawork.py forkchild         cuInit, then fork: the child calls cuDeviceGetCount
                                without cuInit (CUDA does not survive fork)

  --case NAME anywhere is ignored (it tags the command line for the
  recordings); CUDAWORK_LIB=PATH loads that libcuda instead.
"""
import os
import ctypes
import json
import sys
import time


def lib():
    if os.environ.get("CUDAWORK_LIB"):
        return ctypes.CDLL(os.environ["CUDAWORK_LIB"])
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    raise SystemExit(json.dumps({"error": "libcuda not found"}))


def main():
    args = list(sys.argv[1:])
    if "--case" in args:
        i = args.index("--case")
        del args[i : i + 2]
    mode = args[0]
    n = int(args[1]) if len(args) > 1 else 1
    out = {"mode": mode, "n": n}
    if mode == "torch":
        t0 = time.perf_counter()
        import torch

        torch.cuda.init()
        out["device_count"] = torch.cuda.device_count()
        out["seconds"] = time.perf_counter() - t0
        print(json.dumps(out))
        return
    cu = lib()
    if mode == "forkchild":
        out["cuInit"] = cu.cuInit(0)
        pid = os.fork()
        if pid == 0:
            count = ctypes.c_int(-1)
            r = cu.cuDeviceGetCount(ctypes.byref(count))
            print(json.dumps({"child_cuDeviceGetCount": r}))
            os._exit(1 if r else 0)
        out["child_status"] = os.waitpid(pid, 0)[1]
        print(json.dumps(out))
        return
    t0 = time.perf_counter()
    out["cuInit"] = cu.cuInit(0)
    out["cuInit_seconds"] = time.perf_counter() - t0
    count = ctypes.c_int(-1)
    out["cuDeviceGetCount"] = cu.cuDeviceGetCount(ctypes.byref(count))
    out["device_count"] = count.value
    if mode == "cuinit" or out["cuInit"] != 0 or count.value < 1:
        print(json.dumps(out))
        return
    dev = ctypes.c_int()
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p()
    if mode == "ctx":
        t0 = time.perf_counter()
        for _ in range(n):
            r = cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)
            if r != 0:
                out["cuCtxCreate"] = r
                break
            cu.cuCtxDestroy_v2(ctx)
        out["seconds"] = time.perf_counter() - t0
    elif mode == "mem":
        out["cuCtxCreate"] = cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)
        ptr = ctypes.c_uint64()
        t0 = time.perf_counter()
        for _ in range(n):
            r = cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(64 << 20))
            if r != 0:
                out["cuMemAlloc"] = r
                break
            cu.cuMemFree_v2(ptr)
        out["seconds"] = time.perf_counter() - t0
        cu.cuCtxDestroy_v2(ctx)
    print(json.dumps(out))


main()
