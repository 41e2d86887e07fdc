//! Reading kernel structures through offsets that user space found in the
//! running kernel's BTF (aya has no CO-RE for Rust programs).
//!
//! Assumed shapes (include/linux/sched.h, fdtable.h, fs.h, pid.h):
//!   task_struct { struct files_struct *files; struct pid *thread_pid;
//!                 struct task_struct *group_leader; }
//!   files_struct { struct fdtable *fdt; }
//!   fdtable { unsigned int max_fds; struct file **fd; }
//!   file { struct inode *f_inode; }
//!   inode { umode_t i_mode; dev_t i_rdev; unsigned long i_ino; struct super_block *i_sb; }
//!   super_block { dev_t s_dev; }
//!   pid { unsigned int level; struct upid numbers[]; }  upid { int nr; ... }

use aya_ebpf::helpers::{
    bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_current_uid_gid, bpf_probe_read_kernel,
    generated,
};
use nvprobe_common::{DevKind, EventKind, ExtraKey, FileId, Header, classify_rdev};

use nvprobe_common::fastpath::{FDCACHE_FDS, FDCACHE_SLOTS, FdCache};

use crate::maps::{EXTRA_FILES, FDCACHE, PID_FILTER, fd_gen};

const S_IFMT: u16 = 0o170000;
const S_IFCHR: u16 = 0o020000;
const MAX_PIDNS_LEVEL: u32 = 32;

#[inline(always)]
unsafe fn kread<T: Copy>(base: u64, off: u32) -> Option<T> {
    // SAFETY: probe read of kernel memory; faults are reported, not taken.
    unsafe { bpf_probe_read_kernel((base + off as u64) as *const T) }.ok()
}

#[inline(always)]
fn current_task() -> u64 {
    // SAFETY: helper without arguments.
    unsafe { generated::bpf_get_current_task() }
}

/// Read a u32 field of the task at `task` by its Config offset.
#[inline(always)]
pub fn task_field(task: u64, off: u32) -> Option<u32> {
    // SAFETY: probe read.
    unsafe { kread(task, off) }
}

pub fn off_task_tgid() -> u32 {
    config!(task_tgid)
}
pub fn off_task_pid() -> u32 {
    config!(task_pid)
}
pub fn off_task_exit_code() -> u32 {
    config!(task_exit_code)
}
/// Whether the current task's whole process is ending (`SIGNAL_GROUP_EXIT`
/// in `signal_struct.flags`: an exit_group or a fatal signal; or an
/// exec's `group_exec_task`): false where the offsets are not known.
pub fn group_ending() -> bool {
    /// include/linux/sched/signal.h.
    const SIGNAL_GROUP_EXIT: u32 = 0x4;
    let (off_sig, off_flags) = (config!(task_signal), config!(signal_flags));
    if off_sig == 0 || off_flags == 0 {
        return false;
    }
    // SAFETY: probe reads of kernel memory.
    let Some(sig) = (unsafe { kread::<u64>(current_task(), off_sig) }).filter(|p| *p != 0) else {
        return false;
    };
    // SAFETY: as above.
    if unsafe { kread::<u32>(sig, off_flags) }.is_some_and(|f| f & SIGNAL_GROUP_EXIT != 0) {
        return true;
    }
    let off_exec = config!(signal_group_exec_task);
    // SAFETY: as above.
    off_exec != 0 && unsafe { kread::<u64>(sig, off_exec) }.is_some_and(|p| p != 0)
}
pub fn current_task_ptr() -> u64 {
    current_task()
}

/// The current process's address space as the kernel holds it
/// (`mm_struct`): its mappings, and its size and private writable part in
/// bytes. Zeros where the offsets are unknown or the task has no mm.
#[inline(always)]
pub fn mm_sizes() -> (u32, u64, u64) {
    let (t_mm, count) = (config!(task_mm), config!(mm_map_count));
    let (total, data) = (config!(mm_total_vm), config!(mm_data_vm));
    // All four or none: a size read at offset 0 would be a wrong fact.
    if t_mm == 0 || count == 0 || total == 0 || data == 0 {
        return (0, 0, 0);
    }
    // SAFETY: probe reads of kernel memory; faults read as 0.
    unsafe {
        let mm: u64 = kread(current_task(), t_mm).unwrap_or(0);
        if mm == 0 {
            return (0, 0, 0);
        }
        let shift = config!(page_shift) & 31;
        let pages = |off: u32| kread::<u64>(mm, off).unwrap_or(0) << shift;
        (
            kread::<u32>(mm, count).unwrap_or(0),
            pages(total),
            pages(data),
        )
    }
}

#[inline(always)]
pub fn wakeup_bytes() -> u32 {
    config!(wakeup_bytes)
}

#[inline(always)]
pub fn pid_allowed() -> bool {
    pid_allowed_for(bpf_get_current_pid_tgid())
}

/// [`pid_allowed`] for the current task's `pid_tgid`, already read.
#[inline(always)]
pub fn pid_allowed_for(pid_tgid: u64) -> bool {
    let tgid = (pid_tgid >> 32) as u32;
    if tgid == config!(self_tgid) {
        return false;
    }
    if config!(pid_filter) == 0 {
        return true;
    }
    // SAFETY: plain lookup.
    unsafe { PID_FILTER.get(&tgid) }.is_some()
}

/// The device number of a `struct file *` (file->f_inode->i_rdev).
#[inline(always)]
pub fn file_rdev(file: u64) -> Option<u32> {
    if file == 0 {
        return None;
    }
    // SAFETY: probe reads of kernel memory.
    unsafe {
        let inode: u64 = kread(file, config!(file_inode))?;
        kread(inode, config!(inode_rdev))
    }
}

/// Resolve `fd` of the current task to the file it refers to now, the way the
/// kernel would: current->files->fdt->fd[fd]->f_inode. No bookkeeping of
/// opens, dups or closes, so inherited, dup'ed, received (SCM_RIGHTS) and
/// pidfd_getfd'ed descriptors all resolve, and closed ones never do.
#[inline(always)]
pub fn resolve_fd(fd: i32) -> Option<FileId> {
    if fd < 0 {
        return None;
    }
    // SAFETY: every dereference goes through bpf_probe_read_kernel.
    unsafe {
        let task = current_task();
        let files: u64 = kread(task, config!(task_files))?;
        if files == 0 {
            return None;
        }
        let fdt: u64 = kread(files, config!(files_fdt))?;
        let max_fds: u32 = kread(fdt, config!(fdt_max_fds))?;
        if fd as u32 >= max_fds {
            return None;
        }
        let fdarr: u64 = kread(fdt, config!(fdt_fd))?;
        let file: u64 = kread(fdarr, (fd as u32) * 8)?;
        file_id(file)
    }
}

/// The current thread's `FDCACHE` slot when it holds this thread's
/// answers of the current generation; with `claim`, a slot that does not
/// is started afresh for it.
#[inline(always)]
pub fn cache_slot(pid_tgid: u64, claim: bool) -> Option<*mut FdCache> {
    let tid = pid_tgid as u32;
    let tgid = (pid_tgid >> 32) as u32;
    let gen_ = fd_gen();
    if gen_ & nvprobe_common::fastpath::FD_GEN_OFF != 0 {
        return None;
    }
    let c = FDCACHE.get_ptr_mut(tid & (FDCACHE_SLOTS - 1))?;
    // SAFETY: pointer into the array map's value; only this thread (or one
    // whose tid collides with it, which then takes the slot over) writes it.
    unsafe {
        if (*c).tid == tid && (*c).tgid == tgid && (*c).gen_ == gen_ {
            return Some(c);
        }
        if !claim {
            return None;
        }
        // What the slot's last thread left uncounted goes to its process.
        if (*c).unsent != 0 {
            crate::maps::add_unsent((*c).tgid, (*c).unsent as u64);
            (*c).unsent = 0;
        }
        (*c).procs = 0;
        (*c).procs_tgid = 0;
        (*c).tid = 0;
        (*c).fd = [-1; FDCACHE_FDS];
        (*c).next = 0;
        (*c).ns_valid = 0;
        (*c).tgid = tgid;
        (*c).gen_ = gen_;
        (*c).tid = tid;
    }
    Some(c)
}

/// [`resolve_fd`] through the thread's cache: a descriptor resolved to an
/// NVIDIA file in this generation is not resolved again.
///
/// With it, whether the cache says the process is quiet
/// (`nv_procs::QUIET`: past its first context at `--events
/// failures|verdicts`, its successful calls counted, not sent); false when
/// the cache does not hold the process's value.
#[inline(always)]
pub fn resolve_fd_cached(fd: i32, pid_tgid: u64) -> Option<(FileId, bool)> {
    use nvprobe_common::{
        fastpath::PROCS_VALID,
        nv_procs::{QUIET, SHIP_NEXT},
    };
    let Some(c) = cache_slot(pid_tgid, true) else {
        return resolve_fd(fd).map(|f| (f, false));
    };
    let tgid = (pid_tgid >> 32) as u32;
    // SAFETY: pointer into the array map's value (see cache_slot).
    unsafe {
        let p = (*c).procs;
        // The call after a failure or a signal of a process quiet since
        // nvprobe started is sent, and timed.
        let quiet = p & PROCS_VALID != 0
            && (*c).procs_tgid == tgid
            && p & (QUIET | SHIP_NEXT) as u32 == QUIET as u32;
        for i in 0..FDCACHE_FDS {
            if (*c).fd[i] == fd && (*c).owner[i] == tgid {
                return Some(((*c).file[i], quiet));
            }
        }
        let f = resolve_fd(fd)?;
        if f.kind != DevKind::None as u8 && (*c).tid == pid_tgid as u32 {
            let i = ((*c).next as usize) & (FDCACHE_FDS - 1);
            (*c).fd[i] = -1;
            (*c).owner[i] = tgid;
            (*c).file[i] = f;
            (*c).fd[i] = fd;
            (*c).next = (*c).next.wrapping_add(1);
        }
        Some((f, quiet))
    }
}

/// Whether the driver layer's ioctl entry points make the ioctl records.
#[inline(always)]
pub fn drv_ioctls() -> bool {
    config!(drv_ioctls) != 0
}

/// What a `struct file *` is, as [`resolve_fd`] says it for an fd.
#[inline(always)]
pub fn file_id(file: u64) -> Option<FileId> {
    if file == 0 {
        return None;
    }
    // SAFETY: every dereference goes through bpf_probe_read_kernel.
    unsafe {
        let inode: u64 = kread(file, config!(file_inode))?;
        let mode: u16 = kread(inode, config!(inode_mode))?;
        let rdev: u32 = kread(inode, config!(inode_rdev))?;
        let mut id = FileId {
            rdev,
            sdev: 0,
            ino: 0,
            mode,
            kind: DevKind::None as u8,
            valid: 1,
            _pad: 0,
        };
        if mode & S_IFMT == S_IFCHR {
            id.kind = classify_rdev(rdev, config!(uvm_major), config!(caps_major)) as u8;
        }
        if id.kind == DevKind::None as u8 && config!(extra_files) != 0 {
            let sb: u64 = kread(inode, config!(inode_sb))?;
            id.sdev = kread(sb, config!(sb_dev))?;
            id.ino = kread(inode, config!(inode_ino))?;
            let key = ExtraKey {
                sdev: id.sdev,
                _pad: 0,
                ino: id.ino,
            };
            if let Some(k) = EXTRA_FILES.get(&key) {
                id.kind = *k;
            }
        }
        Some(id)
    }
}

/// Fill the common header, including the ids in the task's own pid
/// namespace (containers), read from task->thread_pid->numbers[level].
#[inline(always)]
pub unsafe fn fill_header(h: *mut Header, kind: EventKind) {
    // SAFETY: per the function's contract.
    unsafe {
        (*h).ktime_ns = generated::bpf_ktime_get_ns();
        fill_ids(h, kind, bpf_get_current_pid_tgid());
    }
}

/// [`fill_header`] for a call's record: stamped `ktime` (the call's end,
/// read once), the pid-namespace ids from the thread's cache when it has
/// them.
#[inline(always)]
pub unsafe fn fill_header_at(h: *mut Header, kind: EventKind, ktime: u64, pid_tgid: u64) {
    // SAFETY: `h` points into a reserved ring-buffer record.
    unsafe {
        (*h).ktime_ns = ktime;
        let Some(c) = cache_slot(pid_tgid, false) else {
            fill_ids(h, kind, pid_tgid);
            return;
        };
        if (*c).ns_valid == pid_tgid as u32 {
            fill_ids_cheap(h, kind, pid_tgid);
            (*h).ns_tgid = (*c).ns_tgid;
            (*h).ns_tid = (*c).ns_tid;
            (*h).pidns_level = (*c).pidns_level;
            return;
        }
        fill_ids(h, kind, pid_tgid);
        if (*c).tid == pid_tgid as u32 {
            (*c).ns_valid = 0;
            (*c).ns_tgid = (*h).ns_tgid;
            (*c).ns_tid = (*h).ns_tid;
            (*c).pidns_level = (*h).pidns_level;
            (*c).ns_valid = pid_tgid as u32;
        }
    }
}

/// The header's fields that cost no kernel read.
#[inline(always)]
unsafe fn fill_ids_cheap(h: *mut Header, kind: EventKind, pid_tgid: u64) {
    let tgid = (pid_tgid >> 32) as u32;
    let tid = pid_tgid as u32;
    // SAFETY: `h` points into a reserved ring-buffer record.
    unsafe {
        (*h).kind = kind as u32;
        (*h).cpu = generated::bpf_get_smp_processor_id();
        (*h).tgid = tgid;
        (*h).tid = tid;
        (*h).uid = bpf_get_current_uid_gid() as u32;
        (*h).comm = bpf_get_current_comm().unwrap_or([0u8; 16]);
    }
}

/// Every header field but the time, the pid-namespace ids read from the
/// task.
#[inline(always)]
unsafe fn fill_ids(h: *mut Header, kind: EventKind, pid_tgid: u64) {
    // SAFETY: `h` points into a reserved ring-buffer record.
    unsafe {
        fill_ids_cheap(h, kind, pid_tgid);
        (*h).ns_tgid = (pid_tgid >> 32) as u32;
        (*h).ns_tid = pid_tgid as u32;
        (*h).pidns_level = 0;

        let task = current_task();
        let Some(pid) = kread::<u64>(task, config!(task_thread_pid)) else {
            return;
        };
        let Some(level) = kread::<u32>(pid, config!(pid_level)) else {
            return;
        };
        if level == 0 || level > MAX_PIDNS_LEVEL {
            return;
        }
        let upid_off = config!(pid_numbers) + level * config!(upid_size) + config!(upid_nr);
        (*h).pidns_level = level;
        if let Some(nr) = kread::<u32>(pid, upid_off) {
            (*h).ns_tid = nr;
        }
        if let Some(leader) = kread::<u64>(task, config!(task_group_leader))
            && let Some(lpid) = kread::<u64>(leader, config!(task_thread_pid))
            && let Some(nr) = kread::<u32>(lpid, upid_off)
        {
            (*h).ns_tgid = nr;
        }
    }
}
