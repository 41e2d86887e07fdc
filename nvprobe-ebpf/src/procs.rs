//! Lifecycle and signals of processes that use NVIDIA devices: enough to
//! say that a cuInit was killed, by whom, and how the process ended.
//!
//! Assumed shapes: tracepoint sched/sched_process_exit (comm @8, pid @24,
//! prio @28, group_dead @32), sched/sched_process_exec (filename data_loc
//! @8, pid @12, old_pid @16), signal/signal_deliver (sig @8, errno @12,
//! code @16, sa_handler @24, sa_flags @32); raw tracepoint signal_generate
//! (int sig, struct kernel_siginfo *info, struct task_struct *task, int
//! group, int result). kernel_siginfo: si_signo @0, si_errno @4, si_code
//! @8, si_pid @16 (uapi layout).
//!
//! And the calls a start-up needs besides the NVIDIA ones (threads,
//! mappings, descriptors): their failures, for processes in start-up only.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_kernel},
    macros::{raw_tracepoint, tracepoint},
    programs::{RawTracePointContext, TracePointContext},
};
use nvprobe_common::{CallFailedEvent, EventKind, ProcEvent, ProcOp};

use crate::{
    fdres::{
        current_task_ptr, fill_header, off_task_exit_code, off_task_pid, off_task_tgid, task_field,
        wakeup_bytes,
    },
    maps::{EVENTS, NV_PROCS, count_lost, wakeup_flags},
};

#[inline(always)]
fn is_nv(tgid: u32) -> bool {
    // SAFETY: plain lookup.
    unsafe { NV_PROCS.get(&tgid) }.is_some()
}

/// Reserve, fill the header from the current task, let `f` fill the rest.
#[inline(always)]
fn emit(f: impl FnOnce(&mut ProcEvent)) {
    let Some(mut entry) = EVENTS.reserve::<ProcEvent>(0) else {
        count_lost(EventKind::Proc);
        return;
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: reserved record; every field written before submit.
    unsafe {
        fill_header(&raw mut (*ev).hdr, EventKind::Proc);
        (*ev).op = 0;
        (*ev).sig = 0;
        (*ev).code = 0;
        (*ev).errno = 0;
        (*ev).result = 0;
        (*ev).exit_code = 0;
        (*ev).target_tgid = 0;
        (*ev).target_tid = 0;
        (*ev).si_pid = 0;
        (*ev).unsent = 0;
        (*ev).sa_handler = 0;
        (*ev).sa_flags = 0;
        f(&mut *ev);
    }
    entry.submit(wakeup_flags(
        wakeup_bytes(),
        core::mem::size_of::<ProcEvent>(),
    ));
}

#[tracepoint]
pub fn nvprobe_proc_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    flush_unsent(pid_tgid);
    crate::maps::clean_forget(pid_tgid as u32);
    crate::cuda::thread_ended(pid_tgid);
    // SAFETY: offset from the tracepoint format.
    let group_dead: u8 = unsafe { ctx.read_at(32) }.unwrap_or(0);
    let in_cuinit = crate::cuda::ended_in_cuinit(pid_tgid);
    if group_dead == 0 {
        // A thread ending alone in cuInit (its process lives on, waiting
        // for a call that will never return): which, and how. Not one
        // ending with its whole process (that end has its own record).
        if in_cuinit && is_nv(tgid) && !crate::fdres::group_ending() {
            let code = task_field(current_task_ptr(), off_task_exit_code()).unwrap_or(0) as i32;
            emit(|e| {
                e.op = ProcOp::ThreadExit as u32;
                e.exit_code = code;
                e.target_tgid = tgid;
                e.target_tid = pid_tgid as u32;
            });
        }
        return 0;
    }
    if !is_nv(tgid) {
        return 0;
    }
    // (A libcuda user is followed from its first start-up call.)
    crate::cuda::process_ended(tgid);
    // SAFETY: plain lookup of a u64.
    let unsent = unsafe { crate::maps::UNSENT_PROCS.get(&tgid) }
        .copied()
        .unwrap_or(0);
    let _ = crate::maps::UNSENT_PROCS.remove(&tgid);
    // Its pid may be reused by a process with other files: its threads'
    // cached answers go (only a followed process can have any).
    crate::maps::bump_fd_gen();
    let code = task_field(current_task_ptr(), off_task_exit_code()).unwrap_or(0) as i32;
    emit(|e| {
        e.op = ProcOp::Exit as u32;
        e.exit_code = code;
        e.target_tgid = tgid;
        e.unsent = if unsent > u32::MAX as u64 {
            u32::MAX
        } else {
            unsent as u32
        };
    });
    let _ = NV_PROCS.remove(&tgid);
    let _ = crate::maps::FAILS.remove(&tgid);
    0
}

/// An ending thread's count of calls counted instead of sent goes to its
/// process (its cache slot may be another thread's next).
#[inline(always)]
fn flush_unsent(pid_tgid: u64) {
    use nvprobe_common::fastpath::FDCACHE_SLOTS;
    let tid = pid_tgid as u32;
    let Some(c) = crate::maps::FDCACHE.get_ptr_mut(tid & (FDCACHE_SLOTS - 1)) else {
        return;
    };
    // SAFETY: pointer into the array map's value (this thread's slot).
    unsafe {
        if (*c).tid == tid && (*c).tgid == (pid_tgid >> 32) as u32 && (*c).unsent != 0 {
            // (Not after the process's exit record: see add_unsent.)
            crate::maps::add_unsent((*c).tgid, (*c).unsent as u64);
            (*c).unsent = 0;
        }
    }
}

#[tracepoint]
pub fn nvprobe_proc_exec(ctx: TracePointContext) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    // A thread other than the leader that exec'd now has the leader's
    // tid; its old one's answer goes (old_pid @16).
    // SAFETY: offset from the tracepoint format.
    let old: i32 = unsafe { ctx.read_at(16) }.unwrap_or(0);
    // The calls the old program's threads counted instead of sending are
    // the old program's: the exec'ing thread's (its cache slot is its old
    // tid's; the other threads' were added as they ended in the exec) go
    // with the exec record, and the new program counts afresh.
    flush_unsent(((tgid as u64) << 32) | (old as u32 as u64));
    if old as u32 != tgid {
        crate::maps::clean_forget(old as u32);
    }
    if is_nv(tgid) {
        // Close-on-exec descriptors are gone: so are the answers cached for them.
        crate::maps::bump_fd_gen();
        // A new program starts up again: its calls are shipped until its
        // own verdict, and its failed calls counted afresh.
        let _ = NV_PROCS.insert(&tgid, &nvprobe_common::nv_procs::FOLLOWED, 0);
        let _ = crate::maps::FAILS.remove(&tgid);
        // SAFETY: plain lookup of a u64.
        let unsent = unsafe { crate::maps::UNSENT_PROCS.get(&tgid) }
            .copied()
            .unwrap_or(0);
        let _ = crate::maps::UNSENT_PROCS.remove(&tgid);
        emit(|e| {
            e.op = ProcOp::Exec as u32;
            e.target_tgid = tgid;
            e.unsent = if unsent > u32::MAX as u64 {
                u32::MAX
            } else {
                unsent as u32
            };
        });
    }
    0
}

/// raw tracepoint sched_process_fork(struct task_struct *parent,
/// struct task_struct *child): a new process (not a thread) of an NVIDIA
/// process is followed too (nvidia-modprobe helpers, forked workers).
#[raw_tracepoint(tracepoint = "sched_process_fork")]
pub fn nvprobe_proc_fork(ctx: RawTracePointContext) -> u32 {
    let parent_tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if !is_nv(parent_tgid) {
        return 0;
    }
    let child: u64 = ctx.arg(1);
    let (Some(pid), Some(tgid)) = (
        task_field(child, off_task_pid()),
        task_field(child, off_task_tgid()),
    ) else {
        return 0;
    };
    if pid != tgid {
        return 0; // a thread
    }
    crate::maps::first_sight(tgid);
    emit(|e| {
        e.op = ProcOp::Fork as u32;
        e.target_tgid = tgid;
        e.target_tid = pid;
    });
    0
}

/// oom/mark_victim: `pid` @8 (the victim's task; its tgid when the OOM
/// killer picked the thread group's leader, as it does unless the leader
/// has exited). Only for processes nvprobe follows.
#[tracepoint]
pub fn nvprobe_oom_victim(ctx: TracePointContext) -> u32 {
    // SAFETY: offset from the tracepoint format.
    let pid: i32 = unsafe { ctx.read_at(8) }.unwrap_or(0);
    let pid = pid as u32;
    // SAFETY: plain lookup of a u8.
    if pid == 0 || unsafe { NV_PROCS.get(&pid) }.is_none() {
        return 0;
    }
    emit(|e| {
        e.op = ProcOp::OomVictim as u32;
        e.sig = 9;
        e.target_tgid = pid;
        e.target_tid = pid;
    });
    0
}

#[raw_tracepoint(tracepoint = "signal_generate")]
pub fn nvprobe_signal_generate(ctx: RawTracePointContext) -> u32 {
    let sig: u64 = ctx.arg(0);
    let info: u64 = ctx.arg(1);
    let task: u64 = ctx.arg(2);
    let result: u64 = ctx.arg(4);
    let Some(tgid) = task_field(task, off_task_tgid()) else {
        return 0;
    };
    // SAFETY: plain lookup of a u8.
    let Some(v) = (unsafe { NV_PROCS.get(&tgid) }).copied() else {
        return 0;
    };
    // Not past its first context (a start-up, or a process quiet since
    // nvprobe started): the call the signal came during is sent.
    use nvprobe_common::nv_procs::{HELD, QUIET};
    if crate::config::quiet_levels() && v & (QUIET | HELD) != QUIET {
        // SAFETY: helper without arguments.
        let now = unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() };
        let _ = crate::maps::SIGNALLED.insert(&tgid, &now, 0);
        crate::maps::ship_next(tgid, v, true);
    }
    let tid = task_field(task, off_task_pid()).unwrap_or(0);
    // SEND_SIG_NOINFO (0) and SEND_SIG_PRIV (1) are not pointers.
    let (code, si_pid) = if info > 1 {
        // SAFETY: probe reads of the kernel siginfo.
        unsafe {
            (
                bpf_probe_read_kernel((info + 8) as *const i32).unwrap_or(0),
                bpf_probe_read_kernel((info + 16) as *const u32).unwrap_or(0),
            )
        }
    } else if info == 1 {
        (0x80, 0) // SI_KERNEL
    } else {
        (0, 0) // SI_USER
    };
    // SIGSYS from a seccomp filter (SYS_SECCOMP): the refused call and
    // its architecture, from siginfo's _sigsys (_call_addr @16, _syscall
    // @24, _arch @28: the user ABI's layout), in place of si_pid and the
    // exit code, which a signal has none of.
    let (si_pid, syscall) = if sig == 31 && code == 1 && info > 1 {
        // SAFETY: probe reads of the kernel siginfo.
        unsafe {
            (
                bpf_probe_read_kernel((info + 28) as *const u32).unwrap_or(0),
                bpf_probe_read_kernel((info + 24) as *const i32).unwrap_or(0),
            )
        }
    } else {
        (si_pid, 0)
    };
    emit(|e| {
        e.op = ProcOp::SignalGenerate as u32;
        e.sig = sig as i32;
        e.code = code;
        e.result = result as i32;
        e.target_tgid = tgid;
        e.target_tid = tid;
        e.si_pid = si_pid;
        e.exit_code = syscall;
    });
    0
}

#[tracepoint]
pub fn nvprobe_signal_deliver(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !is_nv(tgid) {
        return 0;
    }
    // SAFETY: offsets from the tracepoint format.
    let (sig, errno, code, handler, flags) = unsafe {
        (
            ctx.read_at::<i32>(8).unwrap_or(0),
            ctx.read_at::<i32>(12).unwrap_or(0),
            ctx.read_at::<i32>(16).unwrap_or(0),
            ctx.read_at::<u64>(24).unwrap_or(0),
            ctx.read_at::<u64>(32).unwrap_or(0),
        )
    };
    emit(|e| {
        e.op = ProcOp::SignalDeliver as u32;
        e.sig = sig;
        e.errno = errno;
        e.code = code;
        e.target_tgid = tgid;
        e.target_tid = pid_tgid as u32;
        e.sa_handler = handler;
        e.sa_flags = flags;
    });
    0
}

/// Where the syscall number and the first four arguments are in the
/// `struct pt_regs` that raw tracepoint `sys_exit` gets (x86_64:
/// orig_ax @120, di @112, si @104, dx @96, r10 @56; arm64: syscallno
/// @280, orig_x0 @272 (x0 holds the return by now), x1 @8, x2 @16, x3
/// @24).
#[cfg(bpf_target_arch = "aarch64")]
mod regs {
    pub const NR: u64 = 280;
    pub const NR_IS_I32: bool = true;
    pub const ARG0: u64 = 272;
    pub const ARG1: u64 = 8;
    pub const ARG2: u64 = 16;
    pub const ARG3: u64 = 24;
    /// futex; read, readv, recvfrom, recvmsg, accept, accept4;
    /// connect (asm-generic/unistd.h).
    pub const FUTEX: i32 = 98;
    pub const NONBLOCKING_READS: [i32; 6] = [63, 65, 207, 212, 202, 242];
    pub const CONNECT: i32 = 203;
    /// Calls whose first argument is a path (none: the generic table has
    /// only the *at forms).
    pub const PATH_ARG0: [i32; 1] = [-1];
    /// Calls whose second argument is a path: faccessat, mknodat, mkdirat,
    /// unlinkat, symlinkat, linkat, renameat, mount, statfs, truncate,
    /// chdir, chroot, fchmodat, fchownat, openat, readlinkat, newfstatat,
    /// execve (first), statx, openat2, faccessat2, execveat, renameat2,
    /// inotify_add_watch, getxattr and lgetxattr (first).
    pub const PATH_ARG1: [i32; 19] = [
        48, 33, 34, 35, 36, 37, 38, 40, 53, 54, 56, 78, 79, 291, 437, 439, 281, 276, 27,
    ];
}
#[cfg(not(bpf_target_arch = "aarch64"))]
mod regs {
    pub const NR: u64 = 120;
    pub const NR_IS_I32: bool = false;
    pub const ARG0: u64 = 112;
    pub const ARG1: u64 = 104;
    pub const ARG2: u64 = 96;
    pub const ARG3: u64 = 56;
    /// futex; read, readv, recvfrom, recvmsg, accept, accept4; connect
    /// (arch/x86/entry/syscalls/syscall_64.tbl).
    pub const FUTEX: i32 = 202;
    pub const NONBLOCKING_READS: [i32; 6] = [0, 19, 45, 47, 43, 288];
    pub const CONNECT: i32 = 42;
    /// Calls whose first argument is a path: open, stat, lstat, access,
    /// execve, truncate, chdir, rename, mkdir, rmdir, creat, link, unlink,
    /// symlink, readlink, chmod, chown, lchown, mknod, statfs, chroot,
    /// umount2, getxattr, lgetxattr, listxattr.
    pub const PATH_ARG0: [i32; 25] = [
        2, 4, 6, 21, 59, 76, 80, 82, 83, 84, 85, 86, 87, 88, 89, 90, 92, 94, 133, 137, 161, 166,
        191, 192, 194,
    ];
    /// Calls whose second argument is a path: mount, inotify_add_watch,
    /// openat, mkdirat, mknodat, fchownat, newfstatat, unlinkat, renameat,
    /// linkat, readlinkat, fchmodat, faccessat, utimensat, renameat2,
    /// execveat, statx, openat2, faccessat2.
    pub const PATH_ARG1: [i32; 19] = [
        165, 254, 257, 258, 259, 260, 262, 263, 264, 265, 267, 268, 269, 280, 316, 322, 332, 437,
        439,
    ];
}

/// Raw tracepoint `sys_exit(struct pt_regs *regs, long ret)`: a failed
/// system call of a process in start-up, whatever the call (the layer
/// beneath the rules: what strace would show failing, without ptrace).
/// Every process's call pays one read and one compare; a failure goes on
/// to one lookup, and only a followed process not past its first context
/// further. ERESTART* (-512..-516) are the kernel's own (the call is
/// restarted or fails with EINTR, which is seen then).
#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn nvprobe_failed_exit(ctx: RawTracePointContext) -> u32 {
    let ret: i64 = ctx.arg(1);
    if ret >= 0 || ret < -4095 || (-516..=-512).contains(&ret) {
        return 0;
    }
    start_call_failed(&ctx, ret);
    0
}

#[inline(always)]
fn read_u64(at: u64) -> u64 {
    // SAFETY: a read of kernel memory through the helper (the syscall's
    // saved registers); 0 when it faults.
    unsafe { bpf_probe_read_kernel(at as *const u64) }.unwrap_or(0)
}

/// A failed call of a process in start-up: sent, up to
/// `call_failed::SENT_MAX` per program (then counted in FAILS_UNSENT).
#[inline(always)]
fn start_call_failed(ctx: &RawTracePointContext, ret: i64) {
    use nvprobe_common::{
        call_failed::SENT_MAX,
        nv_procs::{CALLER, STARTED},
    };
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    // SAFETY: plain lookup of a u8.
    let Some(v) = (unsafe { NV_PROCS.get(&tgid) }).copied() else {
        return;
    };
    // Not yet in a CUDA start-up (followed from its parent only), or past it.
    if v & (STARTED | CALLER) != CALLER {
        return;
    }
    let errno = ret.wrapping_neg() as i32;
    let r: u64 = ctx.arg(0);
    let raw_nr = read_u64(r + regs::NR);
    let nr = if regs::NR_IS_I32 {
        raw_nr as u32 as i32
    } else {
        raw_nr as i32
    };
    if nr == regs::FUTEX || (errno == 11 && regs::NONBLOCKING_READS.contains(&nr)) {
        return;
    }
    // Racing threads may both pass: the bound is loose by a few records.
    let sent = match crate::maps::FAILS.get_ptr_mut(&tgid) {
        // SAFETY: pointer into the map's value.
        Some(p) => unsafe {
            let n = *p;
            if n >= SENT_MAX {
                crate::maps::count_fails_unsent();
                return;
            }
            *p = n + 1;
            n
        },
        None => {
            let _ = crate::maps::FAILS.insert(&tgid, &1, 0);
            0
        }
    };
    let (a0, a1) = (read_u64(r + regs::ARG0), read_u64(r + regs::ARG1));
    let path = if regs::PATH_ARG0.contains(&nr) {
        a0
    } else if regs::PATH_ARG1.contains(&nr) {
        a1
    } else if nr == regs::CONNECT && a1 != 0 {
        // struct sockaddr_un: sun_family (AF_UNIX 1) @0, sun_path @2.
        // SAFETY: a user read through the helper.
        let family: u16 =
            unsafe { aya_ebpf::helpers::bpf_probe_read_user(a1 as *const u16) }.unwrap_or(0);
        if family == 1 { a1 + 2 } else { 0 }
    } else {
        0
    };
    let Some(mut entry) = EVENTS.reserve::<CallFailedEvent>(0) else {
        count_lost(EventKind::Proc);
        return;
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: reserved record; every field written before submit.
    unsafe {
        fill_header(&raw mut (*ev).proc.hdr, EventKind::Proc);
        let p = &raw mut (*ev).proc;
        (*p).op = ProcOp::CallFailed as u32;
        (*p).sig = 0;
        (*p).code = nr;
        (*p).errno = errno;
        (*p).result = 0;
        (*p).exit_code = 0;
        (*p).target_tgid = tgid;
        (*p).target_tid = pid_tgid as u32;
        (*p).si_pid = 0;
        (*p).unsent = 0;
        (*p).sa_handler = 0;
        (*p).sa_flags = 0;
        (*ev).args = [a0, a1];
        (*ev).args_more = [read_u64(r + regs::ARG2), read_u64(r + regs::ARG3)];
        let (maps, vm, data) = crate::fdres::mm_sizes();
        (*ev).map_count = maps;
        (*ev)._pad = 0;
        (*ev).vm_bytes = vm;
        (*ev).data_bytes = data;
        (*ev).seq = sent + 1;
        (*ev).path_len = 0;
        (*ev).path[0] = 0;
        if path != 0 {
            let n = aya_ebpf::helpers::generated::bpf_probe_read_user_str(
                (*ev).path.as_mut_ptr().cast(),
                nvprobe_common::PATH_LEN as u32,
                path as *const _,
            );
            (*ev).path_len = if n > 0 { (n - 1) as u32 } else { 0 };
        }
    }
    entry.submit(wakeup_flags(
        wakeup_bytes(),
        core::mem::size_of::<CallFailedEvent>(),
    ));
}
