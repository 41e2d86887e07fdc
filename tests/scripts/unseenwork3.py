#!/usr/bin/env python3
"""Start-ups that something in the process itself ends or disturbs (the
third unseen workload, tests/scripts/unseen3-workload.sh). libcuda is
loaded first, then the condition is made, then cuInit(0) and a context
on device 0 (cuCtxCreate_v2). Prints one JSON line with the CUresults
(when the process lives to print it).

  unseenwork3.py abort       a thread calls abort() 30 ms into cuInit (an
                             assertion or an uncaught C++ exception
                             elsewhere in the program)
  unseenwork3.py exit3       a thread calls _exit(3) 30 ms into cuInit (a
                             watchdog or a library's fatal-error path)
  unseenwork3.py sigpipe     SIGPIPE at its default action, then a thread
                             writes 30 ms into cuInit to a pipe whose
                             reader is gone (`prog | head` after head ended)
  unseenwork3.py xfsz        SIGXFSZ at its default action, RLIMIT_FSIZE 0,
                             then a thread writes a byte to a file 30 ms
                             into cuInit
  unseenwork3.py xcpu        CPU burnt to 0.97 s, then RLIMIT_CPU's soft
                             limit set to 1 s and a thread burning on: the
                             limit is reached during the start-up
  unseenwork3.py forkinit    cuInit and a context, then fork: the child
                             calls cuInit and makes a context of its own
                             (no exec)
  unseenwork3.py threads8    cuInit from 8 threads at once, then a context
  unseenwork3.py execthread  a thread execs /bin/true 30 ms into cuInit

  --case NAME anywhere is ignored (it tags the command line)."""
import ctypes
import json
import os
import resource
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


def cpu_used():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    out = {"mode": mode}
    cu = ctypes.CDLL(os.environ.get("CUDAWORK_LIB", "libcuda.so.1"))
    if mode == "abort":
        later(os.abort)
    elif mode == "exit3":
        later(lambda: os._exit(3))
    elif mode == "sigpipe":
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        r, w = os.pipe()
        os.close(r)
        later(lambda: os.write(w, b"x"))
    elif mode == "xfsz":
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        fd, path = tempfile.mkstemp()
        os.unlink(path)
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
        later(lambda: os.write(fd, b"x"))
    elif mode == "xcpu":
        while cpu_used() < 0.97:
            pass
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        resource.setrlimit(resource.RLIMIT_CPU, (1, hard))

        def burn():
            while True:
                pass
        # A thread that keeps burning, so that the limit comes during the
        # start-up however little CPU cuInit itself uses.
        threading.Thread(target=burn, daemon=True).start()
    elif mode == "forkinit":
        if start(cu, out) is None:
            print(json.dumps(out), flush=True)
            return 0
        pid = os.fork()
        if pid == 0:
            child = {}
            start(cu, child)
            os.write(1, (json.dumps({"child": child}) + "\n").encode())
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        out["child_status"] = status
        print(json.dumps(out), flush=True)
        return 0
    elif mode == "threads8":
        res = []
        ts = [threading.Thread(target=lambda: res.append(cu.cuInit(0))) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        out["cuInit x8"] = sorted(res)
    elif mode == "execthread":
        later(lambda: os.execv("/bin/true", ["true", "--case", "execthread_true"]))
    start(cu, out)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
