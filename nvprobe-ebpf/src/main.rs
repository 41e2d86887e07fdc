//! nvprobe's kernel side: syscall tracepoints (this file), process
//! tracepoints (`procs`), libcuda uprobes (`cuda`) and driver-layer
//! kprobes/fentry (`driver`) that capture calls on NVIDIA device files and
//! hand raw bytes to user space through one ring buffer (`maps`).
//!
//! Policy lives in user space. Here we only filter cheaply (ioctl command
//! shape, then the fd's device number read from the task's fd table) and
//! copy bytes. Every program is a thin wrapper around a `try_*` function.
//!
//! Assumed syscall tracepoint layout (include/trace/events/syscalls.h and
//! the `format` files): 8 bytes of common fields, `__syscall_nr` at 8, then
//! each argument in an 8-byte slot from offset 16; `ret` of sys_exit_* at 16.
#![no_std]
#![no_main]
// An atomic add (BPF_ATOMIC BPF_ADD) for FD_GEN: the BPF target's
// atomics have no fetch_add.
#![feature(core_intrinsics)]
#![allow(internal_features)]

#[macro_use]
mod config;
mod cuda;
mod driver;
mod fdres;
mod ioctl;
mod ioctl_compat;
mod maps;
mod nccl;
mod paths;
mod procs;

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_probe_read_user, generated},
    macros::tracepoint,
    programs::TracePointContext,
};
use nvprobe_common::{
    DevKind, EventKind, FdEvent, FdOp, Inflight, MmapEvent, PathEvent, PathOp, ioctl::nvidia_shaped,
};

use crate::{
    config::{now, tid},
    fdres::{fill_header, pid_allowed, resolve_fd, wakeup_bytes},
    ioctl::{ioctl_begin, ioctl_finish},
    maps::{EVENTS, count_lost, store, take_slot, wakeup_flags, zeroed_inflight},
};

const ARG0: usize = 16;
const ARG1: usize = 24;
const ARG2: usize = 32;
const ARG3: usize = 40;
const ARG4: usize = 48;
const ARG5: usize = 56;
const RET: usize = 16;

const F_DUPFD: u64 = 0;
const F_DUPFD_CLOEXEC: u64 = 1030;
const MAP_ANONYMOUS: u64 = 0x20;

/// A syscall entry program: a `#[tracepoint]` whose body may fail with `?`
/// (a failed read ends it quietly; the exit then finds no state).
macro_rules! syscall_entry {
    ($(#[$m:meta])* $name:ident($ctx:ident) $body:block) => {
        $(#[$m])*
        #[tracepoint]
        pub fn $name($ctx: TracePointContext) -> u32 {
            let _ = (|| -> Result<(), i64> { $body })();
            0
        }
    };
}

/// An argument of the syscall tracepoint's record, loaded directly: a
/// tracepoint program may read its context, and the verifier checks each
/// load's offset (within the record, past its 8-byte common header,
/// aligned to its size: every argument is an aligned 8-byte slot). Every
/// process's traced call reads one or two, so the helper
/// (`bpf_probe_read_kernel`, a call and a fault-safe copy) is not used.
#[inline(always)]
fn arg<T: Copy>(ctx: &TracePointContext, off: usize) -> Result<T, i64> {
    // SAFETY: offsets are those of the syscall tracepoint format, with a
    // constant offset the load carries itself (the verifier refuses a
    // moved context pointer).
    Ok(unsafe { core::ptr::read_volatile(ctx.as_ptr().cast::<u8>().add(off).cast::<T>()) })
}

// ---------------------------------------------------------------------------
// ioctl: long ioctl(unsigned int fd, unsigned int cmd, unsigned long arg)
// ---------------------------------------------------------------------------

#[tracepoint]
pub fn nvprobe_ioctl_enter(ctx: TracePointContext) -> u32 {
    let _ = try_ioctl_enter(&ctx);
    0
}

fn try_ioctl_enter(ctx: &TracePointContext) -> Result<(), i64> {
    let cmd = arg::<u64>(ctx, ARG1)? as u32;
    if !nvidia_shaped(cmd) {
        return Ok(());
    }
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    if !fdres::pid_allowed_for(pid_tgid) {
        return Ok(());
    }
    let skip = crate::config::bench_skip();
    if skip & nvprobe_common::bench_skip::ENTRY_FILTER != 0 {
        return Ok(());
    }
    let fd = arg::<u64>(ctx, ARG0)? as i32;
    let (file, quiet) = fdres::resolve_fd_cached(fd, pid_tgid).ok_or(0i64)?;
    if file.kind == DevKind::None as u8 || skip & nvprobe_common::bench_skip::ENTRY_RESOLVE != 0 {
        return Ok(());
    }
    let argp = arg::<u64>(ctx, ARG2)?;
    // A quiet process's call is counted, not sent, unless it fails: its
    // start is not read (the clock is the dearest read here; the stall
    // detector times such a call from when it first sees it in flight).
    // At `--events verdicts` another process's call, mostly counted too,
    // starts on the coarse clock.
    let flags = if crate::config::quiet_levels() && quiet {
        nvprobe_common::ioctl_flags::UNTIMED
    } else if crate::config::coarse_tick() != 0 {
        nvprobe_common::ioctl_flags::COARSE
    } else {
        0
    };
    ioctl_begin(fd, file, cmd, argp, flags)
}

#[tracepoint]
pub fn nvprobe_ioctl_exit(ctx: TracePointContext) -> u32 {
    let _ = try_ioctl_exit(&ctx);
    0
}

fn try_ioctl_exit(ctx: &TracePointContext) -> Result<(), i64> {
    let ret = arg::<i64>(ctx, RET)?;
    ioctl_finish(ret)
}

/// The exit for kernels whose verifier refuses `nvprobe_ioctl_exit` as too
/// complex (Linux 6.1): `ioctl_compat.rs`.
#[tracepoint]
pub fn nvprobe_ioctl_exit_compat(ctx: TracePointContext) -> u32 {
    if let Ok(ret) = arg::<i64>(&ctx, RET) {
        let _ = ioctl_compat::ioctl_finish_compat(ret);
    }
    0
}

// ---------------------------------------------------------------------------
// open / openat / openat2: remember the path pointer; decide at exit, when
// the new fd's device is known.
// ---------------------------------------------------------------------------

#[inline(always)]
fn open_enter(op: PathOp, dfd: i32, path: u64, flags: u64, mode: u64) -> Result<(), i64> {
    if !pid_allowed() {
        return Ok(());
    }
    let mut inf = zeroed_inflight();
    inf.kind = EventKind::Path as u32;
    inf.op = op as u32;
    inf.start_ns = now();
    inf.fd = dfd;
    inf.a0 = path;
    inf.a1 = flags;
    inf.a2 = mode;
    store(inf)
}

syscall_entry! {
    /// long open(const char *filename, int flags, umode_t mode)
    nvprobe_open_enter(ctx) {
        open_enter(
            PathOp::Open,
            -100,
            arg(&ctx, ARG0)?,
            arg(&ctx, ARG1)?,
            arg(&ctx, ARG2)?,
        )
    }
}

syscall_entry! {
    /// long openat(int dfd, const char *filename, int flags, umode_t mode)
    nvprobe_openat_enter(ctx) {
        open_enter(
            PathOp::Openat,
            arg::<u64>(&ctx, ARG0)? as i32,
            arg(&ctx, ARG1)?,
            arg(&ctx, ARG2)?,
            arg(&ctx, ARG3)?,
        )
    }
}

syscall_entry! {
    /// long openat2(int dfd, const char *filename, struct open_how *how, size_t usize)
    /// struct open_how { __u64 flags; __u64 mode; __u64 resolve; }
    nvprobe_openat2_enter(ctx) {
        let how: u64 = arg(&ctx, ARG2)?;
        // SAFETY: user read through the helper.
        let hv = unsafe { bpf_probe_read_user(how as *const [u64; 2]) }.unwrap_or([0, 0]);
        open_enter(
            PathOp::Openat2,
            arg::<u64>(&ctx, ARG0)? as i32,
            arg(&ctx, ARG1)?,
            hv[0],
            hv[1],
        )
    }
}

// ---------------------------------------------------------------------------
// stat / access family: only NVIDIA-looking paths (prefix test at entry).
// ---------------------------------------------------------------------------

#[inline(always)]
fn stat_enter(op: PathOp, dfd: i32, path: u64, flags: u64, buf: u64) -> Result<(), i64> {
    if !paths::nvidia_path(path) || !pid_allowed() {
        return Ok(());
    }
    let mut inf = zeroed_inflight();
    inf.kind = EventKind::Path as u32;
    inf.op = op as u32;
    inf.start_ns = now();
    inf.fd = dfd;
    inf.a0 = path;
    inf.a1 = flags;
    inf.a3 = buf;
    store(inf)
}

syscall_entry! {
    /// long newstat(const char *filename, struct stat *statbuf)
    nvprobe_stat_enter(ctx) {
        stat_enter(PathOp::Stat, -100, arg(&ctx, ARG0)?, 0, arg(&ctx, ARG1)?)
    }
}

syscall_entry! {
    /// long newlstat(const char *filename, struct stat *statbuf)
    nvprobe_lstat_enter(ctx) {
        stat_enter(PathOp::Lstat, -100, arg(&ctx, ARG0)?, 0, arg(&ctx, ARG1)?)
    }
}

syscall_entry! {
    /// long newfstatat(int dfd, const char *filename, struct stat *statbuf, int flag)
    nvprobe_fstatat_enter(ctx) {
        stat_enter(
            PathOp::Newfstatat,
            arg::<u64>(&ctx, ARG0)? as i32,
            arg(&ctx, ARG1)?,
            arg(&ctx, ARG3)?,
            arg(&ctx, ARG2)?,
        )
    }
}

syscall_entry! {
    /// long statx(int dfd, const char *filename, unsigned flags, unsigned mask, struct statx *buffer)
    nvprobe_statx_enter(ctx) {
        stat_enter(
            PathOp::Statx,
            arg::<u64>(&ctx, ARG0)? as i32,
            arg(&ctx, ARG1)?,
            arg(&ctx, ARG2)?,
            arg(&ctx, ARG4)?,
        )
    }
}

/// mknod/mknodat of an NVIDIA path: the mode goes where stat flags go,
/// the device number in a2 (the exit writes it as st_rdev, stat_valid 3).
#[inline(always)]
fn mknod_enter(op: PathOp, dfd: i32, path: u64, mode: u64, dev: u64) -> Result<(), i64> {
    if !paths::nvidia_path(path) || !pid_allowed() {
        return Ok(());
    }
    let mut inf = zeroed_inflight();
    inf.kind = EventKind::Path as u32;
    inf.op = op as u32;
    inf.start_ns = now();
    inf.fd = dfd;
    inf.a0 = path;
    inf.a1 = mode;
    inf.a2 = dev;
    store(inf)
}

syscall_entry! {
    /// long mknod(const char *filename, umode_t mode, unsigned dev)
    nvprobe_mknod_enter(ctx) {
        mknod_enter(
            PathOp::Mknod,
            -100,
            arg(&ctx, ARG0)?,
            arg(&ctx, ARG1)?,
            arg(&ctx, ARG2)?,
        )
    }
}

syscall_entry! {
    /// long mknodat(int dfd, const char *filename, umode_t mode, unsigned dev)
    nvprobe_mknodat_enter(ctx) {
        mknod_enter(
            PathOp::Mknodat,
            arg::<u64>(&ctx, ARG0)? as i32,
            arg(&ctx, ARG1)?,
            arg(&ctx, ARG2)?,
            arg(&ctx, ARG3)?,
        )
    }
}

syscall_entry! {
    /// long access(const char *filename, int mode)
    nvprobe_access_enter(ctx) {
        stat_enter(PathOp::Access, -100, arg(&ctx, ARG0)?, arg(&ctx, ARG1)?, 0)
    }
}

syscall_entry! {
    /// long faccessat(int dfd, const char *filename, int mode)
    nvprobe_faccessat_enter(ctx) {
        stat_enter(
            PathOp::Faccessat,
            arg::<u64>(&ctx, ARG0)? as i32,
            arg(&ctx, ARG1)?,
            arg(&ctx, ARG2)?,
            0,
        )
    }
}

syscall_entry! {
    /// long faccessat2(int dfd, const char *filename, int mode, int flags)
    nvprobe_faccessat2_enter(ctx) {
        stat_enter(
            PathOp::Faccessat2,
            arg::<u64>(&ctx, ARG0)? as i32,
            arg(&ctx, ARG1)?,
            arg(&ctx, ARG2)?,
            0,
        )
    }
}

// ---------------------------------------------------------------------------
// close / dup* / fcntl(F_DUPFD*) / mmap on NVIDIA fds.
// ---------------------------------------------------------------------------

#[inline(always)]
fn fd_enter(op: FdOp, fd: i32, extra: u64, kind: EventKind) -> Result<(), i64> {
    if fd < 0 {
        return Ok(());
    }
    // A process with no NVIDIA descriptor stops here (three array reads).
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    if !maps::may_hold_nv(pid_tgid) || !fdres::pid_allowed_for(pid_tgid) {
        return Ok(());
    }
    // dup2/dup3 replace `extra` (newfd): when that is an NVIDIA file, the
    // threads' cached answers for it go, at this entry and at the exit.
    let replaced = if matches!(op, FdOp::Dup2 | FdOp::Dup3) && (extra as i32) >= 0 {
        resolve_fd(extra as i32).filter(|f| f.kind != DevKind::None as u8)
    } else {
        None
    };
    let replaces = replaced.is_some();
    let mut op = op;
    let mut file = resolve_fd(fd).ok_or(0i64)?;
    if file.kind == DevKind::None as u8 {
        let Some(r) = replaced else {
            return Ok(());
        };
        // The old fd is no NVIDIA file: the record is of the NVIDIA file
        // the call replaced (a start-up's descriptor taken from under it).
        file = r;
        op = if op == FdOp::Dup2 {
            FdOp::Dup2Replaced
        } else {
            FdOp::Dup3Replaced
        };
    }
    if op == FdOp::Close || replaces {
        maps::bump_fd_gen();
    }
    let mut inf = zeroed_inflight();
    inf.kind = kind as u32;
    inf.op = op as u32;
    inf.start_ns = now();
    inf.fd = fd;
    inf.a0 = extra;
    inf.file = file;
    inf.flags = replaces as u32;
    store(inf)
}

syscall_entry! {
    /// long close(unsigned int fd)
    nvprobe_close_enter(ctx) {
        fd_enter(
            FdOp::Close,
            arg::<u64>(&ctx, ARG0)? as i32,
            0,
            EventKind::Fd,
        )
    }
}

syscall_entry! {
    /// long close_range(unsigned int fd, unsigned int max_fd, unsigned int flags):
    /// any descriptor may go, NVIDIA ones included. For a process that may
    /// hold one the cache generation moves, and the call is a record of
    /// its range (not resolved here: user space knows which of its
    /// descriptors were NVIDIA files).
    nvprobe_close_range_enter(ctx) {
        let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
        if !maps::may_hold_nv(pid_tgid) {
            return Ok(());
        }
        maps::bump_fd_gen();
        if !fdres::pid_allowed_for(pid_tgid) {
            return Ok(());
        }
        let first: u64 = arg(&ctx, ARG0)?;
        let last: u64 = arg(&ctx, ARG1)?;
        let flags: u64 = arg(&ctx, ARG2)?;
        let mut inf = zeroed_inflight();
        inf.kind = EventKind::Fd as u32;
        inf.op = FdOp::CloseRange as u32;
        inf.start_ns = now();
        inf.fd = first as u32 as i32;
        inf.a0 = (last & 0xffff_ffff) | (flags << 32);
        store(inf)
    }
}

syscall_entry! {
    /// The exit of close_range: answers cached while it ran go too, and
    /// the entry's record is made.
    nvprobe_close_range_exit(ctx) {
        // A process that holds no NVIDIA descriptor stops here, as before.
        if !maps::may_hold_nv(aya_ebpf::helpers::bpf_get_current_pid_tgid()) {
            return Ok(());
        }
        maps::bump_fd_gen();
        let ret = arg::<i64>(&ctx, RET)?;
        match take_slot(tid(), Some(EventKind::Fd as u32)) {
            Some(inf) if inf.op == FdOp::CloseRange as u32 => exit_fd(&inf, ret, now()),
            _ => Ok(()),
        }
    }
}

syscall_entry! {
    /// long dup(unsigned int fildes)
    nvprobe_dup_enter(ctx) {
        fd_enter(FdOp::Dup, arg::<u64>(&ctx, ARG0)? as i32, 0, EventKind::Fd)
    }
}

syscall_entry! {
    /// long dup2(unsigned int oldfd, unsigned int newfd)
    nvprobe_dup2_enter(ctx) {
        fd_enter(
            FdOp::Dup2,
            arg::<u64>(&ctx, ARG0)? as i32,
            arg(&ctx, ARG1)?,
            EventKind::Fd,
        )
    }
}

syscall_entry! {
    /// long dup3(unsigned int oldfd, unsigned int newfd, int flags)
    nvprobe_dup3_enter(ctx) {
        fd_enter(
            FdOp::Dup3,
            arg::<u64>(&ctx, ARG0)? as i32,
            arg(&ctx, ARG1)?,
            EventKind::Fd,
        )
    }
}

syscall_entry! {
    /// long fcntl(unsigned int fd, unsigned int cmd, unsigned long arg)
    nvprobe_fcntl_enter(ctx) {
        let cmd: u64 = arg(&ctx, ARG1)?;
        let op = match cmd {
            F_DUPFD => FdOp::FcntlDupfd,
            F_DUPFD_CLOEXEC => FdOp::FcntlDupfdCloexec,
            _ => return Ok(()),
        };
        fd_enter(
            op,
            arg::<u64>(&ctx, ARG0)? as i32,
            arg(&ctx, ARG2)?,
            EventKind::Fd,
        )
    }
}

syscall_entry! {
    /// long mmap(unsigned long addr, unsigned long len, unsigned long prot,
    /// unsigned long flags, unsigned long fd, unsigned long off)
    nvprobe_mmap_enter(ctx) {
        let flags: u64 = arg(&ctx, ARG3)?;
        let fd = arg::<u64>(&ctx, ARG4)? as i32;
        if flags & MAP_ANONYMOUS != 0 || fd < 0 {
            return Ok(());
        }
        let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
        if !maps::may_hold_nv(pid_tgid) || !fdres::pid_allowed_for(pid_tgid) {
            return Ok(());
        }
        let file = resolve_fd(fd).ok_or(0i64)?;
        if file.kind == DevKind::None as u8 {
            return Ok(());
        }
        let mut inf = zeroed_inflight();
        inf.kind = EventKind::Mmap as u32;
        inf.start_ns = now();
        inf.fd = fd;
        inf.a0 = arg(&ctx, ARG0)?;
        inf.a1 = arg(&ctx, ARG1)?;
        inf.a2 = arg::<u64>(&ctx, ARG2)? | (flags << 32);
        inf.a3 = arg(&ctx, ARG5)?;
        inf.file = file;
        store(inf)
    }
}

// ---------------------------------------------------------------------------
// One exit program for every non-ioctl syscall above: it finds the state the
// entry left and makes the record.
// ---------------------------------------------------------------------------

#[tracepoint]
pub fn nvprobe_exit(ctx: TracePointContext) -> u32 {
    let _ = try_exit(&ctx);
    0
}

fn try_exit(ctx: &TracePointContext) -> Result<(), i64> {
    let ret = arg::<i64>(ctx, RET)?;
    // A call on no NVIDIA file (an anonymous mmap, a stat of another
    // path) that failed in start-up is sent by `procs::nvprobe_failed_exit`.
    let Some(inf) = take_slot(tid(), None) else {
        return Ok(());
    };
    let end = now();
    match EventKind::from_repr(inf.kind) {
        Some(EventKind::Path) => {
            exit_path(&inf, ret, end)?;
            Ok(())
        }
        Some(EventKind::Fd) => exit_fd(&inf, ret, end),
        Some(EventKind::Mmap) => exit_mmap(&inf, ret, end),
        _ => Ok(()),
    }
}

/// The record of a path call; false when the call is not one nvprobe
/// keeps (an open of another file).
fn exit_path(inf: &Inflight, ret: i64, end: u64) -> Result<bool, i64> {
    let op = PathOp::from_repr(inf.op).ok_or(0i64)?;
    let mut file = nvprobe_common::FileId::default();
    // The dynamic loader's open of a libcuda or a libnccl.
    let mut lib = paths::Lib::None;
    // What an open that gave no NVIDIA file named (a failed open of a
    // node, a read of the driver's /proc files).
    let mut node = paths::NvPath::Node;
    if op.is_open() {
        if ret >= 0 {
            if let Some(f) = resolve_fd(ret as i32) {
                file = f;
            }
        }
        // Keep opens that produced an NVIDIA file by any path, opens of
        // NVIDIA-looking paths whatever they produced (failures included),
        // and the dynamic loader's opens of a libcuda (found or not: a
        // process that loads one is followed from that moment, and one
        // that finds none is told why CUDA could not start).
        if file.kind == DevKind::None as u8 {
            node = paths::nvidia_path_kind(inf.a0);
        }
        if file.kind == DevKind::None as u8 && node == paths::NvPath::None {
            lib = paths::libcuda_open(inf.a0, inf.a1);
            if lib == paths::Lib::None {
                return Ok(false);
            }
            // The loader found a libcuda: wake the collector now, so that
            // it is hooked while the loader maps and relocates it, before
            // the process's first call where the race allows.
            if ret >= 0 {
                maps::wake_now();
            }
        }
    }
    // From now on this process's exit, signals and forks are reported: it
    // opened an NVIDIA file or looked for an NVIDIA path (even a missing
    // one: libcuda may only stat() a missing node and then run the
    // setuid nvidia-modprobe, whose fork, exec and exit status matter).
    let tgid = (aya_ebpf::helpers::bpf_get_current_pid_tgid() >> 32) as u32;
    // Another nvprobe's reads (a libcuda through /proc/PID/root, the
    // driver's /proc files): neither traced nor followed, or two of them
    // chase each other's reads.
    // SAFETY: plain lookup.
    if unsafe { maps::PEERS.get(&tgid) }.is_some() {
        return Ok(true);
    }
    // An open (a node, a libcuda loaded) or a mknod is the process's own
    // NVIDIA call: its start-up's failed calls are sent from now on. A
    // stat or access is a look only (a shell's `test -e /dev/nvidia0`).
    if op.is_open() || matches!(op, PathOp::Mknod | PathOp::Mknodat) {
        maps::caller(tgid);
        // A start nvprobe sees whole, of a process that held a descriptor
        // before nvprobe started: the loader's open of a libcuda, or an
        // open of a node (failed or not; a CUDA start-up opens its own).
        if op.is_open()
            && (lib == paths::Lib::Cuda || (lib == paths::Lib::None && node == paths::NvPath::Node))
        {
            maps::held_ends(tgid);
        }
    } else {
        maps::first_sight(tgid);
    }
    let Some(mut entry) = EVENTS.reserve::<PathEvent>(0) else {
        count_lost(EventKind::Path);
        return Ok(true);
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: reserved record; all fields written before submit.
    unsafe {
        fill_header(&raw mut (*ev).hdr, EventKind::Path);
        (*ev).file = file;
        (*ev).start_ns = inf.start_ns;
        (*ev).duration_ns = end.saturating_sub(inf.start_ns);
        (*ev).ret = ret;
        (*ev).op = inf.op;
        (*ev).flags = inf.a1 as u32;
        (*ev).mode = inf.a2 as u32;
        (*ev).dfd = inf.fd;
        (*ev).stat_valid = 0;
        (*ev).st_rdev = 0;
        (*ev).st_mode = 0;
        (*ev)._pad = 0;
        if matches!(op, PathOp::Mknod | PathOp::Mknodat) {
            (*ev).mode = 0;
            (*ev).stat_valid = 3;
            (*ev).st_rdev = inf.a2;
            (*ev).st_mode = inf.a1 as u32;
        } else if ret == 0 && inf.a3 != 0 {
            paths::read_stat(op, inf.a3, &mut *ev);
        }
        let n = generated::bpf_probe_read_user_str(
            (*ev).path.as_mut_ptr().cast(),
            nvprobe_common::PATH_LEN as u32,
            inf.a0 as *const _,
        );
        (*ev).path_len = if n > 0 { (n - 1) as u32 } else { 0 };
    }
    entry.submit(wakeup_flags(
        wakeup_bytes(),
        core::mem::size_of::<PathEvent>(),
    ));
    Ok(true)
}

#[inline(always)]
fn exit_fd(inf: &Inflight, ret: i64, end: u64) -> Result<(), i64> {
    if inf.op == FdOp::Close as u32 || inf.flags != 0 {
        // Answers cached while the close or the replacing dup ran.
        maps::bump_fd_gen();
    }
    if inf.file.kind == DevKind::None as u8 && inf.op != FdOp::CloseRange as u32 {
        return Ok(());
    }
    let Some(mut entry) = EVENTS.reserve::<FdEvent>(0) else {
        count_lost(EventKind::Fd);
        return Ok(());
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: reserved record; all fields written before submit.
    unsafe {
        fill_header(&raw mut (*ev).hdr, EventKind::Fd);
        (*ev).file = inf.file;
        (*ev).start_ns = inf.start_ns;
        (*ev).duration_ns = end.saturating_sub(inf.start_ns);
        (*ev).ret = ret;
        (*ev).op = inf.op;
        (*ev).fd = inf.fd;
        (*ev).arg = inf.a0;
    }
    entry.submit(wakeup_flags(
        wakeup_bytes(),
        core::mem::size_of::<FdEvent>(),
    ));
    Ok(())
}

fn exit_mmap(inf: &Inflight, ret: i64, end: u64) -> Result<(), i64> {
    let Some(mut entry) = EVENTS.reserve::<MmapEvent>(0) else {
        count_lost(EventKind::Mmap);
        return Ok(());
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: reserved record; all fields written before submit.
    unsafe {
        fill_header(&raw mut (*ev).hdr, EventKind::Mmap);
        (*ev).file = inf.file;
        (*ev).start_ns = inf.start_ns;
        (*ev).duration_ns = end.saturating_sub(inf.start_ns);
        (*ev).ret = ret;
        (*ev).addr = inf.a0;
        (*ev).len = inf.a1;
        (*ev).prot = inf.a2 as u32;
        (*ev).flags = (inf.a2 >> 32) as u32;
        (*ev).off = inf.a3;
        (*ev).fd = inf.fd;
        (*ev)._pad = 0;
    }
    entry.submit(wakeup_flags(
        wakeup_bytes(),
        core::mem::size_of::<MmapEvent>(),
    ));
    Ok(())
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
