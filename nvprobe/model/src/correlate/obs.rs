//! What the correlator keeps of each event: a small, owned summary made
//! on the decode threads, so the full event never crosses threads.

use crate::decode::{
    Call, CudaPhase, DeviceKind, Event, Ioctl, PathCall, ProcCall, Status, SysKind, class, escape,
    uvm,
};

use super::{
    facts::{CallRef, CallResult, Comm, DevNo, GpuRef, PathWhy, errno_of},
    stages::stage_of,
};

/// What the correlator keeps of an event.
#[derive(Debug)]
pub struct Obs {
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) comm: Comm,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) stage: Option<usize>,
    pub(crate) kind: ObsKind,
}

#[derive(Debug)]
pub(crate) enum ObsKind {
    Ioctl {
        ok: bool,
        call: CallRef,
        fd: i32,
        /// What the call returned, for failed calls only.
        failure: Option<CallResult>,
        /// The GPU the call names: its node's minor (calls on /dev/nvidiaN)
        /// or the UUID UVM_REGISTER_GPU carries.
        gpu: Option<GpuRef>,
        /// The call was made on /dev/nvidia-uvm.
        uvm: bool,
        /// UVM_PAGEABLE_MEM_ACCESS's answer (NV_OK): whether pageable
        /// memory access (HMM on x86, ATS on Grace or POWER) is in effect
        /// for the process's va_space.
        pageable: Option<bool>,
        /// The driver's build version the call answered (the version
        /// handshake's control).
        told_version: Option<String>,
        /// A successful RM allocation of a memory class (device or system
        /// memory a process holds).
        mem_alloc: bool,
    },
    Path {
        opened_device: bool,
        /// (path, why) of a failed or mismatched NVIDIA path.
        problem: Option<(String, PathWhy)>,
        /// For the stage text of a ctl open.
        open_path: Option<String>,
        /// The path, and whether the call succeeded (for a problem that
        /// start-up later got past).
        path: String,
        ok: bool,
        /// open (not stat/access), and of which GPU minor.
        open: bool,
        gpu_minor: Option<u32>,
        /// A mknod: the node it creates (when the record says).
        mknod: Option<Option<DevNo>>,
        /// The descriptor a successful open gave (`opened_device`: of an
        /// NVIDIA node).
        fd: Option<i64>,
    },
    /// A descriptor's number given to an NVIDIA file again, or NVIDIA
    /// descriptors taken from the process.
    Fds(super::fds::FdChange),
    /// The dynamic loader opened (or failed to open) a libcuda.
    LibLoad {
        path: String,
        /// Why the open failed.
        failure: Option<CallResult>,
    },
    Identity(Box<crate::attribution::ProcessInfo>),
    Proc(Box<ProcCall>),
    /// A call of the start-up's own failed (its name, what it makes, its
    /// errno): a descriptor of an NVIDIA file that could not be duplicated
    /// (the kernel side's `call_failed` records come as `Proc`).
    CallFailed(String, SysKind, i32),
    Cuda {
        /// The function's number, and its name (for display).
        func: u32,
        name: &'static str,
        enter: bool,
        result: Option<i64>,
        result_name: Option<&'static str>,
        /// The device a start-up call names (`CudaCall::device`).
        device: Option<i32>,
        /// What a getter returned (`CudaCall::value`: the device count).
        value: Option<i32>,
        /// Made to a preloaded library that exports the API, not libcuda.
        interposer: bool,
        /// Still waiting when its thread ended (a fault-only call).
        unfinished: bool,
    },
    /// An NVIDIA line of the kernel log.
    KernelLog(Box<super::faults::LogLine>),
    /// The stall check found a call still running: what the thread was
    /// doing then (its state, where it slept, a freezer or tracer holding
    /// it).
    Stall(Box<crate::records::StallReport>),
    /// The collector's clock moved on (no event): start-ups waiting for
    /// their first context may have waited long enough.
    Tick,
    Driver {
        function: &'static str,
        ok: bool,
        result: String,
    },
}

impl Obs {
    /// The process an exit ends, when this is one.
    pub fn exited(&self) -> Option<u32> {
        match &self.kind {
            ObsKind::Proc(p) if p.op == crate::decode::ProcKind::Exit => Some(p.target_pid),
            _ => None,
        }
    }

    pub fn of(ev: &Event) -> Option<Obs> {
        let pr = ev.proc();
        let (start, end) = ev.span();
        let stage = stage_of(ev);
        let kind = match ev {
            Event::Ioctl(i) => ObsKind::Ioctl {
                ok: i.ok,
                call: CallRef::of(i),
                fd: i.fd,
                failure: (!i.ok).then(|| CallResult::of(i.ret, i.status.as_ref())),
                gpu: gpu_of(i),
                uvm: matches!(i.device.kind, DeviceKind::Uvm),
                pageable: i
                    .args
                    .known()
                    .pageable
                    .filter(|_| i.ok && i.call == Call::Uvm(uvm::UVM_PAGEABLE_MEM_ACCESS)),
                told_version: i.args.known().driver_version.clone().filter(|_| i.ok),
                mem_alloc: i.ok
                    && matches!(
                        i.call,
                        Call::Escape(escape::NV_ESC_RM_ALLOC | escape::NV_ESC_RM_ALLOC_MEMORY)
                    )
                    && i.args.known().class.is_some_and(class::is_memory),
            },
            Event::Open(p) if p.device.is_none() && crate::decode::is_libcuda_path(&p.path) => {
                ObsKind::LibLoad {
                    path: p.path.clone(),
                    failure: (!p.ok).then(|| CallResult::Errno(errno_of(p.ret))),
                }
            }
            // The loader's opens of a libnccl are for hooking it alone.
            Event::Open(p) if p.device.is_none() && crate::decode::is_nccl_path(&p.path) => {
                return None;
            }
            Event::Open(p) | Event::Stat(p) | Event::Access(p) | Event::Mknod(p) => {
                path_kind(ev, p, stage)
            }
            Event::Proc(p) => ObsKind::Proc(Box::new(p.clone())),
            Event::Dup(f) if !f.ok => {
                ObsKind::CallFailed(f.syscall.to_owned(), SysKind::Dup, errno_of(f.ret))
            }
            Event::Dup(f) if !f.replaced => ObsKind::Fds(super::fds::FdChange::New(f.newfd?)),
            Event::Close(f) | Event::Dup(f) => {
                let range = f.closes(matches!(ev, Event::Close(_)))?;
                let by = match (f.last_fd, f.replaced) {
                    (Some(last), _) => super::fds::GoneBy::CloseRange {
                        first: f.fd as u32,
                        last,
                    },
                    (None, true) => super::fds::GoneBy::Replaced {
                        call: f.syscall,
                        from: f.fd,
                    },
                    (None, false) => super::fds::GoneBy::Close,
                };
                ObsKind::Fds(super::fds::FdChange::Gone { range, by })
            }
            Event::Driver(d) => ObsKind::Driver {
                function: d.function,
                ok: d.ok,
                result: d
                    .rm_status
                    .as_ref()
                    .filter(|st| st.code != 0)
                    .map_or_else(|| d.result.clone(), Status::text),
            },
            Event::Cuda(c) => ObsKind::Cuda {
                func: c.func_id,
                name: c.func,
                enter: c.phase == CudaPhase::Enter,
                result: c.result,
                result_name: c.result_name,
                device: c.device,
                value: c.value,
                interposer: c.interposer,
                unfinished: c.phase == CudaPhase::Unfinished,
            },
            _ => return None,
        };
        Some(Obs {
            pid: pr.pid,
            tid: pr.tid,
            comm: Comm::new(&pr.comm),
            start,
            end,
            stage,
            kind,
        })
    }
}

/// What is kept of an open, stat, access or mknod of an NVIDIA path
/// (`stage`: the milestone it completes).
fn path_kind(ev: &Event, p: &PathCall, stage: Option<usize>) -> ObsKind {
    ObsKind::Path {
        path: p.path.clone(),
        ok: p.ok,
        // An open that creates the file (a shell's `: >/dev/nvidia-uvm`)
        // makes a file, as mknod does; libcuda never opens a node so.
        open: matches!(ev, Event::Open(_)) && !p.creates,
        gpu_minor: p
            .device
            .as_ref()
            .filter(|d| d.kind == DeviceKind::Gpu && matches!(ev, Event::Open(_)))
            .map(|d| d.minor),
        mknod: matches!(ev, Event::Mknod(_))
            .then(|| p.device.as_ref().map(|d| DevNo(d.major, d.minor))),
        opened_device: matches!(ev, Event::Open(_)) && p.ok && p.device.is_some() && !p.creates,
        // /dev/char/195:N links are refreshed opportunistically by
        // libcuda, and numa_status is probed; their absence is normal.
        problem: (!p.ok && !crate::decode::absence_is_normal(&p.path)).then(|| {
            (
                p.path.clone(),
                PathWhy::of(p, matches!(ev, Event::Mknod(_))),
            )
        }),
        open_path: stage.map(|_| p.path.clone()),
        fd: p
            .fd
            .filter(|_| matches!(ev, Event::Open(_)) && p.ok)
            .map(i64::from),
    }
}

/// The GPU a call names: the minor of a /dev/nvidiaN call, or the UUID
/// of UVM_REGISTER_GPU.
fn gpu_of(i: &Ioctl) -> Option<GpuRef> {
    if i.device.kind == DeviceKind::Gpu {
        return Some(GpuRef::Minor(i.device.minor));
    }
    if i.call == Call::Uvm(uvm::UVM_REGISTER_GPU)
        && let Some(u) = &i.args.known().gpu_uuid
    {
        return Some(GpuRef::Uuid(u.clone()));
    }
    None
}

impl Obs {
    /// The identity of a process, read from /proc by the live collector
    /// (or from a recording's `process` record).
    pub fn identity(info: crate::attribution::ProcessInfo, mono_ns: u64) -> Obs {
        Obs {
            pid: info.pid,
            tid: info.pid,
            comm: Comm::new(""),
            start: mono_ns,
            end: mono_ns,
            stage: None,
            kind: ObsKind::Identity(Box::new(info)),
        }
    }

    /// A stall report made at `mono_ns` (live by the stall check, or from a
    /// recording's `stall` record).
    pub fn stall(report: crate::records::StallReport, mono_ns: u64) -> Obs {
        Obs {
            pid: report.pid,
            tid: report.tid,
            comm: Comm::new(""),
            start: mono_ns,
            end: mono_ns,
            stage: None,
            kind: ObsKind::Stall(Box::new(report)),
        }
    }

    /// A kernel-log line read at `mono_ns` (live from /dev/kmsg, or from a
    /// recording's `kernel_log` record).
    pub fn kernel_log(line: super::faults::LogLine, mono_ns: u64) -> Obs {
        Obs {
            pid: 0,
            tid: 0,
            comm: Comm::new(""),
            start: mono_ns,
            end: mono_ns,
            stage: None,
            kind: ObsKind::KernelLog(Box::new(line)),
        }
    }

    /// The collector's clock at `mono_ns`, with no event.
    pub fn tick(mono_ns: u64) -> Obs {
        Obs {
            pid: 0,
            tid: 0,
            comm: Comm::new(""),
            start: mono_ns,
            end: mono_ns,
            stage: None,
            kind: ObsKind::Tick,
        }
    }
}
