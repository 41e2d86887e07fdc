//! The parameters of an RM control, copied by the kernel side behind
//! NVOS54.params for the controls user space lists (`RM_PARAMS`).

use crate::{IoctlEvent, Record};

/// Bytes of a control's parameters an [`RmControlEvent`] carries at most.
pub const RM_PARAMS_LEN: usize = 256;
/// Bytes of the string a parameter pointer leads to ([`rm_params`]).
pub const RM_DEREF_LEN: usize = 64;

/// What the kernel side copies of an `NV_ESC_RM_CONTROL`'s parameters
/// (NVOS54.params, NVOS54.paramsSize bytes), per control: the values of
/// the `RM_PARAMS` map, which user space fills for the running driver.
pub mod rm_params {
    /// Entries the map holds at most.
    pub const MAX_ENTRIES: u32 = 64;
    /// No second hop.
    pub const NO_DEREF: u32 = 0xff;
    /// `copy` bytes of the parameters (at most RM_PARAMS_LEN, and never
    /// more than paramsSize); when `deref_off` is not [`NO_DEREF`], the
    /// NUL-terminated string (at most RM_DEREF_LEN bytes) that the user
    /// pointer at that offset of the parameters leads to.
    pub const fn pack(copy: u32, deref_off: u32) -> u32 {
        (copy & 0xffff) | ((deref_off & 0xff) << 16)
    }
    pub const fn copy(v: u32) -> u32 {
        v & 0xffff
    }
    pub const fn deref_off(v: u32) -> u32 {
        (v >> 16) & 0xff
    }
}

/// An `NV_ESC_RM_CONTROL` that returned 0 with NV_OK, whose control is in
/// `RM_PARAMS`: the ioctl record, then the control's parameters as the
/// driver left them (read at syscall exit).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RmControlEvent {
    /// `hdr.kind` is [`crate::EventKind::RmControl`]; the rest as for any ioctl.
    pub ioctl: IoctlEvent,
    /// NVOS54.cmd.
    pub control: u32,
    /// Bytes of `params` read (0: unreadable).
    pub params_len: u32,
    /// Bytes of `deref` read, without the NUL (0: none).
    pub deref_len: u32,
    pub _pad: u32,
    pub params: [u8; RM_PARAMS_LEN],
    pub deref: [u8; RM_DEREF_LEN],
}

// SAFETY: integers and byte arrays only.
unsafe impl Record for RmControlEvent {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parameters_follow_the_ioctl_record_without_padding() {
        assert_eq!(
            core::mem::size_of::<RmControlEvent>(),
            core::mem::size_of::<IoctlEvent>() + 16 + RM_PARAMS_LEN + RM_DEREF_LEN
        );
    }
}
