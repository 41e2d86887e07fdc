/* A program linked with -lcuda that calls cuInit and cuDeviceGetCount by
 * their names (resolved by the dynamic loader, so an LD_PRELOAD library
 * that exports them answers first). Prints {"cuInit": N, "count": M} and
 * exits 1 when cuInit fails. Built by tests/scripts/build-interposer.sh
 * against a link-time libcuda.so.1 of its own. */
#include <stdio.h>

int cuInit(unsigned int flags);
int cuDeviceGetCount(int *count);

int main(void)
{
    int r = cuInit(0);
    int count = -1;
    if (r == 0)
        cuDeviceGetCount(&count);
    printf("{\"cuInit\": %d, \"count\": %d}\n", r, count);
    return r ? 1 : 0;
}
