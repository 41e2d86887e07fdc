//! The gate of the descriptor programs (`nvprobe_common::fastpath`,
//! `may_hold_nv` in the kernel side): a close, dup or file mmap of a
//! process outside `NV_PROCS` stops at the top of its program. The kernel
//! puts a process there when it opens an NVIDIA file, calls the driver or
//! libcuda, or is forked by one; what it cannot see is a process that had
//! a descriptor before nvprobe started. So before the gate opens, one scan
//! of /proc puts every process with an NVIDIA descriptor open into
//! `NV_PROCS`, on a thread of its own: the start does not wait for it, and
//! until it ends every call is resolved as before.
//!
//! The scan follows no link out of /proc: each descriptor's link text is
//! read first (a socket, pipe or anonymous inode is none of ours), then the
//! open file itself is asked for its type and device with statx and
//! AT_STATX_DONT_SYNC (a network file system answers from its cache; a
//! hung server does not hold the thread). A process whose descriptors it
//! cannot all read is counted a holder (it pays the full resolution, as
//! before); a host with more processes than it looks at keeps the gate
//! shut.

use std::{
    ffi::CString,
    os::{fd::AsRawFd as _, unix::ffi::OsStrExt as _},
    path::Path,
};

use aya::maps::{Array, HashMap as BpfHashMap, Map, MapData};
use nvprobe_common::{DevKind, classify_rdev, kdev_make};
use nvprobe_model::summary::DescriptorGate;

/// Processes looked at; past this the gate stays shut.
const MAX_PROCS: usize = 1 << 16;
/// Descriptors looked at per process; one with more is counted a holder.
const MAX_FDS: usize = 1 << 16;

/// What makes a descriptor an NVIDIA one, as the kernel side decides it
/// (`file_id`): a character device of the driver's majors, or a file
/// `--device` declared, by (s_dev, ino) in the kernel's encoding.
#[derive(Clone, Debug, Default)]
pub struct Devices {
    pub uvm_major: u32,
    pub caps_major: u32,
    pub extra: Vec<(u32, u64)>,
}

impl Devices {
    /// Whether a file of this statx answer is one of ours.
    fn ours(&self, st: &libc::statx) -> bool {
        let mode = u32::from(st.stx_mode) & libc::S_IFMT;
        if mode == libc::S_IFCHR {
            let rdev = kdev_make(st.stx_rdev_major, st.stx_rdev_minor);
            if classify_rdev(rdev, self.uvm_major, self.caps_major) != DevKind::None {
                return true;
            }
        }
        let dev = kdev_make(st.stx_dev_major, st.stx_dev_minor);
        self.extra.contains(&(dev, st.stx_ino))
    }
}

/// What the scan found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// Processes with an NVIDIA descriptor (or one not fully read).
    pub holders: Vec<u32>,
    /// Processes looked at.
    pub procs: usize,
}

/// The processes under `proc` (a /proc) with an NVIDIA descriptor open;
/// None when there are more than [`MAX_PROCS`] or `proc` cannot be read.
pub fn scan(proc: &Path, devs: &Devices) -> Option<Found> {
    let mut found = Found::default();
    for e in std::fs::read_dir(proc).ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        found.procs += 1;
        if found.procs > MAX_PROCS {
            return None;
        }
        if holds(&e.path().join("fd"), devs) {
            found.holders.push(pid);
        }
    }
    Some(found)
}

/// Whether the descriptor folder `fd_dir` holds one of ours; true when it
/// cannot be read in full for another reason than the process's end.
fn holds(fd_dir: &Path, devs: &Devices) -> bool {
    let dir = match std::fs::File::open(fd_dir) {
        Ok(d) => d,
        // Gone (ENOENT, ESRCH): nothing to follow. A kernel thread's
        // folder is empty. Anything else (EACCES under a security module):
        // counted a holder.
        Err(e) => {
            return !matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH));
        }
    };
    let Ok(entries) = std::fs::read_dir(fd_dir) else {
        return false;
    };
    for (n, e) in entries.enumerate() {
        if n >= MAX_FDS {
            return true;
        }
        let Ok(e) = e else { return true };
        let Ok(link) = std::fs::read_link(e.path()) else {
            // Closed meanwhile.
            continue;
        };
        let text = link.as_os_str().as_bytes();
        if !text.starts_with(b"/") {
            // socket:[…], pipe:[…], anon_inode:…: not a device file.
            continue;
        }
        let Ok(name) = CString::new(e.file_name().as_bytes()) else {
            continue;
        };
        // SAFETY: a zeroed statx is a valid out-buffer.
        let mut st: libc::statx = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor, NUL-terminated name, out-buffer owned.
        let r = unsafe {
            libc::statx(
                dir.as_raw_fd(),
                name.as_ptr(),
                libc::AT_STATX_DONT_SYNC | libc::AT_NO_AUTOMOUNT,
                libc::STATX_TYPE | libc::STATX_INO,
                &mut st,
            )
        };
        if r == 0 && devs.ours(&st) {
            return true;
        }
    }
    false
}

/// A second handle on map `name` of `ebpf` (its descriptor duplicated),
/// for a thread that outlives the borrow.
fn dup_map(ebpf: &aya::Ebpf, name: &str) -> Option<MapData> {
    let fd = super::multi::map_fd(ebpf.map(name)?);
    // SAFETY: aya's map descriptor, open while `ebpf` is borrowed.
    let owned = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
        .try_clone_to_owned()
        .ok()?;
    MapData::from_fd(owned).ok()
}

/// The gate's report, filled by the scan's thread when it ends.
pub type Report = std::sync::Arc<std::sync::OnceLock<DescriptorGate>>;

/// The report for the summary: what the thread said, or that it had not
/// ended.
pub fn summary_of(r: &Report) -> DescriptorGate {
    r.get().cloned().unwrap_or_else(|| DescriptorGate {
        shut_because: Some("the scan of /proc had not ended".into()),
        ..DescriptorGate::default()
    })
}

/// Scan on a thread of its own, put the holders into `NV_PROCS` (as
/// followed, where the kernel has no entry yet) and open the gate. The
/// gate stays shut when the scan cannot be trusted. Call it after the
/// capabilities are dropped (the thread inherits them): reading another
/// user's /proc/PID/fd takes CAP_SYS_PTRACE, which is kept.
pub fn open_gate_after_scan(ebpf: &aya::Ebpf, devs: Devices) -> Report {
    use nvprobe_common::maps;
    let report = Report::default();
    let shut = |why: &str| DescriptorGate {
        shut_because: Some(why.to_owned()),
        ..DescriptorGate::default()
    };
    let (Some(procs), Some(gate)) = (dup_map(ebpf, maps::NV_PROCS), dup_map(ebpf, maps::FD_GATE))
    else {
        let _ = report.set(shut("the object has no NV_PROCS or FD_GATE map"));
        return report;
    };
    let done = report.clone();
    let spawned = std::thread::Builder::new()
        .name("nvprobe-holders".into())
        .spawn(move || {
            let t0 = std::time::Instant::now();
            let r = fill_and_open(procs, gate, &devs);
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            let _ = done.set(match r {
                Ok(found) => DescriptorGate {
                    open: true,
                    processes: found.procs as u64,
                    holders: found.holders.len() as u64,
                    scan_ms: ms,
                    opened_mono_ns: nvprobe_model::render::Clock::mono_now(),
                    shut_because: None,
                },
                Err(why) => DescriptorGate {
                    scan_ms: ms,
                    ..shut(&why)
                },
            });
        });
    if let Err(e) = spawned {
        let _ = report.set(shut(&format!("no thread for the scan: {e}")));
    }
    report
}

fn fill_and_open(procs: MapData, gate: MapData, devs: &Devices) -> Result<Found, String> {
    let found = scan(Path::new("/proc"), devs)
        .ok_or_else(|| format!("/proc unreadable, or more than {MAX_PROCS} processes"))?;
    let mut procs = BpfHashMap::<_, u32, u8>::try_from(Map::LruHashMap(procs))
        .map_err(|e| format!("NV_PROCS: {e}"))?;
    const BPF_NOEXIST: u64 = 1;
    let me = std::process::id();
    for pid in found.holders.iter().filter(|p| **p != me) {
        match procs.insert(pid, nvprobe_common::nv_procs::FOLLOWED, BPF_NOEXIST) {
            Ok(()) => {}
            // Already there (the kernel saw it meanwhile).
            Err(aya::maps::MapError::SyscallError(e))
                if e.io_error.raw_os_error() == Some(libc::EEXIST) => {}
            Err(e) => return Err(format!("NV_PROCS: {e}")),
        }
    }
    let mut g = Array::<_, u32>::try_from(Map::Array(gate)).map_err(|e| format!("FD_GATE: {e}"))?;
    g.set(0, 1, 0).map_err(|e| format!("FD_GATE: {e}"))?;
    Ok(found)
}
