//! Path, fd and mmap records: opens, stats and accesses of NVIDIA paths
//! (with a check that the file is the device its name says), closes, dups
//! and mappings of NVIDIA files.

use nvprobe_common::{DevKind, FdEvent, FdOp, MmapEvent, PathEvent, PathOp};

use super::{bytes::*, callkind::SysKind, context::*, event::*};

/// open(2)'s O_CREAT (include/uapi/asm-generic/fcntl.h).
const O_CREAT: u32 = 0o100;

const O_FLAGS: &[(u32, &str)] = &[
    (0o100, "O_CREAT"),
    (0o200, "O_EXCL"),
    (0o400, "O_NOCTTY"),
    (0o1000, "O_TRUNC"),
    (0o2000, "O_APPEND"),
    (0o4000, "O_NONBLOCK"),
    (0o200000, "O_DIRECTORY"),
    (0o400000, "O_NOFOLLOW"),
    (0o2000000, "O_CLOEXEC"),
    (0o10000000, "O_PATH"),
];

fn open_flags(f: u32) -> String {
    let mut parts = vec![
        match f & 3 {
            0 => "O_RDONLY",
            1 => "O_WRONLY",
            2 => "O_RDWR",
            _ => "O_ACCMODE",
        }
        .to_owned(),
    ];
    let mut rest = f & !3;
    for &(bit, n) in O_FLAGS {
        if rest & bit != 0 {
            parts.push(n.to_owned());
            rest &= !bit;
        }
    }
    if rest != 0 {
        parts.push(format!("{rest:#o}"));
    }
    parts.join("|")
}

fn access_mode(m: u32) -> String {
    if m == 0 {
        return "F_OK".into();
    }
    let mut parts = Vec::new();
    for (bit, n) in [(4, "R_OK"), (2, "W_OK"), (1, "X_OK")] {
        if m & bit != 0 {
            parts.push(n.to_owned());
        }
    }
    if m & !7 != 0 {
        parts.push(format!("{:#x}", m & !7));
    }
    parts.join("|")
}

fn at_flags(f: u32) -> String {
    let mut parts = Vec::new();
    let mut rest = f;
    for (bit, n) in [
        (0x100u32, "AT_SYMLINK_NOFOLLOW"),
        (0x800, "AT_NO_AUTOMOUNT"),
        (0x1000, "AT_EMPTY_PATH"),
    ] {
        if rest & bit != 0 {
            parts.push(n.to_owned());
            rest &= !bit;
        }
    }
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    if parts.is_empty() {
        "0".into()
    } else {
        parts.join("|")
    }
}

/// The kind of NVIDIA node a path names (`/dev/nvidia-uvm`: uvm), if it
/// names one.
/// A path under /dev.
pub fn is_device_path(path: &str) -> bool {
    path.starts_with("/dev/")
}

/// A file of procfs's that exists wherever a procfs of the process's own
/// PID namespace is mounted at /proc: its own entries (/proc/self/…,
/// /proc/thread-self/…) and the host-wide ones libcuda reads
/// (/proc/cpuinfo, /proc/meminfo, /proc/sys/…). Not the driver's
/// /proc/driver/nvidia/… (the module adds those).
pub fn is_procfs_own_path(path: &str) -> bool {
    ["/proc/self/", "/proc/thread-self/", "/proc/sys/"]
        .iter()
        .any(|p| path.starts_with(p))
        || matches!(path, "/proc/cpuinfo" | "/proc/meminfo" | "/proc/stat")
}

/// A file every procfs of the process's PID namespace has: its own maps
/// and status, and /proc/cpuinfo (what libcuda reads first).
pub fn is_procfs_core_path(path: &str) -> bool {
    matches!(
        path,
        "/proc/self/maps" | "/proc/self/status" | "/proc/cpuinfo" | "/proc/self/stat"
    )
}

/// The process's own procfs entries (/proc/self/…, /proc/thread-self/…):
/// missing where /proc is another PID namespace's procfs.
pub fn is_procfs_self_path(path: &str) -> bool {
    path.starts_with("/proc/self/") || path.starts_with("/proc/thread-self/")
}

/// A file under a `stubs` directory: the CUDA toolkit's stub libraries.
pub fn is_stub_path(path: &str) -> bool {
    path.contains("/stubs/")
}

/// A path libcuda probes without needing it: the /dev/char/195:N links it
/// refreshes opportunistically, a GPU's numa_status.
pub fn absence_is_normal(path: &str) -> bool {
    path.starts_with("/dev/char/") || path.starts_with("/proc/driver/nvidia/gpus/")
}

/// Whether the last component of `path` names a libcuda (`libcuda.so`,
/// `libcuda.so.1`, `libcuda.so.580.159.04`).
pub fn is_libcuda_path(path: &str) -> bool {
    path.rsplit('/')
        .next()
        .is_some_and(|b| b.starts_with("libcuda.so"))
}

/// A lookup that found nothing: a stat or access of a path that does
/// not exist, the dynamic loader's open of a libcuda or libnccl where
/// there is none, an open of a path whose absence is normal
/// (`/dev/char/…`), or such a call among a start-up's failed ones. Not
/// a failure: the summary counts them apart.
pub fn lookup_missed(ev: &Event) -> bool {
    const ENOENT: i64 = -(libc::ENOENT as i64);
    match ev {
        Event::Stat(p) | Event::Access(p) => p.ret == ENOENT,
        Event::Open(p) => {
            p.ret == ENOENT
                && (is_libcuda_path(&p.path) || is_nccl_path(&p.path) || absence_is_normal(&p.path))
        }
        Event::Proc(p) => matches!(
            p.failed,
            Some((SysKind::Lookup | SysKind::Open, libc::ENOENT))
        ),
        _ => false,
    }
}

/// Whether the last component of `path` names a libnccl: the loader's
/// opens of one are followed to hook it, and no start-up rule reads them.
pub fn is_nccl_path(path: &str) -> bool {
    path.rsplit('/')
        .next()
        .is_some_and(|b| b.starts_with("libnccl.so"))
}

pub fn node_kind(path: &str) -> Option<DeviceKind> {
    expected_for_path(path).map(|(k, _)| k.into())
}

/// What device a `/dev/nvidia*` name promises: (kind, expected minor).
fn expected_for_path(path: &str) -> Option<(DevKind, Option<u32>)> {
    let name = path.strip_prefix("/dev/")?;
    Some(match name {
        "nvidiactl" => (DevKind::Ctl, Some(255)),
        "nvidia-modeset" => (DevKind::Modeset, Some(254)),
        "nvidia-uvm" => (DevKind::Uvm, Some(0)),
        "nvidia-uvm-tools" => (DevKind::UvmTools, Some(1)),
        n if n.starts_with("nvidia-caps/") => (DevKind::Caps, None),
        n => {
            let num = n.strip_prefix("nvidia")?;
            let minor: u32 = num.parse().ok()?;
            (DevKind::Gpu, Some(minor))
        }
    })
}

fn check_mismatch(path: &str, dev: Option<&Device>, is_chr: bool) -> Option<String> {
    let (want, minor) = expected_for_path(path)?;
    let d = dev?;
    if !is_chr {
        return Some(format!(
            "{path} is not a character device: this is not the NVIDIA {} node",
            dev_kind_name(want)
        ));
    }
    let got = d.kind;
    let kind_wrong = got != DeviceKind::from(want);
    if kind_wrong || minor.is_some_and(|m| m != d.minor) {
        // What the number is: another NVIDIA node, a well-known device
        // (/dev/null bind-mounted over the node), or no NVIDIA module's.
        let what = match got {
            DeviceKind::None => match well_known_device(d.major, d.minor) {
                Some(n) => format!("{n}, no NVIDIA device"),
                None => "no NVIDIA module's device number".to_owned(),
            },
            k if kind_wrong => format!("an NVIDIA {k} node"),
            k => format!("another NVIDIA {k} node"),
        };
        return Some(format!(
            "{path} is device {}:{} ({what}), not the NVIDIA {} node{}",
            d.major,
            d.minor,
            dev_kind_name(want),
            // (The minor it should have, where the kind is right.)
            minor
                .filter(|_| !kind_wrong)
                .map(|m| format!(" (minor {m})"))
                .unwrap_or_default()
        ));
    }
    None
}

/// The memory devices' fixed numbers (Documentation/admin-guide/devices.txt,
/// major 1): what a container binds over a node it has no device for.
fn well_known_device(major: u32, minor: u32) -> Option<&'static str> {
    (major == 1).then_some(())?;
    Some(match minor {
        3 => "/dev/null",
        5 => "/dev/zero",
        7 => "/dev/full",
        8 => "/dev/random",
        9 => "/dev/urandom",
        _ => return None,
    })
}

/// mknod's mode: the file type and the permission bits.
fn node_mode(m: u32) -> String {
    let kind = match m & 0o170000 {
        0o020000 => "S_IFCHR",
        0o060000 => "S_IFBLK",
        0o010000 => "S_IFIFO",
        0o140000 => "S_IFSOCK",
        0o100000 | 0 => "S_IFREG",
        _ => "S_IF?",
    };
    format!("{kind}|{:04o}", m & 0o7777)
}

pub(super) fn decode_path(ev: &PathEvent, ctx: &Context, raw: Option<String>) -> Event {
    let op = PathOp::from_repr(ev.op);
    let plen = (ev.path_len as usize).min(ev.path.len());
    let path = escape_bytes(&ev.path[..plen]);
    let truncated = plen >= ev.path.len() - 1;
    let syscall = match op {
        Some(PathOp::Open) => "open",
        Some(PathOp::Openat) => "openat",
        Some(PathOp::Openat2) => "openat2",
        Some(PathOp::Stat) => "stat",
        Some(PathOp::Lstat) => "lstat",
        Some(PathOp::Newfstatat) => "newfstatat",
        Some(PathOp::Statx) => "statx",
        Some(PathOp::Access) => "access",
        Some(PathOp::Faccessat) => "faccessat",
        Some(PathOp::Faccessat2) => "faccessat2",
        Some(PathOp::Mknod) => "mknod",
        Some(PathOp::Mknodat) => "mknodat",
        None => "unknown",
    };
    let mknod = matches!(op, Some(PathOp::Mknod | PathOp::Mknodat));
    let flags = match op {
        _ if mknod => node_mode(ev.st_mode),
        Some(o) if o.is_open() => open_flags(ev.flags),
        Some(PathOp::Access | PathOp::Faccessat | PathOp::Faccessat2) => access_mode(ev.flags),
        _ => at_flags(ev.flags),
    };
    let errno = errno_name(ev.ret);
    let (mut device, mut fd, mut is_chr) = (None, None, false);
    if op.is_some_and(PathOp::is_open) && ev.ret >= 0 && ev.file.valid != 0 {
        fd = Some(ev.ret as i32);
        is_chr = ev.file.mode & 0o170000 == 0o020000;
        // A device only for device nodes and --device files: a /proc file
        // has no device worth showing.
        let d = device_of(&ev.file, ctx);
        if is_chr || d.extra {
            device = Some(d);
        } else if expected_for_path(&path).is_some() {
            // A /dev/nvidia* name that is not a device at all.
            device = Some(d);
        }
    } else if ev.stat_valid != 0 {
        // A stat tells what the name resolves to without opening it.
        let (major, minor) = if ev.stat_valid == 2 {
            ((ev.st_rdev >> 32) as u32, ev.st_rdev as u32)
        } else if ev.stat_valid == 3 {
            // mknod's `unsigned dev` (new_decode_dev).
            let d = ev.st_rdev as u32;
            ((d & 0xfff00) >> 8, (d & 0xff) | ((d >> 12) & 0xfff00))
        } else {
            (
                nix::sys::stat::major(ev.st_rdev) as u32,
                nix::sys::stat::minor(ev.st_rdev) as u32,
            )
        };
        is_chr = ev.st_mode & 0o170000 == 0o020000;
        let kdev = nvprobe_common::kdev_make(major, minor);
        let kind = if is_chr {
            nvprobe_common::classify_rdev(kdev, ctx.uvm_major, ctx.caps_major)
        } else {
            DevKind::None
        };
        device = Some(Device {
            major,
            minor,
            kind: kind.into(),
            node: None,
            extra: false,
        });
    }
    let mismatch = check_mismatch(&path, device.as_ref(), is_chr);
    let call = PathCall {
        proc: proc_of(&ev.hdr),
        syscall,
        path,
        path_truncated: truncated,
        flags,
        creates: op.is_some_and(PathOp::is_open) && ev.flags & O_CREAT != 0,
        start_ns: ev.start_ns,
        duration_ns: ev.duration_ns,
        ret: ev.ret,
        errno,
        fd,
        device,
        ok: ev.ret >= 0 && mismatch.is_none(),
        mismatch,
        raw,
    };
    match op {
        _ if mknod => Event::Mknod(call),
        Some(o) if o.is_open() => Event::Open(call),
        Some(PathOp::Access | PathOp::Faccessat | PathOp::Faccessat2) => Event::Access(call),
        _ => Event::Stat(call),
    }
}

pub(super) fn decode_fd(ev: &FdEvent, ctx: &Context, raw: Option<String>) -> Event {
    let op = FdOp::from_repr(ev.op);
    let syscall = match op {
        Some(FdOp::Close) => "close",
        Some(FdOp::Dup) => "dup",
        Some(FdOp::Dup2) => "dup2",
        Some(FdOp::Dup3) => "dup3",
        Some(FdOp::FcntlDupfd) => "fcntl(F_DUPFD)",
        Some(FdOp::FcntlDupfdCloexec) => "fcntl(F_DUPFD_CLOEXEC)",
        Some(FdOp::CloseRange) => "close_range",
        Some(FdOp::Dup2Replaced) => "dup2",
        Some(FdOp::Dup3Replaced) => "dup3",
        None => "unknown",
    };
    let closes = matches!(op, Some(FdOp::Close | FdOp::CloseRange));
    let range = op == Some(FdOp::CloseRange);
    let replaced = matches!(op, Some(FdOp::Dup2Replaced | FdOp::Dup3Replaced));
    let call = FdCall {
        proc: proc_of(&ev.hdr),
        syscall,
        fd: ev.fd,
        device: device_of(&ev.file, ctx),
        // A replacing dup's target, which it names even when it failed.
        newfd: if replaced {
            Some(i64::from(ev.arg as u32 as i32))
        } else {
            (!closes && ev.ret >= 0).then_some(ev.ret)
        },
        last_fd: range.then_some(ev.arg as u32),
        range_flags: range.then(|| close_range_flags((ev.arg >> 32) as u32)),
        replaced,
        start_ns: ev.start_ns,
        duration_ns: ev.duration_ns,
        ret: ev.ret,
        errno: errno_name(ev.ret),
        ok: ev.ret >= 0,
        raw,
    };
    if closes {
        Event::Close(call)
    } else {
        Event::Dup(call)
    }
}

/// close_range's flags by name ("0" for none).
fn close_range_flags(f: u32) -> String {
    let mut v = Vec::new();
    for (bit, n) in [(2u32, "CLOSE_RANGE_UNSHARE"), (4, "CLOSE_RANGE_CLOEXEC")] {
        if f & bit != 0 {
            v.push(n.to_owned());
        }
    }
    if f & !6 != 0 {
        v.push(format!("{:#x}", f & !6));
    }
    if v.is_empty() {
        "0".to_owned()
    } else {
        v.join("|")
    }
}

/// PROT_* bits by name (PROT_NONE for none), as strace writes them.
pub fn prot_names(p: u32) -> String {
    if p == 0 {
        return "PROT_NONE".into();
    }
    let mut v = Vec::new();
    for (bit, n) in [(1, "PROT_READ"), (2, "PROT_WRITE"), (4, "PROT_EXEC")] {
        if p & bit != 0 {
            v.push(n.to_owned());
        }
    }
    if p & !7 != 0 {
        v.push(format!("{:#x}", p & !7));
    }
    v.join("|")
}

/// MAP_* bits by name (the type first), as strace writes them.
pub fn map_flag_names(f: u32) -> String {
    let mut v = vec![match f & 0xf {
        1 => "MAP_SHARED".to_owned(),
        2 => "MAP_PRIVATE".to_owned(),
        3 => "MAP_SHARED_VALIDATE".to_owned(),
        x => format!("{x:#x}"),
    }];
    let mut rest = f & !0xf;
    for (bit, n) in [
        (0x10u32, "MAP_FIXED"),
        (0x20, "MAP_ANONYMOUS"),
        (0x100, "MAP_GROWSDOWN"),
        (0x2000, "MAP_LOCKED"),
        (0x4000, "MAP_NORESERVE"),
        (0x8000, "MAP_POPULATE"),
        (0x20000, "MAP_STACK"),
        (0x40000, "MAP_HUGETLB"),
        (0x100000, "MAP_FIXED_NOREPLACE"),
    ] {
        if rest & bit != 0 {
            v.push(n.to_owned());
            rest &= !bit;
        }
    }
    if rest != 0 {
        v.push(format!("{rest:#x}"));
    }
    v.join("|")
}

pub(super) fn decode_mmap(ev: &MmapEvent, ctx: &Context, raw: Option<String>) -> Event {
    let errno = errno_name(ev.ret);
    Event::Mmap(MmapCall {
        proc: proc_of(&ev.hdr),
        fd: ev.fd,
        device: device_of(&ev.file, ctx),
        addr: format!("{:#x}", ev.addr),
        length: ev.len,
        offset: format!("{:#x}", ev.off),
        prot: prot_names(ev.prot),
        flags: map_flag_names(ev.flags),
        start_ns: ev.start_ns,
        duration_ns: ev.duration_ns,
        ret: if errno.is_some() {
            ev.ret.to_string()
        } else {
            format!("{:#x}", ev.ret as u64)
        },
        ok: errno.is_none(),
        errno,
        raw,
    })
}
