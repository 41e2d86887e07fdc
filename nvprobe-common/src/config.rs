//! The tracer's run-time configuration: one global the BPF programs read,
//! filled by user space at load time.

/// Run-time configuration of the BPF programs, set as one global at load
/// time. Struct offsets come from the running kernel's BTF, so the BPF side
/// needs no CO-RE.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Config {
    pub task_files: u32,
    pub task_thread_pid: u32,
    pub task_group_leader: u32,
    pub files_fdt: u32,
    pub fdt_max_fds: u32,
    pub fdt_fd: u32,
    pub file_inode: u32,
    pub inode_mode: u32,
    pub inode_rdev: u32,
    pub inode_ino: u32,
    pub inode_sb: u32,
    pub sb_dev: u32,
    pub pid_level: u32,
    pub pid_numbers: u32,
    pub upid_size: u32,
    pub upid_nr: u32,
    /// Dynamic majors from /proc/devices (0 = not present).
    pub uvm_major: u32,
    pub caps_major: u32,
    /// 1 when only tgids in the PID_FILTER map are traced.
    pub pid_filter: u32,
    /// Number of entries in EXTRA_FILES (0 skips the superblock reads).
    pub extra_files: u32,
    /// nvprobe's own tgid: its reads of /proc/driver/nvidia are not traced.
    pub self_tgid: u32,
    /// Wake the collector only once this many bytes wait in the ring
    /// buffer; below that it drains on its own timer. Saves an irq_work
    /// and a wake-up per event.
    pub wakeup_bytes: u32,
    pub task_tgid: u32,
    pub task_pid: u32,
    pub task_exit_code: u32,
    /// 1: the driver layer's ioctl entry points (kprobes) make the ioctl
    /// records, and the ioctl syscall tracepoints are not attached.
    pub drv_ioctls: u32,
    /// 1 (`--events failures|verdicts`): when cuInit returns CUDA_SUCCESS
    /// the process becomes quiet ([`crate::nv_procs::QUIET`]): its successful
    /// NVIDIA calls are no longer sent.
    pub quiet: u32,
    /// 1 when `RM_PARAMS` lists controls whose parameters are copied.
    pub rm_params: u32,
    /// Benchmarks only (`NVPROBE_BENCH_SKIP`, [`bench_skip`]): parts of the
    /// ioctl programs switched off, to measure what each costs. 0 always
    /// when tracing.
    pub bench_skip: u32,
    /// `--events verdicts`: the length of the kernel's tick in ns (the
    /// coarse clock's resolution, `clock_getres(CLOCK_MONOTONIC_COARSE)`);
    /// nonzero, the ioctls of a process not yet quiet start on a tick
    /// count ([`crate::ioctl_flags::COARSE`]): the fine clock is the dearest read
    /// of a call that is counted, not sent. 0: the fine clock.
    pub coarse_tick_ns: u32,
    /// `task_struct.mm` and `mm_struct`'s `map_count`, `total_vm` and
    /// `data_vm`, for a failed call's record (0: not in this kernel's
    /// BTF, the record's sizes stay 0), and the page size's shift.
    pub task_mm: u32,
    pub mm_map_count: u32,
    pub mm_total_vm: u32,
    pub mm_data_vm: u32,
    pub page_shift: u32,
    /// `task_struct.signal`, `signal_struct.flags` and
    /// `signal_struct.group_exec_task` (0: not in this kernel's BTF): a
    /// thread that ends in cuInit while its whole process ends (a group
    /// exit, an exec) is part of that end, not a [`crate::ProcOp::ThreadExit`].
    pub task_signal: u32,
    pub signal_flags: u32,
    pub signal_group_exec_task: u32,
}

/// [`Config::bench_skip`] bits: where the ioctl programs stop.
pub mod bench_skip {
    /// Entry: after the command-shape and pid filters (no fd resolution).
    pub const ENTRY_FILTER: u32 = 1;
    /// Entry: after resolving the fd to its device (no state kept, so the
    /// exit finds none).
    pub const ENTRY_RESOLVE: u32 = 2;
    /// Exit: after taking the entry's state (no record).
    pub const EXIT_STATE: u32 = 4;
    // 8 and 16 (the record without the RM parameter copy, without the
    // head and tail) were measured once (docs/BENCHMARKS.md) and removed:
    // the extra paths took the exit program past the 6.1 verifier's limit.
}
