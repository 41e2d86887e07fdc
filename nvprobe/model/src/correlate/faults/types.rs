//! The records faults make (`kernel_log`, `fault`) and what they keep of
//! each process meanwhile: below the tying (`mod.rs`) and the judging
//! (`judge.rs`), which both use them.

use serde::Serialize;

use crate::kmsg::{self, LogKind, XidLine, xid::XidAction};

/// A kernel-log record as read (live from /dev/kmsg, or again from a
/// recording).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct LogLine {
    /// The kernel's sequence number.
    pub seq: u64,
    /// The kernel's own time stamp: µs since boot of its local clock.
    pub kernel_ts_us: u64,
    /// The syslog level (0 emergency … 7 debug).
    pub level: u8,
    /// The message as the kernel keeps it (its first line).
    pub message: String,
}

/// A GPU a line or a fault is about.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FaultGpu {
    /// PCI slot, "dddd:bb:ss".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    /// /dev/nvidiaN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minor: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

/// The call a kernel-log line's process had in flight or had last failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct LogCall {
    pub func: String,
    /// "in_flight" or "last_failed".
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_name: Option<&'static str>,
}

/// What the Xid table says of an Xid's number.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct XidMeaning {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'static str>,
    pub meaning: &'static str,
    pub action: XidAction,
    pub what_to_do: &'static str,
}

/// One NVIDIA line of the kernel log (`kernel_log`).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct KernelLog {
    #[serde(flatten)]
    pub line: LogLine,
    pub kind: LogKind,
    /// An Xid's parts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xid: Option<XidLine>,
    /// What NVIDIA's Xid catalogue says of its number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meaning: Option<XidMeaning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<FaultGpu>,
    /// The process the line names, as nvprobe knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<LogCall>,
    /// The RM control a GSP RPC timeout names (Xid 119/120: "Expected
    /// function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4)").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rm_control: Option<RmControlRef>,
    /// A seccomp audit line's parts (kind `seccomp`): the call a filter
    /// judged, and its action.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seccomp: Option<kmsg::audit::SeccompAudit>,
}

/// An RM control by number, with its name from the tables.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RmControlRef {
    pub control: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_name: Option<&'static str>,
}

/// A failing (or unfinished) CUDA call in a fault verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FaultCall {
    pub func: &'static str,
    pub tid: u32,
    /// The CUresult (absent for a call still waiting when its thread ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_name: Option<&'static str>,
    pub start_ns: u64,
    pub duration_ns: u64,
}

/// An Xid tied to a fault.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FaultXid {
    pub number: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meaning: Option<XidMeaning>,
    pub pci: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mmu_fault: Option<kmsg::MmuFault>,
    /// The driver's details after the number (and pid and name).
    pub detail: String,
    /// How it was tied: "pid" (the driver named the process),
    /// "same_burst" (logged without a pid on its GPU at most 100 ms before
    /// a line that named it) or "gpu_time" (no pid: same GPU, while the
    /// failing call ran, or at most 2 s before it began).
    pub tied_by: &'static str,
    /// When it was logged, on nvprobe's clock.
    pub mono_ns: u64,
    /// The kernel's line.
    pub message: String,
}

/// What a fault comes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FaultClass {
    /// The program's own GPU code: the node is fine.
    Program,
    /// The GPU's hardware (memory, NVLink, the bus): drain the node.
    Hardware,
    /// The driver or its firmware (GSP).
    Driver,
    /// Killed while it waited for the GPU, which never answered: a kernel
    /// that does not end (or one slower than the process's patience).
    Unfinished,
    /// Nothing tells which.
    Unknown,
}

impl FaultClass {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultClass::Program => "program",
            FaultClass::Hardware => "hardware",
            FaultClass::Driver => "driver",
            FaultClass::Unfinished => "unfinished",
            FaultClass::Unknown => "unknown",
        }
    }
}

/// A process's run-time fault (`fault`).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Fault {
    pub pid: u32,
    pub comm: String,
    /// The first call that returned a sticky or fatal error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<FaultCall>,
    /// Hooked calls that failed after it (a sticky error fails them all;
    /// the kernel sends the first 8 per process).
    pub later_failures: u32,
    /// A hooked call still waiting when its thread ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unfinished: Option<FaultCall>,
    /// The Xid that explains it best.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xid: Option<FaultXid>,
    /// Every Xid tied to it, in time order.
    pub xids: Vec<FaultXid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<FaultGpu>,
    /// How the process ended ("killed by SIGKILL", "exited with status 1",
    /// "still running").
    pub ended: String,
    pub class: FaultClass,
    /// Whether the node should be drained.
    pub drain: bool,
    pub hint: String,
    /// One line: what happened.
    pub text: String,
    /// The text view's first line: `text` without the Xid's meaning,
    /// which it says on a line of its own.
    #[serde(skip)]
    pub headline: Option<String>,
}

#[derive(Debug)]
pub(super) struct Seen {
    pub(super) at: u64,
    pub(super) line: XidLine,
    pub(super) message: String,
    /// Tied to a process already.
    pub(super) claimed: bool,
}

#[derive(Debug, Default)]
pub(super) struct Pending {
    pub(super) comm: String,
    pub(super) first: Option<FaultCall>,
    pub(super) later: u32,
    pub(super) unfinished: Option<FaultCall>,
    pub(super) xids: Vec<FaultXid>,
    pub(super) gpus: Vec<u32>,
    pub(super) ended: Option<super::super::facts::Exit>,
    pub(super) due: u64,
    /// The last failed call (any CUresult), for a kernel-log line.
    pub(super) last_failed: Option<LogCall>,
}
