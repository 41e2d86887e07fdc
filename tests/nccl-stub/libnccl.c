/* Test fixture, not NCCL: a stand-in libnccl.so.2 that exports the entry
 * points nvprobe hooks with nccl.h's prototypes and does nothing: a
 * communicator is a small allocation, a collective returns ncclSuccess at
 * once. nvprobe reads their arguments (the unique id passed by value, the
 * communicator, count, datatype, op, stream) at the entry, as it does in
 * the real library. */
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t;
typedef void *ncclComm_t;

struct comm { int rank, nranks; };

ncclResult_t ncclGetVersion(int *v) { *v = 22803; return 0; }
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0x5a, sizeof *id);
    return 0;
}
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    (void)id;
    if (rank < 0 || rank >= nranks) return 4; /* ncclInvalidArgument */
    struct comm *c = malloc(sizeof *c);
    if (!c) return 2;
    c->rank = rank;
    c->nranks = nranks;
    *comm = c;
    return 0;
}
ncclResult_t ncclAllReduce(const void *s, void *r, size_t count, int dtype, int op, ncclComm_t comm,
                           void *stream) {
    (void)s; (void)r; (void)count; (void)dtype; (void)op; (void)stream;
    return comm ? 0 : 4;
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t count, int dtype, int root, ncclComm_t comm,
                           void *stream) {
    (void)s; (void)r; (void)count; (void)dtype; (void)root; (void)stream;
    return comm ? 0 : 4;
}
ncclResult_t ncclReduce(const void *s, void *r, size_t count, int dtype, int op, int root,
                        ncclComm_t comm, void *stream) {
    (void)s; (void)r; (void)count; (void)dtype; (void)op; (void)root; (void)stream;
    return comm ? 0 : 4;
}
ncclResult_t ncclSend(const void *s, size_t count, int dtype, int peer, ncclComm_t comm, void *stream) {
    (void)s; (void)count; (void)dtype; (void)peer; (void)stream;
    return comm ? 0 : 4;
}
ncclResult_t ncclRecv(void *r, size_t count, int dtype, int peer, ncclComm_t comm, void *stream) {
    (void)r; (void)count; (void)dtype; (void)peer; (void)stream;
    return comm ? 0 : 4;
}
ncclResult_t ncclGroupStart(void) { return 0; }
ncclResult_t ncclGroupEnd(void) { return 0; }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { free(comm); return 0; }
ncclResult_t ncclCommAbort(ncclComm_t comm) { free(comm); return 0; }
