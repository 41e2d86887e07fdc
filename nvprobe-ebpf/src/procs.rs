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
use nvprobe_common::{EventKind, ProcEvent, ProcOp};

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
    crate::cuda::thread_ended(pid_tgid);
    // SAFETY: offset from the tracepoint format.
    let group_dead: u8 = unsafe { ctx.read_at(32) }.unwrap_or(0);
    if group_dead == 0 {
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
pub fn nvprobe_proc_exec(_ctx: TracePointContext) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if is_nv(tgid) {
        // Close-on-exec descriptors are gone: so are the answers cached for them.
        crate::maps::bump_fd_gen();
        // A new program starts up again: its calls are shipped until its
        // own verdict, and its failed calls counted afresh.
        let _ = NV_PROCS.insert(&tgid, &nvprobe_common::nv_procs::FOLLOWED, 0);
        emit(|e| {
            e.op = ProcOp::Exec as u32;
            e.target_tgid = tgid;
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
    if crate::config::quiet_levels() && v & nvprobe_common::nv_procs::QUIET == 0 {
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
    emit(|e| {
        e.op = ProcOp::SignalGenerate as u32;
        e.sig = sig as i32;
        e.code = code;
        e.result = result as i32;
        e.target_tgid = tgid;
        e.target_tid = tid;
        e.si_pid = si_pid;
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

/// The errnos of a refusal or a limit: what a failed start-up can be
/// explained by (EPERM, EAGAIN, ENOMEM, EACCES, ENFILE, EMFILE, ENOSPC,
/// ENOSYS). EINVAL, EEXIST and the like are a caller's own business
/// (libcuda probes fixed addresses with MAP_FIXED_NOREPLACE).
pub const REFUSALS: [i32; 8] = [1, 11, 12, 13, 23, 24, 28, 38];
/// What the shared exit program reports for calls it does not otherwise
/// keep (mmap of anonymous memory, opens of other files): the limits
/// (EAGAIN, ENOMEM, ENFILE, EMFILE) and EPERM (a filter: a file's mode
/// answers EACCES), not EACCES or ENOENT, which a search along a library
/// path meets as a matter of course.
pub const LIMITS: [i32; 5] = [1, 11, 12, 23, 24];

/// sys_exit of the calls a start-up needs besides the NVIDIA ones
/// (clone, clone3, memfd_create, eventfd2, pipe2):
/// `ret` @16, `__syscall_nr` @8. Every process pays one read and one
/// compare; only a failure of a process in start-up goes further.
#[tracepoint]
pub fn nvprobe_os_exit(ctx: TracePointContext) -> u32 {
    // SAFETY: offset from the syscall tracepoint format.
    let ret: i64 = unsafe { ctx.read_at(16) }.unwrap_or(0);
    if ret < 0 {
        start_call_failed(&ctx, ret, &REFUSALS);
    }
    0
}

/// A failed call of a process in start-up that no other record reports:
/// keep it (at most nv_procs::FAILS_SENT per program) when its errno is
/// in `errnos`.
#[inline(always)]
pub fn start_call_failed(ctx: &TracePointContext, ret: i64, errnos: &[i32]) {
    use nvprobe_common::nv_procs::{FAIL_ONE, FAILS_SENT, STARTED};
    let errno = ret.wrapping_neg() as i32;
    if !errnos.contains(&errno) {
        return;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    // SAFETY: plain lookup of a u8.
    let Some(v) = (unsafe { NV_PROCS.get(&tgid) }).copied() else {
        return;
    };
    if v & STARTED != 0 || v / FAIL_ONE >= FAILS_SENT {
        return;
    }
    // Racing threads may both pass: the bound is loose by a few records.
    let _ = NV_PROCS.insert(&tgid, &(v + FAIL_ONE), 0);
    // SAFETY: offset from the syscall tracepoint format.
    let nr: i32 = unsafe { ctx.read_at::<i64>(8) }.unwrap_or(-1) as i32;
    emit(|e| {
        e.op = ProcOp::CallFailed as u32;
        e.code = nr;
        e.errno = errno;
        e.target_tgid = tgid;
        e.target_tid = pid_tgid as u32;
    });
}
