//! ioctl records: escape, UVM and nvkms commands by name, XFER unwrapping,
//! arguments, and the NV_STATUS read where the driver's layout puts it.

use nvprobe_common::{DevKind, IoctlEvent, ioctl_flags};

use super::{
    args::{Arg, Args},
    bytes::*,
    context::*,
    escape,
    event::*,
    rmparams, status, uvm,
    version::VersionCtx,
};
use nvprobe_common::ioctl as ioc;

/// The name of a call from its command word and device kind, as the
/// decoder would give it (for calls still in flight).
pub fn raw_call_name(kind: DevKind, cmd: u32, xfer_cmd: Option<u32>, v: &VersionCtx) -> String {
    if matches!(kind, DevKind::Uvm | DevKind::UvmTools) {
        return uvm::lookup(cmd).map_or_else(|| format!("uvm {cmd:#x}"), |c| c.name.to_owned());
    }
    if ioc::is_escape(cmd) {
        let nr = match xfer_cmd {
            Some(x) if ioc::is_xfer(cmd) => ioc::ioc_nr(x),
            _ => ioc::ioc_nr(cmd),
        };
        return escape::name_for(nr, v).map_or_else(|| format!("escape {cmd:#x}"), str::to_owned);
    }
    format!("ioctl {cmd:#x}")
}

/// An `NV_ESC_RM_CONTROL` record with the control's parameters: the ioctl,
/// plus the fields of the parameters in `args`, when the control the
/// parameters were copied for is the one NVOS54 names and the call
/// succeeded.
pub(super) fn decode_rm_control(
    ev: &nvprobe_common::RmControlEvent,
    ctx: &Context,
    raw: Option<String>,
) -> Event {
    let mut e = decode_ioctl(&ev.ioctl, ctx, raw);
    if let Event::Ioctl(io) = &mut e
        && io.ret == 0
        && io.status.as_ref().is_some_and(|s| s.code == 0)
        && matches!(io.call, Call::Escape(escape::NV_ESC_RM_CONTROL))
        && io.args.known().control.map(|c| c.code) == Some(ev.control)
    {
        let plen = (ev.params_len as usize).min(ev.params.len());
        let dlen = (ev.deref_len as usize).min(ev.deref.len());
        rmparams::decode(
            ev.control,
            &ev.params[..plen],
            &ev.deref[..dlen],
            &mut io.args,
        );
    }
    e
}

pub(super) fn decode_ioctl(ev: &IoctlEvent, ctx: &Context, raw: Option<String>) -> Event {
    let kind = DevKind::from_u8(ev.file.kind);
    let head_len = (ev.head_len as usize).min(ev.head.len());
    let head = Bytes::new(&ev.head[..head_len]);
    let tail_len = (ev.tail_len as usize).min(ev.tail.len());
    let tail = Bytes::new(&ev.tail[..tail_len]);
    let v = &ctx.version;

    let mut family = Family::Unknown;
    let mut call = Call::Unknown;
    let mut name = None;
    let mut xfer = None;
    let mut args = Args::new();
    let mut loc: Result<StatusLoc, String> = Err("unknown command: no layout".into());
    let size = ev.param_size;

    let is_uvm = matches!(kind, DevKind::Uvm | DevKind::UvmTools);
    if is_uvm {
        family = Family::Uvm;
        call = Call::Uvm(ev.cmd);
        loc = uvm::status_loc(ev.cmd, v);
        if let Some(c) = uvm::lookup(ev.cmd) {
            name = Some(c.name);
            args = uvm::args(ev.cmd, &head, &tail, ev.tail_off);
        }
    } else if kind == DevKind::Modeset || ev.cmd == ioc::NVKMS_IOCTL_IOWR {
        family = Family::Nvkms;
        call = Call::Nvkms;
        name = (ev.cmd == ioc::NVKMS_IOCTL_IOWR).then_some("NVKMS_IOCTL_IOWR");
        loc = Err("nvidia-modeset returns its result as errno".into());
        if let (Some(c), Some(s)) = (head.u32(0), head.u32(4)) {
            args.insert("nvkms_cmd", Arg::from(c));
            args.insert("nvkms_size", Arg::from(s));
        }
    } else if ioc::is_escape(ev.cmd) {
        family = Family::Escape;
        let mut nr = ioc::ioc_nr(ev.cmd);
        name = escape::name_for(nr, v);
        if nr == escape::NV_ESC_IOCTL_XFER_CMD {
            let inner = ioc::ioc_nr(ev.xfer_cmd);
            if ev.flags & ioctl_flags::XFER_FAULT == 0 {
                xfer = Some(Xfer {
                    cmd: ev.xfer_cmd,
                    name: escape::name_for(inner, v),
                    size: ev.xfer_size,
                });
                nr = inner;
            }
        }
        call = Call::Escape(nr);
        if xfer.is_some() && size > nvprobe_common::ioctl::NV_MAX_IOCTL_SIZE {
            loc = Err(format!(
                "the XFER wrapper claims {size} bytes, over the driver's limit of {}: nothing was copied",
                nvprobe_common::ioctl::NV_MAX_IOCTL_SIZE
            ));
        } else if nr != escape::NV_ESC_IOCTL_XFER_CMD {
            loc = escape::status_loc(nr, size, v);
            args = escape::args(nr, size, &head, v);
        } else {
            loc = Err("XFER wrapper could not be read".into());
        }
    }

    let errno = errno_name(ev.ret);
    let (status, status_note) = if ev.ret == 0 {
        status_of(ev, loc, &head, &tail)
    } else {
        (None, None)
    };
    let status_ok = status.as_ref().is_none_or(|s| status::is_benign(s.code));
    Event::Ioctl(Ioctl {
        proc: proc_of(&ev.hdr),
        fd: ev.fd,
        device: device_of(&ev.file, ctx),
        request: ev.cmd,
        family,
        call,
        name,
        xfer,
        size,
        args,
        start_ns: ev.start_ns,
        duration_ns: ev.duration_ns,
        untimed: ev.flags & ioctl_flags::UNTIMED != 0,
        coarse: ev.flags & ioctl_flags::COARSE != 0,
        ret: ev.ret,
        errno,
        status,
        status_note,
        ok: ev.ret == 0 && status_ok,
        via: (ev.flags & ioctl_flags::FROM_DRIVER != 0).then_some("driver"),
        raw,
    })
}

/// The NV_STATUS a call that returned 0 carried, where its layout puts
/// it; else why none is shown.
fn status_of(
    ev: &IoctlEvent,
    loc: Result<StatusLoc, String>,
    head: &Bytes,
    tail: &Bytes,
) -> (Option<Status>, Option<String>) {
    let mut status = None;
    let mut status_note = None;
    match loc {
        Ok(l) => {
            let code = read_status(head, tail, ev.tail_off, l.offset);
            match code {
                Some(code) => {
                    status = Some(Status {
                        code,
                        name: status::name(code),
                        offset: l.offset,
                        layout: l.basis,
                    })
                }
                None => {
                    status_note = Some(
                        if ev.flags & (ioctl_flags::HEAD_FAULT | ioctl_flags::TAIL_FAULT) != 0 {
                            "parameter memory was not readable at exit".to_owned()
                        } else if ev.flags & ioctl_flags::SIZE_UNKNOWN != 0 {
                            "the kernel side knew no parameter size for this command \
                             (not in UVM_SIZES for this driver version): nothing was copied"
                                .to_owned()
                        } else {
                            format!("status at offset {} was not captured", l.offset)
                        },
                    )
                }
            }
        }
        Err(why) => status_note = Some(why),
    }
    (status, status_note)
}

pub(super) fn read_status(head: &Bytes, tail: &Bytes, tail_off: u32, off: u32) -> Option<u32> {
    head.u32(off)
        .or_else(|| off.checked_sub(tail_off).and_then(|rel| tail.u32(rel)))
}
