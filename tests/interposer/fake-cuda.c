/* A preloaded library that exports the CUDA driver API's cuInit and answers
 * it in libcuda's place, as GPU-sharing shims, test doubles and profilers
 * do (issue 22's interposer case). Built by tests/scripts/build-interposer.sh.
 *
 * FAKE_CUDA_FORWARD=1: call libcuda's cuInit (dlsym RTLD_NEXT) and return
 * its answer, as a wrapper does; otherwise return CUDA_ERROR_NO_DEVICE
 * (100) without calling it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

int cuInit(unsigned int flags)
{
    const char *fwd = getenv("FAKE_CUDA_FORWARD");
    if (fwd && fwd[0] == '1') {
        int (*real)(unsigned int) = (int (*)(unsigned int))dlsym(RTLD_NEXT, "cuInit");
        return real ? real(flags) : 999;
    }
    return 100;
}
