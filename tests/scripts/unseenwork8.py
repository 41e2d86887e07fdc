#!/usr/bin/env python3
"""Start-ups under a per-process kernel setting the process gives itself
with prctl(2) (the eighth unseen workload, tests/scripts/unseen8-workload.sh),
then cuInit(0) and a context on device 0 (cuCtxCreate_v2). Prints one JSON
line with the CUresults.

  unseenwork8.py mdwe   PR_SET_MDWE with PR_MDWE_REFUSE_EXEC_GAIN (Linux
                        6.3): the kernel refuses a mapping that is writable
                        and executable, or that gains execute (EACCES): the
                        kernel's own MemoryDenyWriteExecute
  unseenwork8.py tsc    PR_SET_TSC with PR_TSC_SIGSEGV: the rdtsc
                        instruction faults (SIGSEGV), as some sandboxes set
  unseenwork8.py thp    PR_SET_THP_DISABLE: no transparent huge pages
  unseenwork8.py none   no setting (the baseline)

  --case NAME anywhere is ignored (it tags the command line)."""
import ctypes
import json
import os
import sys

from unseenstart import start

PR_SET_TSC, PR_TSC_SIGSEGV = 26, 2
PR_SET_THP_DISABLE = 41
PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "none"
    out = {"mode": mode}
    libc = ctypes.CDLL(None, use_errno=True)
    setting = {
        "mdwe": (PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN),
        "tsc": (PR_SET_TSC, PR_TSC_SIGSEGV),
        "thp": (PR_SET_THP_DISABLE, 1),
    }.get(mode)
    if setting is not None:
        r = libc.prctl(setting[0], ctypes.c_ulong(setting[1]), ctypes.c_ulong(0),
                       ctypes.c_ulong(0), ctypes.c_ulong(0))
        if r != 0:
            out["error"] = "prctl errno %d" % ctypes.get_errno()
            print(json.dumps(out), flush=True)
            return
    cu = ctypes.CDLL(os.environ.get("CUDAWORK_LIB", "libcuda.so.1"))
    start(cu, out)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
