#!/usr/bin/env python3
"""CUDA workloads for recording fixtures and benchmarks on a GPU host.

Only ctypes and libcuda: no toolkit needed. Prints one JSON line with the
CUresult values and the time of the measured part (the loop, not Python's
start-up).

  cudawork.py cuinit            cuInit(0) + cuDeviceGetCount
  cudawork.py ctx N             N x cuCtxCreate/cuCtxDestroy on device 0
  cudawork.py ctxall           a context on every visible device, one after the other
  cudawork.py mem N             N x cuMemAlloc(64 MiB)/cuMemFree in one context
  cudawork.py torch             torch.cuda.init() (torch reaches libcuda through cudart)
  cudawork.py forkchild         cuInit, then fork: the child calls cuDeviceGetCount
                                without cuInit (CUDA does not survive fork)
  cudawork.py forkdrv           cuInit and a context, then fork: the child calls
                                cuCtxSynchronize (not a start-up call), then
                                cuMemAlloc_v2
  cudawork.py forkcudart        the CUDA runtime (CUDAWORK_CUDART=libcudart.so.N):
                                cudaMalloc, fork, cudaMalloc in the child
  cudawork.py launch N          N launches of an empty kernel (PTX), then one
                                cuCtxSynchronize: seconds per launch
  cudawork.py apiloop N         N x cuCtxGetCurrent: the cost of one cheap call
  cudawork.py torchloop N       PyTorch's steady state: N x (x = x + 1) on a
                                one-element CUDA tensor, then synchronize
  cudawork.py device N          cuInit, cuDeviceGetCount, cuDeviceGet(N), then a
                                context on it and one 64 MiB allocation
  cudawork.py late S            cuInit, cuDeviceGetCount, cuDeviceGet(0), S seconds
                                asleep, then the first context (cuCtxCreate)
  cudawork.py hold S            a context on device 0 that takes all the memory
                                it can (1 GiB, then 64 MiB pieces), prints
                                "holding" and sleeps S seconds

  cudawork.py heldwork N        cuInit and a context on device 0, prints its
                                line and waits for a line on stdin (start
                                nvprobe meanwhile), then N x cuMemAlloc(64
                                MiB)/cuMemFree, and one allocation larger
                                than the GPU (refused)

  cudawork.py heldstart N        libcuda loaded, then /dev/nvidiactl opened by
                                hand: an RM root client and N RM controls
                                that fail (on a client that does not
                                exist); prints its
                                line and waits for a line on stdin (start
                                nvprobe meanwhile), then one more such
                                control, and a CUDA start-up: cuInit and a
                                context on device 0 (a process that held a
                                descriptor when nvprobe started, then
                                starts CUDA)

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


def first_context(cu, out):
    """cuInit, cuDeviceGet(0) and a context on it, their CUresults in out."""
    out["cuInit"] = cu.cuInit(0)
    dev = ctypes.c_int(-1)
    out["cuDeviceGet"] = cu.cuDeviceGet(ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p()
    out["cuCtxCreate"] = cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)
    return ctx


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
    if mode == "torchloop":
        import torch

        x = torch.ones(1, device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            x = x + 1
        torch.cuda.synchronize()
        out["seconds"] = time.perf_counter() - t0
        out["per_call_ns"] = out["seconds"] / max(n, 1) * 1e9
        out["value"] = float(x.item())
        print(json.dumps(out))
        return
    if mode == "forkcudart":
        rt = ctypes.CDLL(os.environ["CUDAWORK_CUDART"])
        ptr = ctypes.c_void_p()
        out["cudaMalloc"] = rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(1 << 20))
        pid = os.fork()
        if pid == 0:
            r = rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(1 << 20))
            print(json.dumps({"child_cudaMalloc": r}))
            sys.stdout.flush()
            os._exit(1 if r else 0)
        out["child_status"] = os.waitpid(pid, 0)[1]
        print(json.dumps(out))
        return
    cu = lib()
    if mode == "forkdrv":
        out["cuInit"] = cu.cuInit(0)
        dev = ctypes.c_int()
        cu.cuDeviceGet(ctypes.byref(dev), 0)
        ctx = ctypes.c_void_p()
        out["cuCtxCreate"] = cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)
        pid = os.fork()
        if pid == 0:
            s1 = cu.cuCtxSynchronize()
            p = ctypes.c_uint64()
            s2 = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20))
            print(json.dumps({"child_cuCtxSynchronize": s1, "child_cuMemAlloc_v2": s2}))
            sys.stdout.flush()
            os._exit(1 if (s1 or s2) else 0)
        out["child_status"] = os.waitpid(pid, 0)[1]
        print(json.dumps(out))
        return
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
    if mode == "heldwork":
        first_context(cu, out)
        print(json.dumps(out), flush=True)
        sys.stdin.readline()
        p = ctypes.c_uint64()
        ok = 0
        for _ in range(n):
            if cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(64 << 20)) == 0:
                ok += cu.cuMemFree_v2(p) == 0
        out["allocs_ok"] = ok
        out["huge"] = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 50))
        print(json.dumps(out), flush=True)
        return
    if mode == "heldstart":
        import fcntl
        import struct

        ctl = os.open("/dev/nvidiactl", os.O_RDWR | os.O_CLOEXEC)
        # NV_ESC_RM_ALLOC (NVOS64, 48 bytes) of a root client (class 0):
        # hObjectNew comes back at 8, the status at 40.
        alloc = bytearray(48)
        fcntl.ioctl(ctl, 0xC030462B, alloc)
        client, status = struct.unpack_from("<I", alloc, 8)[0], struct.unpack_from("<I", alloc, 40)[0]
        out["client"], out["alloc_status"] = client, status

        def bad_control():
            # NV_ESC_RM_CONTROL (NVOS54, 32 bytes) of
            # NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION on a client handle
            # that does not exist (refused: NV_ERR_INVALID_CLIENT; an
            # unknown control would get NOT_SUPPORTED, a probe's benign
            # answer); the status at 28.
            c = bytearray(32)
            struct.pack_into("<III", c, 0, 0xDEAD0000, 0xDEAD0000, 0x101)
            fcntl.ioctl(ctl, 0xC020462A, c)
            return struct.unpack_from("<I", c, 28)[0]

        out["held_statuses"] = sorted({bad_control() for _ in range(n)})
        print(json.dumps(out), flush=True)
        sys.stdin.readline()
        out["traced_status"] = bad_control()
        first_context(cu, out)
        print(json.dumps(out), flush=True)
        return
    if mode in ("device", "hold", "late"):
        out["cuInit"] = cu.cuInit(0)
        count = ctypes.c_int(-1)
        out["cuDeviceGetCount"] = cu.cuDeviceGetCount(ctypes.byref(count))
        out["device_count"] = count.value
        dev = ctypes.c_int(-1)
        out["cuDeviceGet"] = cu.cuDeviceGet(ctypes.byref(dev), n if mode == "device" else 0)
        ctx = ctypes.c_void_p()
        if mode == "late":
            # The first context n seconds after cuInit (a model loaded
            # before the first tensor goes to the GPU).
            time.sleep(n)
        if out["cuDeviceGet"] == 0:
            out["cuCtxCreate"] = cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)
        if out.get("cuCtxCreate") == 0 and mode == "device":
            p = ctypes.c_uint64()
            out["cuMemAlloc"] = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(64 << 20))
        if out.get("cuCtxCreate") == 0 and mode == "hold":
            held = 0
            for piece in (1 << 30, 64 << 20):
                p = ctypes.c_uint64()
                while cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(piece)) == 0:
                    held += piece
            out["held_bytes"] = held
            print(json.dumps(out), flush=True)
            print("holding", flush=True)
            time.sleep(n)
            return
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
    elif mode == "ctxall":
        # A context on every visible device, one after the other.
        out["cuCtxCreate"] = []
        for i in range(count.value):
            d = ctypes.c_int()
            cu.cuDeviceGet(ctypes.byref(d), i)
            r = cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, d)
            out["cuCtxCreate"].append(r)
            if r == 0:
                cu.cuCtxDestroy_v2(ctx)
    elif mode in ("launch", "apiloop"):
        out["cuCtxCreate"] = cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)
        if mode == "apiloop":
            cur = ctypes.c_void_p()
            get = cu.cuCtxGetCurrent
            ref = ctypes.byref(cur)
            t0 = time.perf_counter()
            for _ in range(n):
                get(ref)
            out["seconds"] = time.perf_counter() - t0
        else:
            ptx = (b".version 7.0\n.target sm_50\n.address_size 64\n"
                   b".visible .entry nvprobe_nop()\n{\n ret;\n}\n\0")
            mod = ctypes.c_void_p()
            out["cuModuleLoadData"] = cu.cuModuleLoadData(ctypes.byref(mod), ptx)
            fn = ctypes.c_void_p()
            out["cuModuleGetFunction"] = cu.cuModuleGetFunction(
                ctypes.byref(fn), mod, b"nvprobe_nop")
            launch = cu.cuLaunchKernel
            one = ctypes.c_uint(1)
            null = ctypes.c_void_p()
            t0 = time.perf_counter()
            for _ in range(n):
                launch(fn, one, one, one, one, one, one, 0, null, null, null)
            out["cuCtxSynchronize"] = cu.cuCtxSynchronize()
            out["seconds"] = time.perf_counter() - t0
        out["per_call_ns"] = out["seconds"] / max(n, 1) * 1e9
        cu.cuCtxDestroy_v2(ctx)
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
