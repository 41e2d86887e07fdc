//! The probe table: every program nvprobe attaches, by layer, declared
//! once. Syscall tracepoint pairs and process tracepoints are listed here;
//! the driver layer's hooks are the contract's table
//! (`nvprobe_common::hooks::HOOKS`, programs `nvprobe_drv_*_{id}` and, for
//! vmlinux hooks, `nvprobe_drvf_*_{id}`); the libcuda uprobes are
//! [`CUDA_PROGRAMS`] (attached by `crate::uprobes`). A required probe that cannot attach stops
//! the tool with a reason; an optional one is reported once.

/// The tracer's eBPF object, built by build.rs and embedded.
pub(crate) static EBPF_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/nvprobe-bpf"));

/// The libcuda programs (entry, return), attached by `crate::uprobes` to
/// each libcuda copy.
pub const CUDA_PROGRAMS: [&str; 2] = ["nvprobe_cuda_enter", "nvprobe_cuda_return"];

/// One syscall tracepoint pair: the entry program and the exit program.
pub struct Probe {
    pub syscall: &'static str,
    pub enter: &'static str,
    pub exit: &'static str,
    /// Without a required probe nvprobe has nothing to show.
    pub required: bool,
    pub what: &'static str,
}

const fn p(
    syscall: &'static str,
    enter: &'static str,
    exit: &'static str,
    required: bool,
    what: &'static str,
) -> Probe {
    Probe {
        syscall,
        enter,
        exit,
        required,
        what,
    }
}

/// The syscall layer. Assumed prototypes are in nvprobe-ebpf/src/main.rs.
pub const PROBES: &[Probe] = &[
    p(
        "ioctl",
        "nvprobe_ioctl_enter",
        "nvprobe_ioctl_exit",
        true,
        "NVIDIA escapes and UVM commands",
    ),
    p(
        "openat",
        "nvprobe_openat_enter",
        "nvprobe_exit",
        false,
        "opens of NVIDIA nodes",
    ),
    p(
        "open",
        "nvprobe_open_enter",
        "nvprobe_exit",
        false,
        "opens (legacy open(2))",
    ),
    p(
        "openat2",
        "nvprobe_openat2_enter",
        "nvprobe_exit",
        false,
        "opens (openat2)",
    ),
    p(
        "close",
        "nvprobe_close_enter",
        "nvprobe_exit",
        false,
        "closes of NVIDIA fds",
    ),
    p(
        "close_range",
        "nvprobe_close_range_enter",
        "nvprobe_close_range_exit",
        false,
        "close_range(2), after which the kernel side resolves every descriptor again",
    ),
    p(
        "dup",
        "nvprobe_dup_enter",
        "nvprobe_exit",
        false,
        "dup of NVIDIA fds",
    ),
    p(
        "dup2",
        "nvprobe_dup2_enter",
        "nvprobe_exit",
        false,
        "dup2 of NVIDIA fds",
    ),
    p(
        "dup3",
        "nvprobe_dup3_enter",
        "nvprobe_exit",
        false,
        "dup3 of NVIDIA fds",
    ),
    p(
        "fcntl",
        "nvprobe_fcntl_enter",
        "nvprobe_exit",
        false,
        "fcntl(F_DUPFD*) of NVIDIA fds",
    ),
    p(
        "mmap",
        "nvprobe_mmap_enter",
        "nvprobe_exit",
        false,
        "mmaps of NVIDIA fds",
    ),
    p(
        "newstat",
        "nvprobe_stat_enter",
        "nvprobe_exit",
        false,
        "stat of NVIDIA paths",
    ),
    p(
        "newlstat",
        "nvprobe_lstat_enter",
        "nvprobe_exit",
        false,
        "lstat of NVIDIA paths",
    ),
    p(
        "newfstatat",
        "nvprobe_fstatat_enter",
        "nvprobe_exit",
        false,
        "fstatat of NVIDIA paths",
    ),
    p(
        "statx",
        "nvprobe_statx_enter",
        "nvprobe_exit",
        false,
        "statx of NVIDIA paths",
    ),
    p(
        "mknod",
        "nvprobe_mknod_enter",
        "nvprobe_exit",
        false,
        "nodes created by mknod (libcuda creates missing NVIDIA nodes)",
    ),
    p(
        "mknodat",
        "nvprobe_mknodat_enter",
        "nvprobe_exit",
        false,
        "nodes created by mknodat",
    ),
    p(
        "access",
        "nvprobe_access_enter",
        "nvprobe_exit",
        false,
        "access of NVIDIA paths",
    ),
    p(
        "faccessat",
        "nvprobe_faccessat_enter",
        "nvprobe_exit",
        false,
        "faccessat of NVIDIA paths",
    ),
    p(
        "faccessat2",
        "nvprobe_faccessat2_enter",
        "nvprobe_exit",
        false,
        "faccessat2 of NVIDIA paths",
    ),
];

/// Where a single (non-syscall) program attaches.
pub enum Hook {
    TracePoint(&'static str, &'static str),
    RawTracePoint(&'static str),
}

/// The process layer: exit, exec and signals of processes that use NVIDIA
/// devices (for cuInit verdicts). All optional.
pub const PROC_PROBES: &[(&str, Hook, &str)] = &[
    (
        "nvprobe_proc_exit",
        Hook::TracePoint("sched", "sched_process_exit"),
        "how processes end",
    ),
    (
        "nvprobe_proc_exec",
        Hook::TracePoint("sched", "sched_process_exec"),
        "execs",
    ),
    (
        "nvprobe_signal_generate",
        Hook::RawTracePoint("signal_generate"),
        "who sends signals",
    ),
    (
        "nvprobe_signal_deliver",
        Hook::TracePoint("signal", "signal_deliver"),
        "signal delivery",
    ),
    (
        "nvprobe_proc_fork",
        Hook::RawTracePoint("sched_process_fork"),
        "helpers and workers forked by NVIDIA processes",
    ),
    (
        "nvprobe_oom_victim",
        Hook::TracePoint("oom", "mark_victim"),
        "which process the OOM killer chose",
    ),
    // One program on every system call's exit (a raw tracepoint: a call
    // that succeeded costs one compare, ~10 ns per call on the H200, a
    // failure one lookup, ~17 ns more: docs/BENCHMARKS.md); only a failure
    // of a process in start-up is sent.
    (
        "nvprobe_failed_exit",
        Hook::RawTracePoint("sys_exit"),
        "every failed system call of a start-up",
    ),
];

/// The ioctl exit attached instead of the ioctl pair's own when the
/// kernel's verifier refuses that one (`nvprobe-ebpf`'s `ioctl_finish`).
pub const IOCTL_EXIT_COMPAT: &str = "nvprobe_ioctl_exit_compat";

/// Every program name of the tracer's object that some table attaches.
pub fn all_programs() -> Vec<String> {
    let mut v: Vec<String> = PROBES
        .iter()
        .flat_map(|p| [p.enter, p.exit])
        .chain(PROC_PROBES.iter().map(|(name, _, _)| *name))
        .chain([IOCTL_EXIT_COMPAT])
        .chain(CUDA_PROGRAMS.iter().copied())
        .map(str::to_owned)
        .collect();
    let hooks = nvprobe_common::HOOKS.len();
    for i in 0..hooks {
        v.push(format!("nvprobe_drv_enter_{i}"));
        v.push(format!("nvprobe_drv_exit_{i}"));
    }
    for i in nvprobe_common::HOOK_FIRST_VMLINUX as usize..hooks {
        v.push(format!("nvprobe_drvf_enter_{i}"));
        v.push(format!("nvprobe_drvf_exit_{i}"));
    }
    v
}
