//! Process, libcuda (uprobe) and driver-layer (kprobe) records.

use nvprobe_common::{
    CUDA_RETURN, CudaEvent, DevKind, DriverEvent, ProcEvent, ProcOp, kdev_major, kdev_minor,
};

use super::{
    bytes::*, callkind::SysKind, context::*, cudafn, curesult, escape, event::*, ioctl, signal,
    status,
};

/// The helper libcuda runs (setuid) to load the modules and make the
/// nodes, by its task name.
pub fn is_nvidia_modprobe(comm: &str) -> bool {
    comm == "nvidia-modprobe"
}

super::event::named_enum!(
    /// What a program is, by its task name or executable, for the
    /// correlator's class of a process (names end here, at decode).
    Program {
        /// The setuid helper libcuda runs to load modules and make nodes.
        NvidiaModprobe => "nvidia-modprobe",
        /// The loader's cache builder, which opens every libcuda it finds.
        Ldconfig => "ldconfig",
        /// A driver client that never starts CUDA: nvidia-smi, DCGM,
        /// persistenced, device plugins.
        DriverClient => "driver-client",
        Other => "other",
    }
);

/// Programs that use the driver without starting CUDA (NVML clients).
const DRIVER_CLIENTS: &[&str] = &[
    "nvidia-smi",
    "nv-hostengine",
    "nvidia-persistenced",
    "nvidia-device-plugin",
    "dcgmi",
    "dcgm-exporter",
    "nvidia-dcgm",
];

impl Program {
    /// The program whose task name is `comm` or whose executable (a path
    /// or a name) is `exe`.
    pub fn of(comm: &str, exe: Option<&str>) -> Self {
        let base = exe.and_then(|e| e.rsplit('/').next());
        let is = |name: &str| comm == name || base == Some(name);
        if is("nvidia-modprobe") {
            Self::NvidiaModprobe
        } else if is("ldconfig") || is("ldconfig.real") {
            Self::Ldconfig
        } else if DRIVER_CLIENTS.iter().any(|c| is(c)) {
            Self::DriverClient
        } else {
            Self::Other
        }
    }
}

/// An nvprobe process: its task name, and its executable's name when
/// known.
pub fn is_nvprobe(comm: &str, exe: Option<&str>) -> bool {
    comm == "nvprobe"
        && exe.is_none_or(|e| {
            e.rsplit('/')
                .next()
                .is_some_and(|b| b.starts_with("nvprobe"))
        })
}

pub(super) fn decode_cuda(ev: &CudaEvent, raw: Option<String>) -> Event {
    let interposer = ev.func & nvprobe_common::CUDA_INTERPOSER != 0;
    let number = ev.func
        & !(nvprobe_common::CUDA_INTERPOSER
            | nvprobe_common::CUDA_FAULT_ONLY
            | nvprobe_common::CUDA_LAUNCH);
    let func = cudafn::name(number);
    let ret = ev.phase == CUDA_RETURN;
    let unfinished = ev.phase == nvprobe_common::CUDA_UNFINISHED;
    Event::Cuda(CudaCall {
        proc: proc_of(&ev.hdr),
        func,
        func_id: number,
        phase: if ret {
            CudaPhase::Return
        } else if unfinished {
            CudaPhase::Unfinished
        } else {
            CudaPhase::Enter
        },
        start_ns: ev.start_ns,
        duration_ns: (ret || unfinished).then_some(ev.duration_ns),
        result: ret.then_some(ev.ret),
        result_name: if ret { curesult::name(ev.ret) } else { None },
        flags: (!ret && number == nvprobe_common::CUDA_CUINIT).then_some(ev.args[0]),
        interposer,
        value: (ret && ev.out_valid != 0).then_some(ev.out_val),
        device: if ret {
            device_arg(number, &ev.args)
        } else {
            None
        },
        raw,
    })
}

/// The device argument of the start-up calls whose prototype puts it in
/// the first three (cuda.h): cuDeviceGet(CUdevice *, int ordinal),
/// cuDevicePrimaryCtxRetain(CUcontext *, CUdevice), cuCtxCreate(_v2)
/// (CUcontext *, unsigned int flags, CUdevice).
fn device_arg(func: u32, args: &[u64; 3]) -> Option<i32> {
    use cudafn::*;
    match func {
        CU_DEVICE_GET | CU_DEVICE_PRIMARY_CTX_RETAIN => Some(args[1] as u32 as i32),
        CU_CTX_CREATE | CU_CTX_CREATE_V2 => Some(args[2] as u32 as i32),
        _ => None,
    }
}

pub(super) fn decode_driver(ev: &DriverEvent, ctx: &Context, raw: Option<String>) -> Event {
    use nvprobe_common::hooks::{HOOKS, Returns};
    let hook = HOOKS.get(ev.hook as usize);
    let function = hook.map_or("unknown", |h| h.name);
    let module = hook.map_or("unknown", |h| h.target.module());
    let v = &ctx.version;
    let (result, ok) = match hook.map_or(Returns::Errno, |h| h.returns) {
        Returns::Errno => match errno_name(ev.ret) {
            Some(e) => (e, false),
            None => (ev.ret.to_string(), true),
        },
        Returns::NvStatus => {
            let code = ev.ret as u32;
            (
                status::name(code).map_or_else(|| format!("{code:#x}"), str::to_owned),
                code == 0,
            )
        }
        Returns::Bool => {
            let t = ev.ret & 0xff != 0;
            (t.to_string(), t)
        }
        Returns::Void => ("void".to_owned(), true),
        Returns::Ptr => match errno_name(ev.ret) {
            Some(e) => (e, false),
            None if ev.ret == 0 => ("NULL".to_owned(), false),
            None => ("pointer".to_owned(), true),
        },
    };
    let (mut call, mut device, mut rm_status) = (None, None, None);
    match ev.hook {
        nvprobe_common::HOOK_NV_IOCTL | nvprobe_common::HOOK_NV_FRONTEND_IOCTL => {
            let cmd = ev.args[0] as u32;
            call = Some(ioctl::raw_call_name(DevKind::Ctl, cmd, None, v));
            device = Some(dev_text(ev.args[2] as u32));
        }
        nvprobe_common::HOOK_UVM_IOCTL => {
            let cmd = ev.args[0] as u32;
            call = Some(ioctl::raw_call_name(DevKind::Uvm, cmd, None, v));
            device = Some(dev_text(ev.args[2] as u32));
        }
        nvprobe_common::HOOK_RM_IOCTL => {
            let nr = ev.args[0] as u32 & 0xff;
            let size = ev.args[1] as u32;
            call = Some(
                escape::name_for(nr, v).map_or_else(|| format!("escape {nr:#x}"), str::to_owned),
            );
            let n = (ev.data_len as usize).min(ev.head.len());
            let head = Bytes::new(&ev.head[..n]);
            let tail_off = size.saturating_sub(ev.tail.len() as u32);
            let tail = Bytes::new(if size as usize > ev.head.len() {
                &ev.tail[..]
            } else {
                &[]
            });
            if let Ok(l) = escape::status_loc(nr, size, v)
                && let Some(code) = ioctl::read_status(&head, &tail, tail_off, l.offset)
            {
                rm_status = Some(Status {
                    code,
                    name: status::name(code),
                    offset: l.offset,
                    layout: l.basis,
                });
            }
        }
        _ => {}
    }
    let ok = ok && rm_status.as_ref().is_none_or(|s| s.code == 0);
    Event::Driver(DriverCall {
        proc: proc_of(&ev.hdr),
        function,
        module,
        start_ns: ev.start_ns,
        duration_ns: ev.end_ns.saturating_sub(ev.start_ns),
        ret: ev.ret,
        result,
        ok,
        call,
        device,
        rm_status,
        raw,
    })
}

fn dev_text(rdev: u32) -> String {
    format!("{}:{}", kdev_major(rdev), kdev_minor(rdev))
}

/// A process record; a failed call's record carries its path
/// ([`nvprobe_common::CallFailedEvent`]; `bytes` is the whole record).
pub(super) fn decode_proc(ev: &ProcEvent, bytes: &[u8], raw: Option<String>) -> Event {
    let op = ProcOp::from_repr(ev.op);
    let is_sig = matches!(op, Some(ProcOp::SignalGenerate | ProcOp::SignalDeliver));
    let exit = matches!(op, Some(ProcOp::Exit | ProcOp::ThreadExit)).then(|| {
        if ev.exit_code & 0x7f != 0 {
            format!(
                "killed by {}{}",
                signal::name(ev.exit_code & 0x7f),
                if ev.exit_code & 0x80 != 0 {
                    " (core dumped)"
                } else {
                    ""
                }
            )
        } else {
            format!("exited with status {}", (ev.exit_code >> 8) & 0xff)
        }
    });
    // A failed call's arguments and path (a record of either length).
    let failed_rec = (op == Some(ProcOp::CallFailed))
        .then(|| nvprobe_common::call_failed::read(bytes))
        .flatten();
    Event::Proc(ProcCall {
        proc: proc_of(&ev.hdr),
        op: match op {
            Some(ProcOp::Exit) => ProcKind::Exit,
            Some(ProcOp::Exec) => ProcKind::Exec,
            Some(ProcOp::SignalGenerate) => ProcKind::Signal,
            Some(ProcOp::SignalDeliver) => ProcKind::SignalDelivered,
            Some(ProcOp::Fork) => ProcKind::Fork,
            Some(ProcOp::CallFailed) => ProcKind::CallFailed,
            Some(ProcOp::OomVictim) => ProcKind::OomVictim,
            Some(ProcOp::ThreadExit) => ProcKind::ThreadExit,
            None => ProcKind::Unknown,
        },
        target_pid: ev.target_tgid,
        target_tid: (is_sig || op == Some(ProcOp::ThreadExit)).then_some(ev.target_tid),
        sig: is_sig.then_some(ev.sig),
        signal: is_sig.then(|| signal::name(ev.sig)),
        code: is_sig.then_some(ev.code),
        exit_code: matches!(op, Some(ProcOp::Exit | ProcOp::ThreadExit)).then_some(ev.exit_code),
        exit,
        unsent: (matches!(op, Some(ProcOp::Exit | ProcOp::Exec)) && ev.unsent != 0)
            .then_some(u64::from(ev.unsent)),
        action: (op == Some(ProcOp::SignalDeliver)).then_some(match ev.sa_handler {
            0 => SigAction::Default,
            1 => SigAction::Ignored,
            _ => SigAction::Handler,
        }),
        // SA_RESTART (uapi asm-generic/signal-defs.h).
        sa_restart: (op == Some(ProcOp::SignalDeliver)).then_some(ev.sa_flags & 0x1000_0000 != 0),
        call: match op {
            Some(ProcOp::CallFailed) => Some(syscall_name(ev.code)),
            Some(ProcOp::SignalGenerate) if ev.sig == 31 && ev.code == 1 => {
                seccomp_call(ev.si_pid, ev.exit_code)
            }
            _ => None,
        },
        failed: (op == Some(ProcOp::CallFailed))
            .then(|| (SysKind::of(&syscall_name(ev.code)), ev.errno)),
        errno: (op == Some(ProcOp::CallFailed))
            .then(|| errno_name(-i64::from(ev.errno)))
            .flatten(),
        path: failed_rec.filter(|(f, _)| f.path_len > 0).map(|(f, _)| {
            let n = (f.path_len as usize).min(f.path.len());
            super::bytes::escape_bytes(&f.path[..n])
        }),
        seq: failed_rec.map(|(f, _)| f.seq),
        args: failed_rec.map(|(f, n)| {
            let mut a = f.args.to_vec();
            if n > 2 {
                a.extend(f.args_more);
            }
            a
        }),
        mm: failed_rec
            .filter(|(f, _)| f.map_count != 0)
            .map(|(f, _)| super::callkind::MmAt {
                map_count: f.map_count,
                vm_bytes: f.vm_bytes,
                data_bytes: f.data_bytes,
            }),
        time_ns: ev.hdr.ktime_ns,
        raw,
    })
}

/// The system call a seccomp filter refused with SIGSYS, by the table of
/// the architecture the kernel named (`si_arch`): None for a record made
/// before nvprobe sent it (its `si_pid` then holds part of an address,
/// not an AUDIT_ARCH value).
pub fn seccomp_call(arch: u32, nr: i32) -> Option<String> {
    // AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64, AUDIT_ARCH_I386 (uapi
    // linux/audit.h).
    let table = match arch {
        0xC000_003E => super::syscalls::X86_64,
        0xC000_00B7 => super::syscalls::GENERIC,
        0x4000_0003 => return Some(format!("syscall {nr} (i386)")),
        _ => return None,
    };
    Some(
        table
            .binary_search_by_key(&nr, |(n, _)| *n)
            .map_or_else(|_| format!("syscall {nr}"), |i| table[i].1.to_owned()),
    )
}

/// The name of system call `nr` by the tracing machine's numbers
/// (`syscalls.rs`); "syscall N" for a number the table does not have.
pub fn syscall_name(nr: i32) -> String {
    #[cfg(target_arch = "aarch64")]
    let table = super::syscalls::GENERIC;
    #[cfg(not(target_arch = "aarch64"))]
    let table = super::syscalls::X86_64;
    table
        .binary_search_by_key(&nr, |(n, _)| *n)
        .map_or_else(|_| format!("syscall {nr}"), |i| table[i].1.to_owned())
}
