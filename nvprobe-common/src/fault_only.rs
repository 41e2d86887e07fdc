//! The libcuda functions hooked only for the failures they return
//! (`--libcuda-hooks faults`): the cookie flag, the per-process cap, and
//! the per-thread slot their entry writes.

/// Set in the cookie of the functions hooked only for the failures they
/// return (`--libcuda-hooks faults`: synchronisations, copies, frees):
/// their entry keeps the start time in the thread's [`RtSlot`] and sends
/// nothing, their return sends a record only for a CUresult other than
/// CUDA_SUCCESS and CUDA_ERROR_NOT_READY, at most [`RT_FAIL_CAP`] per
/// process. Cleared in the record's `func`.
pub const CUDA_FAULT_ONLY: u32 = 1 << 30;

/// Set with [`CUDA_FAULT_ONLY`] in the cookie of the kernel launches
/// (`--libcuda-hooks launches`): their entry also keeps the launch in the
/// thread's [`RtSlot`] (`launch_func`, `launch_ns`), and their success is
/// not a completed call. Cleared in the record's `func`.
pub const CUDA_LAUNCH: u32 = 1 << 29;

/// The failed returns of fault-only functions sent per process (a sticky
/// error fails every later call; the first ones tell the story).
pub const RT_FAIL_CAP: u32 = 8;

/// Slots of the per-thread [`RtSlot`] array (by tid).
pub const RT_SLOTS: u32 = 16384;

/// A fault-only call in flight on one thread, and the thread's last
/// completed fault-only call and last launch: what the collector reads
/// when a call has run past `--hang-after` (nothing is sent at their
/// entry, so the collector scans the slots of the threads it follows).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RtSlot {
    pub tid: u32,
    /// The function's number; 0 when none is in flight.
    pub func: u32,
    pub start_ns: u64,
    /// The last fault-only call of this thread that returned success (a
    /// synchronisation, copy, memset or free; not a launch), and when it
    /// returned; 0 when none since the slot became this thread's.
    pub done_func: u32,
    /// The last kernel launch this thread entered (`--libcuda-hooks
    /// launches` only), and when; 0 when none.
    pub launch_func: u32,
    pub done_ns: u64,
    pub launch_ns: u64,
}
