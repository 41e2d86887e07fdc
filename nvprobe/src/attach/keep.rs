//! Where nvprobe's probes live, so that nvprobe never removes one itself:
//! every BPF link it holds (tracepoints, kprobes, uprobes) is pinned in a
//! bpffs instance of its own that no path reaches (made with fsmount, or
//! mounted and detached at once), held open by one descriptor. However
//! nvprobe ends, Ctrl-C or SIGKILL, that descriptor closes with it, the
//! instance goes, and the kernel drops the pins from a workqueue.
//!
//! Why: a uprobe's removal in a task with a fatal signal pending fails
//! (the page walk it needs stops at a pending SIGKILL) and the kernel
//! leaves the breakpoint in place for good ("uprobe: nvprobe:PID failed
//! to unregister, leaking uprobe"); a kernel worker has no such signal.
//! Removals also wait for grace periods, under the tracing lock for perf
//! events: none of that is nvprobe's to wait for any more.

use std::{
    ffi::CString,
    io,
    os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd},
    path::Path,
    sync::atomic::{AtomicU64, Ordering},
};

/// The private bpffs; pins are named by a counter.
pub struct Keep {
    root: OwnedFd,
    /// How it was made, for the start record and the banner.
    pub how: &'static str,
    next: AtomicU64,
    done: AtomicU64,
}

impl Keep {
    /// A new instance, or why there is none (then links are removed the
    /// old way, by a child after nvprobe's exit).
    pub fn new() -> Result<Keep, String> {
        let (root, how) = match fsmount_bpffs() {
            Ok(fd) => (fd, "fsmount"),
            Err(e1) => match mount_detached_bpffs() {
                Ok(fd) => (fd, "mount, detached"),
                Err(e2) => {
                    return Err(format!(
                        "no private bpffs for the probes (fsopen: {e1}; mount: {e2})"
                    ));
                }
            },
        };
        Ok(Keep {
            root,
            how,
            next: AtomicU64::new(0),
            done: AtomicU64::new(0),
        })
    }

    /// Pin the link `fd`: from now on the pin holds it, and the caller may
    /// close its descriptor at no cost.
    pub fn pin(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = format!("/proc/self/fd/{}/{n}", self.root.as_raw_fd());
        super::sys::pin(fd, &path).inspect(|()| {
            self.done.fetch_add(1, Ordering::Relaxed);
        })
    }

    /// Links pinned so far.
    pub fn pinned(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Call it only while no other thread opens or closes descriptors
    /// (nvprobe calls it once, at start, before the hooking thread exists):
    /// it borrows descriptors it found by number.
    ///
    /// Pin every BPF link this process holds (found through
    /// /proc/self/fdinfo: aya keeps the tracepoint, kprobe and fentry
    /// links of its programs), then point each of those descriptors at
    /// /dev/null, so that nvprobe holds no reference of its own and the
    /// pin's is always the last (aya closes "its" descriptor later, which
    /// is then /dev/null). Returns (pinned, refused with why).
    pub fn pin_all(&self) -> (usize, Vec<String>) {
        let null = match std::fs::File::open("/dev/null") {
            Ok(f) => f,
            Err(e) => return (0, vec![format!("/dev/null: {e}")]),
        };
        let mut n = 0;
        let mut refused = Vec::new();
        for (fd, id) in own_links() {
            // SAFETY: the descriptor was open a moment ago; link
            // descriptors are closed only when the object is dropped,
            // after tracing ends, and a stale one fails the pin harmlessly.
            let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
            match self.pin(bfd) {
                Ok(()) => {
                    // SAFETY: dup3 over a descriptor this process owns (aya
                    // does); it stays open, now on /dev/null.
                    if unsafe { libc::dup3(null.as_raw_fd(), fd, libc::O_CLOEXEC) } >= 0 {
                        n += 1;
                    } else {
                        refused.push(format!(
                            "link {id}: pinned, but its descriptor stayed ({})",
                            io::Error::last_os_error()
                        ));
                    }
                }
                Err(e) => refused.push(format!("link {id}: {e}")),
            }
        }
        (n, refused)
    }
}

/// What was left to the kernel at start: the start record's
/// `probe_removal`, and how many probes nvprobe could not pin.
pub struct Held {
    pub removal: String,
    pub unpinned: usize,
    /// The pins the kernel refused, each a refusal of probe "pin".
    pub refused: Vec<String>,
}

/// After the attach phase: pin every link `loaded` and aya hold (see
/// [`Keep::pin_all`]); a refused pin is reported as a refusal. Perf events
/// that are no BPF link (kernels before 5.15) cannot be pinned: counted
/// first, before pin_all points the links at /dev/null.
pub fn hold_all(keep: Result<&Keep, &String>, links: &[OwnedFd]) -> Held {
    use std::os::fd::AsFd as _;
    let unlinked = links.iter().filter(|fd| !is_link(fd.as_fd())).count();
    let k = match keep {
        Ok(k) => k,
        Err(e) => {
            return Held {
                removal: format!("child: {e}; a child closes the probes after nvprobe's exit"),
                unpinned: unlinked,
                refused: Vec::new(),
            };
        }
    };
    let (_, refused) = k.pin_all();
    let unpinned = refused.len() + unlinked;
    let removal = if unpinned == 0 {
        format!(
            "kernel: {} links pinned in a private bpffs ({}); dropped by a kernel worker once nvprobe ends, however it ends",
            k.pinned(),
            k.how
        )
    } else {
        format!(
            "kernel: {} links pinned in a private bpffs ({}); {unpinned} probes a child closes after nvprobe's exit ({} pins refused, {unlinked} perf events without a BPF link)",
            k.pinned(),
            k.how,
            refused.len(),
        )
    };
    let refused = refused
        .iter()
        .map(|r| format!("{r}: a child removes this probe after nvprobe's exit instead"))
        .collect();
    Held {
        removal,
        unpinned,
        refused,
    }
}

/// Is `fd` a BPF link (its fdinfo names a link id)?
pub fn is_link(fd: BorrowedFd<'_>) -> bool {
    std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))
        .is_ok_and(|i| i.lines().any(|l| l.starts_with("link_id:")))
}

/// (fd, link id) of every BPF link open in this process.
fn own_links() -> Vec<(i32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fdinfo") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(fd) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(info) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        if let Some(id) = info
            .lines()
            .find_map(|l| l.strip_prefix("link_id:"))
            .and_then(|v| v.trim().parse::<u32>().ok())
        {
            out.push((fd, id));
        }
    }
    out.sort_unstable();
    out
}

fn check(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// fsopen("bpf") → create → fsmount: a mount in no mount namespace, from
/// its first moment (kernels ≥ 5.2).
fn fsmount_bpffs() -> io::Result<OwnedFd> {
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSCONFIG_SET_STRING: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    let fstype = CString::new("bpf").expect("no NUL");
    let (key, val) = (
        CString::new("mode").expect("no NUL"),
        CString::new("0700").expect("no NUL"),
    );
    // SAFETY: plain system calls on C strings that outlive them; each new
    // descriptor is owned at once.
    unsafe {
        let fs = OwnedFd::from_raw_fd(check(libc::syscall(
            libc::SYS_fsopen,
            fstype.as_ptr(),
            FSOPEN_CLOEXEC,
        ))? as i32);
        check(libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_SET_STRING,
            key.as_ptr(),
            val.as_ptr(),
            0,
        ))?;
        check(libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        ))?;
        let mnt = check(libc::syscall(
            libc::SYS_fsmount,
            fs.as_raw_fd(),
            FSMOUNT_CLOEXEC,
            0,
        ))?;
        Ok(OwnedFd::from_raw_fd(mnt as i32))
    }
}

/// Older kernels: mount on a private folder, hold its root open, detach
/// the mount and remove the folder (the open root keeps the instance).
fn mount_detached_bpffs() -> io::Result<OwnedFd> {
    use nix::mount::{MntFlags, MsFlags, mount, umount2};
    let base = Path::new("/run");
    let base = if base.is_dir() {
        base.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let dir = nix::unistd::mkdtemp(&base.join("nvprobe-bpffs.XXXXXX")).map_err(io::Error::from)?;
    let res = (|| -> io::Result<OwnedFd> {
        mount(
            Some("bpf"),
            &dir,
            Some("bpf"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("mode=0700"),
        )
        .map_err(io::Error::from)?;
        let root = nix::fcntl::open(
            &dir,
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC
                | nix::fcntl::OFlag::O_NOFOLLOW,
            nix::sys::stat::Mode::empty(),
        );
        let detached = umount2(&dir, MntFlags::MNT_DETACH).map_err(io::Error::from);
        let root = root.map_err(io::Error::from)?;
        detached?;
        Ok(root)
    })();
    let _ = std::fs::remove_dir(&dir);
    res
}
