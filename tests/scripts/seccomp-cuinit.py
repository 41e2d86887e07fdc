#!/usr/bin/env python3
"""cuInit under a seccomp filter installed after libcuda is loaded (so the
loader's own opens are not refused): the filter answers EPERM to
open/openat (`open`), to ioctls of type 'F', the NVIDIA escapes
(`escapes`), or to clone and clone3, the threads (`threads`); `clone3`
answers ENOSYS to clone3 alone, as container profiles older than the call
do (glibc then uses clone); `escapes-eacces` answers EACCES to the
escapes (what a security module's ioctl rule answers); `nr:N:ERRNO`
answers ERRNO to system call N (x86_64 numbers; N,M,… for several),
whatever it is, and
`nr:N:kill` kills the process at it (SIGSYS, as a profile's
SCMP_ACT_KILL_PROCESS), `nr:N:killthread` the calling thread alone
(SCMP_ACT_KILL_THREAD), `nr:N:trap` sends it SIGSYS (SCMP_ACT_TRAP: the
signal is generated, and without a handler it ends the process); `ioctl:CMD:ERRNO` answers ERRNO to the ioctls
whose request is CMD (a UVM command's number, say); `escapes-kill` kills it at the first escape. Then
the first context (cuCtxCreate_v2 on device 0) when cuInit succeeded.
Prints one JSON line: the CUresults and the device count.

  seccomp-cuinit.py open|escapes|escapes-eacces|escapes-kill|threads|clone3|nr:N:ERRNO|nr:N:kill|nr:N:killthread|nr:N:trap|ioctl:CMD:ERRNO
                    [--case NAME]"""
import ctypes
import json
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
AUDIT_ARCH_X86_64 = 0xC000003E
RET_ALLOW = 0x7FFF0000
RET_EPERM = 0x00050000 | 1
RET_ENOSYS = 0x00050000 | 38
RET_EACCES = 0x00050000 | 13
RET_KILL_PROCESS = 0x80000000
RET_KILL_THREAD = 0x00000000
RET_TRAP = 0x00030000
LD_W_ABS, JEQ_K, RET_K, ALU_AND_K = 0x20, 0x15, 0x06, 0x54


def ins(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


def program(which):
    # seccomp_data: nr @0, arch @4, args[i] @16 + 8 i (low 32 bits first).
    p = [ins(LD_W_ABS, 0, 0, 4), ins(JEQ_K, 1, 0, AUDIT_ARCH_X86_64), ins(RET_K, 0, 0, RET_ALLOW)]
    p.append(ins(LD_W_ABS, 0, 0, 0))
    if which == "open":
        # open (2) or openat (257): EPERM.
        p += [ins(JEQ_K, 2, 0, 2), ins(JEQ_K, 1, 0, 257), ins(RET_K, 0, 0, RET_ALLOW),
              ins(RET_K, 0, 0, RET_EPERM)]
    elif which == "threads":
        # clone (56) or clone3 (435): EPERM.
        p += [ins(JEQ_K, 2, 0, 56), ins(JEQ_K, 1, 0, 435), ins(RET_K, 0, 0, RET_ALLOW),
              ins(RET_K, 0, 0, RET_EPERM)]
    elif which.startswith("nr:"):
        _, nrs, errno = which.split(":")
        ret = {"kill": RET_KILL_PROCESS, "killthread": RET_KILL_THREAD, "trap": RET_TRAP}.get(errno)
        if ret is None:
            ret = 0x00050000 | int(errno)
        # Each listed number: to its answer when equal, else on to the next.
        for nr in nrs.split(","):
            p += [ins(JEQ_K, 0, 1, int(nr)), ins(RET_K, 0, 0, ret)]
        p.append(ins(RET_K, 0, 0, RET_ALLOW))
    elif which.startswith("ioctl:"):
        # ioctl (16) whose request (its second argument's low 32 bits) is
        # CMD: ERRNO.
        _, cmd, errno = which.split(":")
        p += [ins(JEQ_K, 1, 0, 16), ins(RET_K, 0, 0, RET_ALLOW),
              ins(LD_W_ABS, 0, 0, 24), ins(JEQ_K, 1, 0, int(cmd, 0)), ins(RET_K, 0, 0, RET_ALLOW),
              ins(RET_K, 0, 0, 0x00050000 | int(errno))]
    elif which == "clone3":
        # clone3 (435): ENOSYS.
        p += [ins(JEQ_K, 1, 0, 435), ins(RET_K, 0, 0, RET_ALLOW), ins(RET_K, 0, 0, RET_ENOSYS)]
    else:
        # ioctl (16) whose command's _IOC_TYPE is 'F' (0x46): EPERM.
        p += [ins(JEQ_K, 1, 0, 16), ins(RET_K, 0, 0, RET_ALLOW),
              ins(LD_W_ABS, 0, 0, 24), ins(ALU_AND_K, 0, 0, 0xFF00),
              ins(JEQ_K, 1, 0, 0x4600), ins(RET_K, 0, 0, RET_ALLOW),
              ins(RET_K, 0, 0, {"escapes-eacces": RET_EACCES, "escapes-kill": RET_KILL_PROCESS}.get(which, RET_EPERM))]
    return b"".join(p), len(p)


def main():
    which = sys.argv[1]
    cuda = None
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            cuda = ctypes.CDLL(name)
            break
        except OSError:
            pass
    if cuda is None:
        print(json.dumps({"error": "no libcuda"}))
        return 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    code, n = program(which)
    buf = ctypes.create_string_buffer(code, len(code))
    fprog = struct.pack("HxxxxxxQ", n, ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog, len(fprog))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        print(json.dumps({"error": "no_new_privs", "errno": ctypes.get_errno()}))
        return 1
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fbuf), 0, 0) != 0:
        print(json.dumps({"error": "seccomp", "errno": ctypes.get_errno()}))
        return 1
    r = cuda.cuInit(0)
    count = ctypes.c_int(-1)
    c = cuda.cuDeviceGetCount(ctypes.byref(count)) if r == 0 else None
    # The first context too: the NUMA and affinity calls are made there.
    ctx = None
    if r == 0 and count.value > 0:
        dev = ctypes.c_int(0)
        handle = ctypes.c_void_p()
        ctx = cuda.cuDeviceGet(ctypes.byref(dev), 0)
        if ctx == 0:
            ctx = cuda.cuCtxCreate_v2(ctypes.byref(handle), 0, dev)
    print(json.dumps({"filter": which, "cuInit": r, "cuDeviceGetCount": c, "count": count.value,
                      "cuCtxCreate": ctx}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
