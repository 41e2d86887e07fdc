//! The typed, decoded events: one struct per record type, serialized as
//! the NDJSON schema's records.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{
    args::Args,
    callkind::{MmAt, SysKind},
    version::LayoutBasis,
};

/// Declares a field-less enum that serializes as its schema string (and
/// displays as it), so that the model matches on types while the NDJSON
/// stays as it was. It does not compare equal to a string: code says the
/// variant.
macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident => $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $v),+ }
        impl $name {
            pub const fn as_str(self) -> &'static str {
                match self { $(Self::$v => $s),+ }
            }
            /// The value `as_str` names, None for any other text.
            pub fn from_name(s: &str) -> Option<Self> {
                match s { $($s => Some(Self::$v),)+ _ => None }
            }
        }
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Self::from_name(&s)
                    .ok_or_else(|| serde::de::Error::unknown_variant(&s, &[$($s),+]))
            }
        }
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string", "enum": [$($s),+] })
            }
        }
    };
}
pub(crate) use named_enum;

named_enum!(
    /// What an NVIDIA file is, from its device number.
    DeviceKind {
        Ctl => "ctl",
        Gpu => "gpu",
        Uvm => "uvm",
        UvmTools => "uvm-tools",
        Modeset => "modeset",
        Caps => "caps",
        Other => "other",
        None => "none",
    }
);

impl From<nvprobe_common::DevKind> for DeviceKind {
    fn from(k: nvprobe_common::DevKind) -> Self {
        use nvprobe_common::DevKind as K;
        match k {
            K::None => Self::None,
            K::Ctl => Self::Ctl,
            K::Gpu => Self::Gpu,
            K::Uvm => Self::Uvm,
            K::UvmTools => Self::UvmTools,
            K::Modeset => Self::Modeset,
            K::Caps => Self::Caps,
            K::Other => Self::Other,
        }
    }
}

named_enum!(
    /// The command family of an ioctl.
    Family {
        Escape => "escape",
        Uvm => "uvm",
        Nvkms => "nvkms",
        Unknown => "unknown",
    }
);

named_enum!(
    /// What a process record says happened.
    ProcKind {
        Exit => "exit",
        Exec => "exec",
        /// A signal was generated for the target (the current task sent it).
        Signal => "signal",
        /// A signal was delivered to the current task.
        SignalDelivered => "signal_delivered",
        Fork => "fork",
        /// A call the start-up needs besides the NVIDIA ones failed.
        CallFailed => "call_failed",
        /// The kernel's OOM killer chose the target (its SIGKILL came
        /// just before).
        OomVictim => "oom_victim",
        /// A thread of the target (`target_tid`) ended alone while it was
        /// in cuInit; the process lives on.
        ThreadExit => "thread_exit",
        Unknown => "unknown",
    }
);

named_enum!(
    /// Entry or return of a libcuda call.
    CudaPhase {
        Enter => "enter",
        Return => "return",
        /// Still in flight when its thread ended (a fault-only call,
        /// `--libcuda-hooks faults`): `duration_ns` is how long it had run.
        Unfinished => "unfinished",
    }
);

named_enum!(
    /// The receiver's disposition of a delivered signal.
    SigAction {
        Default => "default",
        Ignored => "ignored",
        Handler => "handler",
    }
);

/// The command an ioctl carried, as numbers (the XFER wrapper unwrapped):
/// what the correlator's rules match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Call {
    /// `_IOC_NR` of an escape on /dev/nvidiactl or /dev/nvidiaN.
    Escape(u32),
    /// A UVM command number.
    Uvm(u32),
    Nvkms,
    #[default]
    Unknown,
}

/// A name of a decode table's (read back from a recording: interned, see
/// `intern.rs`). An alias, so that serde's derive does not borrow it from
/// the input as it does a field written `&'static str`.
pub type Name = &'static str;

fn hex_u32<S: serde::Serializer>(v: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{v:#x}"))
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
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

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
pub struct Device {
    pub major: u32,
    pub minor: u32,
    pub kind: DeviceKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<Arc<str>>,
    /// True for a file declared with `--device`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub extra: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
pub struct Status {
    /// The NV_STATUS value (in JSON: hex, "0x1f").
    #[serde(
        serialize_with = "hex_u32",
        deserialize_with = "super::intern::hex_u32"
    )]
    #[schemars(with = "String")]
    pub code: u32,
    #[serde(
        default,
        deserialize_with = "super::intern::static_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub name: Option<Name>,
    pub offset: u32,
    pub layout: LayoutBasis,
}

impl Status {
    /// The status's name, or its number in hex when no table names it.
    pub fn text(&self) -> String {
        self.name
            .map_or_else(|| format!("{:#x}", self.code), str::to_owned)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
pub struct Xfer {
    /// The wrapped command word (in JSON: hex).
    #[serde(
        serialize_with = "hex_u32",
        deserialize_with = "super::intern::hex_u32"
    )]
    #[schemars(with = "String")]
    pub cmd: u32,
    #[serde(
        default,
        deserialize_with = "super::intern::static_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub name: Option<Name>,
    pub size: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct Ioctl {
    #[serde(flatten)]
    pub proc: Proc,
    pub fd: i32,
    pub device: Device,
    /// The raw command word (in JSON: hex, "0xc0204600").
    #[serde(
        serialize_with = "hex_u32",
        deserialize_with = "super::intern::hex_u32"
    )]
    #[schemars(with = "String")]
    pub request: u32,
    pub family: Family,
    /// The command as numbers, for rules (not in the JSON: `request`,
    /// `name` and `xfer` say it there).
    #[serde(skip)]
    pub call: Call,
    #[serde(
        default,
        deserialize_with = "super::intern::static_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub name: Option<Name>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xfer: Option<Xfer>,
    /// Size of the parameter struct.
    pub size: u32,
    /// The call's fields (their typed facts: `args.known()`).
    pub args: Args,
    pub start_ns: u64,
    pub duration_ns: u64,
    /// The call's start was not read, so `duration_ns` is 0 and `start_ns`
    /// its end: a quiet process's call at `--events failures|verdicts`
    /// (past its first context), counted, not sent, unless it fails.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untimed: bool,
    /// The call was timed in the kernel's ticks, so `duration_ns` is right
    /// within one tick: at `--events verdicts`, a call of a process not yet
    /// quiet that took at least two ticks (a shorter one is `untimed`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub coarse: bool,
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
    #[serde(
        default,
        deserialize_with = "super::intern::static_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub via: Option<Name>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct PathCall {
    #[serde(flatten)]
    pub proc: Proc,
    #[serde(deserialize_with = "super::intern::static_str")]
    pub syscall: Name,
    pub path: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub path_truncated: bool,
    /// open flags (O_*), AT_* flags, or the access mode, as named bits.
    pub flags: String,
    /// An open with O_CREAT: it makes the file, as mknod does (not in the
    /// JSON: `flags` says it there).
    #[serde(skip)]
    pub creates: bool,
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

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct FdCall {
    #[serde(flatten)]
    pub proc: Proc,
    #[serde(deserialize_with = "super::intern::static_str")]
    pub syscall: Name,
    pub fd: i32,
    pub device: Device,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newfd: Option<i64>,
    /// close_range: the range's last descriptor (`fd` is its first; the
    /// range is not resolved in the kernel, and `device` is kind `none`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fd: Option<u32>,
    /// close_range's flags by name (`CLOSE_RANGE_UNSHARE`,
    /// `CLOSE_RANGE_CLOEXEC`: then nothing is closed, only marked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_flags: Option<String>,
    /// dup2/dup3 onto a descriptor that held an NVIDIA file, from a file
    /// that is not one: `device` is the file replaced (the one `newfd`
    /// held), not `fd`'s.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replaced: bool,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub ret: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

impl FdCall {
    /// The descriptors this call took from the process when it succeeded
    /// (`close`: the record is a close's or close_range's): a close's fd,
    /// a close_range's range (none with CLOSE_RANGE_CLOEXEC, which only
    /// marks them, nor with CLOSE_RANGE_UNSHARE, which closes them in the
    /// calling thread's own copy of the table), the NVIDIA descriptor a
    /// dup2/dup3 replaced.
    pub fn closes(&self, close: bool) -> Option<(i64, i64)> {
        if !self.ok {
            return None;
        }
        match self.last_fd {
            Some(last) if close => (!self.range_flags.as_deref().is_some_and(|f| {
                f.split('|')
                    .any(|t| t == "CLOSE_RANGE_CLOEXEC" || t == "CLOSE_RANGE_UNSHARE")
            }))
            .then_some((i64::from(self.fd as u32), i64::from(last))),
            None if close => Some((self.fd.into(), self.fd.into())),
            _ if self.replaced => self.newfd.map(|n| (n, n)),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
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

/// How many call_failed records a kernel side before the path was sent
/// sent per program (its `nv_procs::FAILS_SENT`).
pub const LEGACY_FAILS_SENT: u32 = 8;

/// exec, exit or a signal of a process that uses NVIDIA devices.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct ProcCall {
    /// The current task: the exiting or exec'ing process, the signal's
    /// sender (op "signal") or its receiver (op "signal_delivered").
    #[serde(flatten)]
    pub proc: Proc,
    pub op: ProcKind,
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
    /// The program's successful NVIDIA calls the kernel counted instead of
    /// sending (exit, and exec for the program before it, at `--events
    /// failures|verdicts`; absent when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsent: Option<u64>,
    /// The receiver's disposition (signal_delivered): default, ignored or
    /// handler.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<SigAction>,
    /// Whether the handler was installed with SA_RESTART (signal_delivered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sa_restart: Option<bool>,
    /// The system call that failed (call_failed): its name, or "syscall N";
    /// for a SIGSYS from a seccomp filter (signal), the call it refused,
    /// by the table of the architecture the kernel named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// Its errno (call_failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// The path the failed call named (call_failed; its path argument, or
    /// an AF_UNIX socket's for connect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Its number among the failed calls the kernel side sent for this
    /// program's start-up (call_failed), from 1: the one numbered
    /// `nvprobe_common::call_failed::SENT_MAX` (128) is the last sent, later
    /// ones were counted, not sent. Absent in a recording made by an
    /// nvprobe that sent at most [`LEGACY_FAILS_SENT`] and no number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u32>,
    /// Its first four arguments as the caller passed them (call_failed):
    /// an ioctl's descriptor and request, an mmap's address, length,
    /// protection and flags; two in a recording made before the third and
    /// fourth were sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<u64>>,
    /// The process's address space when the call failed, as the kernel
    /// held it (call_failed): its mappings, size and private writable
    /// memory. Absent in a recording made before it was sent, or where
    /// the kernel's BTF does not name the fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mm: Option<MmAt>,
    /// The failed call's kind and errno, as numbers (call_failed; `call`
    /// and `errno` name them).
    #[serde(skip)]
    pub failed: Option<(SysKind, i32)>,
    pub time_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// A libcuda call seen by its uprobe.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct CudaCall {
    #[serde(flatten)]
    pub proc: Proc,
    #[serde(deserialize_with = "super::intern::static_str")]
    pub func: Name,
    /// The function's number (`nvprobe_common::CUDA_API`; `func` names it).
    #[serde(skip)]
    pub func_id: u32,
    pub phase: CudaPhase,
    pub start_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
    /// CUresult (return).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<i64>,
    #[serde(
        default,
        deserialize_with = "super::intern::static_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub result_name: Option<Name>,
    /// cuInit's flags (enter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flags: Option<u64>,
    /// The call went to a library other than libcuda that exports the
    /// driver API (an LD_PRELOAD interposer), not to libcuda.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interposer: bool,
    /// What a getter returned through its pointer: the driver version, the
    /// device count, the device handle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<i32>,
    /// The device a start-up call names (return): the ordinal cuDeviceGet
    /// asked for, the CUdevice of cuDevicePrimaryCtxRetain and of
    /// cuCtxCreate/cuCtxCreate_v2.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// A function inside the NVIDIA modules or the kernel's HMM code, seen by
/// the driver layer (kprobe at entry, kretprobe at return).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct DriverCall {
    #[serde(flatten)]
    pub proc: Proc,
    #[serde(deserialize_with = "super::intern::static_str")]
    pub function: Name,
    /// nvidia, nvidia_uvm or vmlinux.
    #[serde(deserialize_with = "super::intern::static_str")]
    pub module: Name,
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

// Issue 39: a libnccl call (`nccl.rs` decodes it).
named_enum!(
    /// What a libnccl call is.
    NcclCallKind {
        /// A communicator made (its init's return).
        Init => "init",
        /// A collective: every rank of the communicator makes it, in the
        /// same order.
        Collective => "collective",
        /// ncclSend or ncclRecv.
        P2p => "p2p",
        GroupStart => "group_start",
        GroupEnd => "group_end",
        /// ncclCommAbort, ncclCommDestroy, ncclCommFinalize.
        End => "end",
    }
);

pub(super) fn hex_u64<S: serde::Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{v:#x}"))
}

pub(super) fn hex_opt<S: serde::Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(&format_args!("{v:016x}")),
        None => s.serialize_none(),
    }
}

/// A libnccl call seen by its uprobe (an init at its return, the rest at
/// their entry).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct NcclCall {
    #[serde(flatten)]
    pub proc: Proc,
    #[serde(deserialize_with = "super::intern::static_str")]
    pub func: Name,
    pub kind: NcclCallKind,
    /// The communicator's address in the process (in JSON: hex); 0 for a
    /// group call and a failed init.
    #[serde(
        serialize_with = "hex_u64",
        deserialize_with = "super::intern::hex_u64"
    )]
    #[schemars(with = "String")]
    pub communicator: u64,
    /// The communicator's hash, the same on every rank of every node (in
    /// JSON: 16 hex digits; NCCL 2.26 and later print it as the commId of
    /// NCCL_DEBUG=INFO's "Init START"); absent when nvprobe did not see
    /// the communicator made.
    #[serde(
        default,
        serialize_with = "hex_opt",
        deserialize_with = "super::intern::hex_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub comm_hash: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nranks: Option<i32>,
    /// The call's number among its communicator's collective and
    /// point-to-point calls, from 1 (counted from when nvprobe first saw
    /// the communicator); for an end, the last one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// ncclDataType_t, and its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datatype: Option<i32>,
    #[serde(
        default,
        deserialize_with = "super::intern::static_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub datatype_name: Option<Name>,
    /// ncclRedOp_t, and its name (a custom op has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<i32>,
    #[serde(
        default,
        deserialize_with = "super::intern::static_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub op_name: Option<Name>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<i32>,
    /// The CUDA stream (in JSON: hex).
    #[serde(
        default,
        serialize_with = "hex_opt",
        deserialize_with = "super::intern::hex_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub stream: Option<u64>,
    pub start_ns: u64,
    /// An init's ncclResult_t, and its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<i32>,
    #[serde(
        default,
        deserialize_with = "super::intern::static_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub result_name: Option<Name>,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// A decoded kernel record.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Ioctl(Ioctl),
    Open(PathCall),
    Stat(PathCall),
    Access(PathCall),
    /// mknod/mknodat of an NVIDIA path: `device` is the node it creates.
    Mknod(PathCall),
    Close(FdCall),
    Dup(FdCall),
    Mmap(MmapCall),
    Proc(ProcCall),
    Cuda(CudaCall),
    Driver(DriverCall),
    /// A libnccl call (issue 39).
    Nccl(NcclCall),
}

impl Event {
    pub fn proc(&self) -> &Proc {
        match self {
            Event::Ioctl(e) => &e.proc,
            Event::Open(e) | Event::Stat(e) | Event::Access(e) | Event::Mknod(e) => &e.proc,
            Event::Close(e) | Event::Dup(e) => &e.proc,
            Event::Mmap(e) => &e.proc,
            Event::Proc(e) => &e.proc,
            Event::Cuda(e) => &e.proc,
            Event::Driver(e) => &e.proc,
            Event::Nccl(e) => &e.proc,
        }
    }
    /// (start, end) in CLOCK_MONOTONIC ns.
    pub fn span(&self) -> (u64, u64) {
        let (s, d) = match self {
            Event::Ioctl(e) => (e.start_ns, e.duration_ns),
            Event::Open(e) | Event::Stat(e) | Event::Access(e) | Event::Mknod(e) => {
                (e.start_ns, e.duration_ns)
            }
            Event::Close(e) | Event::Dup(e) => (e.start_ns, e.duration_ns),
            Event::Mmap(e) => (e.start_ns, e.duration_ns),
            Event::Proc(e) => (e.time_ns, 0),
            Event::Cuda(e) => (e.start_ns, e.duration_ns.unwrap_or(0)),
            Event::Driver(e) => (e.start_ns, e.duration_ns),
            Event::Nccl(e) => (e.start_ns, 0),
        };
        (s, s.saturating_add(d))
    }
    pub fn ok(&self) -> bool {
        match self {
            Event::Ioctl(e) => e.ok,
            Event::Open(e) | Event::Stat(e) | Event::Access(e) | Event::Mknod(e) => e.ok,
            Event::Close(e) | Event::Dup(e) => e.ok,
            Event::Mmap(e) => e.ok,
            Event::Proc(p) => p.op != ProcKind::CallFailed,
            Event::Cuda(e) => e.phase != CudaPhase::Unfinished && e.result.is_none_or(|r| r == 0),
            Event::Driver(e) => e.ok,
            Event::Nccl(e) => e.ok,
        }
    }
    /// The raw record's hex, when it was kept.
    pub fn raw_mut(&mut self) -> &mut Option<String> {
        match self {
            Event::Ioctl(e) => &mut e.raw,
            Event::Open(e) | Event::Stat(e) | Event::Access(e) | Event::Mknod(e) => &mut e.raw,
            Event::Close(e) | Event::Dup(e) => &mut e.raw,
            Event::Mmap(e) => &mut e.raw,
            Event::Proc(e) => &mut e.raw,
            Event::Cuda(e) => &mut e.raw,
            Event::Driver(e) => &mut e.raw,
            Event::Nccl(e) => &mut e.raw,
        }
    }
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::Ioctl(_) => "ioctl",
            Event::Open(_) => "open",
            Event::Stat(_) => "stat",
            Event::Access(_) => "access",
            Event::Mknod(_) => "mknod",
            Event::Close(_) => "close",
            Event::Dup(_) => "dup",
            Event::Mmap(_) => "mmap",
            Event::Proc(_) => "proc",
            Event::Cuda(_) => "cuda",
            Event::Driver(_) => "driver",
            Event::Nccl(_) => "nccl",
        }
    }
}
