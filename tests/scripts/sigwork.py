#!/usr/bin/env python3
"""cuInit while another process sends SIGUSR1 every millisecond for 0.4 s.

  sigwork.py restart     the handler is installed with SA_RESTART
  sigwork.py norestart   without it (Python's default: interrupted calls
                         return EINTR to libcuda)

Prints one JSON line: cuInit's result and how many signals were handled.
"""
import ctypes
import json
import os
import signal
import sys
import time

seen = 0


def handler(_sig, _frame):
    global seen
    seen += 1


signal.signal(signal.SIGUSR1, handler)
signal.siginterrupt(signal.SIGUSR1, sys.argv[1] != "restart")
me = os.getpid()
pid = os.fork()
if pid == 0:
    end = time.monotonic() + 0.4
    while time.monotonic() < end:
        try:
            os.kill(me, signal.SIGUSR1)
        except ProcessLookupError:
            break
        time.sleep(0.001)
    os._exit(0)
r = ctypes.CDLL("libcuda.so.1").cuInit(0)
os.waitpid(pid, 0)
print(json.dumps({"mode": sys.argv[1], "cuInit": r, "handled": seen}))
