//! What the host says about its NVIDIA driver: version, dynamic majors,
//! device nodes, and the extra files `--device` declares.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};
use nix::sys::stat::{SFlag, major, minor, stat};
use nvprobe_common::{DevKind, kdev_make};
use procfs::FromRead as _;

use crate::{
    decode::version::{DriverInfo, DriverVersion, parse_proc_version},
    safefs::{self, SafeReadError},
};

/// How long a read of a driver file may take before it counts as blocked.
pub const DRIVER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// A read of a file under /proc/driver/nvidia that did not give its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriverRead {
    /// The read failed, or (in a host tree) the file was not read: a link
    /// out of the tree, not a regular file.
    Failed(SafeReadError),
    /// The read did not finish within the timeout: the driver is stuck.
    Blocked,
}

type ReadCache = std::collections::HashMap<std::path::PathBuf, Result<String, DriverRead>>;

fn read_cache() -> &'static std::sync::Mutex<ReadCache> {
    static C: std::sync::OnceLock<std::sync::Mutex<ReadCache>> = std::sync::OnceLock::new();
    C.get_or_init(Default::default)
}

/// The most of one driver file that is read.
const READ_MAX: usize = 64 * 1024;

/// The inode number of the kernel's initial pid namespace
/// (`PROC_PID_INIT_INO`, include/linux/proc_ns.h; fixed since Linux 3.8).
const INIT_PID_NS_INO: u64 = 0xEFFF_FFFC;

/// Whether the pids under PROC (a procfs) are the host's, the ones the
/// kernel side keys its maps by: PROC's pid 1 (or, where that is not
/// readable, nvprobe itself) is in the initial pid namespace. None: it
/// cannot be told.
pub fn procfs_is_hosts(proc: &Path) -> Option<bool> {
    use std::os::unix::fs::MetadataExt as _;
    ["1/ns/pid", "self/ns/pid"]
        .iter()
        .find_map(|p| std::fs::metadata(proc.join(p)).ok())
        .map(|m| m.ino() == INIT_PID_NS_INO)
}

/// Read files that call into the NVIDIA driver (ROOT/proc/driver/nvidia/...,
/// REL each) in a forked child, so that a read stuck in the kernel (a hung
/// GPU, a held lock) cannot keep nvprobe from exiting: whatever has not
/// come back after `timeout` is `Blocked`. The host's own files (under
/// /proc) are read once per process; a host tree's are read again each
/// time (they are plain files), but a blocked one stays blocked. A tree's
/// file is resolved inside the tree first (`safefs`: no link out, a
/// regular file only); the child opens that very file through its
/// descriptor.
pub fn prefetch_driver_files(root: &Path, rels: &[&str], timeout: std::time::Duration) {
    use std::os::fd::{AsFd as _, AsRawFd as _};
    let host = root == Path::new("/");
    let paths: Vec<PathBuf> = rels.iter().map(|r| root.join(r)).collect();
    let todo: Vec<usize> = to_read(&paths);
    if todo.is_empty() {
        return;
    }
    let mut held = Vec::new();
    let mut cpaths: Vec<std::ffi::CString> = Vec::new();
    let mut asked: Vec<usize> = Vec::new();
    for i in todo {
        if host {
            let Ok(c) = std::ffi::CString::new(paths[i].as_os_str().as_encoded_bytes()) else {
                continue;
            };
            cpaths.push(c);
        } else {
            match safefs::resolve_regular(root, rels[i]) {
                Ok(fd) => {
                    cpaths.push(safefs::fd_path(fd.as_fd()));
                    held.push(fd);
                }
                Err(e) => {
                    safefs::note(root, rels[i], &e);
                    read_cache()
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(paths[i].clone(), Err(DriverRead::Failed(e)));
                    continue;
                }
            }
        }
        asked.push(i);
    }
    if asked.is_empty() {
        return;
    }
    // The host's files are no links; a tree's are opened through
    // /proc/self/fd (a link by design).
    let flags = libc::O_RDONLY
        | libc::O_CLOEXEC
        | libc::O_NONBLOCK
        | libc::O_NOCTTY
        | if host { libc::O_NOFOLLOW } else { 0 };
    let Ok((rd, wr)) = nix::unistd::pipe() else {
        return;
    };
    let mut buf = vec![0u8; READ_MAX];
    // SAFETY: between fork and _exit the child makes only system calls
    // (open, read, write, close) on memory allocated before the fork.
    match unsafe { nix::unistd::fork() } {
        Err(_) => {}
        Ok(nix::unistd::ForkResult::Child) => unsafe {
            read_in_child(&cpaths, flags, wr.as_raw_fd(), &mut buf)
        },
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            drop(wr);
            let data = replies_until(&rd, child, timeout);
            let mut got = parse_replies(&data);
            let mut c = read_cache().lock().unwrap_or_else(|e| e.into_inner());
            for (k, &i) in asked.iter().enumerate() {
                let r = got.remove(&k).unwrap_or(Err(DriverRead::Blocked));
                if let Err(DriverRead::Failed(e)) = &r {
                    safefs::note(root, rels[i], e);
                }
                c.insert(paths[i].clone(), r);
            }
        }
    }
    drop(held);
}

/// The indices of the paths that need a read: not cached, or a host
/// tree's (not under /proc) that did not block.
fn to_read(paths: &[std::path::PathBuf]) -> Vec<usize> {
    let c = read_cache().lock().unwrap_or_else(|e| e.into_inner());
    (0..paths.len())
        .filter(|&i| match c.get(&paths[i]) {
            Some(Err(DriverRead::Blocked)) => false,
            Some(_) => !paths[i].starts_with("/proc"),
            None => true,
        })
        .collect()
}

/// The forked child: read each path into `buf` and write it to `wr` as a
/// reply (index, errno, length as three u32, then the bytes); then exit.
///
/// # Safety
///
/// Only in the child of a fork: it makes only system calls, on memory
/// allocated before the fork.
unsafe fn read_in_child(
    cpaths: &[std::ffi::CString],
    flags: i32,
    wr: std::os::fd::RawFd,
    buf: &mut [u8],
) -> ! {
    unsafe {
        for (i, p) in cpaths.iter().enumerate() {
            let fd = libc::open(p.as_ptr(), flags);
            let (status, len) = if fd < 0 {
                (*libc::__errno_location(), 0usize)
            } else {
                let mut got = 0usize;
                let mut status = 0;
                while got < READ_MAX {
                    let n = libc::read(fd, buf.as_mut_ptr().add(got).cast(), READ_MAX - got);
                    if n < 0 {
                        status = *libc::__errno_location();
                        break;
                    }
                    if n == 0 {
                        break;
                    }
                    got += n as usize;
                }
                libc::close(fd);
                (status, got)
            };
            let head = [i as u32, status as u32, len as u32];
            libc::write(wr, head.as_ptr().cast(), 12);
            let mut off = 0;
            while off < len {
                let n = libc::write(wr, buf.as_ptr().add(off).cast(), len - off);
                if n <= 0 {
                    break;
                }
                off += n as usize;
            }
        }
        libc::_exit(0);
    }
}

/// What the child wrote to `rd` until it closed it or `timeout` passed;
/// a child still stuck in the kernel is killed.
fn replies_until(
    rd: &std::os::fd::OwnedFd,
    child: nix::unistd::Pid,
    timeout: std::time::Duration,
) -> Vec<u8> {
    let deadline = std::time::Instant::now() + timeout;
    let mut data = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        let mut fds = [nix::poll::PollFd::new(
            std::os::fd::AsFd::as_fd(rd),
            nix::poll::PollFlags::POLLIN,
        )];
        let ms = left.as_millis().min(u128::from(u16::MAX)) as u16;
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)) {
            Ok(0) => break,
            Ok(_) => match nix::unistd::read(rd, &mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => data.extend_from_slice(&chunk[..n]),
            },
            Err(_) => break,
        }
    }
    let done = nix::sys::wait::waitpid(child, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
    if !matches!(done, Ok(nix::sys::wait::WaitStatus::Exited(..))) {
        // Stuck in the kernel: it dies when its read returns.
        let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(child, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
    }
    data
}

/// The child's complete replies by path index; a cut-off one is left out.
fn parse_replies(data: &[u8]) -> std::collections::HashMap<usize, Result<String, DriverRead>> {
    let mut got: std::collections::HashMap<usize, Result<String, DriverRead>> = Default::default();
    let mut p = 0;
    while p + 12 <= data.len() {
        let w = |k: usize| u32::from_ne_bytes(data[p + k..p + k + 4].try_into().expect("4"));
        let (i, status, len) = (w(0) as usize, w(4) as i32, w(8) as usize);
        if p + 12 + len > data.len() {
            break;
        }
        let body = &data[p + 12..p + 12 + len];
        got.insert(
            i,
            if status == 0 {
                Ok(String::from_utf8_lossy(body).into_owned())
            } else {
                Err(DriverRead::Failed(SafeReadError::from_errno(status)))
            },
        );
        p += 12 + len;
    }
    got
}

/// One driver file, ROOT/REL, through the guarded reader.
pub fn read_driver_file(root: &Path, rel: &str) -> Result<String, DriverRead> {
    prefetch_driver_files(root, &[rel], DRIVER_READ_TIMEOUT);
    read_cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&root.join(rel))
        .cloned()
        .unwrap_or(Err(DriverRead::Blocked))
}

/// The driver files that blocked so far.
pub fn blocked_driver_files() -> Vec<std::path::PathBuf> {
    let c = read_cache().lock().unwrap_or_else(|e| e.into_inner());
    let mut v: Vec<_> = c
        .iter()
        .filter(|(_, r)| matches!(r, Err(DriverRead::Blocked)))
        .map(|(p, _)| p.clone())
        .collect();
    v.sort();
    v
}

/// `/proc/driver/nvidia/version`, else `/sys/module/nvidia/version`.
pub fn driver_info(root: &Path) -> Option<DriverInfo> {
    if let Ok(text) = read_driver_file(root, "proc/driver/nvidia/version")
        && let Some(info) = parse_proc_version(&text)
    {
        return Some(info);
    }
    let text = safefs::read_text(root, "sys/module/nvidia/version", safefs::CAP)?;
    let version: DriverVersion = text.trim().parse().ok()?;
    Some(DriverInfo {
        version,
        flavor: "unknown".into(),
    })
}

/// Character majors registered by the NVIDIA modules, from /proc/devices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Majors {
    /// 195 when nvidia.ko is loaded ("nvidia-frontend"/"nvidia"/"nvidiactl").
    pub nvidia: Option<u32>,
    pub uvm: Option<u32>,
    pub caps: Option<u32>,
}

pub fn majors(root: &Path) -> Majors {
    read_majors(root).unwrap_or_default()
}

/// [`majors`], or why ROOT/proc/devices gave none: it is absent, not a
/// regular file, unreadable, or not in its format (the problem is noted
/// for a tree, see [`safefs::note`]).
pub fn read_majors(root: &Path) -> Result<Majors, SafeReadError> {
    let text = safefs::read_noted(root, "proc/devices", safefs::CAP)?;
    // The parser's own error names its source file: not for users.
    let devs = procfs::Devices::from_read(&text[..]).map_err(|_| {
        SafeReadError::Io(
            "not in the format of /proc/devices (\"Character devices:\", then \"MAJOR NAME\" lines)".into(),
        )
    })?;
    let find = |name: &str| {
        devs.char_devices
            .iter()
            .find(|d| d.name == name)
            .map(|d| d.major)
    };
    Ok(Majors {
        nvidia: find("nvidiactl")
            .or_else(|| find("nvidia"))
            .or_else(|| find("nvidia-frontend")),
        uvm: find("nvidia-uvm"),
        caps: find("nvidia-caps"),
    })
}

/// A char device node under /dev whose name says NVIDIA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CharNode {
    /// As seen from inside `root`: "/dev/nvidiactl".
    pub path: String,
    pub major: u32,
    pub minor: u32,
    /// Permission bits.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// Every `nvidia*` char node in ROOT/dev and ROOT/dev/nvidia-caps (each
/// resolved inside ROOT: a link out of a tree is not looked at).
pub fn nvidia_char_nodes(root: &Path) -> Vec<CharNode> {
    let mut out = Vec::new();
    let mut scan = |dir: &str, shown: &str| {
        let Some(names) = safefs::read_dir_noted(root, dir) else {
            return;
        };
        for name in names {
            if !name.starts_with("nvidia") {
                continue;
            }
            if let Ok(st) = safefs::stat(root, format!("{dir}/{name}"))
                && SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFCHR
            {
                out.push(CharNode {
                    path: format!("{shown}{name}"),
                    major: major(st.st_rdev) as u32,
                    minor: minor(st.st_rdev) as u32,
                    mode: st.st_mode & 0o7777,
                    uid: st.st_uid,
                    gid: st.st_gid,
                });
            }
        }
    };
    scan("dev", "/dev/");
    scan("dev/nvidia-caps", "/dev/nvidia-caps/");
    out
}

/// Char device nodes under /dev whose name says NVIDIA:
/// kernel-encoded rdev -> path.
pub fn device_nodes(root: &Path) -> HashMap<u32, String> {
    let mut out = HashMap::new();
    for n in nvidia_char_nodes(root) {
        out.entry(kdev_make(n.major, n.minor)).or_insert(n.path);
    }
    out
}

/// A `--device PATH[=KIND]` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtraDevice {
    pub path: PathBuf,
    pub kind: DevKind,
}

impl std::str::FromStr for ExtraDevice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (path, kind) = match s.rsplit_once('=') {
            Some((p, k)) => (p, Some(k)),
            None => (s, None),
        };
        if path.is_empty() {
            return Err("empty path".into());
        }
        let kind = match kind {
            Some("ctl") => DevKind::Ctl,
            Some("gpu") => DevKind::Gpu,
            Some("uvm") => DevKind::Uvm,
            Some(other) => {
                return Err(format!(
                    "unknown device kind {other:?}: use ctl, gpu or uvm (e.g. --device /tmp/fake=ctl)"
                ));
            }
            None => guess_kind(path).ok_or_else(|| {
                format!(
                    "cannot tell what kind of NVIDIA device {path} stands for: add =ctl, =gpu or =uvm"
                )
            })?,
        };
        Ok(Self {
            path: path.into(),
            kind,
        })
    }
}

fn guess_kind(path: &str) -> Option<DevKind> {
    let name = Path::new(path).file_name()?.to_str()?;
    match name {
        "nvidiactl" => Some(DevKind::Ctl),
        "nvidia-uvm" => Some(DevKind::Uvm),
        n if n
            .strip_prefix("nvidia")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())) =>
        {
            Some(DevKind::Gpu)
        }
        _ => None,
    }
}

/// Identity of an extra file as the BPF side sees it: (s_dev, ino), both in
/// the kernel's encoding.
pub fn file_identity(path: &Path) -> anyhow::Result<(u32, u64)> {
    let st = stat(path).with_context(|| {
        format!(
            "--device {}: cannot stat it (it existed when nvprobe started: was it removed, or its mount unmounted?)",
            path.display()
        )
    })?;
    let dev = st.st_dev;
    if st.st_ino == 0 {
        bail!("--device {}: the file has no inode number", path.display());
    }
    Ok((kdev_make(major(dev) as u32, minor(dev) as u32), st.st_ino))
}

pub use nvprobe_model::records::HmmFacts;

/// ROOT/proc/kallsyms (at most `safefs::KALLSYMS_CAP`). The live one
/// (root `/`) is read once per process: the kernel formats ~200,000 lines
/// each time, a noticeable part of doctor's second.
pub fn kallsyms_text(root: &Path) -> Option<std::sync::Arc<String>> {
    static LIVE: std::sync::OnceLock<Option<std::sync::Arc<String>>> = std::sync::OnceLock::new();
    let read =
        || safefs::read_text(root, "proc/kallsyms", safefs::KALLSYMS_CAP).map(std::sync::Arc::new);
    if root == Path::new("/") {
        return LIVE.get_or_init(read).clone();
    }
    read()
}

/// Read the HMM facts from /proc/kallsyms and nvidia_uvm's parameters.
pub fn hmm_facts(root: &Path) -> HmmFacts {
    let disabled = safefs::read_text(
        root,
        "sys/module/nvidia_uvm/parameters/uvm_disable_hmm",
        safefs::CAP,
    )
    .and_then(|s| match s.trim() {
        "Y" | "1" => Some(true),
        "N" | "0" => Some(false),
        _ => None,
    });
    let compiled_in = kallsyms_text(root).and_then(|text| {
        let (mut module, mut hmm) = (false, false);
        for l in text.lines().filter(|l| l.ends_with("[nvidia_uvm]")) {
            module = true;
            if l.split_whitespace()
                .nth(2)
                .is_some_and(|s| s.starts_with("uvm_hmm_"))
            {
                hmm = true;
                break;
            }
        }
        module.then_some(hmm)
    });
    HmmFacts {
        compiled_in,
        disabled,
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn parses_device_args() {
        let d: ExtraDevice = "/tmp/x/nvidiactl".parse().expect("guessed");
        assert_eq!(d.kind, DevKind::Ctl);
        let d: ExtraDevice = "/tmp/x/nvidia3".parse().expect("guessed");
        assert_eq!(d.kind, DevKind::Gpu);
        let d: ExtraDevice = "/tmp/weird=uvm".parse().expect("explicit");
        assert_eq!(
            (d.path.to_str(), d.kind),
            (Some("/tmp/weird"), DevKind::Uvm)
        );
        let d: ExtraDevice = "/tmp/a=b=gpu".parse().expect("last = splits");
        assert_eq!(d.path.to_str(), Some("/tmp/a=b"));
        assert!(
            "/tmp/weird"
                .parse::<ExtraDevice>()
                .unwrap_err()
                .contains("=ctl")
        );
        assert!(
            "/tmp/x=modeset"
                .parse::<ExtraDevice>()
                .unwrap_err()
                .contains("unknown device kind")
        );
        assert!("=ctl".parse::<ExtraDevice>().is_err());
    }

    #[test]
    fn reads_driver_from_a_host_tree() {
        let dir = std::env::temp_dir().join(format!("nvprobe-host-{}", std::process::id()));
        fs::create_dir_all(dir.join("proc/driver/nvidia")).expect("mkdir");
        fs::create_dir_all(dir.join("sys/module/nvidia")).expect("mkdir");
        assert_eq!(driver_info(&dir), None);
        fs::write(dir.join("sys/module/nvidia/version"), "570.86.16\n").expect("write");
        assert_eq!(
            driver_info(&dir).map(|d| d.version),
            Some(DriverVersion::new(570, 86, 16))
        );
        fs::write(
            dir.join("proc/driver/nvidia/version"),
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n",
        )
        .expect("write");
        let d = driver_info(&dir).expect("found");
        assert_eq!(
            (d.version, d.flavor.as_str()),
            (DriverVersion::new(580, 159, 4), "open")
        );
        fs::write(
            dir.join("proc/devices"),
            "Character devices:\n  1 mem\n195 nvidia-frontend\n238 nvidia-uvm\n237 nvidia-caps\n\nBlock devices:\n  7 loop\n",
        )
        .expect("write");
        assert_eq!(
            majors(&dir),
            Majors {
                nvidia: Some(195),
                uvm: Some(238),
                caps: Some(237)
            }
        );
        fs::remove_dir_all(&dir).expect("cleanup");
    }
    /// The H200 host's kallsyms had nvidia_uvm symbols but no uvm_hmm_*
    /// (tests/fixtures/gpu-host): built without HMM, uvm_disable_hmm=N.
    #[test]
    fn reads_hmm_facts_from_a_host_tree() {
        let dir = std::env::temp_dir().join(format!("nvprobe-hmm-{}", std::process::id()));
        let params = dir.join("sys/module/nvidia_uvm/parameters");
        fs::create_dir_all(&params).expect("mkdir");
        fs::create_dir_all(dir.join("proc")).expect("mkdir");
        assert_eq!(hmm_facts(&dir), HmmFacts::default());
        fs::write(params.join("uvm_disable_hmm"), "N\n").expect("write");
        fs::write(
            dir.join("proc/kallsyms"),
            "0000000000000000 T hmm_range_fault\n0000000000000000 t uvm_ioctl\t[nvidia_uvm]\n",
        )
        .expect("write");
        let f = hmm_facts(&dir);
        assert_eq!((f.compiled_in, f.disabled), (Some(false), Some(false)));
        assert_eq!(
            f.describe(),
            "nvidia_uvm is built without HMM (no uvm_hmm_* in /proc/kallsyms), uvm_disable_hmm=N"
        );
        fs::write(
            dir.join("proc/kallsyms"),
            "0 t uvm_ioctl\t[nvidia_uvm]\n0 t uvm_hmm_is_enabled\t[nvidia_uvm]\n",
        )
        .expect("write");
        fs::write(params.join("uvm_disable_hmm"), "Y\n").expect("write");
        assert_eq!(
            hmm_facts(&dir),
            HmmFacts {
                compiled_in: Some(true),
                disabled: Some(true)
            }
        );
        // No nvidia_uvm symbols at all: unknown, not "without HMM".
        fs::write(dir.join("proc/kallsyms"), "0 T hmm_range_fault\n").expect("write");
        assert_eq!(hmm_facts(&dir).compiled_in, None);
        let _ = fs::remove_dir_all(&dir);
    }
}
