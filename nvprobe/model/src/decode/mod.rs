//! Raw ring-buffer records -> typed, named events.
//!
//! The BPF side captures bytes; this module gives them meaning: escape and
//! UVM names, RM classes and controls, NV_STATUS read at the offset the
//! running driver's layout says. Unknown numbers decode to their raw value,
//! never to a guess.

pub mod args;
mod bytes;
mod callkind;
pub mod class;
mod context;
pub mod control;
pub mod cudafn;
pub mod curesult;
pub mod escape;
mod escape_args;
mod event;
mod failed_call;
mod files;
pub(crate) mod intern;
mod ioctl;
mod nccl;
mod process;
mod read;
pub mod rmparams;
pub mod rmtable;
pub mod signal;
pub mod status;
mod syscalls;
pub mod uvm;
pub mod version;

use nvprobe_common::EventKind;

use self::context::read;
pub use self::{
    bytes::{
        Bytes, CMDLINE_FIELD, PATH_FIELD, VALUE_FIELD, escape_bytes, escape_capped, hex_decode,
        hex_encode, terminal_safe, terminal_unsafe,
    },
    callkind::{MmAt, SysKind},
    context::{
        Context, DecodeError, StatusLoc, check_shape, dev_kind_name, errno_name, record_ktime,
        record_size,
    },
    event::*,
    failed_call::MemAsk,
    files::{
        absence_is_normal, is_device_path, is_libcuda_path, is_nccl_path, is_procfs_core_path,
        is_procfs_own_path, is_procfs_self_path, is_stub_path, lookup_missed, map_flag_names,
        node_kind, prot_names,
    },
    intern::intern,
    ioctl::raw_call_name,
    process::{Program, is_nvidia_modprobe, is_nvprobe, seccomp_call},
    read::recorded,
};

/// Decode one raw ring-buffer record.
pub fn decode(bytes: &[u8], ctx: &Context) -> Result<Event, DecodeError> {
    let kind = check_shape(bytes)?;
    let raw = ctx.keep_raw.then(|| hex_encode(bytes));
    Ok(match kind {
        EventKind::Ioctl => ioctl::decode_ioctl(&read(bytes)?, ctx, raw),
        EventKind::Path => files::decode_path(&read(bytes)?, ctx, raw),
        EventKind::Fd => files::decode_fd(&read(bytes)?, ctx, raw),
        EventKind::Mmap => files::decode_mmap(&read(bytes)?, ctx, raw),
        EventKind::Proc => process::decode_proc(&read(bytes)?, bytes, raw),
        EventKind::Cuda => process::decode_cuda(&read(bytes)?, raw),
        EventKind::Driver => process::decode_driver(&read(bytes)?, ctx, raw),
        EventKind::RmControl => ioctl::decode_rm_control(&read(bytes)?, ctx, raw),
        EventKind::Nccl => nccl::decode_nccl(&read(bytes)?, raw),
    })
}

#[cfg(test)]
mod tests;
