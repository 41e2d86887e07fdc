//! The record of a failed system call of a process in start-up
//! ([`crate::ProcOp::CallFailed`]) and its bound.

use crate::{PATH_LEN, ProcEvent, Record};

/// Failed calls sent per program (between an exec and the first
/// context); the later ones are counted (`FAILS_UNSENT`), not sent.
pub const SENT_MAX: u32 = 128;

/// A failed system call of a process in start-up
/// ([`crate::ProcOp::CallFailed`]): the process record, the call's first two
/// arguments as the caller passed them, and the path it named (the
/// syscall's path argument, or an `AF_UNIX` socket's path for connect).
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
}

// SAFETY: plain integers and byte arrays, valid for any bit pattern.
unsafe impl Record for CallFailedEvent {}
