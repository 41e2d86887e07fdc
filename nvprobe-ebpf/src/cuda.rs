//! libcuda uprobes: one entry and one return program for every hooked
//! function, told apart by the attach cookie (the function's number in
//! nvprobe_common::CUDA_FUNCS).
//!
//! Assumed prototypes (cuda.h): CUresult cuInit(unsigned int flags);
//! cuDriverGetVersion(int *); cuDeviceGetCount(int *); cuDeviceGet(CUdevice *,
//! int ordinal); cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
//! cuCtxCreate*(CUcontext *, …).

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user, generated},
    macros::{map, uprobe, uretprobe},
    maps::{Array, LruHashMap, PerCpuArray},
    programs::{ProbeContext, RetProbeContext},
};
use nvprobe_common::{
    CUDA_ENTER, CUDA_FAULT_ONLY, CUDA_LAUNCH, CUDA_NCCL, CUDA_RETURN, CUDA_UNFINISHED, CudaEntry,
    CudaEvent, EventKind, RT_FAIL_CAP, RT_SLOTS, RtSlot,
};

use crate::{
    fdres::{fill_header, wakeup_bytes},
    maps::{EVENTS, count_lost, wakeup_flags},
};

/// (tid << 32 | function) -> entry state.
#[map]
static CUDA_INFLIGHT: LruHashMap<u64, CudaEntry> = LruHashMap::with_max_entries(16384, 0);

/// The fault-only call in flight on each thread (by tid): nothing is sent
/// at their entry.
#[map]
pub static RT_INFLIGHT: Array<RtSlot> = Array::with_max_entries(RT_SLOTS, 0);

/// tgid -> failed fault-only returns sent (at most RT_FAIL_CAP).
#[map]
static RT_FAILS: LruHashMap<u32, u32> = LruHashMap::with_max_entries(4096, 0);

/// Failed fault-only returns not sent (past RT_FAIL_CAP for their
/// process, or no room in the ring buffer is counted as lost instead).
#[map]
static RT_CAPPED: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// Functions whose first argument is an int the call fills in.
const GETTERS: [u32; 3] = [2, 3, 4];

#[inline(always)]
fn emit(func: u32, phase: u32, start: u64, end: u64, ret: i64, args: [u64; 3], out: Option<i32>) {
    let Some(mut entry) = EVENTS.reserve::<CudaEvent>(0) else {
        count_lost(EventKind::Cuda);
        return;
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: reserved record; every field written before submit.
    unsafe {
        fill_header(&raw mut (*ev).hdr, EventKind::Cuda);
        (*ev).func = func;
        (*ev).phase = phase;
        (*ev).start_ns = start;
        (*ev).duration_ns = end.saturating_sub(start);
        (*ev).ret = ret;
        (*ev).args = args;
        (*ev).out_val = out.unwrap_or(0);
        (*ev).out_valid = u32::from(out.is_some());
    }
    entry.submit(wakeup_flags(
        wakeup_bytes(),
        core::mem::size_of::<CudaEvent>(),
    ));
}

/// The attach cookie: the function's number and flags in the low 32
/// bits; for a libnccl function, where its arguments are in the high ones.
#[inline(always)]
fn cookie<C: EbpfContext>(ctx: &C) -> u64 {
    // SAFETY: helper on the program's context.
    unsafe { generated::bpf_get_attach_cookie(ctx.as_ptr()) }
}

#[uprobe]
pub fn nvprobe_cuda_enter(ctx: ProbeContext) -> u32 {
    let full = cookie(&ctx);
    let func = full as u32;
    // SAFETY: helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    if func & CUDA_NCCL != 0 {
        crate::nccl::enter(&ctx, full, now);
        return 0;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    if func & CUDA_FAULT_ONLY != 0 {
        // Only the start, in the thread's slot: array stores.
        let tid = pid_tgid as u32;
        let f = func & !(CUDA_FAULT_ONLY | CUDA_LAUNCH);
        if let Some(s) = RT_INFLIGHT.get_ptr_mut(tid & (RT_SLOTS - 1)) {
            // SAFETY: pointer into the array map's value.
            unsafe {
                if (*s).tid != tid {
                    // Another thread's slot before: its history goes.
                    (*s).tid = tid;
                    (*s).done_func = 0;
                    (*s).launch_func = 0;
                }
                (*s).func = f;
                (*s).start_ns = now;
                if func & CUDA_LAUNCH != 0 {
                    (*s).launch_func = f;
                    (*s).launch_ns = now;
                }
            }
        }
        return 0;
    }
    let args = [
        ctx.arg::<u64>(0).unwrap_or(0),
        ctx.arg::<u64>(1).unwrap_or(0),
        ctx.arg::<u64>(2).unwrap_or(0),
    ];
    let key = ((pid_tgid as u32 as u64) << 32) | func as u64;
    let _ = CUDA_INFLIGHT.insert(
        &key,
        &CudaEntry {
            start_ns: now,
            args,
        },
        0,
    );
    // A libcuda user is an NVIDIA process even before it opens a node.
    let tgid = (pid_tgid >> 32) as u32;
    let starts = func & !nvprobe_common::CUDA_INTERPOSER == nvprobe_common::CUDA_CUINIT;
    if quiet(tgid, starts) {
        // Past its verdict, with only failures and verdicts shipped: the
        // return is sent if the call fails.
        crate::maps::count_quieted();
        return 0;
    }
    emit(func, CUDA_ENTER, now, now, 0, args, None);
    0
}

/// Whether `tgid` is past its verdict with only failures shipped (and
/// marks it followed when it is new); `starts`: the call is cuInit, which
/// ends the quiet of a process that held a descriptor when nvprobe started
/// (its CUDA start-up comes next).
#[inline(always)]
fn quiet(tgid: u32, starts: bool) -> bool {
    use nvprobe_common::nv_procs::{CALLER, HELD, QUIET};
    // SAFETY: plain lookup of a u8.
    match unsafe { crate::maps::NV_PROCS.get(&tgid) }.copied() {
        None => {
            crate::maps::caller(tgid);
            false
        }
        Some(v) => {
            if v & CALLER == 0 {
                crate::maps::caller(tgid);
            }
            if starts && v & HELD != 0 {
                // Quiet since nvprobe started, and now starting CUDA.
                crate::maps::held_ends(tgid);
                return false;
            }
            v & QUIET != 0
        }
    }
}

#[uretprobe]
pub fn nvprobe_cuda_return(ctx: RetProbeContext) -> u32 {
    let full = cookie(&ctx);
    let func = full as u32;
    // SAFETY: helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    if func & CUDA_NCCL != 0 {
        crate::nccl::init_return(&ctx, full, now);
        return 0;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    if func & CUDA_FAULT_ONLY != 0 {
        fault_only_return(
            &ctx,
            func & !(CUDA_FAULT_ONLY | CUDA_LAUNCH),
            func & CUDA_LAUNCH != 0,
            pid_tgid,
            now,
        );
        return 0;
    }
    let key = ((pid_tgid as u32 as u64) << 32) | func as u64;
    // SAFETY: value copied out before removal.
    let entry = unsafe { CUDA_INFLIGHT.get(&key) }.copied();
    let _ = CUDA_INFLIGHT.remove(&key);
    let (start, args) = entry.map_or((now, [0; 3]), |e| (e.start_ns, e.args));
    let ret = ctx.ret::<u64>() as u32 as i64;
    if ret == 0 && quiet((pid_tgid >> 32) as u32, false) {
        crate::maps::count_quieted();
        return 0;
    }
    if ret == 0 && nvprobe_common::CUDA_CONTEXT_FUNCS.contains(&func) {
        // The start-up ends with its first context (its verdict is `ok`
        // with this record): its other calls are no longer watched for
        // failures, and with `--events failures|verdicts` its successful
        // NVIDIA calls stay in the kernel from here on.
        use nvprobe_common::nv_procs::{CALLER, FOLLOWED, QUIET, STARTED};
        let tgid = (pid_tgid >> 32) as u32;
        let quiet = if crate::config::quiet_levels() {
            QUIET
        } else {
            0
        };
        // CALLER kept: the next call need not set it again.
        let _ = crate::maps::NV_PROCS.insert(&tgid, &(FOLLOWED | CALLER | STARTED | quiet), 0);
        // The threads' cached copies of the value go.
        crate::maps::bump_fd_gen();
    }
    let base = func & !nvprobe_common::CUDA_INTERPOSER;
    if ret != 0
        && (base == nvprobe_common::CUDA_CUINIT
            || nvprobe_common::CUDA_CONTEXT_FUNCS.contains(&base))
    {
        // A failed start-up: the collector reads the process again at
        // once, while it lives (the limits and filters it fails under).
        crate::maps::wake_now();
    }
    let out = if ret == 0 && GETTERS.contains(&func) && args[0] != 0 {
        // SAFETY: user read through the helper.
        unsafe { bpf_probe_read_user(args[0] as *const i32) }.ok()
    } else {
        None
    };
    emit(func, CUDA_RETURN, start, now, ret, args, out);
    0
}

/// CUDA_ERROR_NOT_READY: what a query answers while work is pending.
const NOT_READY: u32 = 600;

#[inline(always)]
fn fault_only_return(ctx: &RetProbeContext, func: u32, launch: bool, pid_tgid: u64, now: u64) {
    let tid = pid_tgid as u32;
    let mut start = now;
    let ret = ctx.ret::<u64>() as u32;
    let ok = ret == 0 || ret == NOT_READY;
    if let Some(s) = RT_INFLIGHT.get_ptr_mut(tid & (RT_SLOTS - 1)) {
        // SAFETY: pointer into the array map's value.
        unsafe {
            if (*s).tid == tid && (*s).func == func {
                start = (*s).start_ns;
                (*s).func = 0;
                if ok && !launch {
                    (*s).done_func = func;
                    (*s).done_ns = now;
                }
            }
        }
    }
    if ok {
        return;
    }
    let tgid = (pid_tgid >> 32) as u32;
    // SAFETY: plain lookup of a u32.
    let sent = unsafe { RT_FAILS.get(&tgid) }.copied().unwrap_or(0);
    if sent >= RT_FAIL_CAP {
        if let Some(c) = RT_CAPPED.get_ptr_mut(0) {
            // SAFETY: this CPU's counter.
            unsafe { *c += 1 };
        }
        return;
    }
    let _ = RT_FAILS.insert(&tgid, &(sent + 1), 0);
    emit(func, CUDA_RETURN, start, now, ret as i64, [0; 3], None);
}

/// At a process's end: its count of failed returns sent goes (its pid
/// may be reused).
#[inline(always)]
pub fn process_ended(tgid: u32) {
    let _ = RT_FAILS.remove(&tgid);
}

/// At the end of thread `pid_tgid`: whether it was in libcuda's cuInit
/// (entered, not returned); its entry goes, so that a thread that gets
/// the tid later is not taken for it.
#[inline(always)]
pub fn ended_in_cuinit(pid_tgid: u64) -> bool {
    let key = ((pid_tgid as u32 as u64) << 32) | nvprobe_common::CUDA_CUINIT as u64;
    CUDA_INFLIGHT.remove(&key).is_ok()
}

/// At a thread's end: the fault-only call it was still in (a thread killed
/// while it waited in a synchronisation that never returned).
#[inline(always)]
pub fn thread_ended(pid_tgid: u64) {
    let tid = pid_tgid as u32;
    let Some(s) = RT_INFLIGHT.get_ptr_mut(tid & (RT_SLOTS - 1)) else {
        return;
    };
    // SAFETY: pointer into the array map's value.
    let (func, start) = unsafe {
        if (*s).tid != tid || (*s).func == 0 {
            return;
        }
        let f = ((*s).func, (*s).start_ns);
        (*s).func = 0;
        f
    };
    // SAFETY: helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    emit(func, CUDA_UNFINISHED, start, now, 0, [0; 3], None);
}
