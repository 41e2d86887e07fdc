#!/usr/bin/env python3
"""Start-ups in a process that did something odd first (the second unseen
workload, tests/scripts/unseen2-workload.sh). libcuda is loaded first,
then the condition is made, then cuInit(0) and a context on device 0
(cuCtxCreate_v2). Prints one JSON line with the CUresults.

  unseenwork.py closed012    descriptors 0, 1 and 2 closed first (a daemon's
                             start), so libcuda's first open gets 0; the
                             line goes to a copy of stdout kept at fd 100
  unseenwork.py closefds     a context made and destroyed, then every
                             descriptor from 3 up closed (a daemon library's
                             "close what I did not open"), then a second
                             context
  unseenwork.py mapcount     the process's own mappings brought to 10 short
                             of vm.max_map_count (pages of alternating
                             protection), then the start-up
  unseenwork.py vafull       the address space reserved (PROT_NONE,
                             MAP_NORESERVE) down to holes under 1 GiB, then
                             the start-up
  unseenwork.py forkexec     a context, then a child that execs a new
                             Python doing its own start-up (cudawork.py ctx 1)

  --case NAME anywhere is ignored (it tags the command line)."""
import ctypes
import json
import os
import subprocess
import sys

PROT_NONE, PROT_READ, PROT_WRITE = 0, 1, 2
MAP_PRIVATE, MAP_ANONYMOUS, MAP_NORESERVE = 0x02, 0x20, 0x4000
MAP_FAILED = ctypes.c_void_p(-1).value
PAGE = os.sysconf("SC_PAGE_SIZE")


def libc():
    c = ctypes.CDLL(None, use_errno=True)
    c.mmap.restype = ctypes.c_void_p
    c.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]
    c.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    c.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return c


def start(cu, out):
    out["cuInit"] = cu.cuInit(0)
    if out["cuInit"] != 0:
        return None
    dev = ctypes.c_int(0)
    out["cuDeviceGet"] = cu.cuDeviceGet(ctypes.byref(dev), 0)
    if out["cuDeviceGet"] != 0:
        return None
    ctx = ctypes.c_void_p()
    out["cuCtxCreate"] = cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)
    return ctx if out["cuCtxCreate"] == 0 else None


def map_count():
    with open("/proc/self/maps", "rb") as f:
        return sum(1 for _ in f)


def fill_maps(c, out):
    """Mappings up to 10 short of the limit: one region whose pages
    alternate read-write and read-only, so that no two merge."""
    with open("/proc/sys/vm/max_map_count") as f:
        limit = int(f.read())
    want = limit - 10 - map_count()
    out["max_map_count"] = limit
    if want <= 0 or want > 2_000_000:
        out["skipped"] = "map count"
        return None, 0
    size = (want + 1) * PAGE
    base = c.mmap(None, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    if base in (None, MAP_FAILED):
        out["skipped"] = "mmap %d" % ctypes.get_errno()
        return None, 0
    for i in range(1, want + 1, 2):
        c.mprotect(base + i * PAGE, PAGE, PROT_READ)
    out["maps_before"] = map_count()
    return base, size


def fill_va(c, out):
    """Reserve the address space in halving pieces, down to 1 GiB."""
    held = []
    piece = 1 << 46
    while piece >= 1 << 30:
        p = c.mmap(None, piece, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        if p in (None, MAP_FAILED):
            piece >>= 1
        else:
            held.append((p, piece))
    out["reserved_gib"] = sum(s for _, s in held) >> 30
    return held


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    out = {"mode": mode}
    fd_out = 1
    if mode == "closed012":
        fd_out = os.dup2(1, 100)
        for fd in (0, 1, 2):
            os.close(fd)
    cu = ctypes.CDLL(os.environ.get("CUDAWORK_LIB", "libcuda.so.1"))
    c = libc()
    if mode == "closefds":
        ctx = start(cu, out)
        if ctx is not None:
            out["cuCtxDestroy"] = cu.cuCtxDestroy_v2(ctx)
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))
            ctx2 = ctypes.c_void_p()
            dev = ctypes.c_int(0)
            out["second cuCtxCreate"] = cu.cuCtxCreate_v2(ctypes.byref(ctx2), 0, dev)
    elif mode == "mapcount":
        base, size = fill_maps(c, out)
        if base is not None:
            start(cu, out)
            out["maps_after"] = map_count()
            c.munmap(base, size)
    elif mode == "vafull":
        held = fill_va(c, out)
        start(cu, out)
        for p, s in held:
            c.munmap(p, s)
    elif mode == "forkexec":
        start(cu, out)
        here = os.path.dirname(os.path.abspath(__file__))
        child = subprocess.run([sys.executable, os.path.join(here, "cudawork.py"), "ctx", "1", "--case",
                                "forkexec_child"], capture_output=True, text=True)
        out["child"] = (child.stdout.strip().splitlines() or [""])[-1]
        out["child_exit"] = child.returncode
    else:
        start(cu, out)
    os.write(fd_out, (json.dumps(out) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
