//! What nvprobe checks before loading anything: root, bpf() and the ring
//! buffer, tracefs (mounted when missing), syscall tracepoints, kernel
//! BTF. Each failure is a [`StartError`] that says what to do.

use std::path::{Path, PathBuf};

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
        "tracefs is not mounted and mounting it at {path} failed: {err}. Mount it by hand: mount -t tracefs tracefs {path}"
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

/// Where tracefs is, and whether nvprobe mounted it there. A mount
/// nvprobe made is undone when this is dropped (MNT_DETACH: probes already
/// attached do not need it), on every way out of `watch`, errors included.
#[derive(Debug)]
pub struct Tracefs {
    pub path: PathBuf,
    /// nvprobe mounted it (and unmounts it when done).
    pub mounted: bool,
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted
            && let Err(e) = nix::mount::umount2(&self.path, nix::mount::MntFlags::MNT_DETACH)
        {
            log::warn!(
                "could not unmount the tracefs nvprobe mounted at {}: {}",
                self.path.display(),
                e.desc()
            );
        }
    }
}

/// Find tracefs, mounting it at /sys/kernel/tracing when it is not mounted
/// (a fresh container or VM often has it unmounted). Must run before the
/// first tracepoint attach: aya looks for tracefs once.
pub fn ensure_tracefs() -> Result<Tracefs, StartError> {
    for p in TRACEFS_PATHS {
        if tracefs_ready(Path::new(p)) {
            return Ok(Tracefs {
                path: PathBuf::from(p),
                mounted: false,
            });
        }
    }
    let target = Path::new(TRACEFS_PATHS[0]);
    let res = nix::mount::mount(
        Some("tracefs"),
        target,
        Some("tracefs"),
        nix::mount::MsFlags::MS_NOSUID
            | nix::mount::MsFlags::MS_NODEV
            | nix::mount::MsFlags::MS_NOEXEC,
        None::<&str>,
    );
    match res {
        Ok(()) => {
            // Unmounted again when dropped, whatever comes next.
            let t = Tracefs {
                path: target.to_path_buf(),
                mounted: true,
            };
            if tracefs_ready(target) {
                Ok(t)
            } else {
                Err(StartError::Tracefs {
                    path: target.display().to_string(),
                    err: "mounted, but it has no events directory".into(),
                })
            }
        }
        Err(e) => Err(StartError::Tracefs {
            path: target.display().to_string(),
            err: e.desc().to_owned(),
        }),
    }
}

pub fn check_syscall_tracepoints(tracefs: &Path) -> Result<(), StartError> {
    let p = tracefs.join("events/syscalls/sys_enter_ioctl");
    if !p.is_dir() {
        return Err(StartError::NoSyscallTracepoints(p.display().to_string()));
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
