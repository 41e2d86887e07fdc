//! The argument decoders of the escapes (one function per escape, named
//! in its row of `escape::ESCAPES`): the fields a person needs, read from
//! the captured head of the parameter struct (nv-ioctl.h, nvos.h).

use super::{
    args::{Arg, Args},
    bytes::Bytes,
    class, control,
    version::VersionCtx,
};

pub(super) fn args_rm_control(m: &mut Args, size: u32, head: &Bytes, v: &VersionCtx) {
    let u32_at = |o| head.u32(o);
    if size != 32 {
        return;
    }
    // NVOS54 only: the control's own params are behind the user
    // pointer at 16, which the capture does not follow
    // (docs/RM-TABLES.md).
    let cmd = u32_at(8);
    if let (Some(hc), Some(ho), Some(cmd)) = (u32_at(0), u32_at(4), cmd) {
        m.insert("hClient", Arg::Hex(hc.into()));
        m.insert("hObject", Arg::Hex(ho.into()));
        m.control(cmd, control::name(cmd, v));
    }
    if let Some(ps) = u32_at(24) {
        m.insert("paramsSize", Arg::from(ps));
        if let (Some(cmd), Some(flags)) = (cmd, u32_at(12))
            && let Some(want) = control::size_mismatch(cmd, flags, ps, v)
        {
            m.insert("params_size_expected", Arg::from(want));
        }
    }
}

pub(super) fn args_rm_alloc(m: &mut Args, size: u32, head: &Bytes, v: &VersionCtx) {
    let u32_at = |o| head.u32(o);
    if !matches!(size, 32 | 40 | 48) {
        return;
    }
    if let (Some(r), Some(p), Some(n), Some(c)) = (u32_at(0), u32_at(4), u32_at(8), u32_at(12)) {
        m.insert("hRoot", Arg::Hex(r.into()));
        m.insert("hParent", Arg::Hex(p.into()));
        m.insert("hObjectNew", Arg::Hex(n.into()));
        m.class(c, class::name(c, v));
        m.insert(
            "struct",
            Arg::Text(if size == 32 { "NVOS21" } else { "NVOS64" }.into()),
        );
    }
}

pub(super) fn args_rm_free(m: &mut Args, size: u32, head: &Bytes, _v: &VersionCtx) {
    let u32_at = |o| head.u32(o);
    if size != 16 {
        return;
    }
    if let (Some(r), Some(p), Some(o)) = (u32_at(0), u32_at(4), u32_at(8)) {
        m.insert("hRoot", Arg::Hex(r.into()));
        m.insert("hParent", Arg::Hex(p.into()));
        m.insert("hObjectOld", Arg::Hex(o.into()));
    }
}

pub(super) fn args_alloc_memory(m: &mut Args, size: u32, head: &Bytes, v: &VersionCtx) {
    let u32_at = |o| head.u32(o);
    if size != 56 {
        return;
    }
    // nv_ioctl_nvos02_parameters_with_fd
    if let (Some(r), Some(p), Some(n), Some(c)) = (u32_at(0), u32_at(4), u32_at(8), u32_at(12)) {
        m.insert("hRoot", Arg::Hex(r.into()));
        m.insert("hParent", Arg::Hex(p.into()));
        m.insert("hObjectNew", Arg::Hex(n.into()));
        m.class(c, class::name(c, v));
    }
    if let Some(fd) = head.i32(48) {
        m.insert("fd", Arg::from(fd));
    }
}

pub(super) fn args_map_memory(m: &mut Args, size: u32, head: &Bytes, _v: &VersionCtx) {
    let u32_at = |o| head.u32(o);
    if size != 56 {
        return;
    }
    // nv_ioctl_nvos33_parameters_with_fd
    if let (Some(c), Some(d), Some(mem)) = (u32_at(0), u32_at(4), u32_at(8)) {
        m.insert("hClient", Arg::Hex(c.into()));
        m.insert("hDevice", Arg::Hex(d.into()));
        m.insert("hMemory", Arg::Hex(mem.into()));
    }
    if let (Some(off), Some(len)) = (head.u64(16), head.u64(24)) {
        m.insert("offset", Arg::Hex(off));
        m.insert("length", Arg::Hex(len));
    }
    if let Some(fd) = head.i32(48) {
        m.insert("fd", Arg::from(fd));
    }
}

pub(super) fn args_card_info(m: &mut Args, size: u32, head: &Bytes, _v: &VersionCtx) {
    let u32_at = |o| head.u32(o);
    // nv_ioctl_card_info_t[N]: show N and the first entry.
    m.insert("entries", Arg::from(size / 72));
    if let (Some(valid), Some(dom), Some(bus), Some(slot), Some(func)) =
        (head.u8(0), u32_at(4), head.u8(8), head.u8(9), head.u8(10))
    {
        m.insert("valid0", Arg::from(valid != 0));
        if valid != 0 {
            m.insert(
                "pci0",
                Arg::Text(format!("{dom:04x}:{bus:02x}:{slot:02x}.{func:x}")),
            );
            if let (Some(ven), Some(dev)) = (head.u16(12), head.u16(14)) {
                m.insert("pci_id0", Arg::Text(format!("{ven:04x}:{dev:04x}")));
            }
            if let Some(id) = u32_at(16) {
                m.insert("gpu_id0", Arg::Hex(id.into()));
            }
            if let Some(minor) = u32_at(56) {
                m.insert("minor0", Arg::from(minor));
            }
        }
    }
}

pub(super) fn args_register_fd(m: &mut Args, _size: u32, head: &Bytes, _v: &VersionCtx) {
    if let Some(fd) = head.i32(0) {
        m.insert("ctl_fd", Arg::from(fd));
    }
}

pub(super) fn args_os_event(m: &mut Args, size: u32, head: &Bytes, _v: &VersionCtx) {
    let u32_at = |o| head.u32(o);
    if size != 16 {
        return;
    }
    if let (Some(c), Some(d), Some(fd)) = (u32_at(0), u32_at(4), head.i32(8)) {
        m.insert("hClient", Arg::Hex(c.into()));
        m.insert("hDevice", Arg::Hex(d.into()));
        m.insert("fd", Arg::from(fd));
    }
}

pub(super) fn args_check_version_str(m: &mut Args, _size: u32, head: &Bytes, _v: &VersionCtx) {
    let u32_at = |o| head.u32(o);
    if let (Some(cmd), Some(reply)) = (u32_at(0), u32_at(4)) {
        let how = match cmd {
            0 => "strict",
            0x31 => "relaxed",
            0x32 => "query",
            _ => "unknown",
        };
        m.insert("mode", Arg::Text(how.into()));
        m.insert("reply", Arg::from(reply));
    }
    if let Some(s) = head.cstr(8, 56) {
        m.insert("version", Arg::Text(s));
    }
}

pub(super) fn args_attach_gpus_to_fd(m: &mut Args, size: u32, head: &Bytes, _v: &VersionCtx) {
    let u32_at = |o| head.u32(o);
    let n = (size / 4).min(16);
    let ids: Vec<u64> = (0..n)
        .filter_map(|i| u32_at(i * 4))
        .map(u64::from)
        .collect();
    m.insert("gpu_ids", Arg::HexList(ids));
}

pub(super) fn args_sys_params(m: &mut Args, _size: u32, head: &Bytes, _v: &VersionCtx) {
    if let Some(b) = head.u64(0) {
        m.insert("memblock_size", Arg::Hex(b));
    }
}

pub(super) fn args_numa_info(m: &mut Args, _size: u32, head: &Bytes, _v: &VersionCtx) {
    let u32_at = |o| head.u32(o);
    if let (Some(nid), Some(state)) = (head.i32(0), u32_at(4)) {
        m.insert("nid", Arg::from(nid));
        let s = match state {
            0 => "disabled",
            1 => "offline",
            2 => "online_in_progress",
            3 => "online",
            4 => "online_failed",
            5 => "offline_in_progress",
            6 => "offline_failed",
            _ => "unknown",
        };
        m.insert("numa_state", Arg::Text(s.into()));
    }
}

pub(super) fn args_wait_open_complete(m: &mut Args, _size: u32, head: &Bytes, _v: &VersionCtx) {
    if let Some(rc) = head.i32(0) {
        m.insert("rc", Arg::from(rc));
    }
}
