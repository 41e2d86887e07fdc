//! Raw `#[repr(C)]` records shared by the BPF programs (`nvprobe-ebpf`) and the
//! collector (`nvprobe`). Every record starts with [`Header`], so the decoder can
//! dispatch on `kind` before it touches the payload. Kind numbers are fixed: a
//! retired number is never reused.
//!
//! These are wire types, not the JSON output types: those live in
//! `nvprobe-model` (`nvprobe/model`) and carry a schema version. This crate
//! is the whole kernel/user contract: records, map names, lost-slot names,
//! ioctl numbers, hook ids. Nothing reads a record at a literal offset.
#![no_std]

pub const COMM_LEN: usize = 16;
/// Bytes of an ioctl parameter struct captured from its start.
pub const HEAD_LEN: usize = 64;
/// Bytes captured from the end of a parameter struct larger than [`HEAD_LEN`]
/// (where structs like `UVM_MAP_EXTERNAL_ALLOCATION_PARAMS` keep `rmStatus`).
pub const TAIL_LEN: usize = 16;
/// Longest path captured for opens, stats and accesses.
pub const PATH_LEN: usize = 128;
/// Number of slots in the per-CPU lost-event counter (indexed by [`EventKind`],
/// plus [`LOST_SLOT_COLLISION`]).
pub const LOST_SLOTS: u32 = 16;
/// Lost-counter slot for calls whose in-flight slot another thread took
/// (two threads with tids equal modulo [`INFLIGHT_SLOTS`] in a traced
/// syscall at the same time).
pub const LOST_SLOT_COLLISION: u32 = 15;
/// Per-thread syscall state lives in an array indexed by tid modulo this
/// (a power of two): no hash-map insert or delete on the hot path.
pub const INFLIGHT_SLOTS: u32 = 32768;

pub mod fastpath;
pub mod hooks;

mod rm;
pub use rm::{RM_DEREF_LEN, RM_PARAMS_LEN, RmControlEvent, rm_params};

pub mod call_failed;
mod config;
pub use call_failed::CallFailedEvent;
pub use config::{Config, bench_skip};
mod paths;
pub use paths::NVIDIA_PATH_PREFIXES;
pub mod maps;

pub mod nv_procs;

/// `STATUS_AT`: where a call's NV_STATUS is, so that the kernel can tell a
/// successful call of a quiet process without copying its parameters. Keys:
/// the ioctl command of an escape (`_IOWR('F', nr, size)`), an
/// XFER-wrapped escape ([`status_at::xfer_key`]) or a UVM command; values:
/// the status's offset in the parameters, or [`status_at::NO_STATUS`] when
/// the errno alone is the result. A call not in the map is always sent.
pub mod status_at {
    /// The struct has no NV_STATUS: a return of 0 is success.
    pub const NO_STATUS: u32 = u32::MAX;
    /// Entries the map holds at most.
    pub const MAX_ENTRIES: u32 = 1024;
    /// The key of escape `nr` with parameters of `size` bytes behind an
    /// XFER wrapper (bit 31 set, bit 30 clear: no `_IOWR` command and no
    /// UVM command looks like it).
    pub const fn xfer_key(nr: u32, size: u32) -> u32 {
        0x8000_0000 | ((size & 0x7fff) << 8) | (nr & 0xff)
    }
    /// The key of escape `nr` called directly: its `_IOWR` command.
    pub const fn escape_key(nr: u32, size: u32) -> u32 {
        (3 << 30) | ((size & 0x3fff) << 16) | (super::ioctl::NV_IOCTL_MAGIC << 8) | (nr & 0xff)
    }
}

/// NVIDIA ioctl numbers both sides need (nv-ioctl-numbers.h,
/// uvm_linux_ioctl.h, nvkms-ioctl.h).
pub mod ioctl {
    /// `NV_IOCTL_MAGIC` ('F'): the `_IOC` type of every escape.
    pub const NV_IOCTL_MAGIC: u32 = 0x46;
    /// `NV_ESC_IOCTL_XFER_CMD`: an escape whose real command and parameters
    /// sit behind a pointer.
    pub const NV_ESC_IOCTL_XFER_CMD: u32 = 0xD3;
    /// `NV_ESC_RM_CONTROL` (nv_escape.h) and the size of its NVOS54.
    pub const NV_ESC_RM_CONTROL: u32 = 0x2A;
    pub const NVOS54_SIZE: u32 = 32;
    /// The driver's cap on an XFER-wrapped parameter struct
    /// (`NV_ABSOLUTE_MAX_IOCTL_SIZE`).
    pub const NV_MAX_IOCTL_SIZE: u32 = 16384;
    pub const UVM_INITIALIZE: u32 = 0x3000_0001;
    pub const UVM_DEINITIALIZE: u32 = 0x3000_0002;
    /// Highest plain UVM command number (`UVM_IS_8_SUPPORTED` = 2047).
    pub const UVM_MAX_PLAIN: u32 = 0x7ff;
    /// `NVKMS_IOCTL_IOWR` and its parameter size.
    pub const NVKMS_IOCTL_IOWR: u32 = 0xC010_6D00;
    pub const NVKMS_PARAMS_SIZE: u32 = 16;

    /// `_IOC_TYPE(cmd)`.
    pub const fn ioc_type(cmd: u32) -> u32 {
        (cmd >> 8) & 0xff
    }
    /// `_IOC_NR(cmd)`.
    pub const fn ioc_nr(cmd: u32) -> u32 {
        cmd & 0xff
    }
    /// `_IOC_SIZE(cmd)`.
    pub const fn ioc_size(cmd: u32) -> u32 {
        (cmd >> 16) & 0x3fff
    }
    /// An escape (type 'F').
    pub const fn is_escape(cmd: u32) -> bool {
        ioc_type(cmd) == NV_IOCTL_MAGIC
    }
    /// The XFER wrapper escape.
    pub const fn is_xfer(cmd: u32) -> bool {
        is_escape(cmd) && ioc_nr(cmd) == NV_ESC_IOCTL_XFER_CMD
    }
    /// A command an NVIDIA device could take, from the word alone (the
    /// kernel side's cheap test before any fd-table read): every escape is
    /// `_IOWR('F', nr, size)`; UVM commands are small plain numbers or the
    /// two 0x3000000x values; nvidia-modeset takes exactly one command.
    pub const fn nvidia_shaped(cmd: u32) -> bool {
        is_escape(cmd)
            || cmd <= UVM_MAX_PLAIN
            || cmd == UVM_INITIALIZE
            || cmd == UVM_DEINITIALIZE
            || cmd == NVKMS_IOCTL_IOWR
    }
}

/// What each slot of the per-CPU lost-event counter counts: the
/// [`EventKind`] whose record did not fit, or a slot collision.
pub const fn lost_slot_name(slot: u32) -> &'static str {
    if slot == LOST_SLOT_COLLISION {
        return "slot_collision";
    }
    match EventKind::from_repr(slot) {
        Some(EventKind::Ioctl) => "ioctl",
        Some(EventKind::Path) => "path",
        Some(EventKind::Fd) => "fd",
        Some(EventKind::Mmap) => "mmap",
        Some(EventKind::Proc) => "proc",
        Some(EventKind::Cuda) => "cuda",
        Some(EventKind::Driver) => "driver",
        Some(EventKind::RmControl) => "rm_control",
        Some(EventKind::Nccl) => "nccl",
        None => "other",
    }
}

/// Declares a wire enum: its fixed discriminants, and `from_repr`, which
/// is generated from them (a number no variant has is `None`), and `ALL`.
macro_rules! wire_enum {
    ($(#[$m:meta])* pub enum $name:ident: $repr:ident {
        $($(#[$vm:meta])* $v:ident = $n:literal,)+
    }) => {
        $(#[$m])*
        #[repr($repr)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name { $($(#[$vm])* $v = $n,)+ }
        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$v),+];
            /// The variant of this wire number.
            pub const fn from_repr(v: $repr) -> Option<Self> {
                match v {
                    $($n => Some(Self::$v),)+
                    _ => None,
                }
            }
        }
    };
}

wire_enum! {
    /// Record kinds. Fixed numbers; never reuse a retired one.
    pub enum EventKind: u32 {
        Ioctl = 1,
        Path = 2,
        Fd = 3,
        Mmap = 4,
        /// exec, exit and signals of processes that use NVIDIA devices.
        Proc = 5,
        /// A libcuda entry point (uprobe/uretprobe).
        Cuda = 6,
        /// A function inside nvidia, nvidia_uvm or the kernel's HMM code
        /// (kprobe/kretprobe): the driver layer.
        Driver = 7,
        /// An `NV_ESC_RM_CONTROL` ioctl record followed by the control's own
        /// parameters ([`RmControlEvent`]), for the controls user space listed
        /// in `RM_PARAMS`.
        RmControl = 8,
        /// A libnccl call (uprobe): a communicator made, a collective or
        /// point-to-point call with its sequence number, a group, an end.
        Nccl = 9,
    }
}

wire_enum! {
    /// What a [`ProcEvent`] reports.
    pub enum ProcOp: u32 {
        /// The last thread of the process exited (`exit_code` as in wait(2)).
        Exit = 1,
        /// The process exec'd a new program.
        Exec = 2,
        /// A signal was generated for the process; the header is the sender
        /// (the current task), `target_*` the receiver.
        SignalGenerate = 3,
        /// A signal is being delivered; the header is the receiver.
        SignalDeliver = 4,
        /// The process (header) forked a new process (`target_*`).
        Fork = 5,
        /// A system call of a process in start-up failed, whatever the call
        /// (raw tracepoint `sys_exit`): `code` is the syscall number (the
        /// traced machine's), `errno` the error. The record is a
        /// [`CallFailedEvent`] (its path and first arguments follow). At
        /// most [`call_failed::SENT_MAX`] per program; futex and the
        /// EAGAIN of a non-blocking read are never sent.
        CallFailed = 6,
        /// The kernel's OOM killer chose the process (`oom/mark_victim`,
        /// right after it sent the SIGKILL): `target_*` the victim, the
        /// header the task whose allocation ran out.
        OomVictim = 7,
        /// A thread (`target_tid`) ended alone, its process living on,
        /// while it was in cuInit: `exit_code` is the thread's (a signal
        /// number for a thread the kernel ended alone, as a seccomp
        /// filter's kill-thread action does with SIGSYS; status << 8 for
        /// one that called exit(2)). Sent for that thread only.
        ThreadExit = 8,
    }
}

wire_enum! {
    /// What kind of NVIDIA file an fd refers to, as the kernel side classified it.
    pub enum DevKind: u8 {
        /// Not an NVIDIA file (path events for failed opens, or a lookalike).
        None = 0,
        /// `/dev/nvidiactl` (195:255).
        Ctl = 1,
        /// `/dev/nvidiaN` (195:0..=247).
        Gpu = 2,
        /// `/dev/nvidia-uvm` (uvm major, minor 0).
        Uvm = 3,
        /// `/dev/nvidia-uvm-tools` (uvm major, minor 1).
        UvmTools = 4,
        /// `/dev/nvidia-modeset` (195:254).
        Modeset = 5,
        /// `/dev/nvidia-caps/*` (nvidia-caps major).
        Caps = 6,
        /// Another minor of major 195 (248..=253).
        Other = 7,
    }
}

impl DevKind {
    /// The kind of this wire number; an unknown one is no NVIDIA file.
    pub const fn from_u8(v: u8) -> Self {
        match Self::from_repr(v) {
            Some(k) => k,
            None => Self::None,
        }
    }
}

wire_enum! {
    /// Which system call produced a [`PathEvent`].
    pub enum PathOp: u32 {
        Open = 1,
        Openat = 2,
        Openat2 = 3,
        Stat = 4,
        Lstat = 5,
        Newfstatat = 6,
        Statx = 7,
        Access = 8,
        Faccessat = 9,
        Faccessat2 = 10,
        /// mknod/mknodat of an NVIDIA path (libcuda creates missing nodes as
        /// root): `st_mode` is the mode, `st_rdev` the requested device (the
        /// syscall's `unsigned dev`, new_encode_dev), `stat_valid` 3.
        Mknod = 11,
        Mknodat = 12,
    }
}

impl PathOp {
    pub fn is_open(self) -> bool {
        matches!(self, Self::Open | Self::Openat | Self::Openat2)
    }
}

wire_enum! {
    /// Which system call produced an [`FdEvent`].
    pub enum FdOp: u32 {
        Close = 1,
        Dup = 2,
        Dup2 = 3,
        Dup3 = 4,
        FcntlDupfd = 5,
        FcntlDupfdCloexec = 6,
        /// close_range(first, last, flags) by a process that may hold an
        /// NVIDIA file: `fd` is `first`, `arg` is `last | flags << 32`,
        /// and `file` is empty (the range is not resolved in the kernel).
        CloseRange = 7,
        /// dup2 onto a descriptor that held an NVIDIA file, from a file
        /// that is not one: `file` is the file replaced (`arg`'s), not
        /// `fd`'s.
        Dup2Replaced = 8,
        /// dup3 likewise.
        Dup3Replaced = 9,
    }
}

/// Common prefix of every record.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Header {
    /// [`EventKind`] as u32.
    pub kind: u32,
    pub cpu: u32,
    /// `bpf_ktime_get_ns()` when the record was made (CLOCK_MONOTONIC).
    pub ktime_ns: u64,
    /// Host pid (thread-group id) and thread id.
    pub tgid: u32,
    pub tid: u32,
    /// The same ids in the task's own pid namespace (equal to the host ids
    /// when the task is in the initial namespace).
    pub ns_tgid: u32,
    pub ns_tid: u32,
    /// Depth of the task's pid namespace (0 = the host's).
    pub pidns_level: u32,
    pub uid: u32,
    pub comm: [u8; COMM_LEN],
}

impl Header {
    /// The header at the start of a raw record, or None when the record is
    /// shorter than a header. Any bit pattern is a valid header.
    pub fn peek(rec: &[u8]) -> Option<Header> {
        read(rec)
    }
    /// The record's [`EventKind`], if it is a known one.
    pub fn event_kind(&self) -> Option<EventKind> {
        EventKind::from_repr(self.kind)
    }
}

/// Read a `#[repr(C)]` record (integers and byte arrays only, valid for
/// any bit pattern) from the start of `rec`; None when `rec` is shorter.
pub fn read<T: Record>(rec: &[u8]) -> Option<T> {
    if rec.len() < core::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: the length is checked; `Record` types are plain integers and
    // byte arrays, valid for any bit pattern; read_unaligned handles
    // alignment.
    Some(unsafe { core::ptr::read_unaligned(rec.as_ptr().cast::<T>()) })
}

/// Plain-old-data records that [`read`] may build from any bytes.
///
/// # Safety
/// Implement only for `#[repr(C)]` structs of integers and byte arrays.
pub unsafe trait Record: Copy {}

/// Identity of the file behind an fd, read from the kernel's fd table.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FileId {
    /// `inode->i_rdev` in the kernel's encoding (major << 20 | minor).
    pub rdev: u32,
    /// `inode->i_sb->s_dev` (kernel encoding); 0 unless extra devices are set.
    pub sdev: u32,
    /// `inode->i_ino`; 0 unless extra devices are set.
    pub ino: u64,
    /// `inode->i_mode`.
    pub mode: u16,
    /// [`DevKind`] as u8.
    pub kind: u8,
    /// 1 when the fd resolved to a file.
    pub valid: u8,
    pub _pad: u32,
}

pub mod ioctl_flags;

/// One ioctl on an NVIDIA file, emitted at syscall exit.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IoctlEvent {
    pub hdr: Header,
    pub file: FileId,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub arg: u64,
    /// Return value of the syscall (0 or -errno).
    pub ret: i64,
    pub fd: i32,
    pub cmd: u32,
    /// Inner escape, size and pointer of an XFER-wrapped call.
    pub xfer_cmd: u32,
    pub xfer_size: u32,
    pub xfer_ptr: u64,
    /// Size of the parameter struct the captures were bounded by.
    pub param_size: u32,
    pub head_len: u32,
    pub tail_off: u32,
    pub tail_len: u32,
    pub flags: u32,
    pub _pad: u32,
    pub head: [u8; HEAD_LEN],
    pub tail: [u8; TAIL_LEN],
}

/// An open, stat or access of an NVIDIA path, or an open that yielded an
/// NVIDIA file by any path. Emitted at syscall exit.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PathEvent {
    pub hdr: Header,
    /// For successful opens: the file the new fd refers to.
    pub file: FileId,
    pub start_ns: u64,
    pub duration_ns: u64,
    /// fd, 0 or -errno.
    pub ret: i64,
    /// [`PathOp`] as u32.
    pub op: u32,
    /// open flags, AT_* flags or the access mode.
    pub flags: u32,
    pub mode: u32,
    pub dfd: i32,
    /// Bytes of `path` in use (without the NUL); `PATH_LEN` means truncated.
    pub path_len: u32,
    /// 1 when `st_mode`/`st_rdev` were read from a successful stat.
    pub stat_valid: u32,
    /// `st_rdev` in user-space encoding (for statx: major << 32 | minor).
    pub st_rdev: u64,
    pub st_mode: u32,
    pub _pad: u32,
    pub path: [u8; PATH_LEN],
}

/// close/dup/fcntl(F_DUPFD*) on an NVIDIA fd. Emitted at syscall exit.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FdEvent {
    pub hdr: Header,
    pub file: FileId,
    pub start_ns: u64,
    pub duration_ns: u64,
    /// New fd, 0 or -errno.
    pub ret: i64,
    /// [`FdOp`] as u32.
    pub op: u32,
    pub fd: i32,
    /// Requested new fd (dup2/dup3) or lowest fd (fcntl).
    pub arg: u64,
}

/// mmap of an NVIDIA fd. Emitted at syscall exit.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MmapEvent {
    pub hdr: Header,
    pub file: FileId,
    pub start_ns: u64,
    pub duration_ns: u64,
    /// Mapped address or -errno.
    pub ret: i64,
    pub addr: u64,
    pub len: u64,
    pub off: u64,
    pub prot: u32,
    pub flags: u32,
    pub fd: i32,
    pub _pad: u32,
}

/// Lifecycle and signal events of processes that touched an NVIDIA device
/// (the NV_PROCS map).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProcEvent {
    pub hdr: Header,
    /// [`ProcOp`] as u32.
    pub op: u32,
    pub sig: i32,
    /// siginfo `si_code` (SI_USER 0, SI_KERNEL 0x80, SI_TIMER -2, …).
    pub code: i32,
    pub errno: i32,
    /// signal_generate's result (0 delivered, 1 ignored, 2 already pending, …).
    pub result: i32,
    /// `task->exit_code` for Exit: status << 8, or the fatal signal (| 0x80 core).
    /// For a SIGSYS from a seccomp filter (SignalGenerate, `code`
    /// SYS_SECCOMP): the system call it refused (`si_syscall`).
    pub exit_code: i32,
    pub target_tgid: u32,
    pub target_tid: u32,
    /// siginfo `si_pid` (the sender as the kernel recorded it). For a
    /// SIGSYS from a seccomp filter: the refused call's audit architecture
    /// (`si_arch`, AUDIT_ARCH_*), which names its number's table.
    pub si_pid: u32,
    /// For Exit and Exec: the program's successful NVIDIA calls the kernel
    /// counted instead of sending (`--events failures|verdicts`,
    /// `nvprobe_common::fastpath`), saturating; at an exec the old
    /// program's, and the new one counts afresh; 0 otherwise.
    pub unsent: u32,
    pub sa_handler: u64,
    pub sa_flags: u64,
}

/// The cookie of cuInit in [`CUDA_FUNCS`].
pub const CUDA_CUINIT: u32 = 1;

/// Set in the cookie (and so in `CudaEvent::func`) of the uprobes on a
/// library other than libcuda that exports the CUDA driver API (an
/// LD_PRELOAD interposer): its calls are told apart from libcuda's own.
pub const CUDA_INTERPOSER: u32 = 1 << 31;

mod fault_only;
mod nccl;
pub use fault_only::{CUDA_FAULT_ONLY, CUDA_LAUNCH, RT_FAIL_CAP, RT_SLOTS, RtSlot};
pub use nccl::{
    CUDA_NCCL, NCCL_FUNCS, NCCL_UNIQUE_ID_BYTES, NO_ARG, NcclArg, NcclComm, NcclEvent, NcclFn,
    NcclInit, NcclKey, NcclKind, nccl_cookie, nccl_cookie_parts, nccl_fn, nccl_fn_named, nccl_hash,
};

/// The functions that make a first context (numbers of [`CUDA_API`]):
/// cuDevicePrimaryCtxRetain, cuCtxCreate to cuCtxCreate_v4,
/// cuGreenCtxCreate. A start-up ends at the first that succeeds.
pub const CUDA_CONTEXT_FUNCS: [u32; 6] = [5, 6, 7, 8, 9, 255];

mod cuda_api;

/// libcuda functions nvprobe knows; the number is the uprobe's attach
/// cookie (and `CudaEvent::func`). Generated, append-only: see
/// `cuda_api.rs`.
pub const CUDA_FUNCS: &[(u32, &str)] = cuda_api::CUDA_API;

/// The name of function number `func`.
pub fn cuda_func_name(func: u32) -> Option<&'static str> {
    // Numbers are dense from 1 in table order; fall back to a search.
    match CUDA_FUNCS.get((func as usize).wrapping_sub(1)) {
        Some(&(n, name)) if n == func => Some(name),
        _ => CUDA_FUNCS.iter().find(|(n, _)| *n == func).map(|e| e.1),
    }
}

/// The number of function `name`.
pub fn cuda_func_number(name: &str) -> Option<u32> {
    CUDA_FUNCS.iter().find(|(_, n)| *n == name).map(|e| e.0)
}

/// Phases in [`CudaEvent::phase`].
pub const CUDA_ENTER: u32 = 1;
pub const CUDA_RETURN: u32 = 2;
/// A fault-only call still in flight when its thread ended (killed in a
/// synchronisation that never returned): sent by the thread's exit.
pub const CUDA_UNFINISHED: u32 = 3;

/// A libcuda call: at entry (arguments) and at return (CUresult, and the
/// value a getter wrote through its first argument).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CudaEvent {
    pub hdr: Header,
    /// Index into [`CUDA_FUNCS`] numbering.
    pub func: u32,
    pub phase: u32,
    pub start_ns: u64,
    pub duration_ns: u64,
    /// CUresult at return.
    pub ret: i64,
    pub args: [u64; 3],
    /// For cuDriverGetVersion/cuDeviceGetCount/cuDeviceGet: the int written
    /// through the first argument (valid when `out_valid` is 1).
    pub out_val: i32,
    pub out_valid: u32,
}

/// Per-thread state of a libcuda call between entry and return.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CudaEntry {
    pub start_ns: u64,
    pub args: [u64; 3],
}

/// Per-thread state kept between a syscall's entry and exit.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Inflight {
    /// [`EventKind`] of the record the exit will make.
    pub kind: u32,
    /// [`PathOp`] / [`FdOp`], or 0.
    pub op: u32,
    pub start_ns: u64,
    pub a0: u64,
    pub a1: u64,
    pub a2: u64,
    pub a3: u64,
    pub fd: i32,
    pub cmd: u32,
    pub xfer_cmd: u32,
    pub xfer_size: u32,
    pub xfer_ptr: u64,
    pub flags: u32,
    /// Thread that owns the slot (0: free).
    pub tid: u32,
    pub file: FileId,
    /// The slot's count of ioctls begun in it (wrapping): with
    /// [`ioctl_flags::UNTIMED`] (no `start_ns`), what tells user space
    /// that the call it sees in flight is the one it saw before.
    pub seq: u32,
    pub _pad: u32,
}

/// Key of the map of extra files treated as NVIDIA devices (`--device`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExtraKey {
    pub sdev: u32,
    pub _pad: u32,
    pub ino: u64,
}

/// Kernel-internal dev_t helpers (`MAJOR()`/`MINOR()` in linux/kdev_t.h).
pub const fn kdev_major(dev: u32) -> u32 {
    dev >> 20
}
pub const fn kdev_minor(dev: u32) -> u32 {
    dev & 0xfffff
}
pub const fn kdev_make(major: u32, minor: u32) -> u32 {
    (major << 20) | (minor & 0xfffff)
}

pub const NVIDIA_MAJOR: u32 = 195;
pub const NV_CTL_MINOR: u32 = 255;
pub const NV_MODESET_MINOR: u32 = 254;
pub const NV_GPU_MINOR_MAX: u32 = 247;

/// Classify a char device number the way nvidia.ko / nvidia-uvm.ko register
/// them (docs/NVIDIA-ABI.md §8).
pub fn classify_rdev(rdev: u32, uvm_major: u32, caps_major: u32) -> DevKind {
    let major = kdev_major(rdev);
    let minor = kdev_minor(rdev);
    if major == NVIDIA_MAJOR {
        if minor == NV_CTL_MINOR {
            DevKind::Ctl
        } else if minor == NV_MODESET_MINOR {
            DevKind::Modeset
        } else if minor <= NV_GPU_MINOR_MAX {
            DevKind::Gpu
        } else {
            DevKind::Other
        }
    } else if uvm_major != 0 && major == uvm_major {
        if minor == 0 {
            DevKind::Uvm
        } else {
            DevKind::UvmTools
        }
    } else if caps_major != 0 && major == caps_major {
        DevKind::Caps
    } else {
        DevKind::None
    }
}

#[cfg(feature = "user")]
mod pod {
    use super::*;
    // SAFETY: all of these are repr(C), made of integers and byte arrays,
    // with explicit padding fields, so every bit pattern is valid.
    unsafe impl aya::Pod for Config {}
    unsafe impl aya::Pod for ExtraKey {}
    unsafe impl aya::Pod for Inflight {}
    unsafe impl aya::Pod for FileId {}
    unsafe impl aya::Pod for RtSlot {}
    unsafe impl aya::Pod for NcclKey {}
    unsafe impl aya::Pod for NcclComm {}
}

pub use hooks::{
    HOOK_FIRST_VMLINUX, HOOK_NV_FRONTEND_IOCTL, HOOK_NV_IOCTL, HOOK_RM_IOCTL, HOOK_UVM_IOCTL, HOOKS,
};

/// A driver function's return (kretprobe), with what its entry saw.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DriverEvent {
    pub hdr: Header,
    /// Index into [`HOOKS`].
    pub hook: u32,
    /// Bytes of `head` that hold the callee's data (rm_ioctl's params).
    pub data_len: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The function's return value (rax).
    pub ret: i64,
    /// Hook-specific: the ioctl entry points give (cmd, user arg, rdev of
    /// the file); rm_ioctl gives (Command, dataSize); others their first
    /// four arguments.
    pub args: [u64; 4],
    /// rm_ioctl: the kernel copy of the parameters at return (start and
    /// end), where RM wrote its status.
    pub head: [u8; HEAD_LEN],
    pub tail: [u8; TAIL_LEN],
}

/// A driver function's entry, kept until its return.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DrvEntry {
    pub start_ns: u64,
    pub args: [u64; 6],
}

/// Slots of the doctor's probe self-test counters (SELFTEST_HITS).
pub const SELFTEST_TRACEPOINT: u32 = 0;
pub const SELFTEST_RAW_TRACEPOINT: u32 = 1;
pub const SELFTEST_UPROBE: u32 = 2;
pub const SELFTEST_KPROBE: u32 = 3;
pub const SELFTEST_FENTRY: u32 = 4;

// SAFETY: each is #[repr(C)] of integers and byte arrays only.
unsafe impl Record for Header {}
unsafe impl Record for IoctlEvent {}
unsafe impl Record for PathEvent {}
unsafe impl Record for FdEvent {}
unsafe impl Record for MmapEvent {}
unsafe impl Record for ProcEvent {}
unsafe impl Record for CudaEvent {}
unsafe impl Record for DriverEvent {}
unsafe impl Record for NcclEvent {}

#[cfg(test)]
mod tests;
