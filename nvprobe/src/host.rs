//! What the host says about its NVIDIA driver: version, dynamic majors,
//! device nodes, and the extra files `--device` declares.

use std::{
    collections::HashMap,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};
use nix::sys::stat::{SFlag, major, minor, stat};
use nvprobe_common::{DevKind, kdev_make};
use procfs::FromRead as _;

use crate::decode::version::{DriverInfo, DriverVersion, parse_proc_version};

/// `/proc/driver/nvidia/version`, else `/sys/module/nvidia/version`.
pub fn driver_info(root: &Path) -> Option<DriverInfo> {
    if let Ok(text) = fs::read_to_string(root.join("proc/driver/nvidia/version"))
        && let Some(info) = parse_proc_version(&text)
    {
        return Some(info);
    }
    let text = fs::read_to_string(root.join("sys/module/nvidia/version")).ok()?;
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
    let Ok(devs) = procfs::Devices::from_file(root.join("proc/devices")) else {
        return Majors::default();
    };
    let find = |name: &str| {
        devs.char_devices
            .iter()
            .find(|d| d.name == name)
            .map(|d| d.major)
    };
    Majors {
        nvidia: find("nvidiactl")
            .or_else(|| find("nvidia"))
            .or_else(|| find("nvidia-frontend")),
        uvm: find("nvidia-uvm"),
        caps: find("nvidia-caps"),
    }
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

/// Every `nvidia*` char node in ROOT/dev and ROOT/dev/nvidia-caps.
pub fn nvidia_char_nodes(root: &Path) -> Vec<CharNode> {
    let mut out = Vec::new();
    let mut scan = |dir: PathBuf, shown: &str| {
        let Ok(rd) = fs::read_dir(&dir) else { return };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("nvidia") {
                continue;
            }
            if let Ok(st) = stat(&e.path())
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
    scan(root.join("dev"), "/dev/");
    scan(root.join("dev/nvidia-caps"), "/dev/nvidia-caps/");
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
            "--device {}: cannot stat it (does it exist, and is the FUSE/test server running?)",
            path.display()
        )
    })?;
    let dev = st.st_dev;
    if st.st_ino == 0 {
        bail!("--device {}: the file has no inode number", path.display());
    }
    Ok((kdev_make(major(dev) as u32, minor(dev) as u32), st.st_ino))
}

#[cfg(test)]
mod tests {
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

/// What the host says about HMM in nvidia_uvm (ABI reference §6.3).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HmmFacts {
    /// Whether nvidia_uvm was built with HMM: its `uvm_hmm_*` functions
    /// exist only then. None: the module's symbols could not be read.
    pub compiled_in: Option<bool>,
    /// `uvm_disable_hmm` (Y/N), when the module is loaded.
    pub disabled: Option<bool>,
}

impl HmmFacts {
    /// One line for a diagnosis's evidence.
    pub fn describe(&self) -> String {
        let built = match self.compiled_in {
            Some(true) => "nvidia_uvm is built with HMM (uvm_hmm_* in /proc/kallsyms)",
            Some(false) => "nvidia_uvm is built without HMM (no uvm_hmm_* in /proc/kallsyms)",
            None => "whether nvidia_uvm has HMM is unknown (its symbols were not readable)",
        };
        match self.disabled {
            Some(d) => format!("{built}, uvm_disable_hmm={}", if d { "Y" } else { "N" }),
            None => built.to_owned(),
        }
    }
}

/// ROOT/proc/kallsyms. The live one (root `/`) is read once per process:
/// the kernel formats ~200,000 lines each time, a noticeable part of
/// doctor's second.
pub fn kallsyms_text(root: &Path) -> Option<std::sync::Arc<String>> {
    static LIVE: std::sync::OnceLock<Option<std::sync::Arc<String>>> = std::sync::OnceLock::new();
    if root == Path::new("/") {
        return LIVE
            .get_or_init(|| {
                fs::read_to_string("/proc/kallsyms")
                    .ok()
                    .map(std::sync::Arc::new)
            })
            .clone();
    }
    fs::read_to_string(root.join("proc/kallsyms"))
        .ok()
        .map(std::sync::Arc::new)
}

/// Read the HMM facts from /proc/kallsyms and nvidia_uvm's parameters.
pub fn hmm_facts(root: &Path) -> HmmFacts {
    let disabled =
        fs::read_to_string(root.join("sys/module/nvidia_uvm/parameters/uvm_disable_hmm"))
            .ok()
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
