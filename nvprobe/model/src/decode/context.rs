//! What decoding knows of the host ([`Context`]) and the helpers every
//! record's decoder shares: a record's shape and time, its process, its
//! device, an errno's name. Below the decoders and the dispatcher
//! (`mod.rs`), which both use it.

use std::{collections::HashMap, mem::size_of, sync::Arc};

use nvprobe_common::{
    CudaEvent, DevKind, DriverEvent, EventKind, FdEvent, FileId, Header, IoctlEvent, MmapEvent,
    PathEvent, ProcEvent, RmControlEvent, kdev_major, kdev_minor,
};

use super::{
    bytes::escape_bytes,
    event::{Device, DeviceKind, Proc},
    version::{LayoutBasis, VersionCtx},
};

/// Where an NV_STATUS is and how that layout was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusLoc {
    pub offset: u32,
    pub basis: LayoutBasis,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("record of {0} bytes is shorter than a header")]
    Short(usize),
    #[error("unknown record kind {0}")]
    Kind(u32),
    #[error("{kind} record is {got} bytes, expected {want}")]
    Size {
        kind: &'static str,
        got: usize,
        want: usize,
    },
}

/// What the decoder knows about the host.
#[derive(Clone, Debug)]
pub struct Context {
    pub version: VersionCtx,
    /// Kernel-encoded rdev -> device node path.
    pub nodes: HashMap<u32, Arc<str>>,
    /// (s_dev, ino) of `--device` files -> their path.
    pub extra: HashMap<(u32, u64), Arc<str>>,
    /// Keep the raw record (hex) in each event, for `nvprobe decode`.
    pub keep_raw: bool,
    /// Dynamic majors of nvidia-uvm and nvidia-caps (0 = absent).
    pub uvm_major: u32,
    pub caps_major: u32,
    /// The GPUs the driver lists, to tie UVM's UUIDs to nodes.
    pub host_gpus: Vec<crate::attribution::HostGpu>,
    /// The kernel module's version.
    pub host_driver: Option<String>,
}

impl Context {
    pub fn new(version: VersionCtx) -> Self {
        Self {
            version,
            nodes: HashMap::new(),
            extra: HashMap::new(),
            keep_raw: false,
            uvm_major: 0,
            caps_major: 0,
            host_gpus: Vec::new(),
            host_driver: None,
        }
    }
}

/// Kernel time of a raw record (for ordering and wall-clock conversion).
pub fn record_ktime(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?))
}

/// The record's kind, once its length is right for that kind: what a
/// record must be before it is decoded (replays check it per line).
pub fn check_shape(bytes: &[u8]) -> Result<EventKind, DecodeError> {
    let h = Header::peek(bytes).ok_or(DecodeError::Short(bytes.len()))?;
    let kind = h.event_kind().ok_or(DecodeError::Kind(h.kind))?;
    let (name, want) = record_size(kind);
    // A failed system call's record is a ProcEvent with its arguments and
    // path after it (nvprobe_common::CallFailedEvent, of either length).
    if kind == EventKind::Proc
        && nvprobe_common::call_failed::read(bytes).is_some()
        && nvprobe_common::read::<ProcEvent>(bytes)
            .is_some_and(|p| p.op == nvprobe_common::ProcOp::CallFailed as u32)
    {
        return Ok(kind);
    }
    if bytes.len() != want {
        return Err(DecodeError::Size {
            kind: name,
            got: bytes.len(),
            want,
        });
    }
    Ok(kind)
}

/// The name and the exact size of a record of `kind` (a `proc` record of
/// a failed system call is a `CallFailedEvent`, longer: [`check_shape`]).
pub fn record_size(kind: EventKind) -> (&'static str, usize) {
    match kind {
        EventKind::Ioctl => ("ioctl", size_of::<IoctlEvent>()),
        EventKind::Path => ("path", size_of::<PathEvent>()),
        EventKind::Fd => ("fd", size_of::<FdEvent>()),
        EventKind::Mmap => ("mmap", size_of::<MmapEvent>()),
        EventKind::Proc => ("proc", size_of::<ProcEvent>()),
        EventKind::Cuda => ("cuda", size_of::<CudaEvent>()),
        EventKind::Driver => ("driver", size_of::<DriverEvent>()),
        EventKind::RmControl => ("rm_control", size_of::<RmControlEvent>()),
        EventKind::Nccl => ("nccl", size_of::<nvprobe_common::NcclEvent>()),
    }
}

/// The record as `T`, after [`check_shape`] said it is one.
pub(crate) fn read<T: nvprobe_common::Record>(bytes: &[u8]) -> Result<T, DecodeError> {
    nvprobe_common::read(bytes).ok_or(DecodeError::Short(bytes.len()))
}

pub(crate) fn proc_of(h: &Header) -> Proc {
    let differs = h.pidns_level > 0 && (h.ns_tgid != h.tgid || h.ns_tid != h.tid);
    let end = h.comm.iter().position(|&c| c == 0).unwrap_or(h.comm.len());
    Proc {
        pid: h.tgid,
        tid: h.tid,
        ns_pid: differs.then_some(h.ns_tgid),
        ns_tid: differs.then_some(h.ns_tid),
        comm: escape_bytes(&h.comm[..end]),
        uid: h.uid,
    }
}

pub fn dev_kind_name(k: DevKind) -> &'static str {
    DeviceKind::from(k).as_str()
}

pub(crate) fn device_of(f: &FileId, ctx: &Context) -> Device {
    let kind = DevKind::from_u8(f.kind);
    let extra = ctx.extra.get(&(f.sdev, f.ino));
    let is_chr = f.mode & 0o170000 == 0o020000;
    let node = match extra {
        Some(p) => Some(p.clone()),
        None if is_chr => ctx.nodes.get(&f.rdev).cloned(),
        None => None,
    };
    Device {
        major: kdev_major(f.rdev),
        minor: kdev_minor(f.rdev),
        kind: kind.into(),
        node,
        extra: extra.is_some(),
    }
}

pub fn errno_name(ret: i64) -> Option<String> {
    if !(-4095..0).contains(&ret) {
        return None;
    }
    let e = nix::errno::Errno::from_raw((-ret) as i32);
    Some(match e {
        nix::errno::Errno::UnknownErrno => match -ret {
            512 => "ERESTARTSYS".to_owned(),
            513 => "ERESTARTNOINTR".to_owned(),
            514 => "ERESTARTNOHAND".to_owned(),
            516 => "ERESTART_RESTARTBLOCK".to_owned(),
            n => format!("E{n}"),
        },
        e => format!("{e:?}"),
    })
}
