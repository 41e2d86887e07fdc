#!/usr/bin/env python3
"""Start-ups disturbed from inside the process (the tenth unseen workload,
tests/scripts/unseen10-workload.sh): libcuda is loaded first, then the
condition, then cuInit(0) and a context on device 0 (cuCtxCreate_v2).
Prints one JSON line with the CUresults.

  unseenwork10.py close_range   another thread waits for /dev/nvidiactl
                                to be opened, then closes every descriptor
                                from 3 up (close_range), as a daemonising
                                library does
  unseenwork10.py dup2_over     another thread waits for /dev/nvidiactl
                                to be opened, then puts /dev/null in its
                                place (dup2), as a logger redirecting a
                                descriptor it thinks is its own does
  unseenwork10.py mlock_nobody  drops to nobody (65534), then
                                mlockall(MCL_FUTURE): every later mapping
                                is locked, under RLIMIT_MEMLOCK
  unseenwork10.py nobody        drops to nobody (65534) alone (run under a
                                memory-lock limit of 0)
  unseenwork10.py mlock_root    mlockall(MCL_CURRENT | MCL_FUTURE) as root
                                (a real-time program's set-up)
  unseenwork10.py sigstorm      a profiling timer (ITIMER_PROF) every
                                200 us with a handler, through the whole
                                start-up
  unseenwork10.py forkstorm     another thread forks children that exit at
                                once, through the whole start-up
  unseenwork10.py double_close  another thread closes a descriptor of its
                                own twice, the second time after
                                /dev/nvidiactl took its number (the
                                classic double close)
  unseenwork10.py spawn_closefds  another thread runs `true` through
                                subprocess (close_fds: the child's
                                close_range) all through the start-up
  unseenwork10.py nofile_lowered  another thread lowers RLIMIT_NOFILE to
                                the descriptors open once /dev/nvidiactl
                                is open (the eleventh batch,
                                unseen11-workload.sh)

  --case NAME anywhere is ignored (it tags the command line)."""
import ctypes
import json
import os
import signal
import sys
import threading
import time

from unseenstart import start

MCL_CURRENT, MCL_FUTURE = 1, 2
SYS_CLOSE_RANGE = 436


def nvidiactl_fd(deadline):
    """The descriptor of /dev/nvidiactl, once this process has opened it."""
    while time.monotonic() < deadline:
        for name in os.listdir("/proc/self/fd"):
            try:
                if os.readlink("/proc/self/fd/" + name) == "/dev/nvidiactl":
                    return int(name)
            except OSError:
                pass
    return None


def on_open(out, act):
    """Run `act(fd)` on another thread once /dev/nvidiactl is open."""
    def watch():
        fd = nvidiactl_fd(time.monotonic() + 10)
        out["nvidiactl_fd_seen"] = fd is not None
        if fd is not None:
            act(fd)
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    out = {"mode": mode}
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    cu = ctypes.CDLL(os.environ.get("CUDAWORK_LIB", "libcuda.so.1"))
    # The JSON line goes to a descriptor no case closes or replaces.
    fd_out = os.dup2(1, 200)
    if mode == "close_range":
        def act(fd):
            out["close_range"] = libc.syscall(SYS_CLOSE_RANGE, 3, 199, 0)
        on_open(out, act)
    elif mode == "dup2_over":
        def act(fd):
            null = os.open("/dev/null", os.O_RDWR)
            os.dup2(null, fd)
            os.close(null)
            out["replaced_fd"] = True
        on_open(out, act)
    elif mode in ("mlock_nobody", "nobody"):
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
        out["memlock_limit"] = list(__import__("resource").getrlimit(8))
        if mode == "mlock_nobody" and libc.mlockall(MCL_FUTURE) != 0:
            out["error"] = "mlockall errno %d" % ctypes.get_errno()
    elif mode == "double_close":
        def twice():
            mine = os.open("/dev/null", os.O_RDONLY)
            os.close(mine)
            # The number is free again: the start-up's next open takes it.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    if os.readlink("/proc/self/fd/%d" % mine) == "/dev/nvidiactl":
                        break
                except OSError:
                    pass
            out["closed_again"] = mine
            try:
                os.close(mine)
            except OSError as e:
                out["close_error"] = e.errno
        threading.Thread(target=twice, daemon=True).start()
        time.sleep(0.01)
    elif mode == "spawn_closefds":
        import subprocess
        done = threading.Event()
        spawns = [0]

        def spawn():
            while not done.is_set():
                subprocess.run(["true"], close_fds=True)
                spawns[0] += 1
        t = threading.Thread(target=spawn, daemon=True)
        t.start()
        start(cu, out)
        done.set()
        t.join()
        out["spawns"] = spawns[0]
        os.write(fd_out, (json.dumps(out) + "\n").encode())
        return
    elif mode == "nofile_lowered":
        import resource

        def lower(fd):
            n = len(os.listdir("/proc/self/fd"))
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
            out["nofile_set"] = n
        on_open(out, lower)
    elif mode == "mlock_root":
        if libc.mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
            out["error"] = "mlockall errno %d" % ctypes.get_errno()
    elif mode == "sigstorm":
        hits = [0]

        def tick(s, f):
            hits[0] += 1
        signal.signal(signal.SIGPROF, tick)
        signal.setitimer(signal.ITIMER_PROF, 0.0002, 0.0002)
        start(cu, out)
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        out["handled"] = hits[0]
        os.write(fd_out, (json.dumps(out) + "\n").encode())
        return
    elif mode == "forkstorm":
        done = threading.Event()
        forks = [0]

        def storm():
            while not done.is_set():
                pid = os.fork()
                if pid == 0:
                    os._exit(0)
                os.waitpid(pid, 0)
                forks[0] += 1
        t = threading.Thread(target=storm, daemon=True)
        t.start()
        start(cu, out)
        done.set()
        t.join()
        out["forks"] = forks[0]
        os.write(fd_out, (json.dumps(out) + "\n").encode())
        return
    if "error" not in out:
        start(cu, out)
    time.sleep(0.05)
    os.write(fd_out, (json.dumps(out) + "\n").encode())


if __name__ == "__main__":
    main()
