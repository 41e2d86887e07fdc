#!/usr/bin/env python3
"""Start-ups in an odd shape of process (the ninth unseen workload,
tests/scripts/unseen9-workload.sh): libcuda is loaded first, then the
condition, then cuInit(0) and a context on device 0 (cuCtxCreate_v2).
Prints one JSON line with the CUresults.

  unseenwork9.py main_exited   the main thread ends (exit(2)) while
                               another thread makes the start-up: the
                               process's leader is a zombie meanwhile
  unseenwork9.py cpuid_fault   arch_prctl(ARCH_SET_CPUID, 0): the cpuid
                               instruction faults (SIGSEGV), as rr sets it
                               (ENODEV where the CPU cannot)
  unseenwork9.py trap_handled  a SIGSYS handler, then a seccomp filter
                               whose action at the NVIDIA escapes (ioctl
                               type 'F') is SECCOMP_RET_TRAP: each escape
                               fails with ENOSYS and the handler is told
  unseenwork9.py setuid        root drops to nobody (65534) after loading
                               libcuda

  --case NAME anywhere is ignored (it tags the command line)."""
import ctypes
import json
import os
import signal
import struct
import sys
import threading

from unseenstart import start

ARCH_SET_CPUID = 0x1012
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
AUDIT_ARCH_X86_64 = 0xC000003E
RET_ALLOW, RET_TRAP = 0x7FFF0000, 0x00030000
LD_W_ABS, JEQ_K, RET_K, ALU_AND_K, ALU_RSH_K = 0x20, 0x15, 0x06, 0x54, 0x74


def ins(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


def trap_escapes(libc):
    # seccomp_data: nr @0, arch @4, args[1] (the request) low word @24.
    p = [ins(LD_W_ABS, 0, 0, 4), ins(JEQ_K, 1, 0, AUDIT_ARCH_X86_64), ins(RET_K, 0, 0, RET_ALLOW),
         ins(LD_W_ABS, 0, 0, 0), ins(JEQ_K, 1, 0, 16), ins(RET_K, 0, 0, RET_ALLOW),
         ins(LD_W_ABS, 0, 0, 24), ins(ALU_RSH_K, 0, 0, 8), ins(ALU_AND_K, 0, 0, 0xFF),
         ins(JEQ_K, 1, 0, ord("F")), ins(RET_K, 0, 0, RET_ALLOW), ins(RET_K, 0, 0, RET_TRAP)]
    buf = ctypes.create_string_buffer(b"".join(p))
    prog = struct.pack("HxxxxxxQ", len(p), ctypes.addressof(buf))
    pbuf = ctypes.create_string_buffer(prog)
    libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return "no_new_privs errno %d" % ctypes.get_errno()
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(pbuf), 0, 0) != 0:
        return "seccomp errno %d" % ctypes.get_errno()
    return None


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    out = {"mode": mode}
    libc = ctypes.CDLL(None, use_errno=True)
    cu = ctypes.CDLL(os.environ.get("CUDAWORK_LIB", "libcuda.so.1"))
    if mode == "main_exited":
        def worker():
            start(cu, out)
            print(json.dumps(out), flush=True)
            os._exit(0)
        threading.Thread(target=worker).start()
        # exit(2) of this thread alone (no unwinding through Python's
        # frames, as pthread_exit would do).
        libc.syscall(60, 0)
    if mode == "cpuid_fault":
        libc.syscall.restype = ctypes.c_long
        if libc.syscall(158, ARCH_SET_CPUID, 0) != 0:
            out["error"] = "arch_prctl errno %d" % ctypes.get_errno()
            print(json.dumps(out), flush=True)
            return
    if mode == "trap_handled":
        seen = []
        signal.signal(signal.SIGSYS, lambda s, f: seen.append(s))
        err = trap_escapes(libc)
        if err:
            out["error"] = err
            print(json.dumps(out), flush=True)
            return
        start(cu, out)
        out["sigsys_handled"] = len(seen)
        print(json.dumps(out), flush=True)
        return
    if mode == "setuid":
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    start(cu, out)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
