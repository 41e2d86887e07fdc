"""The start-up the unseen workloads' Python helpers make after their
condition (unseenwork6.py, unseenwork8.py, unseenwork9.py): cuInit(0), then a context on
device 0 (cuCtxCreate_v2), each CUresult put in `out`."""
import ctypes


def start(cu, out):
    out["cuInit"] = cu.cuInit(0)
    if out["cuInit"] != 0:
        return
    dev = ctypes.c_int(0)
    out["cuDeviceGet"] = cu.cuDeviceGet(ctypes.byref(dev), 0)
    if out["cuDeviceGet"] != 0:
        return
    ctx = ctypes.c_void_p()
    out["cuCtxCreate"] = cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)
