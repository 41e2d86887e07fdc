#!/usr/bin/env python3
"""GPU faults at run time, made on purpose, for fixtures and benchmarks.

Only ctypes and libcuda: the kernels are PTX, JIT-compiled by the driver
(cuModuleLoadData), so no toolkit is needed. Each case starts CUDA
(cuInit, a context), loads the module, launches one kernel and then makes
the calls a program makes after a launch: cuCtxSynchronize, a copy back,
a free, the context's destruction. It prints one JSON line: each call with
its CUresult and CLOCK_MONOTONIC times (ns) before and after, so a
recording's kernel-log lines can be put next to the calls.

  gpufault.py write       st.global through a null pointer (an MMU fault on a write)
  gpufault.py read        ld.global from an unmapped address (an MMU fault on a read)
  gpufault.py misaligned  a 4-byte load from an odd address
  gpufault.py trap        the PTX `trap;` instruction
  gpufault.py spin        a kernel that never ends: cuCtxSynchronize waits until
                          the process is killed (run it under `timeout -s KILL`)
  gpufault.py ok          the same calls with a kernel that does nothing wrong
  gpufault.py bigblock    a launch of 2048 threads per block (over the limit):
                          refused by cuLaunchKernel itself, nothing runs
  gpufault.py bigshared   a launch asking 1 GiB of shared memory per block

  Loops for the cost of the hooks on the calls where such errors surface
  (seconds per call in "per_call_ns"):
  gpufault.py sync N      N x cuCtxSynchronize on an idle context
  gpufault.py copy N      N x cuMemcpyHtoD_v2 of 4 bytes
  gpufault.py launch N    N x cuLaunchKernel of an empty kernel, then one sync
  gpufault.py getdev N    N x cuCtxGetDevice (a call no hook set but `all` touches)

  --case NAME anywhere is ignored (it tags the command line).
"""
import ctypes
import json
import os
import sys
import time

PTX = b"""
.version 8.0
.target sm_90
.address_size 64

.visible .entry nvprobe_write(.param .u64 p)
{
  .reg .u64 %rd<2>;
  .reg .u32 %r<2>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, 42;
  st.global.u32 [%rd1], %r1;
  ret;
}

.visible .entry nvprobe_read(.param .u64 p, .param .u64 out)
{
  .reg .u64 %rd<3>;
  .reg .u32 %r<2>;
  ld.param.u64 %rd1, [p];
  ld.param.u64 %rd2, [out];
  ld.volatile.global.u32 %r1, [%rd1];
  st.global.u32 [%rd2], %r1;
  ret;
}

.visible .entry nvprobe_misaligned(.param .u64 p)
{
  .reg .u64 %rd<3>;
  .reg .u32 %r<2>;
  ld.param.u64 %rd1, [p];
  add.u64 %rd2, %rd1, 1;
  ld.volatile.global.u32 %r1, [%rd2];
  st.global.u32 [%rd1], %r1;
  ret;
}

.visible .entry nvprobe_trap()
{
  trap;
  ret;
}

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

.visible .entry nvprobe_nop()
{
  ret;
}
\0"""


def lib():
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    raise SystemExit(json.dumps({"error": "libcuda not found"}))


def now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Calls:
    def __init__(self, cu):
        self.cu = cu
        self.log = []

    def __call__(self, name, *args):
        t0 = now()
        r = getattr(self.cu, name)(*args)
        t1 = now()
        self.log.append({"call": name, "result": r, "start_ns": t0, "end_ns": t1})
        print(json.dumps(self.log[-1]), file=sys.stderr, flush=True)
        return r


def main():
    args = list(sys.argv[1:])
    if "--case" in args:
        i = args.index("--case")
        del args[i : i + 2]
    mode = args[0]
    n = int(args[1]) if len(args) > 1 else 1
    cu = lib()
    cu.cuLaunchKernel.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
        ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
        ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
    ]
    cu.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
    cu.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
    cu.cuMemFree_v2.argtypes = [ctypes.c_uint64]
    cu.cuMemsetD8_v2.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t]
    c = Calls(cu)
    out = {"mode": mode, "pid": os.getpid()}
    c("cuInit", 0)
    dev = ctypes.c_int()
    c("cuDeviceGet", ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p()
    c("cuCtxCreate_v2", ctypes.byref(ctx), 0, dev)
    mod = ctypes.c_void_p()
    r = c("cuModuleLoadData", ctypes.byref(mod), PTX)
    if r != 0:
        out["calls"] = c.log
        print(json.dumps(out))
        return
    buf = ctypes.c_uint64()
    c("cuMemAlloc_v2", ctypes.byref(buf), ctypes.c_size_t(1 << 20))
    c("cuMemsetD8_v2", buf, 0, 1 << 20)
    fn = ctypes.c_void_p()
    one = 1
    null = None

    def launch(name, *params):
        c("cuModuleGetFunction", ctypes.byref(fn), mod, name)
        vals = [ctypes.c_uint64(p) for p in params]
        arr = (ctypes.c_void_p * max(len(vals), 1))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in vals]
        )
        return c("cuLaunchKernel", fn, one, one, one, one, one, one, 0, null,
                 arr if vals else null, null)

    if mode in ("sync", "copy", "launch", "getdev"):
        out["calls"] = c.log[:]
        host = ctypes.c_uint32(7)
        cur = ctypes.c_int()
        c("cuModuleGetFunction", ctypes.byref(fn), mod, b"nvprobe_nop")
        f = {
            "sync": lambda: cu.cuCtxSynchronize(),
            "copy": lambda: cu.cuMemcpyHtoD_v2(buf.value, ctypes.byref(host), 4),
            "launch": lambda: cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, None, None),
            "getdev": lambda: cu.cuCtxGetDevice(ctypes.byref(cur)),
        }[mode]
        bad = 0
        t0 = time.perf_counter()
        for _ in range(n):
            if f() != 0:
                bad += 1
        if mode == "launch":
            cu.cuCtxSynchronize()
        out["seconds"] = time.perf_counter() - t0
        out["per_call_ns"] = out["seconds"] / max(n, 1) * 1e9
        out["failed"] = bad
        print(json.dumps(out))
        return

    if mode == "write":
        launch(b"nvprobe_write", 0)
    elif mode == "read":
        launch(b"nvprobe_read", 0x7F0000000000, buf.value)
    elif mode == "misaligned":
        launch(b"nvprobe_misaligned", buf.value)
    elif mode == "trap":
        launch(b"nvprobe_trap")
    elif mode == "spin":
        launch(b"nvprobe_spin", buf.value)
    elif mode == "ok":
        launch(b"nvprobe_nop")
    elif mode == "bigblock":
        # 2048 threads per block, over the 1024 every GPU allows: the
        # driver refuses the launch at once (the kernel never runs).
        c("cuModuleGetFunction", ctypes.byref(fn), mod, b"nvprobe_nop")
        c("cuLaunchKernel", fn, one, one, one, 2048, one, one, 0, null, null, null)
    elif mode == "bigshared":
        # 1 GiB of dynamic shared memory per block: refused at once.
        c("cuModuleGetFunction", ctypes.byref(fn), mod, b"nvprobe_nop")
        c("cuLaunchKernel", fn, one, one, one, one, one, one, 1 << 30, null, null, null)
    else:
        raise SystemExit(json.dumps({"error": f"unknown mode {mode}"}))
    c("cuCtxSynchronize")
    host = ctypes.c_uint32()
    c("cuMemcpyDtoH_v2", ctypes.byref(host), buf.value, 4)
    c("cuMemFree_v2", buf)
    c("cuCtxDestroy_v2", ctx)
    out["calls"] = c.log
    print(json.dumps(out))


main()
