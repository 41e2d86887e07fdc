//! The record of a failed system call of a process in start-up
//! ([`crate::ProcOp::CallFailed`]) and its bound.

use crate::{PATH_LEN, ProcEvent, Record};

/// Failed calls sent per program (between an exec and the first
/// context); the later ones are counted (`FAILS_UNSENT`), not sent.
pub const SENT_MAX: u32 = 128;

/// A failed system call of a process in start-up
/// ([`crate::ProcOp::CallFailed`]): the process record, the call's first four
/// arguments as the caller passed them, and the path it named (the
/// syscall's path argument, or an `AF_UNIX` socket's path for connect).
/// The third and fourth arguments come last: a record made before they
/// were sent is [`V1_LEN`] bytes long, the rest of this one ([`read`]).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CallFailedEvent {
    pub proc: ProcEvent,
    pub args: [u64; 2],
    /// Bytes of `path` in use (without the NUL); 0 when the call names
    /// no path, `PATH_LEN` when it was cut.
    pub path_len: u32,
    /// Its number among the failed calls sent for this program's
    /// start-up, from 1; the one numbered [`SENT_MAX`] is the
    /// last sent (later ones were counted in `FAILS_UNSENT`).
    pub seq: u32,
    pub path: [u8; PATH_LEN],
    /// The third and fourth arguments (an mmap's protection and flags,
    /// an mprotect's protection).
    pub args_more: [u64; 2],
    /// The process's address space when the call failed, as the kernel
    /// held it (`mm_struct`: `map_count`, `total_vm` and `data_vm` in
    /// bytes): what a refused mapping is judged by. All 0 when not read
    /// (a kernel thread, a kernel whose BTF lacks the fields); absent from
    /// a record made before they were sent ([`V2_LEN`]).
    pub map_count: u32,
    pub _pad: u32,
    pub vm_bytes: u64,
    pub data_bytes: u64,
}

// SAFETY: plain integers and byte arrays, valid for any bit pattern.
unsafe impl Record for CallFailedEvent {}

/// The length of a record made before the third and fourth arguments
/// were sent (everything up to `args_more`).
pub const V1_LEN: usize = core::mem::offset_of!(CallFailedEvent, args_more);

/// The length of a record made before the address space's sizes were
/// sent (everything up to `map_count`).
pub const V2_LEN: usize = core::mem::offset_of!(CallFailedEvent, map_count);

/// A failed call's record of any of its lengths, and how many of its
/// arguments it carries (2 for a [`V1_LEN`] record, whose `args_more`
/// are 0 here; else 4); the sizes of a shorter record are 0. None for
/// any other length.
pub fn read(rec: &[u8]) -> Option<(CallFailedEvent, usize)> {
    const FULL: usize = core::mem::size_of::<CallFailedEvent>();
    let args = match rec.len() {
        FULL => return crate::read::<CallFailedEvent>(rec).map(|e| (e, 4)),
        V2_LEN => 4,
        V1_LEN => 2,
        _ => return None,
    };
    let mut whole = [0u8; FULL];
    whole[..rec.len()].copy_from_slice(rec);
    crate::read::<CallFailedEvent>(&whole).map(|e| (e, args))
}
