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

/// The failed returns of fault-only functions sent per process (a sticky
/// error fails every later call; the first ones tell the story).
pub const RT_FAIL_CAP: u32 = 8;

/// Slots of the per-thread [`RtSlot`] array (by tid).
pub const RT_SLOTS: u32 = 16384;

/// A fault-only call in flight on one thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RtSlot {
    pub tid: u32,
    /// The function's number; 0 when none is in flight.
    pub func: u32,
    pub start_ns: u64,
}
