#!/usr/bin/env python3
"""Start-ups that a harness's signal or the process's own code ends in
ways a program meets in practice (the fourth unseen workload,
tests/scripts/unseen4-workload.sh). libcuda is loaded first, then the
condition is made, then cuInit(0) and a context on device 0
(cuCtxCreate_v2). Prints one JSON line with the CUresults (when the
process lives to print it).

  unseenwork4.py alarm_raise   a 50 ms interval timer whose SIGALRM handler
                               raises (pytest-timeout's signal method): the
                               exception comes when cuInit returns
  unseenwork4.py term_exit     a SIGTERM handler that exits 143, and a
                               SIGTERM to itself from a thread 30 ms into
                               cuInit (a launcher's graceful stop)
  unseenwork4.py main_exits    cuInit and the context in a daemon thread;
                               the main thread returns 30 ms later (exit 0
                               with the thread still in the driver)
  unseenwork4.py segv_thread   a thread reads address 0 30 ms into cuInit
  unseenwork4.py bus_thread    a thread touches a mapped file cut to zero
                               length 30 ms into cuInit (SIGBUS)
  unseenwork4.py pdeath        a child that asked for SIGKILL at its
                               parent's death (PR_SET_PDEATHSIG, as
                               launchers do) starts CUDA; the parent exits
                               30 ms later

  --case NAME anywhere is ignored (it tags the command line)."""
import ctypes
import json
import mmap
import os
import signal
import sys
import tempfile
import threading
import time


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


def later(fn, delay=0.03):
    t = threading.Thread(target=lambda: (time.sleep(delay), fn()), daemon=True)
    t.start()
    return t


class Timeout(Exception):
    pass


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    out = {"mode": mode}
    lib = os.environ.get("CUDAWORK_LIB", "libcuda.so.1")
    if mode == "pdeath":
        pid = os.fork()
        if pid == 0:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
            cu = ctypes.CDLL(lib)
            start(cu, out)
            print(json.dumps(out), flush=True)
            os._exit(0)
        time.sleep(0.03)
        os._exit(0)
    cu = ctypes.CDLL(lib)
    if mode == "alarm_raise":
        def on_alarm(_sig, _frame):
            raise Timeout("timed out after 0.05 s")
        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, 0.05)
    elif mode == "term_exit":
        signal.signal(signal.SIGTERM, lambda _s, _f: sys.exit(143))
        later(lambda: os.kill(os.getpid(), signal.SIGTERM))
    elif mode == "main_exits":
        threading.Thread(target=lambda: start(cu, out), daemon=True).start()
        time.sleep(0.03)
        print(json.dumps(out), flush=True)
        return 0
    elif mode == "segv_thread":
        later(lambda: ctypes.string_at(0))
    elif mode == "bus_thread":
        fd, path = tempfile.mkstemp()
        os.unlink(path)
        os.write(fd, b"x" * mmap.PAGESIZE)
        m = mmap.mmap(fd, mmap.PAGESIZE)

        def cut_and_touch():
            os.ftruncate(fd, 0)
            m[0]  # beyond the file's end now: SIGBUS
        later(cut_and_touch)
    start(cu, out)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
