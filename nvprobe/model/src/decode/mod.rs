//! Raw ring-buffer records -> typed, named events.
//!
//! The BPF side captures bytes; this module gives them meaning: escape and
//! UVM names, RM classes and controls, NV_STATUS read at the offset the
//! running driver's layout says. Unknown numbers decode to their raw value,
//! never to a guess.

pub mod args;
pub mod class;
pub mod control;
pub mod curesult;
pub mod escape;
pub mod signal;
pub mod status;
pub mod uvm;
pub mod version;

use std::{collections::HashMap, mem::size_of, sync::Arc};

use nvprobe_common::{
    CUDA_FUNCS, CUDA_RETURN, CudaEvent, DevKind, DriverEvent, EventKind, FdEvent, FdOp, FileId,
    Header, IoctlEvent, MmapEvent, PathEvent, PathOp, ProcEvent, ProcOp, ioctl_flags, kdev_major,
    kdev_minor,
};
use serde::Serialize;

use self::{
    args::{Arg, Args},
    version::{LayoutBasis, VersionCtx},
};

/// A bounds-checked little-endian view of captured bytes. Reads past the
/// end give None, so a truncated capture decodes to fewer fields, never to
/// garbage or a panic.
#[derive(Clone, Copy)]
pub struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Self(b)
    }
    fn get<const N: usize>(&self, off: u32) -> Option<[u8; N]> {
        let off = usize::try_from(off).ok()?;
        self.0.get(off..off.checked_add(N)?)?.try_into().ok()
    }
    pub fn u8(&self, off: u32) -> Option<u8> {
        self.get::<1>(off).map(|b| b[0])
    }
    pub fn u16(&self, off: u32) -> Option<u16> {
        self.get(off).map(u16::from_le_bytes)
    }
    pub fn u32(&self, off: u32) -> Option<u32> {
        self.get(off).map(u32::from_le_bytes)
    }
    pub fn i32(&self, off: u32) -> Option<i32> {
        self.get(off).map(i32::from_le_bytes)
    }
    pub fn u64(&self, off: u32) -> Option<u64> {
        self.get(off).map(u64::from_le_bytes)
    }
    pub fn array16(&self, off: u32) -> Option<[u8; 16]> {
        self.get(off)
    }
    /// A NUL-terminated string of at most `max` bytes at `off`, printable
    /// ASCII only (anything else is escaped).
    pub fn cstr(&self, off: u32, max: usize) -> Option<String> {
        let off = usize::try_from(off).ok()?;
        let b = self.0.get(off..)?;
        let b = &b[..b.len().min(max)];
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        Some(escape_bytes(&b[..end]))
    }
}

/// Render bytes from an untrusted source (process names, paths, strings
/// from parameter structs) so that they are safe on a terminal and in JSON:
/// valid UTF-8 stays as it is, except control characters, which become
/// `\xNN`; invalid bytes become `\xNN` too.
pub fn escape_bytes(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() || c == '\\' {
                if (c as u32) < 0x100 {
                    out.push_str(&format!("\\x{:02x}", c as u32));
                } else {
                    out.push_str(&format!("\\u{{{:x}}}", c as u32));
                }
            } else {
                out.push(c);
            }
        }
        for &x in chunk.invalid() {
            out.push_str(&format!("\\x{x:02x}"));
        }
    }
    out
}

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
        }
    }
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub tid: u32,
    /// Ids inside the task's pid namespace, present only when they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_tid: Option<u32>,
    pub comm: String,
    pub uid: u32,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Device {
    pub major: u32,
    pub minor: u32,
    /// ctl, gpu, uvm, uvm-tools, modeset, caps, other, or none.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<Arc<str>>,
    /// True for a file declared with `--device`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub extra: bool,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Status {
    pub code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'static str>,
    pub offset: u32,
    pub layout: LayoutBasis,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Xfer {
    pub cmd: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'static str>,
    pub size: u32,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Ioctl {
    #[serde(flatten)]
    pub proc: Proc,
    pub fd: i32,
    pub device: Device,
    /// The raw command word.
    pub request: String,
    /// escape, uvm, nvkms or unknown.
    pub family: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xfer: Option<Xfer>,
    /// Size of the parameter struct.
    pub size: u32,
    pub args: Args,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub ret: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// Why no status is shown, when the call returned 0 without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_note: Option<String>,
    /// False when the call failed: errno, or a status other than NV_OK and
    /// the benign answers (NOT_SUPPORTED probes, WARN_NOTHING_TO_DO).
    pub ok: bool,
    /// "driver" when the driver layer's kprobe on the module's ioctl entry
    /// point made the record (then `fd` is -1: unknown there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PathCall {
    #[serde(flatten)]
    pub proc: Proc,
    pub syscall: &'static str,
    pub path: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub path_truncated: bool,
    /// open flags (O_*), AT_* flags, or the access mode, as named bits.
    pub flags: String,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub ret: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// For successful opens: the file the new fd refers to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fd: Option<i32>,
    /// The device the call actually reached (opens) or saw (stats).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<Device>,
    /// Set when the path names an NVIDIA node but the file is not that
    /// device (a regular file, another major, the wrong minor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<String>,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FdCall {
    #[serde(flatten)]
    pub proc: Proc,
    pub syscall: &'static str,
    pub fd: i32,
    pub device: Device,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newfd: Option<i64>,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub ret: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MmapCall {
    #[serde(flatten)]
    pub proc: Proc,
    pub fd: i32,
    pub device: Device,
    pub addr: String,
    pub length: u64,
    pub offset: String,
    pub prot: String,
    pub flags: String,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub ret: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// exec, exit or a signal of a process that uses NVIDIA devices.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProcCall {
    /// The current task: the exiting or exec'ing process, the signal's
    /// sender (op "signal") or its receiver (op "signal_delivered").
    #[serde(flatten)]
    pub proc: Proc,
    /// exit, exec, signal, signal_delivered.
    pub op: &'static str,
    pub target_pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_tid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sig: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// siginfo si_code (signals).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// wait(2)-style exit code (exit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// "exited with status N" / "killed by SIGX" (exit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    /// The receiver's disposition (signal_delivered): default, ignored or
    /// handler.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<&'static str>,
    /// Whether the handler was installed with SA_RESTART (signal_delivered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sa_restart: Option<bool>,
    pub time_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// A libcuda call seen by its uprobe.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CudaCall {
    #[serde(flatten)]
    pub proc: Proc,
    pub func: &'static str,
    /// enter or return.
    pub phase: &'static str,
    pub start_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
    /// CUresult (return).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_name: Option<&'static str>,
    /// cuInit's flags (enter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flags: Option<u64>,
    /// What a getter returned through its pointer: the driver version, the
    /// device count, the device handle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// A function inside the NVIDIA modules or the kernel's HMM code, seen by
/// the driver layer (kprobe at entry, kretprobe at return).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DriverCall {
    #[serde(flatten)]
    pub proc: Proc,
    pub function: &'static str,
    /// nvidia, nvidia_uvm or vmlinux.
    pub module: &'static str,
    pub start_ns: u64,
    pub duration_ns: u64,
    /// The raw return value.
    pub ret: i64,
    /// The return value in words: 0, an errno, an NV_STATUS name, true or
    /// false, a pointer or an ERR_PTR errno, or "void".
    pub result: String,
    pub ok: bool,
    /// The escape or UVM command (ioctl entry points, rm_ioctl).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// "major:minor" of the file (ioctl entry points).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// rm_ioctl: the RM status in the kernel's copy of the parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rm_status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// A decoded kernel record.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Ioctl(Ioctl),
    Open(PathCall),
    Stat(PathCall),
    Access(PathCall),
    Close(FdCall),
    Dup(FdCall),
    Mmap(MmapCall),
    Proc(ProcCall),
    Cuda(CudaCall),
    Driver(DriverCall),
}

impl Event {
    pub fn proc(&self) -> &Proc {
        match self {
            Event::Ioctl(e) => &e.proc,
            Event::Open(e) | Event::Stat(e) | Event::Access(e) => &e.proc,
            Event::Close(e) | Event::Dup(e) => &e.proc,
            Event::Mmap(e) => &e.proc,
            Event::Proc(e) => &e.proc,
            Event::Cuda(e) => &e.proc,
            Event::Driver(e) => &e.proc,
        }
    }
    /// (start, end) in CLOCK_MONOTONIC ns.
    pub fn span(&self) -> (u64, u64) {
        let (s, d) = match self {
            Event::Ioctl(e) => (e.start_ns, e.duration_ns),
            Event::Open(e) | Event::Stat(e) | Event::Access(e) => (e.start_ns, e.duration_ns),
            Event::Close(e) | Event::Dup(e) => (e.start_ns, e.duration_ns),
            Event::Mmap(e) => (e.start_ns, e.duration_ns),
            Event::Proc(e) => (e.time_ns, 0),
            Event::Cuda(e) => (e.start_ns, e.duration_ns.unwrap_or(0)),
            Event::Driver(e) => (e.start_ns, e.duration_ns),
        };
        (s, s + d)
    }
    pub fn ok(&self) -> bool {
        match self {
            Event::Ioctl(e) => e.ok,
            Event::Open(e) | Event::Stat(e) | Event::Access(e) => e.ok,
            Event::Close(e) | Event::Dup(e) => e.ok,
            Event::Mmap(e) => e.ok,
            Event::Proc(_) => true,
            Event::Cuda(e) => e.result.is_none_or(|r| r == 0),
            Event::Driver(e) => e.ok,
        }
    }
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::Ioctl(_) => "ioctl",
            Event::Open(_) => "open",
            Event::Stat(_) => "stat",
            Event::Access(_) => "access",
            Event::Close(_) => "close",
            Event::Dup(_) => "dup",
            Event::Mmap(_) => "mmap",
            Event::Proc(_) => "proc",
            Event::Cuda(_) => "cuda",
            Event::Driver(_) => "driver",
        }
    }
}

/// The name of a call from its command word and device kind, as the
/// decoder would give it (for calls still in flight).
pub fn raw_call_name(kind: DevKind, cmd: u32, xfer_cmd: Option<u32>, v: &VersionCtx) -> String {
    if matches!(kind, DevKind::Uvm | DevKind::UvmTools) {
        return uvm::lookup(cmd).map_or_else(|| format!("uvm {cmd:#x}"), |c| c.name.to_owned());
    }
    if (cmd >> 8) & 0xff == escape::NV_IOCTL_MAGIC {
        let nr = match xfer_cmd {
            Some(x) if cmd & 0xff == escape::NV_ESC_IOCTL_XFER_CMD => x & 0xff,
            _ => cmd & 0xff,
        };
        return escape::name_for(nr, v).map_or_else(|| format!("escape {cmd:#x}"), str::to_owned);
    }
    format!("ioctl {cmd:#x}")
}

/// Kernel time of a raw record (for ordering and wall-clock conversion).
pub fn record_ktime(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?))
}

fn read_record<T: Copy>(bytes: &[u8], kind: &'static str) -> Result<T, DecodeError> {
    let want = size_of::<T>();
    if bytes.len() != want {
        return Err(DecodeError::Size {
            kind,
            got: bytes.len(),
            want,
        });
    }
    // SAFETY: length checked; T is a repr(C) record of integers and byte
    // arrays, valid for any bit pattern; read_unaligned handles alignment.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// Decode one raw ring-buffer record.
pub fn decode(bytes: &[u8], ctx: &Context) -> Result<Event, DecodeError> {
    if bytes.len() < size_of::<Header>() {
        return Err(DecodeError::Short(bytes.len()));
    }
    let kind = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
    let raw = ctx.keep_raw.then(|| hex_encode(bytes));
    match EventKind::from_u32(kind) {
        Some(EventKind::Ioctl) => Ok(decode_ioctl(&read_record(bytes, "ioctl")?, ctx, raw)),
        Some(EventKind::Path) => Ok(decode_path(&read_record(bytes, "path")?, ctx, raw)),
        Some(EventKind::Fd) => Ok(decode_fd(&read_record(bytes, "fd")?, ctx, raw)),
        Some(EventKind::Mmap) => Ok(decode_mmap(&read_record(bytes, "mmap")?, ctx, raw)),
        Some(EventKind::Proc) => Ok(decode_proc(&read_record(bytes, "proc")?, raw)),
        Some(EventKind::Cuda) => Ok(decode_cuda(&read_record(bytes, "cuda")?, raw)),
        Some(EventKind::Driver) => Ok(decode_driver(&read_record(bytes, "driver")?, ctx, raw)),
        None => Err(DecodeError::Kind(kind)),
    }
}

pub fn hex_encode(b: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(DIGITS[(x >> 4) as usize] as char);
        s.push(DIGITS[(x & 0xf) as usize] as char);
    }
    s
}

pub fn hex_decode(s: &str) -> Option<Vec<u8>> {
    fn nib(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    b.chunks(2)
        .map(|p| Some(nib(p[0])? << 4 | nib(p[1])?))
        .collect()
}

fn proc_of(h: &Header) -> Proc {
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
    match k {
        DevKind::None => "none",
        DevKind::Ctl => "ctl",
        DevKind::Gpu => "gpu",
        DevKind::Uvm => "uvm",
        DevKind::UvmTools => "uvm-tools",
        DevKind::Modeset => "modeset",
        DevKind::Caps => "caps",
        DevKind::Other => "other",
    }
}

fn device_of(f: &FileId, ctx: &Context) -> Device {
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
        kind: dev_kind_name(kind),
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

fn decode_ioctl(ev: &IoctlEvent, ctx: &Context, raw: Option<String>) -> Event {
    let kind = DevKind::from_u8(ev.file.kind);
    let head_len = (ev.head_len as usize).min(ev.head.len());
    let head = Bytes::new(&ev.head[..head_len]);
    let tail_len = (ev.tail_len as usize).min(ev.tail.len());
    let tail = Bytes::new(&ev.tail[..tail_len]);
    let v = &ctx.version;

    let mut family = "unknown";
    let mut name = None;
    let mut xfer = None;
    let mut args = Args::new();
    let mut loc: Result<StatusLoc, String> = Err("unknown command: no layout".into());
    let size = ev.param_size;

    let ioc_type = (ev.cmd >> 8) & 0xff;
    let is_uvm = matches!(kind, DevKind::Uvm | DevKind::UvmTools);
    if is_uvm {
        family = "uvm";
        loc = uvm::status_loc(ev.cmd, v);
        if let Some(c) = uvm::lookup(ev.cmd) {
            name = Some(c.name);
            args = uvm::args(ev.cmd, &head, &tail, ev.tail_off);
        }
    } else if kind == DevKind::Modeset || ev.cmd == 0xC010_6D00 {
        family = "nvkms";
        name = (ev.cmd == 0xC010_6D00).then_some("NVKMS_IOCTL_IOWR");
        loc = Err("nvidia-modeset returns its result as errno".into());
        if let (Some(c), Some(s)) = (head.u32(0), head.u32(4)) {
            args.insert("nvkms_cmd", Arg::from(c));
            args.insert("nvkms_size", Arg::from(s));
        }
    } else if ioc_type == escape::NV_IOCTL_MAGIC {
        family = "escape";
        let mut nr = ev.cmd & 0xff;
        name = escape::name_for(nr, v);
        if nr == escape::NV_ESC_IOCTL_XFER_CMD {
            let inner = ev.xfer_cmd & 0xff;
            if ev.flags & ioctl_flags::XFER_FAULT == 0 {
                xfer = Some(Xfer {
                    cmd: format!("{:#x}", ev.xfer_cmd),
                    name: escape::name_for(inner, v),
                    size: ev.xfer_size,
                });
                nr = inner;
            }
        }
        if nr != escape::NV_ESC_IOCTL_XFER_CMD {
            loc = escape::status_loc(nr, size, v);
            args = escape::args(nr, size, &head);
        } else {
            loc = Err("XFER wrapper could not be read".into());
        }
    }

    let errno = errno_name(ev.ret);
    let mut status = None;
    let mut status_note = None;
    if ev.ret == 0 {
        match loc {
            Ok(l) => {
                let code = read_status(&head, &tail, ev.tail_off, l.offset);
                match code {
                    Some(code) => {
                        status = Some(Status {
                            code: format!("{code:#x}"),
                            name: status::name(code),
                            offset: l.offset,
                            layout: l.basis,
                        })
                    }
                    None => {
                        status_note = Some(
                            if ev.flags & (ioctl_flags::HEAD_FAULT | ioctl_flags::TAIL_FAULT) != 0 {
                                "parameter memory was not readable at exit".to_owned()
                            } else {
                                format!("status at offset {} was not captured", l.offset)
                            },
                        )
                    }
                }
            }
            Err(why) => status_note = Some(why),
        }
    }
    let status_ok = status.as_ref().is_none_or(|s| {
        u32::from_str_radix(s.code.trim_start_matches("0x"), 16).is_ok_and(status::is_benign)
    });
    Event::Ioctl(Ioctl {
        proc: proc_of(&ev.hdr),
        fd: ev.fd,
        device: device_of(&ev.file, ctx),
        request: format!("{:#x}", ev.cmd),
        family,
        name,
        xfer,
        size,
        args,
        start_ns: ev.start_ns,
        duration_ns: ev.duration_ns,
        ret: ev.ret,
        errno,
        status,
        status_note,
        ok: ev.ret == 0 && status_ok,
        via: (ev.flags & ioctl_flags::FROM_DRIVER != 0).then_some("driver"),
        raw,
    })
}

fn read_status(head: &Bytes, tail: &Bytes, tail_off: u32, off: u32) -> Option<u32> {
    head.u32(off)
        .or_else(|| off.checked_sub(tail_off).and_then(|rel| tail.u32(rel)))
}

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
    if got != dev_kind_name(want) || minor.is_some_and(|m| m != d.minor) {
        return Some(format!(
            "{path} is device {}:{} ({got}), not the NVIDIA {} node{}",
            d.major,
            d.minor,
            dev_kind_name(want),
            minor.map(|m| format!(" (minor {m})")).unwrap_or_default()
        ));
    }
    None
}

fn decode_path(ev: &PathEvent, ctx: &Context, raw: Option<String>) -> Event {
    let op = PathOp::from_u32(ev.op);
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
        None => "unknown",
    };
    let flags = match op {
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
            kind: dev_kind_name(kind),
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
        Some(o) if o.is_open() => Event::Open(call),
        Some(PathOp::Access | PathOp::Faccessat | PathOp::Faccessat2) => Event::Access(call),
        _ => Event::Stat(call),
    }
}

fn decode_fd(ev: &FdEvent, ctx: &Context, raw: Option<String>) -> Event {
    let op = FdOp::from_u32(ev.op);
    let syscall = match op {
        Some(FdOp::Close) => "close",
        Some(FdOp::Dup) => "dup",
        Some(FdOp::Dup2) => "dup2",
        Some(FdOp::Dup3) => "dup3",
        Some(FdOp::FcntlDupfd) => "fcntl(F_DUPFD)",
        Some(FdOp::FcntlDupfdCloexec) => "fcntl(F_DUPFD_CLOEXEC)",
        None => "unknown",
    };
    let call = FdCall {
        proc: proc_of(&ev.hdr),
        syscall,
        fd: ev.fd,
        device: device_of(&ev.file, ctx),
        newfd: (op != Some(FdOp::Close) && ev.ret >= 0).then_some(ev.ret),
        start_ns: ev.start_ns,
        duration_ns: ev.duration_ns,
        ret: ev.ret,
        errno: errno_name(ev.ret),
        ok: ev.ret >= 0,
        raw,
    };
    if op == Some(FdOp::Close) {
        Event::Close(call)
    } else {
        Event::Dup(call)
    }
}

fn prot_names(p: u32) -> String {
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

fn map_flags(f: u32) -> String {
    let mut v = vec![match f & 0xf {
        1 => "MAP_SHARED".to_owned(),
        2 => "MAP_PRIVATE".to_owned(),
        3 => "MAP_SHARED_VALIDATE".to_owned(),
        x => format!("{x:#x}"),
    }];
    let mut rest = f & !0xf;
    for (bit, n) in [
        (0x10u32, "MAP_FIXED"),
        (0x4000, "MAP_NORESERVE"),
        (0x8000, "MAP_POPULATE"),
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

fn decode_mmap(ev: &MmapEvent, ctx: &Context, raw: Option<String>) -> Event {
    let errno = errno_name(ev.ret);
    Event::Mmap(MmapCall {
        proc: proc_of(&ev.hdr),
        fd: ev.fd,
        device: device_of(&ev.file, ctx),
        addr: format!("{:#x}", ev.addr),
        length: ev.len,
        offset: format!("{:#x}", ev.off),
        prot: prot_names(ev.prot),
        flags: map_flags(ev.flags),
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

fn decode_cuda(ev: &CudaEvent, raw: Option<String>) -> Event {
    let func = CUDA_FUNCS
        .iter()
        .find(|(n, _)| *n == ev.func)
        .map_or("unknown", |(_, name)| name);
    let ret = ev.phase == CUDA_RETURN;
    Event::Cuda(CudaCall {
        proc: proc_of(&ev.hdr),
        func,
        phase: if ret { "return" } else { "enter" },
        start_ns: ev.start_ns,
        duration_ns: ret.then_some(ev.duration_ns),
        result: ret.then_some(ev.ret),
        result_name: if ret { curesult::name(ev.ret) } else { None },
        flags: (!ret && ev.func == 1).then_some(ev.args[0]),
        value: (ret && ev.out_valid != 0).then_some(ev.out_val),
        raw,
    })
}

fn decode_driver(ev: &DriverEvent, ctx: &Context, raw: Option<String>) -> Event {
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
            call = Some(raw_call_name(DevKind::Ctl, cmd, None, v));
            device = Some(dev_text(ev.args[2] as u32));
        }
        nvprobe_common::HOOK_UVM_IOCTL => {
            let cmd = ev.args[0] as u32;
            call = Some(raw_call_name(DevKind::Uvm, cmd, None, v));
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
                && let Some(code) = read_status(&head, &tail, tail_off, l.offset)
            {
                rm_status = Some(Status {
                    code: format!("{code:#x}"),
                    name: status::name(code),
                    offset: l.offset,
                    layout: l.basis,
                });
            }
        }
        _ => {}
    }
    let ok = ok && rm_status.as_ref().is_none_or(|s| s.code == "0x0");
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

fn decode_proc(ev: &ProcEvent, raw: Option<String>) -> Event {
    let op = ProcOp::from_u32(ev.op);
    let is_sig = matches!(op, Some(ProcOp::SignalGenerate | ProcOp::SignalDeliver));
    let exit = (op == Some(ProcOp::Exit)).then(|| {
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
    Event::Proc(ProcCall {
        proc: proc_of(&ev.hdr),
        op: match op {
            Some(ProcOp::Exit) => "exit",
            Some(ProcOp::Exec) => "exec",
            Some(ProcOp::SignalGenerate) => "signal",
            Some(ProcOp::SignalDeliver) => "signal_delivered",
            Some(ProcOp::Fork) => "fork",
            None => "unknown",
        },
        target_pid: ev.target_tgid,
        target_tid: is_sig.then_some(ev.target_tid),
        sig: is_sig.then_some(ev.sig),
        signal: is_sig.then(|| signal::name(ev.sig)),
        code: is_sig.then_some(ev.code),
        exit_code: (op == Some(ProcOp::Exit)).then_some(ev.exit_code),
        exit,
        action: (op == Some(ProcOp::SignalDeliver)).then_some(match ev.sa_handler {
            0 => "default",
            1 => "ignored",
            _ => "handler",
        }),
        // SA_RESTART (uapi asm-generic/signal-defs.h).
        sa_restart: (op == Some(ProcOp::SignalDeliver)).then_some(ev.sa_flags & 0x1000_0000 != 0),
        time_ns: ev.hdr.ktime_ns,
        raw,
    })
}

#[cfg(test)]
mod tests;
