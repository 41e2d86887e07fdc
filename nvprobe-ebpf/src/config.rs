//! The load-time settings user space writes into the programs
//! (`EbpfLoader::override_global`: BTF offsets, majors, filters, levels)
//! and the clock: below every other module, which all read them.

use aya_ebpf::helpers::bpf_ktime_get_ns;
use nvprobe_common::Config;

/// Overridden by user space at load time (`EbpfLoader::override_global`).
#[unsafe(no_mangle)]
pub static CONFIG: Config = Config {
    task_files: 0,
    task_thread_pid: 0,
    task_group_leader: 0,
    files_fdt: 0,
    fdt_max_fds: 0,
    fdt_fd: 0,
    file_inode: 0,
    inode_mode: 0,
    inode_rdev: 0,
    inode_ino: 0,
    inode_sb: 0,
    sb_dev: 0,
    pid_level: 0,
    pid_numbers: 0,
    upid_size: 0,
    upid_nr: 0,
    uvm_major: 0,
    caps_major: 0,
    pid_filter: 0,
    extra_files: 0,
    self_tgid: 0,
    wakeup_bytes: 0,
    task_tgid: 0,
    task_pid: 0,
    task_exit_code: 0,
    drv_ioctls: 0,
    quiet: 0,
    rm_params: 0,
    bench_skip: 0,
    coarse_tick_ns: 0,
    task_mm: 0,
    mm_map_count: 0,
    mm_total_vm: 0,
    mm_data_vm: 0,
    page_shift: 0,
    task_signal: 0,
    signal_flags: 0,
    signal_group_exec_task: 0,
};

#[inline(always)]
pub fn rd(p: *const u32) -> u32 {
    // SAFETY: `p` points into the CONFIG global. The read is volatile so the
    // compiler cannot fold the zero initialiser the loader rewrites.
    unsafe { core::ptr::read_volatile(p) }
}

macro_rules! config {
    ($f:ident) => {
        $crate::config::rd(&raw const $crate::config::CONFIG.$f)
    };
}

/// `--events failures|verdicts`: successful start-ups make processes quiet.
#[inline(always)]
pub fn quiet_levels() -> bool {
    config!(quiet) != 0
}

/// Whether `RM_PARAMS` lists controls whose parameters are copied.
#[inline(always)]
pub fn rm_params_on() -> bool {
    config!(rm_params) != 0
}

/// Benchmarks only: [`nvprobe_common::bench_skip`] bits (0 when tracing).
#[inline(always)]
pub fn bench_skip() -> u32 {
    config!(bench_skip)
}

/// CLOCK_MONOTONIC, as every record's times.
#[inline(always)]
pub fn now() -> u64 {
    // SAFETY: helper with no arguments.
    unsafe { bpf_ktime_get_ns() }
}

/// `--events verdicts`: the coarse clock's tick when a call of a process
/// not yet quiet starts on it (0: such calls read the fine clock).
#[inline(always)]
pub fn coarse_tick() -> u64 {
    config!(coarse_tick_ns) as u64
}

/// The start of a call that enters with `flags`: none for an untimed one,
/// the tick count (jiffies: `bpf_ktime_get_coarse_ns` is refused to
/// tracing programs) for a coarse one, else [`now`].
#[inline(always)]
pub fn start_for(flags: u32) -> u64 {
    use nvprobe_common::ioctl_flags::{COARSE, UNTIMED};
    if flags & UNTIMED != 0 {
        0
    } else if flags & COARSE != 0 {
        // SAFETY: helper with no arguments.
        unsafe { aya_ebpf::helpers::generated::bpf_jiffies64() }
    } else {
        now()
    }
}

/// The earliest time a call that entered with `start` and `flags` can
/// have begun (for windows that must not close early): an untimed one's
/// is unknown (0), a coarse one's a tick before its tick count says.
#[inline(always)]
pub fn start_at_least(start: u64, flags: u32) -> u64 {
    use nvprobe_common::ioctl_flags::{COARSE, UNTIMED};
    if flags & UNTIMED != 0 {
        return 0;
    }
    if flags & COARSE != 0 {
        // SAFETY: helper with no arguments.
        let ticks = unsafe { aya_ebpf::helpers::generated::bpf_jiffies64() }.wrapping_sub(start);
        // (At most 2^32 ticks, so that the product stays a plain u64 one:
        // more than a year at HZ 100.)
        let ticks = if ticks > u32::MAX as u64 {
            u32::MAX as u64
        } else {
            ticks
        };
        return now().saturating_sub((ticks + 1) * coarse_tick());
    }
    start
}

/// The start a record of a call that ended at `end` shows, and its flags:
/// an untimed call starts where it ends; a coarse one (its start a tick
/// count) that took less than two ticks is made untimed (a tick count says
/// nothing of so short a call); a longer one starts as many ticks before
/// its end (within a tick).
#[inline(always)]
pub fn record_start(start: u64, end: u64, flags: u32) -> (u64, u32) {
    use nvprobe_common::ioctl_flags::{COARSE, UNTIMED};
    if flags & UNTIMED != 0 {
        return (end, flags & !COARSE);
    }
    if flags & COARSE != 0 {
        // SAFETY: helper with no arguments.
        let ticks = unsafe { aya_ebpf::helpers::generated::bpf_jiffies64() }.wrapping_sub(start);
        if ticks < 2 || ticks > u32::MAX as u64 {
            return (end, (flags & !COARSE) | UNTIMED);
        }
        return (end.saturating_sub(ticks * coarse_tick()), flags);
    }
    (start, flags)
}

/// The current thread's id.
#[inline(always)]
pub fn tid() -> u32 {
    aya_ebpf::helpers::bpf_get_current_pid_tgid() as u32
}
