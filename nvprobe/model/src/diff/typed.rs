//! What a decoded event is, read from its types: the names a step and a
//! Perfetto slice carry, its result, its GPU (a recording made without
//! --raw is read into the same types: decode/read.rs).

use crate::decode::{Device, DeviceKind, Event, ProcKind};

/// What a driver call is, without handles, fds or addresses: the escape or
/// UVM command with its RM control or class ("NV_ESC_RM_CONTROL
/// NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION"), a path call with its path
/// ("open /dev/nvidia-uvm"), an mmap with the device kind, a driver-layer
/// function. None for other events.
pub fn call_label(ev: &Event) -> Option<String> {
    Some(match ev {
        Event::Ioctl(i) => {
            let name = i
                .xfer
                .as_ref()
                .and_then(|x| x.name)
                .or(i.name)
                .map_or_else(|| format!("{} {:#x}", i.family, i.request), str::to_owned);
            let k = i.args.known();
            // A name first (the control's, else the class's), else the
            // number (the class's, else the control's).
            let what = k
                .control
                .and_then(|c| c.name)
                .or_else(|| k.class.and_then(|c| c.name))
                .map(str::to_owned)
                .or_else(|| k.class.map(|c| format!("{:#x}", c.code)))
                .or_else(|| k.control.map(|c| format!("{:#x}", c.code)));
            match what {
                Some(w) => format!("{name} {w}"),
                None => name,
            }
        }
        Event::Open(p) | Event::Stat(p) | Event::Access(p) | Event::Mknod(p) => {
            format!("{} {}", ev.type_name(), p.path)
        }
        Event::Mmap(m) => format!("mmap {}", m.device.kind),
        Event::Driver(d) => d.function.to_owned(),
        _ => return None,
    })
}

/// What a step of a process is: a driver call ([`call_label`]; ioctls
/// prefixed), a CUDA call, a signal, fork, exec or exit. None for
/// bookkeeping (close, dup) and the driver layer's own spans.
pub fn call_name(ev: &Event) -> Option<String> {
    Some(match ev {
        Event::Ioctl(_) => format!("ioctl {}", call_label(ev)?),
        Event::Cuda(c) => format!("cuda {} {}", c.func, c.phase),
        Event::Nccl(n) => format!("nccl {}", n.func),
        Event::Proc(p) => match p.op {
            ProcKind::Signal | ProcKind::SignalDelivered => {
                format!("{} {}", p.op, p.signal.as_deref().unwrap_or("?"))
            }
            ProcKind::Fork
            | ProcKind::Exec
            | ProcKind::Exit
            | ProcKind::OomVictim
            | ProcKind::ThreadExit => p.op.to_string(),
            ProcKind::CallFailed => format!("{} {}", p.op, p.call.as_deref().unwrap_or("?")),
            ProcKind::Unknown => return None,
        },
        Event::Close(_) | Event::Dup(_) | Event::Driver(_) => return None,
        _ => call_label(ev)?,
    })
}

/// The device an event names.
pub fn device(ev: &Event) -> Option<&Device> {
    match ev {
        Event::Ioctl(i) => Some(&i.device),
        Event::Open(p) | Event::Stat(p) | Event::Access(p) | Event::Mknod(p) => p.device.as_ref(),
        Event::Close(f) | Event::Dup(f) => Some(&f.device),
        Event::Mmap(m) => Some(&m.device),
        Event::Proc(_) | Event::Cuda(_) | Event::Driver(_) | Event::Nccl(_) => None,
    }
}

/// The GPU node of a call on a GPU (its path, else "major:minor").
pub fn gpu_node(ev: &Event) -> Option<String> {
    let d = device(ev).filter(|d| d.kind == DeviceKind::Gpu)?;
    Some(match &d.node {
        Some(n) => n.to_string(),
        None => format!("{}:{}", d.major, d.minor),
    })
}

/// The GPU UUID a call's arguments name.
pub fn gpu_uuid(ev: &Event) -> Option<&str> {
    match ev {
        Event::Ioctl(i) => i.args.known().gpu_uuid.as_deref(),
        _ => None,
    }
}

/// What GPU a call was about: the UUID its arguments name (false), else
/// the GPU node it was made on (true).
pub fn detail(ev: &Event) -> Option<(String, bool)> {
    match gpu_uuid(ev) {
        Some(u) => Some((u.to_owned(), false)),
        None => gpu_node(ev).map(|n| (n, true)),
    }
}

/// Whether the call succeeded (a process record or a libcuda call, which
/// carry no `ok`, counts as one).
pub fn ok(ev: &Event) -> bool {
    match ev {
        Event::Ioctl(i) => i.ok,
        Event::Open(p) | Event::Stat(p) | Event::Access(p) | Event::Mknod(p) => p.ok,
        Event::Close(f) | Event::Dup(f) => f.ok,
        Event::Mmap(m) => m.ok,
        Event::Driver(d) => d.ok,
        Event::Proc(p) => p.op != ProcKind::CallFailed,
        Event::Cuda(_) => true,
        Event::Nccl(n) => n.ok,
    }
}

/// The errno name of a failed system call.
pub fn errno(ev: &Event) -> Option<&str> {
    match ev {
        Event::Ioctl(i) => i.errno.as_deref(),
        Event::Open(p) | Event::Stat(p) | Event::Access(p) | Event::Mknod(p) => p.errno.as_deref(),
        Event::Close(f) | Event::Dup(f) => f.errno.as_deref(),
        Event::Mmap(m) => m.errno.as_deref(),
        Event::Proc(p) => p.errno.as_deref(),
        Event::Cuda(_) | Event::Driver(_) | Event::Nccl(_) => None,
    }
}

/// The NV_STATUS name an ioctl's parameters carried.
pub fn status_name(ev: &Event) -> Option<&'static str> {
    match ev {
        Event::Ioctl(i) => i.status.as_ref().and_then(|s| s.name),
        _ => None,
    }
}

/// A step's result: the NV_STATUS name, the errno, the CUresult name, or
/// "ok"/"failed" (with the device an open or stat of an NVIDIA path found).
pub fn result(ev: &Event) -> String {
    if let Some(n) = status_name(ev) {
        return n.to_owned();
    }
    if let Some(e) = errno(ev) {
        return e.to_owned();
    }
    if let Event::Cuda(c) = ev
        && let Some(r) = c.result_name
    {
        return r.to_owned();
    }
    if let Event::Nccl(n) = ev
        && let Some(r) = n.result_name
    {
        return r.to_owned();
    }
    let mut r = if ok(ev) { "ok" } else { "failed" }.to_owned();
    if let Event::Open(p) | Event::Stat(p) = ev
        && let Some(d) = &p.device
        && p.path.starts_with("/dev/nvidia")
    {
        r.push_str(&format!(", device {}", d.kind));
    }
    r
}
