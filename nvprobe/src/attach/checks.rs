//! What nvprobe checks before loading anything: root, bpf() and the ring
//! buffer, tracefs (mounted when missing, in nvprobe's own mount
//! namespace), syscall tracepoints, kernel BTF. Each failure is a
//! [`StartError`] that says what to do.

use std::{
    os::fd::{AsRawFd, OwnedFd},
    path::{Path, PathBuf},
};

use aya::maps::MapType;
use nvprobe_common::Config;

use crate::btf::{Btf, kernel_offsets};

/// A reason nvprobe cannot start, with what the user should do. Each maps
/// to an exit code (see `main.rs`).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "nvprobe must run as root (euid is {0}): it loads BPF programs and reads other processes' \
         ioctl arguments. Run it with sudo."
    )]
    NotRoot(u32),
    #[error(
        "the kernel refused the bpf() system call ({0}). BPF may be disabled (CONFIG_BPF_SYSCALL), \
         blocked by a seccomp profile (containers: run privileged or allow bpf), or by lockdown."
    )]
    NoBpf(String),
    #[error(
        "this kernel has no BPF ring buffer (BPF_MAP_TYPE_RINGBUF needs Linux 5.8 or newer); \
         nvprobe needs it to deliver events"
    )]
    NoRingBuf,
    #[error(
        "tracefs is not mounted and mounting it at {path} (in nvprobe's own mount namespace) failed: {err}. Mount it by \
hand: mount -t tracefs tracefs {path}"
    )]
    Tracefs { path: String, err: String },
    #[error(
        "this kernel has no syscall tracepoints ({0} is missing; CONFIG_FTRACE_SYSCALLS is off). \
         nvprobe's syscall layer needs them"
    )]
    NoSyscallTracepoints(String),
    #[error(
        "cannot read kernel BTF from {path}: {err}. nvprobe needs CONFIG_DEBUG_INFO_BTF=y to find \
         the struct offsets it uses to resolve file descriptors in the kernel"
    )]
    NoBtf { path: String, err: String },
    #[error("loading the BPF programs failed: {0}")]
    Load(String),
    #[error("attaching the required {syscall} probe failed: {err}")]
    Required { syscall: String, err: String },
}

pub fn check_root() -> Result<(), StartError> {
    let euid = nix::unistd::geteuid().as_raw();
    if euid != 0 {
        return Err(StartError::NotRoot(euid));
    }
    Ok(())
}

pub fn check_bpf() -> Result<(), StartError> {
    match aya::sys::is_map_supported(MapType::RingBuf) {
        Ok(true) => Ok(()),
        Ok(false) => match aya::sys::is_map_supported(MapType::Array) {
            Ok(true) => Err(StartError::NoRingBuf),
            Ok(false) => Err(StartError::NoBpf("no map type can be created".into())),
            Err(e) => Err(StartError::NoBpf(e.to_string())),
        },
        Err(e) => Err(StartError::NoBpf(e.to_string())),
    }
}

const TRACEFS_PATHS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

fn tracefs_ready(p: &Path) -> bool {
    p.join("events").is_dir()
}

/// Where tracefs is, and whether nvprobe mounted it. nvprobe runs in a
/// mount namespace of its own, a slave of the one it started in (the
/// host's mounts reach it, its own go nowhere), and holds the tracefs
/// directory open, reaching it through that descriptor (`path` is
/// `/proc/self/fd/N`): whoever unmounts the mount it found (another
/// tracer, an older nvprobe, `umount -l`) cannot take it away from under
/// a running nvprobe. When tracefs is not mounted, nvprobe mounts it in
/// its own namespace: no other process sees it, and nothing is left
/// behind or unmounted under another instance when nvprobe exits. (And a
/// compromised nvprobe's mounts stay in its namespace: without
/// CAP_SYS_CHROOT, dropped once attached, it cannot setns out.)
#[derive(Debug)]
pub struct Tracefs {
    /// Where to read tracefs: the held descriptor's path.
    pub path: PathBuf,
    /// Where it is mounted (for messages and the start record).
    pub at: PathBuf,
    /// nvprobe mounted it, in its own mount namespace.
    pub mounted: bool,
    /// nvprobe runs in a mount namespace of its own (else: why not).
    pub own_namespace: Result<(), String>,
    _dir: OwnedFd,
}

impl Tracefs {
    fn hold(
        at: &Path,
        mounted: bool,
        own_namespace: Result<(), String>,
    ) -> Result<Self, StartError> {
        let dir = nix::fcntl::open(
            at,
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| StartError::Tracefs {
            path: at.display().to_string(),
            err: format!("opening it: {}", e.desc()),
        })?;
        Ok(Self {
            path: PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())),
            at: at.to_path_buf(),
            mounted,
            own_namespace,
            _dir: dir,
        })
    }
}

/// Find tracefs, mounting it at /sys/kernel/tracing in nvprobe's own mount
/// namespace when it is not mounted (a fresh container or VM often has it
/// unmounted). Must run before the first tracepoint attach and before
/// nvprobe starts a thread (unshare(CLONE_NEWNS) refuses a process whose
/// threads share its filesystem context).
pub fn ensure_tracefs() -> Result<Tracefs, StartError> {
    crate::identity::remember_own_view();
    let own = own_namespace().map_err(|(what, e)| format!("{what}: {}", e.desc()));
    for p in TRACEFS_PATHS {
        if tracefs_ready(Path::new(p)) {
            return Tracefs::hold(Path::new(p), false, own);
        }
    }
    let target = Path::new(TRACEFS_PATHS[0]);
    let fail = |err: String| StartError::Tracefs {
        path: target.display().to_string(),
        err,
    };
    if let Err(e) = &own {
        return Err(fail(format!(
            "nvprobe could not make a mount namespace of its own to mount it in ({e})"
        )));
    }
    mount_tracefs(target).map_err(|e| fail(format!("mount: {}", e.desc())))?;
    if !tracefs_ready(target) {
        return Err(fail("mounted, but it has no events directory".into()));
    }
    Tracefs::hold(target, true, own)
}

/// A mount namespace of nvprobe's own, a slave of the one it started in
/// (mounts made there still reach nvprobe's view, and its own reach no
/// one).
fn own_namespace() -> Result<(), (&'static str, nix::Error)> {
    own_mount_namespace(nix::mount::MsFlags::MS_SLAVE)
}

/// unshare(CLONE_NEWNS), then every mount made `propagation` (MS_SLAVE:
/// the host's mounts still reach this process; MS_PRIVATE: nothing
/// does), so that what this process mounts reaches no one. Under a chroot
/// whose root is not a mount point, `/` cannot be changed (EINVAL): then
/// each mount the process sees is, and tracefs's place must be in one of
/// them. Needs a single-threaded process.
pub fn own_mount_namespace(
    propagation: nix::mount::MsFlags,
) -> Result<(), (&'static str, nix::Error)> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
        .map_err(|e| ("unshare(CLONE_NEWNS)", e))?;
    match set_propagation("/", propagation, true) {
        Err(nix::Error::EINVAL) => {
            let points = visible_mounts().map_err(|e| ("reading /proc/self/mountinfo", e))?;
            for p in &points {
                set_propagation(p, propagation, false)
                    .map_err(|e| ("changing each of its mounts' propagation", e))?;
            }
            // A tracefs mounted where no visible mount holds the point
            // would land in the chroot's hidden, possibly shared, mount.
            let holds = |p: &String| {
                p == "/" || TRACEFS_PATHS[0].starts_with(&format!("{}/", p.trim_end_matches('/')))
            };
            if !points.iter().any(holds) {
                return Err((
                    "its root is not a mount point and no mount it sees holds /sys/kernel/tracing",
                    nix::Error::EINVAL,
                ));
            }
            Ok(())
        }
        r => r.map_err(|e| ("changing its mounts' propagation", e)),
    }
}

fn set_propagation(point: &str, how: nix::mount::MsFlags, recursive: bool) -> nix::Result<()> {
    use nix::mount::{MsFlags, mount};
    let rec = if recursive {
        MsFlags::MS_REC
    } else {
        MsFlags::empty()
    };
    mount(None::<&str>, point, None::<&str>, rec | how, None::<&str>)
}

/// The mount points of /proc/self/mountinfo (at most 1 MiB of it), with
/// its octal escapes (`\040` for a space) undone.
fn visible_mounts() -> nix::Result<Vec<String>> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open("/proc/self/mountinfo")
        .and_then(|f| f.take(1 << 20).read_to_string(&mut text))
        .map_err(|e| nix::Error::from_raw(e.raw_os_error().unwrap_or(nix::libc::EIO)))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mount_point)
        .collect())
}

fn unescape_mount_point(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], oct) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |a, c| a.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn mount_tracefs(target: &Path) -> nix::Result<()> {
    use nix::mount::{MsFlags, mount};
    mount(
        Some("tracefs"),
        target,
        Some("tracefs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
}

pub fn check_syscall_tracepoints(tracefs: &Tracefs) -> Result<(), StartError> {
    let rel = "events/syscalls/sys_enter_ioctl";
    if !tracefs.path.join(rel).is_dir() {
        return Err(StartError::NoSyscallTracepoints(
            tracefs.at.join(rel).display().to_string(),
        ));
    }
    Ok(())
}

pub fn kernel_config() -> Result<Config, StartError> {
    let path = Path::new("/sys/kernel/btf/vmlinux");
    let btf = Btf::from_file(path).map_err(|e| StartError::NoBtf {
        path: path.display().to_string(),
        err: e.to_string(),
    })?;
    kernel_offsets(&btf).map_err(|e| StartError::NoBtf {
        path: path.display().to_string(),
        err: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::unescape_mount_point;

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape_mount_point("/sys"), "/sys");
        assert_eq!(unescape_mount_point(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape_mount_point(r"/x\011y\134z"), "/x\ty\\z");
        // Not an escape: left as it is.
        assert_eq!(unescape_mount_point(r"/a\9b\04"), r"/a\9b\04");
    }
}
