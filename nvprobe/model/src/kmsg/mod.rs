//! The kernel log's NVIDIA lines: which lines the driver wrote, and what
//! an Xid line says (its number, GPU, process, channel, and an MMU fault's
//! address and type). `watch` reads them live from /dev/kmsg and `doctor`
//! from the log; both judge a line here.
//!
//! A line counts only when the driver wrote it: the kernel's facility
//! (user space may write to /dev/kmsg too, and the kernel marks those
//! records with the user facility), a message that starts with a driver's
//! own printk prefix (`NVRM: `, `nvidia-uvm: `, …), and not a line the
//! kernel starts with a task's name (`COMM[PID]: segfault at …`: a process
//! may name itself `NVRM: Xid 79`). Where the driver itself quotes a task's
//! name (an Xid's `name=`), what follows the name is read only where a
//! name (15 bytes) cannot have written it.

pub mod audit;
pub mod syslog;
pub mod xid;

use std::borrow::Cow;

/// How the NVIDIA modules' lines start (open-gpu-kernel-modules): nvidia.ko's
/// `nv_printf`/`NV_DEV_PRINTF`/`portDbgPrintf` write `NVRM: `, nvidia-uvm
/// `NVIDIA_UVM_PRETTY_PRINTING_PREFIX`, nvidia-modeset `NVKMS_LOG_PREFIX`,
/// `nvlink_print` and `NVSWITCH_PRINT` theirs; and the kernel's module
/// loader names the module it loads (`nvidia: loading out-of-tree module`).
pub const DRIVER_PREFIXES: &[&str] = &[
    "NVRM: ",
    "nvidia-uvm: ",
    "nvidia-modeset: ",
    "nvidia-nvlink: ",
    "nvidia-nvswitch: ",
    "nvidia: ",
    "nvidia_uvm: ",
    "nvidia_modeset: ",
    "nvidia_drm: ",
];

/// How far into a message a task's name can reach: 15 bytes, each written
/// as up to 4 characters (the kernel escapes a control byte as `\xNN`).
const COMM_REACH: usize = 15 * 4;

/// A message one of the NVIDIA modules wrote: it starts with a driver
/// prefix, and not as a line the kernel starts with a task's name.
pub fn driver_line(msg: &str) -> bool {
    DRIVER_PREFIXES.iter().any(|p| msg.starts_with(p)) && !task_led(msg)
}

/// Whether the message may be one the kernel starts with a task's name,
/// within a name's reach of its start: `COMM[PID]` (a segfault, a trap, a
/// bad signal frame), `COMM (PID)` (a stack-depth or drop_caches note),
/// `COMM: page allocation failure: ` (which quotes the task's cpuset),
/// `COMM invoked oom-killer: ` (a memory cgroup's or the host's OOM
/// killer, started by the task: any user can make one), `COMM uses
/// obsolete (PF_INET,SOCK_PACKET)` (net/packet, any user with a raw
/// socket).
fn task_led(msg: &str) -> bool {
    let b = msg.as_bytes();
    let digits_then = |from: usize, close: u8| {
        let n = b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
        n > 0 && b.get(from + n) == Some(&close)
    };
    (1..=COMM_REACH.min(b.len().saturating_sub(1))).any(|i| {
        (b[i] == b'[' && digits_then(i + 1, b']'))
            || (b[i..].starts_with(b" (") && digits_then(i + 2, b')'))
            || b[i..].starts_with(b": page allocation failure: ")
            || b[i..].starts_with(b" invoked oom-killer: ")
            || b[i..].starts_with(b" uses obsolete (")
    })
}

/// An Xid the driver reported: the GPU it names (as the driver writes it,
/// "PCI:0000:41:00", perhaps with " GPU-I:05" after) and its number. Read
/// from the head the driver writes before the task's pid and name
/// (`kernel_rc.c`: "NVRM: Xid (%s): %d, pid=%s, name=%s, %s").
pub fn xid(msg: &str) -> Option<(&str, u32)> {
    let rest = msg.strip_prefix("NVRM: Xid (")?;
    let (attr, rest) = rest.split_once("): ")?;
    // "PCI:dddd:bb:ss", then only the partition's words (" GPU-I:05").
    let tail = attr
        .strip_prefix("PCI:")
        .filter(|a| pci_slot(a).is_some())?;
    if !tail[10..]
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b" :-".contains(&c))
    {
        return None;
    }
    let (n, _) = rest.split_once(',').unwrap_or((rest.trim_end(), ""));
    Some((attr, n.parse().ok()?))
}

/// What nvidia.ko wrote after "NVRM: ", without the GPU `NV_DEV_PRINTF`
/// names first ("GPU dddd:bb:ss.f: ", older drivers "GPU at PCI:dddd:bb:ss: ").
pub fn nvrm_words(msg: &str) -> Option<&str> {
    let rest = msg.strip_prefix("NVRM: ")?;
    for p in ["GPU at PCI:", "GPU "] {
        if let Some(r) = rest.strip_prefix(p)
            && pci_slot(r).is_some()
            && let Some((_, words)) = r.split_once(": ")
        {
            return Some(words);
        }
    }
    Some(rest)
}

/// The GPU a driver line is about, as "dddd:bb:ss" (lowercase): an Xid's
/// `PCI:dddd:bb:ss`, `NV_DEV_PRINTF`'s "NVRM: GPU dddd:bb:ss.f: ", the older
/// "NVRM: GPU at PCI:dddd:bb:ss: ", and "NVRM: The NVIDIA GPU dddd:bb:ss.f".
pub fn line_gpu(msg: &str) -> Option<String> {
    let addr = if let Some((attr, _)) = xid(msg) {
        attr.strip_prefix("PCI:")?
    } else {
        ["NVRM: GPU at PCI:", "NVRM: GPU ", "NVRM: The NVIDIA GPU "]
            .iter()
            .find_map(|p| msg.strip_prefix(p))?
    };
    pci_slot(addr)
}

/// "dddd:bb:ss" from the start of a PCI address ("0000:41:00.0: …",
/// "0000:41:00 GPU-I:05", "0000:41:00").
pub fn pci_slot(addr: &str) -> Option<String> {
    let a = addr.get(..10)?;
    let ok = a.bytes().enumerate().all(|(i, c)| match i {
        4 | 7 => c == b':',
        _ => c.is_ascii_hexdigit(),
    });
    ok.then(|| a.to_ascii_lowercase())
}

/// The UUID the driver names a GPU by when it first reports an error on it
/// (seen on the H200 before its first Xid: "NVRM: GPU at PCI:0000:00:06:
/// GPU-f32ddf9e-…"): (slot, UUID).
pub fn gpu_identity(msg: &str) -> Option<(String, String)> {
    let r = msg.strip_prefix("NVRM: GPU at PCI:")?;
    let slot = pci_slot(r)?;
    let uuid = r.get(10..)?.strip_prefix(": ")?.trim_end();
    let ok = uuid.len() == 40
        && uuid.starts_with("GPU-")
        && uuid[4..]
            .bytes()
            .all(|c| c.is_ascii_hexdigit() || c == b'-');
    ok.then(|| (slot, uuid.to_owned()))
}

/// One /dev/kmsg record ("prio,seq,usec,flags;message\n KEY=value…").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KmsgRecord<'a> {
    /// The syslog level (0 emergency … 7 debug).
    pub level: u8,
    /// The facility: 0 is the kernel's; user space's writes are 1 or more.
    pub facility: u32,
    pub seq: u64,
    /// The kernel's own time stamp (µs of its local clock since boot).
    pub ts_us: u64,
    /// The message's first line.
    pub msg: Cow<'a, str>,
}

/// A /dev/kmsg record, or None when `rec` is not one.
pub fn parse_record(rec: &[u8]) -> Option<KmsgRecord<'_>> {
    let semi = rec.iter().position(|&b| b == b';')?;
    let head = std::str::from_utf8(&rec[..semi]).ok()?;
    let mut f = head.split(',');
    let prio: u32 = f.next()?.parse().ok()?;
    let seq = f.next()?.parse().ok()?;
    let ts_us = f.next()?.parse().ok()?;
    let body = &rec[semi + 1..];
    let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
    Some(KmsgRecord {
        level: (prio & 7) as u8,
        facility: prio >> 3,
        seq,
        ts_us,
        msg: String::from_utf8_lossy(&body[..end]),
    })
}

/// What a driver line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogKind {
    /// An Xid (`NVRM: Xid (PCI:…): N, …`).
    Xid,
    /// The GPU fell off the bus (Xid 79, or the driver's own sentence).
    GpuLost,
    /// RmInitAdapter failed: the GPU could not be initialised.
    GpuInitFailed,
    /// The kernel module and the user-space driver are of other versions.
    VersionMismatch,
    /// nvidia-uvm reported an error.
    UvmError,
    /// The driver named a GPU's UUID (before its first error report).
    GpuIdentity,
    /// Another line of the driver's.
    Other,
    /// Not the driver's: the kernel's seccomp audit line (`type=1326`),
    /// the only record of the call a filter's kill-thread action ended a
    /// thread at ([`audit`]).
    Seccomp,
}

/// What kind of line of the kernel's nvprobe reads `msg` is: a driver line
/// ([`kind_of`]) or a seccomp audit line.
pub fn line_kind(msg: &str) -> Option<LogKind> {
    kind_of(msg).or_else(|| audit::seccomp_audit(msg).map(|_| LogKind::Seccomp))
}

/// What kind of driver line `msg` is; None when the driver did not write
/// it (see [`driver_line`]).
pub fn kind_of(msg: &str) -> Option<LogKind> {
    if !driver_line(msg) {
        return None;
    }
    if let Some((_, n)) = xid(msg) {
        return Some(if n == 79 {
            LogKind::GpuLost
        } else {
            LogKind::Xid
        });
    }
    if msg.starts_with("NVRM: Xid") {
        // Not the driver's shape.
        return Some(LogKind::Other);
    }
    if gpu_identity(msg).is_some() {
        return Some(LogKind::GpuIdentity);
    }
    let words = nvrm_words(msg).unwrap_or("");
    let low = msg.to_ascii_lowercase();
    Some(
        if words.starts_with("GPU has fallen off the bus")
            || words.starts_with("fallen off the bus")
            || words.starts_with("The NVIDIA GPU ") && words.contains("fallen off the bus")
            || msg.starts_with("NVRM: The NVIDIA GPU ") && msg.contains("fallen off the bus")
        {
            LogKind::GpuLost
        } else if [
            "RmInitAdapter failed",
            "rm_init_adapter failed",
            "failed to initialize",
        ]
        .iter()
        .any(|w| words.starts_with(w))
        {
            LogKind::GpuInitFailed
        } else if msg.starts_with("nvidia-uvm: ")
            && (low.contains("hmm") || low.contains("error") || low.contains("fail"))
        {
            LogKind::UvmError
        } else if words.starts_with("API mismatch") || low.contains("version mismatch") {
            LogKind::VersionMismatch
        } else {
            LogKind::Other
        },
    )
}

/// An MMU fault as an Xid 31 line describes it ("MMU Fault: ENGINE GRAPHICS
/// GPC1 GPCCLIENT_T1_8 faulted @ 0x0_00000000. Fault is of type FAULT_PDE
/// ACCESS_TYPE_VIRT_WRITE").
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct MmuFault {
    /// The engine and client the driver names.
    pub engine: String,
    /// The faulting GPU virtual address, as a number (the driver writes
    /// it as 0xHI_LO).
    pub address: u64,
    /// FAULT_PDE (no page directory entry), FAULT_PTE, FAULT_WRITE, …
    pub fault_type: String,
    /// ACCESS_TYPE_VIRT_READ, ACCESS_TYPE_VIRT_WRITE, …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_type: Option<String>,
    /// What the access did, read off `access_type` when the line is parsed.
    #[serde(skip)]
    pub access: Access,
}

/// The kind of access an MMU fault names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    #[default]
    Other,
}

/// What an Xid line says.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct XidLine {
    pub number: u32,
    /// The GPU's PCI slot, "dddd:bb:ss" (lowercase).
    pub pci: String,
    /// The process the driver names (absent on lines it writes without
    /// one, e.g. Xid 13's exception details, or as '<unknown>').
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Its name as the driver quoted it (the task's comm).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The GPU channel ("0x0000000a").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mmu_fault: Option<MmuFault>,
    /// The details after the number (and after pid and name).
    pub detail: String,
}

/// The parts of an Xid line (see [`xid`] for what makes one).
pub fn parse_xid(msg: &str) -> Option<XidLine> {
    let (attr, number) = xid(msg)?;
    let pci = pci_slot(attr.strip_prefix("PCI:")?)?;
    let rest = msg.split_once("): ")?.1;
    let rest = rest.split_once(", ").map_or("", |(_, r)| r);
    let (mut pid, mut name, mut detail) = (None, None, rest);
    if let Some(r) = rest.strip_prefix("pid=") {
        let digits = r.bytes().take_while(u8::is_ascii_digit).count();
        pid = r[..digits].parse().ok();
        let after = r.split_once(", ").map_or("", |(_, a)| a);
        if let Some(n) = after.strip_prefix("name=") {
            // The name reaches at most COMM_REACH characters; the driver's
            // text is what follows the last ", " within that reach that
            // leaves a remainder of the driver's own shape.
            let cut = n
                .match_indices(", ")
                .map(|(i, _)| i)
                .take_while(|&i| i <= COMM_REACH)
                .find(|&i| driver_tail(&n[i + 2..]))
                .or_else(|| n.find(", ").filter(|&i| i <= COMM_REACH));
            match cut {
                Some(i) => {
                    name = Some(n[..i].to_owned());
                    detail = &n[i + 2..];
                }
                None => {
                    name = Some(n.chars().take(COMM_REACH).collect());
                    detail = "";
                }
            }
        }
    }
    let channel = detail
        .strip_prefix("channel ")
        .and_then(|c| c.split([',', ' ', '.']).next())
        .filter(|c| {
            c.starts_with("0x") && c.len() > 2 && c[2..].bytes().all(|b| b.is_ascii_hexdigit())
        })
        .map(str::to_owned);
    Some(XidLine {
        number,
        pci,
        pid,
        name,
        channel,
        mmu_fault: mmu_fault(detail),
        detail: detail.trim_end().to_owned(),
    })
}

/// Whether `s` starts as the driver's text after an Xid's name does.
fn driver_tail(s: &str) -> bool {
    s.starts_with("channel 0x") || s.starts_with("Ch ") || s.starts_with("MMU Fault")
}

/// The MMU fault an Xid's details describe. The pattern is longer than a
/// task's name, so a name cannot write it.
fn mmu_fault(detail: &str) -> Option<MmuFault> {
    let at = detail.rfind("MMU Fault: ENGINE ")?;
    let r = &detail[at + "MMU Fault: ENGINE ".len()..];
    let (engine, r) = r.split_once(" faulted @ ")?;
    let (addr, r) = r.split_once(". Fault is of type ")?;
    let hex: String = addr
        .strip_prefix("0x")?
        .chars()
        .filter(|&c| c != '_')
        .collect();
    if hex.is_empty() || hex.len() > 16 {
        return None;
    }
    let address = u64::from_str_radix(&hex, 16).ok()?;
    let mut words = r.split_whitespace();
    let fault_type = words.next()?.to_owned();
    let access_type = words
        .next()
        .filter(|w| w.starts_with("ACCESS_TYPE_"))
        .map(str::to_owned);
    let access = match access_type.as_deref() {
        Some(a) if a.contains("WRITE") => Access::Write,
        Some(a) if a.contains("READ") => Access::Read,
        _ => Access::Other,
    };
    Some(MmuFault {
        engine: engine.to_owned(),
        address,
        fault_type,
        access_type,
        access,
    })
}

#[cfg(test)]
mod tests;
