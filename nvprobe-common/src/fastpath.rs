//! The kernel side's per-thread cache: what the ioctl programs would
//! otherwise read from the kernel on every call.
//!
//! An ioctl's entry resolves its fd to the device by a chain of reads
//! (task → files → fdtable → file → inode); its exit reads the thread's
//! ids in its pid namespace (task → pid → numbers[level]). Both answers
//! stay the same from one call to the next, so each thread keeps them in
//! its `FDCACHE` slot, stamped with the global `FD_GEN` generation.
//!
//! What the fd answer depends on is which file the fd number refers to.
//! That changes only when a descriptor is closed or replaced: close(2),
//! close_range(2), dup2(2)/dup3(2) onto it, an exec (close-on-exec), the
//! process's exit (a new process may get its pid). The programs on those
//! bump `FD_GEN` at the call's entry and again at its exit, so an answer
//! cached while the call ran is dropped too. A bump makes every thread's
//! cache miss once (it costs a full resolution, never a wrong answer).
//! Not seen: a descriptor closed by io_uring (IORING_OP_CLOSE) whose number
//! is then reused for another file before any of the above happens
//! anywhere on the host; calls on it keep the old file's identity until then.
//!
//! The pid-namespace answer depends on the thread alone, and a thread's
//! namespace never changes; the same stamp keeps it (an exit bump covers a
//! reused pid).

use crate::FileId;

/// Set in `FD_GEN` (as loaded, and by user space when a probe that moves
/// it is missing): no answer is cached or used. User space clears it once
/// close, dup2, dup3, close_range (where the kernel has it), exec and exit
/// are all watched.
pub const FD_GEN_OFF: u64 = 1 << 63;

/// Other processes' calls at the floor: a close, dup or file mmap of a
/// process that holds no NVIDIA descriptor stops at the top of its
/// program. "Holds" is read as "is in `NV_PROCS`" (an open of an NVIDIA
/// file, an NVIDIA ioctl or libcuda call, a fork of such a process, or
/// user space's scan of the descriptors of the processes already running
/// puts it there), and each thread keeps the last "no" in its `CLEAN`
/// slot as [`clean_key`]: every insert into `NV_PROCS` bumps `FD_GEN`, so
/// a "no" of an older generation is asked again. A thread's exit (and an
/// exec's old tid) clears its slot, so a reused tid starts empty.
///
/// `FD_GATE[0]` is 0 as loaded (every call is resolved, as before); user
/// space sets it once the running processes' descriptors were scanned and
/// fork, exit, exec and the opens are watched (`attach::fast`).
///
/// The key of a thread's "no NVIDIA descriptor" answer in `CLEAN`: its tid
/// and the generation's low 32 bits, in one word (written and read whole,
/// so two threads sharing a slot never mix their halves).
#[inline(always)]
pub const fn clean_key(tid: u32, gen_: u64) -> u64 {
    ((tid as u64) << 32) | (gen_ & 0xffff_ffff)
}

/// Slots of `FDCACHE` (a power of two): indexed by tid modulo this; a
/// slot that belongs to another thread is taken over (a miss, not an error).
pub const FDCACHE_SLOTS: u32 = 16384;
/// Descriptors remembered per thread (NVIDIA files only).
pub const FDCACHE_FDS: usize = 4;

/// One thread's cache.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FdCache {
    pub tid: u32,
    pub tgid: u32,
    /// `FD_GEN` when the slot was (re)started.
    pub gen_: u64,
    /// Next entry of `fd`/`file` to overwrite.
    pub next: u32,
    /// The tid whose pid-namespace ids the `ns_*` fields hold (0: none).
    /// Each answer carries whose it is, so that a thread whose tid
    /// collides with this one's (the slot is taken over while a program of
    /// the other still runs) never uses the other's.
    pub ns_valid: u32,
    pub ns_tgid: u32,
    pub ns_tid: u32,
    pub pidns_level: u32,
    /// The process's `NV_PROCS` value as this thread last read it, with
    /// [`PROCS_VALID`] set; 0: read it again. The kernel side bumps the
    /// generation whenever it changes a followed process's value.
    pub procs: u32,
    /// This thread's successful NVIDIA calls counted instead of sent, not
    /// yet added to `UNSENT_PROCS` (done at the thread's exit and when the
    /// slot starts afresh).
    pub unsent: u32,
    /// The tgid whose value `procs` is.
    pub procs_tgid: u32,
    /// -1: empty.
    pub fd: [i32; FDCACHE_FDS],
    /// The tgid each entry is of (threads of one process share their fds).
    pub owner: [u32; FDCACHE_FDS],
    pub file: [FileId; FDCACHE_FDS],
}

/// How long after a signal a call may begin and still be sent for it at
/// `--events failures|verdicts` (the calls of other threads in flight at
/// the signal end in this time, or are reported as stalls: 5 s is the
/// default `--stall-after`).
pub const SIGNAL_WINDOW_NS: u64 = 5_000_000_000;

/// Set in [`FdCache::procs`] when it holds the value.
pub const PROCS_VALID: u32 = 0x100;

/// Entries of `SHIP_CALLS` and `UNSENT_CALLS`: an escape's number, or
/// [`UVM_BASE`] + a UVM command number.
pub const CALL_SLOTS: u32 = 512;
pub const UVM_BASE: u32 = 256;
/// UVM_INITIALIZE and UVM_DEINITIALIZE (0x30000001, 0x30000002) have
/// these slots; every other UVM command number is below 250.
pub const UVM_INIT_SLOT: u32 = UVM_BASE + 254;
pub const UVM_DEINIT_SLOT: u32 = UVM_BASE + 255;
/// A call the kernel side has no slot for (NVKMS, a UVM number out of
/// range): such a call is always sent.
pub const NO_SLOT: u32 = u32::MAX;

/// `SHIP_CALLS` value: a successful call of this slot is sent at
/// `--events failures|verdicts` (it completes a milestone, or a verdict
/// rule reads what it answered); 0: counted, not sent.
pub const SHIP: u8 = 1;

/// The `SHIP_CALLS` slot of an ioctl: `cmd` (`xfer_cmd` for an XFER
/// wrapper, whose inner command is an escape too).
#[inline(always)]
pub const fn call_slot(cmd: u32, xfer: bool, xfer_cmd: u32) -> u32 {
    let c = if xfer { xfer_cmd } else { cmd };
    if crate::ioctl::is_escape(c) || xfer {
        return crate::ioctl::ioc_nr(c);
    }
    match c {
        0x3000_0001 => UVM_INIT_SLOT,
        0x3000_0002 => UVM_DEINIT_SLOT,
        c if c < 250 => UVM_BASE + c,
        _ => NO_SLOT,
    }
}

/// `SHIP_CONTROLS`: NV_ESC_RM_CONTROL's slot is not sent whole, its
/// controls are told apart by buckets of their numbers: [`SHIP`] set when
/// a control a verdict reads falls in the bucket (a control sharing it is
/// sent too: never fewer); [`COPY`] when one `RM_PARAMS` lists does (the
/// exit looks `RM_PARAMS` up only then).
pub const CONTROL_BUCKETS: u32 = 1024;
pub const COPY: u8 = 2;

/// The `SHIP_CONTROLS` bucket of an RM control number.
#[inline(always)]
pub const fn control_bucket(c: u32) -> u32 {
    (c ^ (c >> 10) ^ (c >> 20)) & (CONTROL_BUCKETS - 1)
}

/// `STATUS_SLOTS` value: where one size of a slot's parameter struct keeps
/// its NV_STATUS, `size << 16 | offset` (offset [`STATUS_SLOT_NONE`]: no
/// status field); 0: none known (the `STATUS_AT` hash is asked).
pub const STATUS_SLOT_NONE: u32 = 0xffff;

pub const fn status_slot_value(size: u32, off: u32) -> u32 {
    let o = if off == crate::status_at::NO_STATUS {
        STATUS_SLOT_NONE
    } else {
        off & 0xffff
    };
    ((size & 0xffff) << 16) | o
}

/// The status offset a `STATUS_SLOTS` value gives for a struct of `size`
/// bytes (`status_at::NO_STATUS` for none), if it is for that size.
#[inline(always)]
pub const fn status_slot_off(v: u32, size: u32) -> Option<u32> {
    if v == 0 || v >> 16 != size & 0xffff {
        return None;
    }
    match v & 0xffff {
        STATUS_SLOT_NONE => Some(crate::status_at::NO_STATUS),
        o => Some(o),
    }
}

#[cfg(feature = "user")]
// SAFETY: repr(C) of integers with explicit padding: any bit pattern is valid.
unsafe impl aya::Pod for FdCache {}
