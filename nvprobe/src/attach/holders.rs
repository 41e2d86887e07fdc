//! The gate of the descriptor programs (`nvprobe_common::fastpath`,
//! `may_hold_nv` in the kernel side): a close, dup or file mmap of a
//! process outside `NV_PROCS` stops at the top of its program. The kernel
//! puts a process there when it opens an NVIDIA file, calls the driver or
//! libcuda, or is forked by one; what it cannot see is a process that had
//! a descriptor before nvprobe started. So before the gate opens, a scan
//! of /proc puts every process with an NVIDIA descriptor open into
//! `NV_PROCS` as it finds it, on a thread of its own, and reads /proc again
//! until a pass finds none the kernel did not know (a holder that forked
//! before it went in): the start does not wait for it, and until it ends
//! every call is resolved as before.
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
/// Passes over /proc: each holder goes into `NV_PROCS` as it is found, so
/// a holder's later forks are followed by the kernel; one forked before
/// its parent went in is found by the next pass. The gate opens after a
/// pass that found no holder the kernel did not know; holders still
/// appearing in the last pass keep it shut.
const MAX_PASSES: usize = 4;
/// The whole scan's time; past it the gate stays shut.
const MAX_SCAN: std::time::Duration = std::time::Duration::from_secs(5);

/// What makes a descriptor an NVIDIA one, as the kernel side decides it
/// (`file_id`): a character device of the driver's majors, or a file
/// `--device` declared, by (s_dev, ino) in the kernel's encoding.
#[derive(Clone, Debug, Default)]
pub struct Devices {
    pub uvm_major: u32,
    pub caps_major: u32,
    pub extra: Vec<(u32, u64)>,
    /// Holders go in quiet (`--events failures|verdicts`): their
    /// start-ups were not seen, so only their failures are sent, until
    /// they open an NVIDIA node, load a libcuda or enter cuInit
    /// (`nv_procs::HELD`).
    pub quiet: bool,
    /// `--pid`: the only processes traced (empty: all). Every holder goes
    /// into `NV_PROCS` (the gate needs them all); only these are reported.
    pub pids: Vec<u32>,
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
    /// Processes with an NVIDIA descriptor (or one not fully read), over
    /// every pass.
    pub holders: std::collections::BTreeSet<u32>,
    /// Processes looked at (the first pass).
    pub procs: usize,
    /// Passes made.
    pub passes: usize,
}

/// One pass over `proc` (a /proc): `holder` is told of each process with
/// an NVIDIA descriptor open as it is found, and answers whether it was
/// new to the kernel. Returns the processes looked at and how many
/// holders were new; an error when `proc` cannot be read, holds more than
/// [`MAX_PROCS`] processes or the pass runs past `deadline`.
pub fn scan_pass(
    proc: &Path,
    devs: &Devices,
    deadline: std::time::Instant,
    mut holder: impl FnMut(u32) -> Result<bool, String>,
) -> Result<(usize, usize), String> {
    let (mut procs, mut new) = (0, 0);
    let dir = std::fs::read_dir(proc).map_err(|e| format!("{}: {e}", proc.display()))?;
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        procs += 1;
        if procs > MAX_PROCS {
            return Err(format!("more than {MAX_PROCS} processes"));
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("the scan of /proc took more than {MAX_SCAN:?}"));
        }
        if process_holds(&e.path(), devs) && holder(pid)? {
            new += 1;
        }
    }
    Ok((procs, new))
}

/// Whether the process at `dir` (/proc/PID) holds one of ours. Its
/// folder `fd` is the thread-group leader's table; a leader that has
/// ended (a zombie whose threads live on) shows none, so then each
/// thread's own table is read.
fn process_holds(dir: &Path, devs: &Devices) -> bool {
    let fd = dir.join("fd");
    if holds(&fd, devs) {
        return true;
    }
    let empty = std::fs::read_dir(&fd).is_ok_and(|mut d| d.next().is_none());
    if !empty {
        return false;
    }
    let Ok(tasks) = std::fs::read_dir(dir.join("task")) else {
        return false;
    };
    let tasks: Vec<_> = tasks.flatten().take(MAX_FDS).collect();
    tasks.len() > 1 && tasks.iter().any(|t| holds(&t.path().join("fd"), devs))
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
    let gone = |e: &std::io::Error| matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH));
    let entries = match std::fs::read_dir(fd_dir) {
        Ok(d) => d,
        Err(e) => return !gone(&e),
    };
    for (n, e) in entries.enumerate() {
        if n >= MAX_FDS {
            return true;
        }
        let Ok(e) = e else { return true };
        let link = match std::fs::read_link(e.path()) {
            Ok(l) => l,
            // Closed meanwhile.
            Err(e) if gone(&e) => continue,
            // Unreadable (a security module): not known to be clean.
            Err(_) => return true,
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
        if r != 0 {
            let e = std::io::Error::last_os_error();
            if gone(&e) || e.raw_os_error() == Some(libc::EBADF) {
                continue;
            }
            return true;
        }
        if devs.ours(&st) {
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

/// The gate's report, filled by the scan's thread when it ends, and the
/// processes it put into `NV_PROCS` as it went (`nv_procs::HELD`: already
/// holding an NVIDIA descriptor when nvprobe started).
#[derive(Clone, Default)]
pub struct Report {
    done: std::sync::Arc<std::sync::OnceLock<DescriptorGate>>,
    /// Put in, not yet taken. Each goes in under the lock with its
    /// insert, so that a record of the process read after the insert finds
    /// it here.
    held: std::sync::Arc<std::sync::Mutex<Vec<u32>>>,
}

impl Report {
    fn set(&self, g: DescriptorGate) {
        let _ = self.done.set(g);
    }

    /// What the scan said, once it has ended.
    pub fn get(&self) -> Option<&DescriptorGate> {
        self.done.get()
    }

    /// The processes put into `NV_PROCS` since the last call.
    pub fn take_held(&self) -> Vec<u32> {
        self.held
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

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
        report.set(shut("the object has no NV_PROCS or FD_GATE map"));
        return report;
    };
    let done = report.clone();
    let spawned = std::thread::Builder::new()
        .name("nvprobe-holders".into())
        .spawn(move || {
            let t0 = std::time::Instant::now();
            let r = fill_and_open(procs, gate, &devs, &done.held);
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            done.set(match r {
                Ok(found) => DescriptorGate {
                    open: true,
                    processes: found.procs as u64,
                    passes: found.passes as u64,
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
        report.set(shut(&format!("no thread for the scan: {e}")));
    }
    report
}

fn fill_and_open(
    procs: MapData,
    gate: MapData,
    devs: &Devices,
    held: &std::sync::Mutex<Vec<u32>>,
) -> Result<Found, String> {
    let proc = Path::new("/proc");
    // NV_PROCS is keyed by the host's pids: a /proc of another pid
    // namespace (a container without the host's pids) names others.
    if crate::host::procfs_is_hosts(proc) != Some(true) {
        return Err(
            "this /proc is not of the host's pid namespace: its pids are not the kernel's".into(),
        );
    }
    let mut procs = BpfHashMap::<_, u32, u8>::try_from(Map::LruHashMap(procs))
        .map_err(|e| format!("NV_PROCS: {e}"))?;
    const BPF_NOEXIST: u64 = 1;
    // Past a start-up nvprobe did not see (or in it): their run-time
    // hangs are watched and their other calls' failures are not sent, as
    // for a process past its first context; quiet too where asked.
    use nvprobe_common::nv_procs::{FOLLOWED, HELD, QUIET, STARTED};
    let value = FOLLOWED | STARTED | HELD | if devs.quiet { QUIET } else { 0 };
    let me = std::process::id();
    let deadline = std::time::Instant::now() + MAX_SCAN;
    let mut found = Found::default();
    let mut settled = false;
    while !settled && found.passes < MAX_PASSES {
        let (n, new) = scan_pass(proc, devs, deadline, |pid| {
            found.holders.insert(pid);
            if pid == me {
                return Ok(false);
            }
            let mut taken = held.lock().map_err(|_| "a poisoned lock".to_owned())?;
            match procs.insert(pid, value, BPF_NOEXIST) {
                Ok(()) => {
                    // Ended since it was read (its exit has come, or comes
                    // and removes the entry): no stale entry for its pid.
                    if !proc.join(pid.to_string()).exists() {
                        let _ = procs.remove(&pid);
                    } else if devs.pids.is_empty() || devs.pids.contains(&pid) {
                        taken.push(pid);
                    }
                    Ok(true)
                }
                // Already there (the kernel saw it, or an earlier pass).
                Err(aya::maps::MapError::SyscallError(e))
                    if e.io_error.raw_os_error() == Some(libc::EEXIST) =>
                {
                    Ok(false)
                }
                Err(e) => Err(format!("NV_PROCS: {e}")),
            }
        })?;
        if found.passes == 0 {
            found.procs = n;
        }
        found.passes += 1;
        settled = new == 0;
    }
    if !settled {
        return Err(format!(
            "processes holding an NVIDIA descriptor kept appearing after {MAX_PASSES} passes"
        ));
    }
    let mut g = Array::<_, u32>::try_from(Map::Array(gate)).map_err(|e| format!("FD_GATE: {e}"))?;
    g.set(0, 1, 0).map_err(|e| format!("FD_GATE: {e}"))?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt as _, symlink};

    /// A /proc of links: a holder (a link to the `--device` file), a
    /// process with other files only, a zombie leader whose second thread
    /// holds one, and a kernel thread (empty table, one task).
    #[test]
    fn a_pass_finds_holders_and_threads_of_a_zombie_leader() {
        let (base, _) = crate::safefs::private_temp_dir(&std::env::temp_dir(), "nvprobe-holders-")
            .expect("mkdtemp");
        let ours = base.join("dev-file");
        std::fs::write(&ours, b"x").expect("w");
        let m = std::fs::metadata(&ours).expect("stat");
        let dev = kdev_make(
            nix::sys::stat::major(m.dev()) as u32,
            nix::sys::stat::minor(m.dev()) as u32,
        );
        let devs = Devices {
            extra: vec![(dev, m.ino())],
            ..Devices::default()
        };
        let proc = base.join("proc");
        let fds = |rel: &str, links: &[&Path]| {
            let d = proc.join(rel);
            std::fs::create_dir_all(&d).expect("mkdir");
            for (i, l) in links.iter().enumerate() {
                symlink(l, d.join((i + 3).to_string())).expect("link");
            }
        };
        let other = base.join("other");
        std::fs::write(&other, b"y").expect("w");
        fds("100/fd", &[&other, &ours]);
        fds("200/fd", &[&other, Path::new("/dev/null")]);
        fds("300/fd", &[]);
        fds("300/task/300/fd", &[]);
        fds("300/task/301/fd", &[&ours]);
        fds("2/fd", &[]);
        fds("2/task/2/fd", &[]);
        std::fs::create_dir_all(proc.join("self")).expect("mkdir");
        let deadline = std::time::Instant::now() + MAX_SCAN;
        let mut seen = Vec::new();
        let (n, new) = scan_pass(&proc, &devs, deadline, |pid| {
            seen.push(pid);
            Ok(pid != 300)
        })
        .expect("a pass");
        seen.sort_unstable();
        assert_eq!((n, new, seen), (4, 1, vec![100, 300]));
        // Past its deadline, a pass is an error (the gate stays shut).
        let past = std::time::Instant::now()
            .checked_sub(std::time::Duration::from_millis(1))
            .expect("an instant a millisecond ago");
        let late = scan_pass(&proc, &devs, past, |_| Ok(true));
        assert!(late.is_err_and(|e| e.starts_with("the scan of /proc took more than")));
        let _ = std::fs::remove_dir_all(&base);
    }
}
