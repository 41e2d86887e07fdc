//! What the attach phases are given ([`Settings`]: the layers, the host's
//! majors and filters) and what they report back ([`Refusal`]): below the
//! phases, which all use them.

use crate::{decode::version::VersionCtx, host::ExtraDevice};

pub use nvprobe_model::records::ProbeState;

/// A probe the kernel refused; reported once, then tracing goes on.
#[derive(Clone, Debug)]
pub struct Refusal {
    pub probe: String,
    pub reason: String,
}

pub struct Settings<'a> {
    /// Attach the driver layer (kprobes in nvidia/nvidia_uvm) when the
    /// kernel allows it.
    pub driver_layer: bool,
    /// Let the driver layer's ioctl entry points make the ioctl records and
    /// leave the ioctl syscall tracepoints off when they attach (other
    /// processes' ioctls then run no BPF program).
    pub driver_ioctls: bool,
    /// The syscall tracepoints (ioctl, opens, stats...).
    pub syscall_layer: bool,
    /// Exits, execs, signals, forks.
    pub process_layer: bool,
    pub driver_version: Option<crate::decode::version::DriverVersion>,
    pub uvm_major: u32,
    pub caps_major: u32,
    pub pids: &'a [u32],
    pub extra: &'a [(ExtraDevice, (u32, u64))],
    pub ringbuf_bytes: u32,
    pub version: VersionCtx,
    /// `--events failures|verdicts`: the kernel drops the successful calls
    /// of processes whose cuInit succeeded.
    pub quiet: bool,
    /// `--events verdicts` without `--metrics`: the ioctls of a process not
    /// yet quiet start on a tick count (`nvprobe_common::ioctl_flags::COARSE`).
    pub coarse_starts: bool,
}
