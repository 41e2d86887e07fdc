//! What a failed system call is to a start-up (its kind) and the address
//! space the kernel side read at the failure: the facts a `call_failed`
//! record carries besides its numbers (payload types, below the decoders
//! and the records that hold them).

use serde::{Deserialize, Serialize};

/// A process's address space when one of its calls failed, as the kernel
/// held it (`mm_struct`, read by the kernel side at the failure).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MmAt {
    /// Its mappings (`map_count`: what vm.max_map_count bounds).
    pub map_count: u32,
    /// Its size in bytes (`total_vm`: VmSize, what RLIMIT_AS bounds).
    pub vm_bytes: u64,
    /// Its private writable memory in bytes (`data_vm`: VmData, what
    /// RLIMIT_DATA bounds).
    pub data_bytes: u64,
}

/// What a start-up makes with a system call whose failure the kernel side
/// reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SysKind {
    /// clone, fork, vfork: a thread or a process.
    Thread,
    /// clone3, which glibc falls back from to clone on ENOSYS.
    Clone3,
    /// mmap, mremap: mapping memory.
    Map,
    /// mprotect.
    Protect,
    MemFile,
    EventFd,
    Pipe,
    /// dup, dup2, dup3, fcntl(F_DUPFD): a descriptor of an NVIDIA file
    /// duplicated.
    Dup,
    /// An open of an NVIDIA node past cuInit (the first context's).
    NodeOpen,
    /// open, openat, openat2.
    Open,
    /// stat, lstat, newfstatat, statx, access, faccessat, faccessat2: a
    /// lookup of a path.
    Lookup,
    /// mknod, mknodat: a device node made (nvidia-modprobe's).
    Mknod,
    /// mlock, mlock2, mlockall: memory locked.
    Lock,
    /// ioctl: one on an NVIDIA file is its own record too, unless a
    /// filter answered it before the kernel traced its entry.
    Ioctl,
    /// socket, socketpair: no file's mode is checked, so EACCES is a
    /// filter's or a security module's answer.
    Socket,
    /// A call the kernel checks no permission for (uname, sysinfo,
    /// readlink, getcwd, the NUMA policy queries, the ids and clocks): its
    /// EPERM can only be a filter's.
    Unchecked,
    /// No call: number -1, what a ptrace tracer sets to skip a call it
    /// answers itself (strace's -e inject), the kernel's ENOSYS then
    /// replaced by the tracer's result. Its arguments are the skipped
    /// call's.
    Skipped,
    Other,
}

impl SysKind {
    /// The kind of the call `syscall_name` names.
    pub fn of(name: &str) -> Self {
        match name {
            "clone" | "fork" | "vfork" => Self::Thread,
            "clone3" => Self::Clone3,
            "mmap" | "mremap" => Self::Map,
            "mprotect" => Self::Protect,
            "memfd_create" => Self::MemFile,
            "eventfd2" => Self::EventFd,
            "pipe2" => Self::Pipe,
            "open" | "openat" | "openat2" => Self::Open,
            "stat" | "lstat" | "newfstatat" | "statx" | "access" | "faccessat" | "faccessat2" => {
                Self::Lookup
            }
            "mknod" | "mknodat" => Self::Mknod,
            "mlock" | "mlock2" | "mlockall" => Self::Lock,
            "ioctl" => Self::Ioctl,
            "socket" | "socketpair" => Self::Socket,
            "uname" | "sysinfo" | "readlink" | "readlinkat" | "getcwd" | "get_mempolicy"
            | "set_mempolicy" | "sched_getaffinity" | "getcpu" | "getrandom" | "gettid"
            | "getpid" | "getppid" | "getuid" | "geteuid" | "getgid" | "getegid" | "getresuid"
            | "getresgid" | "getrlimit" | "clock_gettime" | "clock_getres" | "gettimeofday"
            | "time" | "sched_yield" | "statfs" | "fstatfs" | "getdents64" | "fstat" | "lseek"
            | "read" | "pread64" | "close" => Self::Unchecked,
            // syscall_name(-1), in a record or read back from one.
            "syscall -1" => Self::Skipped,
            _ => Self::Other,
        }
    }
}
