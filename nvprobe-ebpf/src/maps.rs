//! The maps shared with user space. Names are part of the contract with
//! `nvprobe::attach` (looked up by name there).

use aya_ebpf::{
    bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    macros::map,
    maps::{Array, HashMap, PerCpuArray, RingBuf},
};
use nvprobe_common::{
    EventKind, ExtraKey, INFLIGHT_SLOTS, Inflight, LOST_SLOT_COLLISION, LOST_SLOTS,
    fastpath::{CALL_SLOTS, CONTROL_BUCKETS, FDCACHE_SLOTS, FdCache},
};

/// The one ring buffer every record goes through. User space may resize it
/// (`--ringbuf-size`) before load.
#[map]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(16 * 1024 * 1024, 0);

/// Records that could not be reserved, per CPU, indexed by EventKind.
#[map]
pub static LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(LOST_SLOTS, 0);

/// Syscall state between entry and exit, one slot per tid modulo
/// INFLIGHT_SLOTS. Array lookups are inlined by the verifier and take no
/// lock, unlike hash-map insert/delete on every traced call.
#[map]
pub static INFLIGHT: Array<Inflight> = Array::with_max_entries(INFLIGHT_SLOTS, 0);

/// Each thread's fd → device answers and pid-namespace ids
/// (`nvprobe_common::fastpath`), valid while `FD_GEN` has not moved.
#[map]
pub static FDCACHE: Array<FdCache> = Array::with_max_entries(FDCACHE_SLOTS, 0);

/// The generation of every `FDCACHE` slot: bumped when any descriptor
/// may have changed the file it refers to.
#[map]
pub static FD_GEN: Array<u64> = Array::with_max_entries(1, 0);
// Starts at 0 (the map is zeroed); user space writes FD_GEN_OFF before
// any program runs and clears it once the probes that move it are in.

/// The current generation.
#[inline(always)]
pub fn fd_gen() -> u64 {
    match FD_GEN.get_ptr(0) {
        // SAFETY: pointer into the array map's value.
        Some(p) => unsafe { core::ptr::read_volatile(p) },
        None => 0,
    }
}

/// Drop every thread's cached answers (a descriptor was closed or
/// replaced, a process exec'd or ended).
#[inline(always)]
pub fn bump_fd_gen() {
    if let Some(p) = FD_GEN.get_ptr_mut(0) {
        // SAFETY: pointer into the array map's value, updated atomically
        // (two CPUs bumping at once must both move it).
        unsafe {
            core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
                p, 1,
            );
        }
    }
}

/// Non-zero once user space has put the processes already running with
/// an NVIDIA descriptor into `NV_PROCS` (`nvprobe_common::fastpath`):
/// from then on a process outside it stops at the top of the descriptor
/// programs ([`may_hold_nv`]).
#[map]
pub static FD_GATE: Array<u32> = Array::with_max_entries(1, 0);

/// Each thread's last "its process is not in `NV_PROCS`", as
/// `fastpath::clean_key` (0: none), by tid modulo `FDCACHE_SLOTS`.
#[map]
pub static CLEAN: Array<u64> = Array::with_max_entries(FDCACHE_SLOTS, 0);

/// Whether the process of `pid_tgid` may hold an NVIDIA descriptor: false
/// only when the gate is on and the process is not in `NV_PROCS`, said by
/// the thread's `CLEAN` slot (three array reads) or, when that is of an
/// older generation, by one lookup whose "no" goes into the slot.
#[inline(always)]
pub fn may_hold_nv(pid_tgid: u64) -> bool {
    use nvprobe_common::fastpath::clean_key;
    match FD_GATE.get(0) {
        Some(v) if *v != 0 => {}
        _ => return true,
    }
    let tid = pid_tgid as u32;
    // Read before the lookup: an insert bumps after it, so a "no" read
    // across an insert is stored under the generation before the bump.
    let key = clean_key(tid, fd_gen());
    let slot = CLEAN.get_ptr_mut(tid & (FDCACHE_SLOTS - 1));
    if let Some(p) = slot {
        // SAFETY: pointer into the array map's value, read whole.
        if unsafe { core::ptr::read_volatile(p) } == key {
            return false;
        }
    }
    let tgid = (pid_tgid >> 32) as u32;
    // SAFETY: plain lookup.
    if unsafe { NV_PROCS.get(&tgid) }.is_some() {
        return true;
    }
    if let Some(p) = slot {
        // SAFETY: as above, written whole.
        unsafe { core::ptr::write_volatile(p, key) };
    }
    false
}

/// Forget thread `tid`'s `CLEAN` answer (it ended, or exec gave it
/// another tid): a thread that reuses the tid starts without one.
#[inline(always)]
pub fn clean_forget(tid: u32) {
    if let Some(p) = CLEAN.get_ptr_mut(tid & (FDCACHE_SLOTS - 1)) {
        // SAFETY: pointer into the array map's value; only a slot still
        // holding this tid's answer is cleared.
        unsafe {
            if core::ptr::read_volatile(p) >> 32 == tid as u64 {
                core::ptr::write_volatile(p, 0);
            }
        }
    }
}

/// `--events failures|verdicts`: which successful calls are sent
/// (`nvprobe_common::fastpath::call_slot` → SHIP), filled by user space.
#[map]
pub static SHIP_CALLS: Array<u8> = Array::with_max_entries(CALL_SLOTS, 0);

/// RM controls by bucket (`nvprobe_common::fastpath::control_bucket`):
/// SHIP and COPY bits, filled by user space.
#[map]
pub static SHIP_CONTROLS: Array<u8> = Array::with_max_entries(CONTROL_BUCKETS, 0);

/// Successful calls counted instead of sent, per CPU and call slot.
#[map]
pub static UNSENT_CALLS: PerCpuArray<u64> = PerCpuArray::with_max_entries(CALL_SLOTS, 0);

/// The same per process (threads' counts, added when a thread ends or its
/// cache slot starts afresh; the exec record carries the sum of the
/// program before it, the exit record the sum of the last).
#[map]
pub static UNSENT_PROCS: aya_ebpf::maps::LruHashMap<u32, u64> =
    aya_ebpf::maps::LruHashMap::with_max_entries(16384, 0);

/// Add `n` calls to `tgid`'s count of calls counted instead of sent.
#[inline(always)]
pub fn add_unsent(tgid: u32, n: u64) {
    // Only for a process still followed: after its exit record a late
    // count would stay for whoever gets the pid next (it is in `quieted`).
    // SAFETY: plain lookup.
    if n == 0 || unsafe { NV_PROCS.get(&tgid) }.is_none() {
        return;
    }
    if let Some(p) = UNSENT_PROCS.get_ptr_mut(&tgid) {
        // SAFETY: pointer into the map's value; threads of one process
        // may add at once, so the add is atomic.
        unsafe {
            core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
                p, n,
            );
        }
    } else {
        let _ = UNSENT_PROCS.insert(&tgid, &n, 0);
    }
}

/// Count a successful call of `slot` that is not sent, for its thread's
/// cache slot `c` (or the process, when it is null).
#[inline(always)]
pub fn count_unsent(slot: u32, c: *mut FdCache, tgid: u32) {
    count_quieted();
    // A call with no slot (NO_SLOT) is counted in the total only.
    if slot < CALL_SLOTS
        && let Some(p) = UNSENT_CALLS.get_ptr_mut(slot)
    {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU.
        unsafe { *p += 1 };
    }
    // SAFETY: the thread's cache slot, while it is this process's.
    if !c.is_null() && unsafe { (*c).tgid } == tgid {
        // SAFETY: as above.
        unsafe { (*c).unsent = (*c).unsent.saturating_add(1) };
    } else {
        add_unsent(tgid, 1);
    }
}

/// `--events failures|verdicts`: set (`on`) or clear SHIP_NEXT in the
/// followed process `tgid`'s value, for a process not yet quiet or one
/// quiet since nvprobe started (`v`, the
/// value the caller read, says whether there is anything to do). The bit
/// is changed in the map's value as it is now, not in `v` (a thread's
/// cached copy may be behind in the other bits, e.g. the failed-call
/// count); the threads' cached copies go with a generation bump.
#[inline(always)]
pub fn ship_next(tgid: u32, v: u8, on: bool) {
    use nvprobe_common::nv_procs::{HELD, QUIET, SHIP_NEXT};
    // Past its first context: only failures are sent, none after them.
    let settled = |v: u8| v & (QUIET | HELD) == QUIET;
    if !crate::config::quiet_levels() || settled(v) || (v & SHIP_NEXT != 0) == on {
        return;
    }
    let Some(p) = NV_PROCS.get_ptr_mut(&tgid) else {
        return;
    };
    // SAFETY: pointer into the map's value.
    unsafe {
        if settled(*p) {
            return;
        }
        *p = if on { *p | SHIP_NEXT } else { *p & !SHIP_NEXT };
    }
    bump_fd_gen();
}

/// `--events failures|verdicts`: when a signal last came for a followed
/// process (ns). While its SHIP_NEXT bit is set, the calls in flight then
/// are sent (the correlator names the call a signal came during).
#[map]
pub static SIGNALLED: aya_ebpf::maps::LruHashMap<u32, u64> =
    aya_ebpf::maps::LruHashMap::with_max_entries(4096, 0);

/// How long after a signal a call may begin and still be sent for it: the
/// other threads' calls in flight at the signal end in this time, or are
/// stalls (reported on their own).
pub const SIGNAL_WINDOW_NS: u64 = nvprobe_common::fastpath::SIGNAL_WINDOW_NS;

/// The start a sent ioctl record shows, and its flags
/// ([`crate::config::record_start`]); but a call timed in ticks that a
/// signal may have come during (the process's `SIGNALLED` time lies
/// between the earliest it can have begun and its end) starts at that
/// earliest time, `COARSE` (at most two ticks early): the span the
/// signal is matched against then holds it, however short the call.
#[inline(always)]
pub fn record_timing(tgid: u32, start: u64, end: u64, flags: u32) -> (u64, u32) {
    use nvprobe_common::ioctl_flags::{COARSE, UNTIMED};
    if flags & COARSE != 0 {
        // SAFETY: plain lookup of a u64.
        if let Some(at) = unsafe { SIGNALLED.get(&tgid) }.copied() {
            let from = crate::config::start_at_least(start, flags);
            if from <= at && at <= end {
                return (from, (flags & !UNTIMED) | COARSE);
            }
        }
    }
    crate::config::record_start(start, end, flags)
}

/// A successful call of a process whose SHIP_NEXT bit is set was sent:
/// the bit goes when it was set by a failure (this is the call after it),
/// or by a signal that came before this call began, by more than
/// [`SIGNAL_WINDOW_NS`].
#[inline(always)]
pub fn ship_next_done(tgid: u32, v: u8, start_ns: u64) {
    // SAFETY: plain lookup of a u64.
    if let Some(at) = unsafe { SIGNALLED.get(&tgid) }.copied() {
        if start_ns <= at.saturating_add(SIGNAL_WINDOW_NS) {
            return;
        }
        let _ = SIGNALLED.remove(&tgid);
    }
    ship_next(tgid, v, false);
}

/// Processes that use an NVIDIA device: their exit, exec and signals are
/// reported. Filled here when an open yields an NVIDIA file, and by user
/// space for processes first seen through an inherited fd.
#[map]
pub static NV_PROCS: aya_ebpf::maps::LruHashMap<u32, u8> =
    aya_ebpf::maps::LruHashMap::with_max_entries(16384, 0);

/// Other nvprobe instances (filled by user space when it recognises one):
/// their own reads of libcuda files and of the driver's /proc files are
/// not traced, and they are not followed.
#[map]
pub static PEERS: HashMap<u32, u8> = HashMap::with_max_entries(64, 0);

/// Tgids to trace when Config::pid_filter is set.
#[map]
pub static PID_FILTER: HashMap<u32, u8> = HashMap::with_max_entries(1024, 0);

/// Files that `--device` declares to be NVIDIA devices: (s_dev, ino) -> DevKind.
#[map]
pub static EXTRA_FILES: HashMap<ExtraKey, u8> = HashMap::with_max_entries(256, 0);

/// Parameter struct size per UVM command for the running driver version
/// (UVM commands do not encode a size).
#[map]
pub static UVM_SIZES: HashMap<u32, u32> = HashMap::with_max_entries(512, 0);

/// Where each call's NV_STATUS is (nvprobe_common::status_at), filled by
/// user space for the running driver version.
#[map]
pub static STATUS_AT: HashMap<u32, u32> =
    HashMap::with_max_entries(nvprobe_common::status_at::MAX_ENTRIES, 0);

/// NV_ESC_RM_CONTROL controls whose parameters are copied, and how much
/// (nvprobe_common::rm_params), filled by user space for the running
/// driver version.
#[map]
pub static RM_PARAMS: HashMap<u32, u32> =
    HashMap::with_max_entries(nvprobe_common::rm_params::MAX_ENTRIES, 0);

/// The most data the ring buffer held when a record was submitted, in
/// bytes, since user space last reset it (`--metrics`).
#[map]
pub static RB_FILL: Array<u64> = Array::with_max_entries(1, 0);

/// Successful calls of quiet processes left out here, per CPU.
#[map]
pub static QUIETED: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
pub fn count_quieted() {
    if let Some(p) = QUIETED.get_ptr_mut(0) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU.
        unsafe { *p += 1 };
    }
}

/// STATUS_AT by call slot (`nvprobe_common::fastpath::status_slot`): an
/// array, so the common case needs no hash lookup.
#[map]
pub static STATUS_SLOTS: Array<u32> = Array::with_max_entries(CALL_SLOTS, 0);

#[inline(always)]
fn count_slot(slot: u32) {
    if let Some(p) = LOST.get_ptr_mut(slot) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU.
        unsafe { *p += 1 };
    }
}

#[inline(always)]
pub fn count_lost(kind: EventKind) {
    count_slot(kind as u32);
}

/// The slot of thread `tid`, claimed for a new call. A slot still held by
/// another thread's call is taken over, and that call counted as lost.
#[inline(always)]
pub fn claim_slot(tid: u32) -> Option<*mut Inflight> {
    let p = INFLIGHT.get_ptr_mut(tid & (INFLIGHT_SLOTS - 1))?;
    // SAFETY: pointer into the array map's value.
    unsafe {
        if (*p).kind != 0 && (*p).tid != tid {
            count_slot(LOST_SLOT_COLLISION);
        }
    }
    Some(p)
}

/// Take thread `tid`'s pending call of `kind` (or any kind when None),
/// freeing the slot.
#[inline(always)]
pub fn take_slot(tid: u32, kind: Option<u32>) -> Option<Inflight> {
    let p = INFLIGHT.get_ptr_mut(tid & (INFLIGHT_SLOTS - 1))?;
    // SAFETY: pointer into the array map's value; copied, then released.
    unsafe {
        if (*p).tid != tid || (*p).kind == 0 || kind.is_some_and(|k| k != (*p).kind) {
            return None;
        }
        let v = *p;
        (*p).kind = 0;
        Some(v)
    }
}

/// Set when a process is seen for the first time: its record wakes the
/// collector at once, so that it reads the process's identity from /proc
/// while the process lives (a short one is gone by the next tick).
#[map]
pub static WAKE_NEXT: PerCpuArray<u8> = PerCpuArray::with_max_entries(1, 0);

/// Follow `tgid` from now on (its exit, signals, forks are reported);
/// true when it was not followed yet.
#[inline(always)]
pub fn first_sight(tgid: u32) -> bool {
    // SAFETY: plain lookup.
    if unsafe { NV_PROCS.get(&tgid) }.is_some() {
        return false;
    }
    let _ = NV_PROCS.insert(&tgid, &nvprobe_common::nv_procs::FOLLOWED, 0);
    // Threads that said "not in NV_PROCS" ask again (`may_hold_nv`).
    bump_fd_gen();
    if let Some(p) = WAKE_NEXT.get_ptr_mut(0) {
        // SAFETY: per-CPU slot of this program's CPU.
        unsafe { *p = 1 };
    }
    true
}

/// `tgid` made an NVIDIA call of its own: followed (and woken for, when
/// new: true) and marked a caller (`nv_procs::CALLER`), whose start-up's
/// failed calls are sent from now on.
#[inline(always)]
pub fn caller(tgid: u32) -> bool {
    use nvprobe_common::nv_procs::{CALLER, FOLLOWED};
    if let Some(p) = NV_PROCS.get_ptr_mut(&tgid) {
        // SAFETY: pointer into the map's value.
        unsafe {
            if *p & CALLER == 0 {
                *p |= CALLER;
            }
        }
        return false;
    }
    let _ = NV_PROCS.insert(&tgid, &(FOLLOWED | CALLER), 0);
    bump_fd_gen();
    if let Some(p) = WAKE_NEXT.get_ptr_mut(0) {
        // SAFETY: per-CPU slot of this program's CPU.
        unsafe { *p = 1 };
    }
    true
}

/// `tgid` opened an NVIDIA node, had the loader open a libcuda, or
/// entered cuInit: a process that held an NVIDIA descriptor when nvprobe
/// started (`nv_procs::HELD`) begins something nvprobe sees from its
/// start (a CUDA start-up opens its own nodes), followed call by call.
#[inline(always)]
pub fn held_ends(tgid: u32) {
    use nvprobe_common::nv_procs::{HELD, QUIET, STARTED};
    let Some(p) = NV_PROCS.get_ptr_mut(&tgid) else {
        return;
    };
    // SAFETY: pointer into the map's value.
    unsafe {
        if *p & HELD == 0 {
            return;
        }
        *p &= !(QUIET | HELD | STARTED);
    }
    // The threads' cached copies of the value go.
    bump_fd_gen();
}

/// `tgid` made an NVIDIA call on a descriptor nvprobe never saw it open
/// (held when nvprobe started, or handed to it): followed (woken for,
/// true when new) as one whose start-up was not seen, as user space puts
/// the start's holders (`nv_procs::HELD`, quiet at `--events
/// failures|verdicts`).
#[inline(always)]
pub fn held_first(tgid: u32) -> bool {
    use nvprobe_common::nv_procs::{FOLLOWED, HELD, QUIET, STARTED};
    // SAFETY: plain lookup.
    if unsafe { NV_PROCS.get(&tgid) }.is_some() {
        return false;
    }
    let quiet = if crate::config::quiet_levels() {
        QUIET
    } else {
        0
    };
    let _ = NV_PROCS.insert(&tgid, &(FOLLOWED | STARTED | HELD | quiet), 0);
    bump_fd_gen();
    if let Some(p) = WAKE_NEXT.get_ptr_mut(0) {
        // SAFETY: per-CPU slot of this program's CPU.
        unsafe { *p = 1 };
    }
    true
}

/// Have the next record submitted on this CPU wake the collector at once
/// (a failed start-up: the process is read again while it lives).
#[inline(always)]
pub fn wake_now() {
    if let Some(p) = WAKE_NEXT.get_ptr_mut(0) {
        // SAFETY: per-CPU slot of this program's CPU.
        unsafe { *p = 1 };
    }
}

/// Submit flags for a record of `size` bytes: wake the collector only when
/// this record makes the backlog cross `threshold` bytes. Waking on every
/// record above the threshold would cost an irq_work per event exactly when
/// the collector is busiest; below it the collector drains on its timer,
/// and its poll() sees any data left, so no wake-up is lost. The first record of a new process always wakes it.
#[inline(always)]
pub fn wakeup_flags(threshold: u32, size: usize) -> u64 {
    if let Some(p) = WAKE_NEXT.get_ptr_mut(0) {
        // SAFETY: per-CPU slot of this program's CPU.
        unsafe {
            if *p != 0 {
                *p = 0;
                return BPF_RB_FORCE_WAKEUP as u64;
            }
        }
    }
    // Includes the record being submitted (reserved space counts).
    let avail = EVENTS.query(BPF_RB_AVAIL_DATA as u64);
    if let Some(p) = RB_FILL.get_ptr_mut(0) {
        // SAFETY: pointer into the array map's value; a racing writer on
        // another CPU may win, which only loses a high-water mark.
        unsafe {
            if avail > *p {
                *p = avail;
            }
        }
    }
    let t = threshold as u64;
    if avail >= t && avail < t + size as u64 + 8 {
        BPF_RB_FORCE_WAKEUP as u64
    } else {
        BPF_RB_NO_WAKEUP as u64
    }
}

/// Keep `inf` as the current thread's pending call.
#[inline(always)]
pub fn store(mut inf: Inflight) -> Result<(), i64> {
    let tid = crate::config::tid();
    inf.tid = tid;
    let p = claim_slot(tid).ok_or(0i64)?;
    // SAFETY: pointer into the INFLIGHT array value. The slot's count of
    // calls begun moves on with every call (`Inflight::seq`).
    unsafe {
        inf.seq = (*p).seq.wrapping_add(1);
        *p = inf;
    }
    Ok(())
}

#[inline(always)]
pub fn zeroed_inflight() -> Inflight {
    // SAFETY: Inflight is plain integers; all-zero is a valid value.
    unsafe { core::mem::zeroed() }
}

/// Failed calls sent per followed process in start-up (reset by an exec,
/// removed at its exit): `nvprobe_common::call_failed::SENT_MAX` at most.
#[map]
pub static FAILS: aya_ebpf::maps::LruHashMap<u32, u32> =
    aya_ebpf::maps::LruHashMap::with_max_entries(16384, 0);

/// Failed calls of start-ups past `SENT_MAX` per program, counted instead
/// of sent (read for the summary).
#[map]
pub static FAILS_UNSENT: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
pub fn count_fails_unsent() {
    if let Some(c) = FAILS_UNSENT.get_ptr_mut(0) {
        // SAFETY: per-CPU slot of this program's CPU.
        unsafe { *c += 1 };
    }
}
