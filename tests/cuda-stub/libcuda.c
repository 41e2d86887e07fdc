/* Test fixture, not a driver: a stand-in libcuda.so.1 that exports the
 * entry points nvprobe hooks and makes driver-style calls on the FUSE
 * stand-in device (tests/src/fakedrv.rs) named by NVPROBE_FAKE_DIR.
 * NVPROBE_STUB_MODE=fail makes cuInit fail the way a GPU attach failure
 * does: GPU_ATTACH_IDS answers NV_ERR_INVALID_DEVICE, cuInit returns
 * CUDA_ERROR_NOT_INITIALIZED (3); =hang makes cuInit sleep 3 s; =spin
 * makes it busy-loop in user space for 2.5 s; =reserve makes it reserve
 * 64 GiB of addresses as the real one reserves its virtual address range
 * (CUDA_ERROR_OUT_OF_MEMORY, 2, when the mapping is refused); =heap
 * makes it map 1 GiB of private writable memory, which RLIMIT_DATA counts
 * (2 when that is refused); =thread
 * makes it start a thread (CUDA_ERROR_OPERATING_SYSTEM, 304, when that
 * is refused); =config makes it look for a configuration file and a
 * daemon's socket that are not there (CUDA_ERROR_UNKNOWN, 999: no call
 * on an NVIDIA file fails, only those two); =seccomp installs a seccomp
 * filter whose action at uname(2) is SECCOMP_RET_KILL_PROCESS, then calls
 * uname (SIGSYS, as a systemd unit's SystemCallFilter= does to a call it
 * does not list); =killthread starts a thread that exits the process
 * with status 7 600 ms later, then ends cuInit's thread alone the same way
 * (SECCOMP_RET_KILL_THREAD). Like the real libcuda, the
 * calls after cuInit answer CUDA_ERROR_NOT_INITIALIZED (3) in a process
 * forked after it (cuMemGetInfo_v2, a start-up call, and cuLaunchKernel,
 * one of the calls only --libcuda-hooks all hooks). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

typedef int CUresult;

/* The driver version, as a whole string in .rodata the way NVIDIA's
 * libcuda carries it ("580.159.04\0"): nvprobe doctor reads it from the
 * file's contents. -DSTUB_VERSION='"575.57.08"' makes a mismatched one. */
#ifndef STUB_VERSION
#define STUB_VERSION "580.159.04"
#endif
const char nvprobe_stub_driver_version[] = STUB_VERSION;
static int ctl = -1;
static uint32_t client;
static pid_t init_pid;

static void *idle_thread(void *arg) { return arg; }

/* A seccomp filter whose action at uname(2) is `action`, then uname:
 * the calling thread (or process) ends there; 304 if it does not. */
static CUresult killed_at_uname(uint32_t action) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0), /* seccomp_data.nr */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_uname, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, action),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 304;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) return 304;
    struct utsname u;
    uname(&u);
    return 304;
}

static void *exit_later(void *arg) {
    struct timespec ts = {0, 600000000};
    while (nanosleep(&ts, &ts) != 0) {}
    _exit(7);
    return arg;
}

static uint32_t rm_control(uint32_t h, uint32_t cmd) {
    uint32_t p[8] = {h, h, cmd, 0, 0, 0, 0, 0};
    ioctl(ctl, 0xc020462a, p);
    return p[7];
}

CUresult cuInit(unsigned int flags) {
    (void)flags;
    const char *dir = getenv("NVPROBE_FAKE_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/nvidiactl", dir ? dir : "/dev");
    ctl = open(path, O_RDWR | O_CLOEXEC);
    if (ctl < 0) return 999;
    uint32_t alloc[8] = {0};
    if (ioctl(ctl, 0xc020462b, alloc) != 0 || alloc[7] != 0) return 999;
    client = alloc[2];
    init_pid = getpid();
    if (rm_control(client, 0x101) != 0) return 999;
    const char *mode = getenv("NVPROBE_STUB_MODE");
    if (mode && strcmp(mode, "reserve") == 0) {
        void *va = mmap(NULL, (size_t)64 << 30, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (va == MAP_FAILED) return 2;
        munmap(va, (size_t)64 << 30);
        return 0;
    }
    if (mode && strcmp(mode, "heap") == 0) {
        void *va = mmap(NULL, (size_t)1 << 30, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (va == MAP_FAILED) return 2;
        munmap(va, (size_t)1 << 30);
        return 0;
    }
    if (mode && strcmp(mode, "config") == 0) {
        int fd = open("/nonexistent-nvprobe-stub/gpu.conf", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un a;
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        strcpy(a.sun_path, "/nonexistent-nvprobe-stub/daemon.sock");
        int r = s >= 0 ? connect(s, (struct sockaddr *)&a, sizeof a) : -1;
        if (s >= 0) close(s);
        return r == 0 ? 0 : 999;
    }
    if (mode && strcmp(mode, "seccomp") == 0) return killed_at_uname(SECCOMP_RET_KILL_PROCESS);
    if (mode && strcmp(mode, "killthread") == 0) {
        /* The thread in cuInit is ended alone by a filter's kill-thread
         * action at uname(2); the rest of the process lives on and exits
         * with status 7 600 ms later. */
        pthread_t t;
        if (pthread_create(&t, NULL, exit_later, NULL) != 0) return 304;
        return killed_at_uname(SECCOMP_RET_KILL_THREAD);
    }
    if (mode && strcmp(mode, "thread") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, idle_thread, NULL) != 0) return 304;
        pthread_join(t, NULL);
        return 0;
    }
    if (mode && strcmp(mode, "hang") == 0) {
        /* a cuInit that takes 3 s in user space */
        struct timespec ts = {3, 0};
        while (nanosleep(&ts, &ts) != 0) {}
        return 0;
    }
    if (mode && strcmp(mode, "spin") == 0) {
        /* a cuInit that computes for 2.5 s (task state R) */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        volatile uint64_t n = 0;
        do {
            for (int i = 0; i < 100000; i++) n++;
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 2500000000L);
        return 0;
    }
    if (mode && strcmp(mode, "fail") == 0) {
        rm_control(client, 0x215); /* NV_ERR_INVALID_DEVICE from the stand-in */
        return 3;
    }
    return 0;
}

CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = ctl >= 0 ? 1 : 0; return ctl >= 0 ? 0 : 3; }
CUresult cuDeviceGet(int *d, int ordinal) { *d = ordinal; return 0; }
/* A first context: the start-up ends here (and, at --events failures or
 * verdicts, the kernel side quiets the process). */
CUresult cuCtxCreate_v2(void **ctx, unsigned int flags, int dev) {
    (void)flags;
    (void)dev;
    if (ctl < 0) return 3;
    *ctx = (void *)&client;
    return 0;
}

/* Initialised in this very process (not in a parent before a fork). */
static int live(void) { return ctl >= 0 && init_pid == getpid(); }
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b) {
    if (!live()) return 3;
    *free_b = (size_t)1 << 30;
    *total_b = (size_t)2 << 30;
    return 0;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz;
    (void)shared; (void)stream; (void)params; (void)extra;
    return live() ? 0 : 3;
}

/* Where a run-time fault surfaces (nvprobe's fault-only hooks). With
 * NVPROBE_STUB_FAULT=N set, the first cuCtxSynchronize returns N and so
 * does every later call (a sticky error, as CUDA_ERROR_ILLEGAL_ADDRESS
 * is); NVPROBE_STUB_FAULT=wait makes cuCtxSynchronize wait for ever (a
 * kernel that never ends); =until:PATH makes it wait, asleep, until PATH
 * exists, and =spin:PATH the same in a busy loop (libcuda's default spin
 * while a kernel runs), then succeed. Unset: each call succeeds. */
static int sticky;
static CUresult runtime_call(int sync) {
    const char *f = getenv("NVPROBE_STUB_FAULT");
    if (!live()) return 3;
    if (sticky) return sticky;
    if (sync && f && strcmp(f, "wait") == 0) {
        for (;;) pause();
    }
    if (sync && f && strncmp(f, "until:", 6) == 0) {
        struct timespec ts = {0, 20000000};
        while (access(f + 6, F_OK) != 0) nanosleep(&ts, NULL);
        return 0;
    }
    if (sync && f && strncmp(f, "spin:", 5) == 0) {
        volatile uint64_t n = 0;
        while (access(f + 5, F_OK) != 0) {
            for (int i = 0; i < 2000000; i++) n++;
        }
        return 0;
    }
    if (sync && f && atoi(f) > 0) sticky = atoi(f);
    return sticky;
}
CUresult cuCtxSynchronize(void) { return runtime_call(1); }
CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n) {
    (void)dst; (void)src; (void)n;
    return runtime_call(0);
}
CUresult cuMemFree_v2(unsigned long long p) { (void)p; return runtime_call(0); }
