#!/usr/bin/env python3
"""Start-ups under a Landlock sandbox (the sixth unseen workload,
tests/scripts/unseen6-workload.sh): libcuda is loaded first, then the
process restricts itself (no_new_privs, landlock_restrict_self), then
cuInit(0) and a context on device 0 (cuCtxCreate_v2). Prints one JSON
line with the CUresults and the Landlock ABI.

  unseenwork6.py landlock_ioctl  handles LANDLOCK_ACCESS_FS_IOCTL_DEV (ABI 5,
                                 Linux 6.10) with no rule: every ioctl on a
                                 device file opened from then on is refused
                                 (EACCES), the driver's included
  unseenwork6.py landlock_open   handles reading and writing files; every
                                 top-level folder but /dev is allowed, and in
                                 /dev only null, zero, urandom, random and
                                 shm: opening an NVIDIA node is refused
                                 (EACCES)

  --case NAME anywhere is ignored (it tags the command line)."""
import ctypes
import json
import os
import struct
import sys

from unseenstart import start

SYS_CREATE, SYS_ADD_RULE, SYS_RESTRICT = 444, 445, 446
WRITE_FILE, READ_FILE, IOCTL_DEV = 1 << 1, 1 << 2, 1 << 15
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38


def restrict(libc, mode, out):
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    out["landlock_abi"] = abi
    if abi < 1 or (mode == "landlock_ioctl" and abi < 5):
        out["error"] = "landlock unavailable" if abi < 1 else "landlock ABI below 5"
        return False
    handled = IOCTL_DEV if mode == "landlock_ioctl" else READ_FILE | WRITE_FILE
    attr = struct.pack("Q", handled)
    fd = libc.syscall(SYS_CREATE, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if fd < 0:
        out["error"] = "landlock_create_ruleset errno %d" % ctypes.get_errno()
        return False
    if mode == "landlock_open":
        allowed = [os.path.join("/", n) for n in os.listdir("/") if n != "dev"]
        allowed += ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/shm"]
        for path in allowed:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            rule = struct.pack("=Qi", READ_FILE | WRITE_FILE, pfd)
            libc.syscall(SYS_ADD_RULE, fd, ctypes.c_uint32(RULE_PATH_BENEATH), rule,
                         ctypes.c_uint32(0))
            os.close(pfd)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.syscall(SYS_RESTRICT, fd, ctypes.c_uint32(0)) != 0:
        out["error"] = "landlock_restrict_self errno %d" % ctypes.get_errno()
        return False
    os.close(fd)
    return True


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    out = {"mode": mode}
    cu = ctypes.CDLL(os.environ.get("CUDAWORK_LIB", "libcuda.so.1"))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    if mode not in ("landlock_ioctl", "landlock_open"):
        print(json.dumps({"error": "unknown mode " + mode}))
        return 2
    restrict(libc, mode, out)
    start(cu, out)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
