/* Test fixture: one rank of a stand-in NCCL job. Usage:
 *   rank LIBCUDA LIBNCCL RANK NRANKS COLLECTIVES
 * dlopens the stand-in libcuda and libnccl, prints "ready" and waits for a
 * line on stdin (the test waits for nvprobe to hook both), then starts
 * CUDA (cuInit, a context), makes a communicator from a unique id of 128
 * bytes of NVPROBE_NCCL_ID_BYTE (default 0x5a) with rank 7 at byte 0,
 * makes COLLECTIVES ncclAllReduce calls (count 1024 plus the call's
 * number, float32, sum, stream 0x5000 plus the rank) and one grouped
 * ncclSend/ncclRecv pair, prints "collectives", then calls
 * cuCtxSynchronize (which the stand-in libcuda holds as
 * NVPROBE_STUB_FAULT says), destroys the communicator and prints "done". */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: rank LIBCUDA LIBNCCL RANK NRANKS COLLECTIVES\n");
        return 2;
    }
    void *cu = dlopen(argv[1], RTLD_NOW);
    void *nc = dlopen(argv[2], RTLD_NOW);
    if (!cu || !nc) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    int rank = atoi(argv[3]), nranks = atoi(argv[4]), n = atoi(argv[5]);
    int (*cu_init)(unsigned) = (int (*)(unsigned))dlsym(cu, "cuInit");
    int (*ctx_create)(void **, unsigned, int) = (int (*)(void **, unsigned, int))dlsym(cu, "cuCtxCreate_v2");
    int (*sync)(void) = (int (*)(void))dlsym(cu, "cuCtxSynchronize");
    int (*init_rank)(void **, int, ncclUniqueId, int) =
        (int (*)(void **, int, ncclUniqueId, int))dlsym(nc, "ncclCommInitRank");
    int (*all_reduce)(const void *, void *, size_t, int, int, void *, void *) =
        (int (*)(const void *, void *, size_t, int, int, void *, void *))dlsym(nc, "ncclAllReduce");
    int (*send)(const void *, size_t, int, int, void *, void *) =
        (int (*)(const void *, size_t, int, int, void *, void *))dlsym(nc, "ncclSend");
    int (*recv)(void *, size_t, int, int, void *, void *) =
        (int (*)(void *, size_t, int, int, void *, void *))dlsym(nc, "ncclRecv");
    int (*group_start)(void) = (int (*)(void))dlsym(nc, "ncclGroupStart");
    int (*group_end)(void) = (int (*)(void))dlsym(nc, "ncclGroupEnd");
    int (*destroy)(void *) = (int (*)(void *))dlsym(nc, "ncclCommDestroy");
    if (!cu_init || !ctx_create || !sync || !init_rank || !all_reduce || !send || !recv ||
        !group_start || !group_end || !destroy) {
        fprintf(stderr, "a symbol is missing\n");
        return 2;
    }
    printf("ready\n");
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) return 2;
    void *ctx = NULL;
    int r = cu_init(0);
    int c = ctx_create(&ctx, 0, 0);
    ncclUniqueId id;
    const char *b = getenv("NVPROBE_NCCL_ID_BYTE");
    memset(&id, b ? (int)strtol(b, NULL, 0) : 0x5a, sizeof id);
    id.internal[0] = 7;
    void *comm = NULL;
    int i = init_rank(&comm, nranks, id, rank);
    static float buf[4096];
    int failed = 0;
    for (int k = 0; k < n; k++) {
        failed += all_reduce(buf, buf, 1024 + (size_t)k, 7, 0, comm, (void *)(0x5000UL + rank)) != 0;
    }
    group_start();
    failed += send(buf, 16, 7, (rank + 1) % nranks, comm, (void *)(0x5000UL + rank)) != 0;
    failed += recv(buf, 16, 7, (rank + nranks - 1) % nranks, comm, (void *)(0x5000UL + rank)) != 0;
    group_end();
    printf("collectives %d %d %d %d\n", r, c, i, failed);
    fflush(stdout);
    int s = sync();
    destroy(comm);
    printf("done %d\n", s);
    fflush(stdout);
    return r || c || i || failed || s;
}
