/* An LD_PRELOAD shim that makes libc's own wrappers fail a call without
 * any system call, as a sandboxing or fault-injection preload does (the
 * sixth batch of unseen cases, tests/scripts/unseen6-workload.sh):
 *
 *   NVSHIM_OPEN=PATH:ERRNO   open/open64/openat/openat64 of PATH fail
 *                            with ERRNO, never reaching the kernel
 *   NVSHIM_ESCAPE=N:ERRNO    the Nth ioctl whose request is an NVIDIA
 *                            escape (_IOC_TYPE 'F') fails with ERRNO,
 *                            never reaching the kernel
 *
 * Built by tests/scripts/build-interposer.sh (gcc only). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

static int split(const char *env, char *first, size_t n, int *err)
{
    const char *v = getenv(env);
    const char *colon;
    size_t len;
    if (v == NULL || (colon = strrchr(v, ':')) == NULL)
        return 0;
    len = (size_t)(colon - v);
    if (len >= n)
        return 0;
    memcpy(first, v, len);
    first[len] = '\0';
    *err = atoi(colon + 1);
    return 1;
}

static int refused(const char *path)
{
    char want[4096];
    int err;
    if (path == NULL || !split("NVSHIM_OPEN", want, sizeof want, &err))
        return 0;
    if (strcmp(path, want) != 0)
        return 0;
    errno = err;
    return 1;
}

static mode_t mode_of(int flags, va_list ap)
{
    return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

#define OPEN_LIKE(name)                                                       \
    int name(const char *path, int flags, ...)                                \
    {                                                                         \
        static int (*real)(const char *, int, ...);                           \
        va_list ap;                                                           \
        mode_t m;                                                             \
        if (refused(path))                                                    \
            return -1;                                                        \
        if (real == NULL)                                                     \
            real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, #name);  \
        va_start(ap, flags);                                                  \
        m = mode_of(flags, ap);                                               \
        va_end(ap);                                                           \
        return real(path, flags, m);                                          \
    }

#define OPENAT_LIKE(name)                                                     \
    int name(int dir, const char *path, int flags, ...)                       \
    {                                                                         \
        static int (*real)(int, const char *, int, ...);                      \
        va_list ap;                                                           \
        mode_t m;                                                             \
        if (refused(path))                                                    \
            return -1;                                                        \
        if (real == NULL)                                                     \
            real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT,     \
                                                               #name);        \
        va_start(ap, flags);                                                  \
        m = mode_of(flags, ap);                                               \
        va_end(ap);                                                           \
        return real(dir, path, flags, m);                                     \
    }

OPEN_LIKE(open)
OPEN_LIKE(open64)
OPENAT_LIKE(openat)
OPENAT_LIKE(openat64)

int ioctl(int fd, unsigned long req, ...)
{
    static int (*real)(int, unsigned long, ...);
    static int seen;
    char nth[32];
    int err;
    va_list ap;
    void *arg;
    va_start(ap, req);
    arg = va_arg(ap, void *);
    va_end(ap);
    if (((req >> 8) & 0xff) == 'F' && split("NVSHIM_ESCAPE", nth, sizeof nth, &err)) {
        if (__atomic_add_fetch(&seen, 1, __ATOMIC_SEQ_CST) == atoi(nth)) {
            errno = err;
            return -1;
        }
    }
    if (real == NULL)
        real = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
    return real(fd, req, arg);
}
