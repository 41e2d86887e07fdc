//! The maps shared with user space. Names are part of the contract with
//! `nvprobe::attach` (looked up by name there).

use aya_ebpf::{
    bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    macros::map,
    maps::{Array, HashMap, PerCpuArray, RingBuf},
};
use nvprobe_common::{
    EventKind, ExtraKey, INFLIGHT_SLOTS, Inflight, LOST_SLOT_COLLISION, LOST_SLOTS,
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

/// Whether a call that returned 0 also left NV_STATUS 0 (NV_OK) in its
/// parameters, by the offset user space put into STATUS_AT; false when the
/// call is not there or its status cannot be read (it is then sent).
#[inline(always)]
pub fn quiet_success(inf: &Inflight, ptr: u64, size: u32) -> bool {
    let key = if inf.flags & nvprobe_common::ioctl_flags::XFER != 0 {
        if inf.flags & nvprobe_common::ioctl_flags::XFER_FAULT != 0
            || inf.xfer_size > nvprobe_common::ioctl::NV_MAX_IOCTL_SIZE
        {
            return false;
        }
        nvprobe_common::status_at::xfer_key(inf.xfer_cmd, inf.xfer_size)
    } else {
        inf.cmd
    };
    // SAFETY: plain lookup of a u32.
    let Some(off) = (unsafe { STATUS_AT.get(&key) }).copied() else {
        return false;
    };
    if off == nvprobe_common::status_at::NO_STATUS {
        return true;
    }
    if ptr == 0 || off.saturating_add(4) > size {
        return false;
    }
    // SAFETY: reading user memory through the helper, which handles faults.
    matches!(
        unsafe { aya_ebpf::helpers::bpf_probe_read_user((ptr + off as u64) as *const u32) },
        Ok(0)
    )
}

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
