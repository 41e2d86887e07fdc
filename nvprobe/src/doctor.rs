//! `nvprobe doctor`: what a host says about the things that break CUDA
//! start-up, as verdicts (ok, warn, fail) with evidence and a hint.
//!
//! This first part reads file evidence only (under `--root`, or `/`): the
//! driver, its parameters and GPUs, nvidia_uvm and its HMM support, and the device
//! nodes. Git cannot hold device nodes, so a host tree may describe its
//! nodes in `dev.manifest` (one `PATH c MAJOR:MINOR MODE` line each); when
//! it is present it replaces `stat()` of `ROOT/dev`.

use std::{collections::BTreeMap, fs, io::Read as _, path::Path};

use serde::Serialize;

use crate::host::{Majors, driver_info, hmm_facts, majors};

#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    Warn,
    Fail,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Check {
    pub area: &'static str,
    pub id: &'static str,
    pub verdict: Verdict,
    pub evidence: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

fn check(
    area: &'static str,
    id: &'static str,
    verdict: Verdict,
    evidence: impl Into<String>,
    hint: Option<&str>,
) -> Check {
    Check {
        area,
        id,
        verdict,
        evidence: evidence.into(),
        hint: hint.map(str::to_owned),
    }
}

/// A device node as the host tree has it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    major: u32,
    minor: u32,
    mode: u32,
}

/// The nodes under ROOT/dev: from `ROOT/dev.manifest` when present, else
/// from stat().
fn nodes(root: &Path) -> Result<BTreeMap<String, Node>, String> {
    let manifest = root.join("dev.manifest");
    let mut out = BTreeMap::new();
    if let Ok(text) = fs::read_to_string(&manifest) {
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || {
                format!(
                    "{}:{}: expected `PATH c MAJOR:MINOR MODE`, got {line:?}",
                    manifest.display(),
                    n + 1
                )
            };
            let f: Vec<&str> = line.split_whitespace().collect();
            let [path, "c", mm, mode] = f[..] else {
                return Err(bad());
            };
            let (ma, mi) = mm.split_once(':').ok_or_else(bad)?;
            out.insert(
                path.to_owned(),
                Node {
                    major: ma.parse().map_err(|_| bad())?,
                    minor: mi.parse().map_err(|_| bad())?,
                    mode: u32::from_str_radix(mode, 8).map_err(|_| bad())?,
                },
            );
        }
        return Ok(out);
    }
    for n in crate::host::nvidia_char_nodes(root) {
        out.insert(
            n.path,
            Node {
                major: n.major,
                minor: n.minor,
                mode: n.mode,
            },
        );
    }
    Ok(out)
}

/// GPU minors the driver knows: /proc/driver/nvidia/gpus/*/information
/// ("Device Minor: N").
fn gpu_minors(root: &Path) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(root.join("proc/driver/nvidia/gpus")) else {
        return out;
    };
    for e in rd.flatten() {
        let bus = e.file_name().to_string_lossy().into_owned();
        let Ok(info) = fs::read_to_string(e.path().join("information")) else {
            continue;
        };
        if let Some(m) = info.lines().find_map(|l| {
            l.strip_prefix("Device Minor:")
                .and_then(|v| v.trim().parse().ok())
        }) {
            out.push((bus, m));
        }
    }
    out.sort();
    out
}

/// Kernel config: ROOT/proc/config.gz (not decompressed here: only when
/// ROOT/boot/config-RELEASE or an uncompressed ROOT/proc/config exists).
fn kernel_config(root: &Path) -> Option<String> {
    let release = fs::read_to_string(root.join("proc/sys/kernel/osrelease")).ok()?;
    let p = root.join(format!("boot/config-{}", release.trim()));
    let mut s = String::new();
    fs::File::open(&p)
        .or_else(|_| fs::File::open(root.join("proc/config")))
        .ok()?
        .read_to_string(&mut s)
        .ok()?;
    Some(s)
}

fn driver_checks(root: &Path, out: &mut Vec<Check>) -> Majors {
    match driver_info(root) {
        Some(d) => out.push(check(
            "driver",
            "driver_loaded",
            Verdict::Ok,
            format!("{} kernel module {}", d.flavor, d.version),
            None,
        )),
        None => out.push(check(
            "driver",
            "driver_loaded",
            Verdict::Fail,
            "no /proc/driver/nvidia/version and no /sys/module/nvidia/version: the nvidia module is not loaded",
            Some("load it (modprobe nvidia) and read the kernel log (dmesg | grep -i nvrm) if that fails"),
        )),
    }
    let m = majors(root);
    let uvm_loaded = root.join("sys/module/nvidia_uvm").exists() || m.uvm.is_some();
    out.push(if uvm_loaded {
        check(
            "driver",
            "uvm_loaded",
            Verdict::Ok,
            match m.uvm {
                Some(ma) => format!("nvidia_uvm is loaded (char major {ma})"),
                None => "nvidia_uvm is loaded".to_owned(),
            },
            None,
        )
    } else {
        check(
            "driver",
            "uvm_loaded",
            Verdict::Fail,
            "nvidia_uvm is not loaded (no /sys/module/nvidia_uvm, no nvidia-uvm in /proc/devices)",
            Some("cuInit fails with 999 without it: modprobe nvidia-uvm (libcuda runs the setuid nvidia-modprobe for this; in a container the host must load it)"),
        )
    });
    if uvm_loaded {
        let f = hmm_facts(root);
        let cfg = kernel_config(root);
        let has = |k: &str| {
            cfg.as_ref()
                .map(|c| c.lines().any(|l| l == format!("{k}=y")))
        };
        let kernel_hmm = match (has("CONFIG_HMM_MIRROR"), has("CONFIG_DEVICE_PRIVATE")) {
            (Some(a), Some(b)) => Some(a && b),
            _ => None,
        };
        let compiled = f.compiled_in.or(kernel_hmm);
        let evidence = format!(
            "{}{}",
            f.describe(),
            match kernel_hmm {
                Some(true) => "; kernel config has CONFIG_HMM_MIRROR=y and CONFIG_DEVICE_PRIVATE=y",
                Some(false) => "; kernel config lacks CONFIG_HMM_MIRROR or CONFIG_DEVICE_PRIVATE",
                None => "",
            }
        );
        out.push(match (compiled, f.disabled) {
            (Some(true), Some(false)) => check(
                "driver",
                "uvm_hmm",
                Verdict::Warn,
                evidence,
                Some("HMM is on in nvidia_uvm. It has made cuInit fail (CUDA_ERROR_NOT_INITIALIZED, 0 devices) on several kernels: \
open-gpu-kernel-modules issues 797 (NixOS 6.13, 570.86), 901 (EL9 5.14, 570/575), 947 (EL10 6.12, 570-580.95), \
ollama issue 11593 (RTX PRO 6000 Blackwell, 575); the CUDA 12.9 and 13 release notes give the workaround: \
modprobe -r nvidia_uvm && modprobe nvidia_uvm uvm_disable_hmm=1 (or options nvidia_uvm uvm_disable_hmm=1 in /etc/modprobe.d)"),
            ),
            (_, Some(true)) => check("driver", "uvm_hmm", Verdict::Ok, evidence, None),
            (Some(false), _) => check("driver", "uvm_hmm", Verdict::Ok, evidence, None),
            _ => check(
                "driver",
                "uvm_hmm",
                Verdict::Warn,
                evidence,
                Some("cannot tell whether nvidia_uvm has HMM (run as root so /proc/kallsyms shows module symbols); if cuInit fails with 3 and 0 devices, try uvm_disable_hmm=1"),
            ),
        });
    }
    m
}

fn node_checks(root: &Path, m: &Majors, out: &mut Vec<Check>) {
    let have = match nodes(root) {
        Ok(n) => n,
        Err(e) => {
            out.push(check(
                "nodes",
                "manifest",
                Verdict::Fail,
                e,
                Some("fix the manifest line"),
            ));
            return;
        }
    };
    let mut want: Vec<(String, u32, u32)> = Vec::new();
    if let Some(nv) = m.nvidia {
        want.push(("/dev/nvidiactl".into(), nv, 255));
        for (_, minor) in gpu_minors(root) {
            want.push((format!("/dev/nvidia{minor}"), nv, minor));
        }
    }
    if let Some(uvm) = m.uvm {
        want.push(("/dev/nvidia-uvm".into(), uvm, 0));
        want.push(("/dev/nvidia-uvm-tools".into(), uvm, 1));
    }
    for (path, ma, mi) in want {
        let id = "node";
        out.push(match have.get(&path) {
            None => check(
                "nodes",
                id,
                Verdict::Fail,
                format!("{path} is missing (expected char {ma}:{mi})"),
                Some("libcuda will try the setuid nvidia-modprobe to create it; create it yourself with nvidia-modprobe -c0 -u, or pass it into the container"),
            ),
            Some(n) if (n.major, n.minor) != (ma, mi) => check(
                "nodes",
                id,
                Verdict::Fail,
                format!("{path} is char {}:{}, not {ma}:{mi} as /proc/devices says", n.major, n.minor),
                Some("remove the stale node and recreate it (nvidia-modprobe -c0 -u), or fix the container's bind mount"),
            ),
            Some(n) if n.mode & 0o006 != 0o006 => check(
                "nodes",
                id,
                Verdict::Warn,
                format!("{path} is char {ma}:{mi} with mode {:04o}: other users cannot open it read-write", n.mode),
                Some("CUDA needs read-write access: the usual mode is 0666 (or a group the users are in)"),
            ),
            Some(n) => check(
                "nodes",
                id,
                Verdict::Ok,
                format!("{path} is char {ma}:{mi}, mode {:04o}", n.mode),
                None,
            ),
        });
    }
}

/// `/proc/driver/nvidia/params` (how the driver makes nodes, excluded
/// GPUs) and the GPUs under `/proc/driver/nvidia/gpus`.
fn param_and_gpu_checks(root: &Path, out: &mut Vec<Check>) {
    let base = root.join("proc/driver/nvidia");
    if !base.join("version").exists() {
        return;
    }
    match fs::read_to_string(base.join("params")) {
        Err(e) => out.push(check(
            "driver",
            "params",
            Verdict::Warn,
            format!("/proc/driver/nvidia/params: {e}"),
            Some("run as root, or check that /proc/driver/nvidia is visible here (containers may hide it)"),
        )),
        Ok(text) => {
            let get = |k: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix(':')))
                    .map(|v| v.trim().trim_matches('"').to_owned())
            };
            let mode = get("DeviceFileMode").and_then(|v| v.parse::<u32>().ok());
            let excluded = get("ExcludedGpus").filter(|v| !v.is_empty());
            let evidence = format!(
                "ModifyDeviceFiles={} DeviceFileUID={} DeviceFileGID={} DeviceFileMode={} ExcludedGpus={}",
                get("ModifyDeviceFiles").unwrap_or_else(|| "?".into()),
                get("DeviceFileUID").unwrap_or_else(|| "?".into()),
                get("DeviceFileGID").unwrap_or_else(|| "?".into()),
                mode.map_or_else(|| "?".into(), |m| format!("{m:04o}")),
                excluded.as_deref().unwrap_or("none"),
            );
            out.push(if mode.is_some_and(|m| m & 0o006 != 0o006) {
                check(
                    "driver",
                    "params",
                    Verdict::Warn,
                    evidence,
                    Some("the driver creates its nodes without read-write for other users (NVreg_DeviceFileMode): users outside DeviceFileGID cannot start CUDA"),
                )
            } else if excluded.is_some() {
                check(
                    "driver",
                    "params",
                    Verdict::Warn,
                    evidence,
                    Some("NVreg_ExcludedGpus hides these GPUs from CUDA: remove them from the module options if they should be used"),
                )
            } else {
                check("driver", "params", Verdict::Ok, evidence, None)
            });
        }
    }
    let mut gpus = 0;
    if let Ok(rd) = fs::read_dir(base.join("gpus")) {
        let mut dirs: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        dirs.sort();
        for d in dirs {
            let Ok(info) = fs::read_to_string(d.join("information")) else {
                continue;
            };
            gpus += 1;
            let field = |k: &str| {
                info.lines()
                    .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_owned()))
                    .unwrap_or_else(|| "?".into())
            };
            let bus = d
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            let excluded = field("GPU Excluded:") == "Yes";
            let evidence = format!(
                "{} at {bus}, minor {}{}",
                field("Model:"),
                field("Device Minor:"),
                if excluded { ", excluded" } else { "" }
            );
            out.push(if excluded {
                check(
                    "driver",
                    "gpu",
                    Verdict::Warn,
                    evidence,
                    Some("the driver excluded this GPU (NVreg_ExcludedGpus, or it failed a check): CUDA will not see it"),
                )
            } else {
                check("driver", "gpu", Verdict::Ok, evidence, None)
            });
        }
    }
    if gpus == 0 {
        out.push(check(
            "driver",
            "gpu",
            Verdict::Fail,
            "the driver lists no GPU under /proc/driver/nvidia/gpus",
            Some("cuInit will find no device (CUDA_ERROR_NO_DEVICE): check lspci and the kernel log (dmesg | grep -i nvrm) for GPUs the driver did not take"),
        ));
    }
}

/// Every check, in order.
pub fn run(root: &Path) -> Vec<Check> {
    let mut out = Vec::new();
    let m = driver_checks(root, &mut out);
    param_and_gpu_checks(root, &mut out);
    node_checks(root, &m, &mut out);
    out
}

/// One line per check, then the hints.
pub fn text(checks: &[Check]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for c in checks {
        let v = match c.verdict {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
        };
        let _ = writeln!(s, "{v} {:<7} {:<14} {}", c.area, c.id, c.evidence);
        if let Some(h) = &c.hint {
            let _ = writeln!(s, "     hint: {h}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(name: &str) -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/hosts")
            .join(name)
    }

    fn by_id<'a>(c: &'a [Check], id: &str) -> Vec<&'a Check> {
        c.iter().filter(|c| c.id == id).collect()
    }

    #[test]
    fn a_healthy_host() {
        let c = run(&tree("healthy"));
        assert!(c.iter().all(|c| c.verdict == Verdict::Ok), "{}", text(&c));
        assert_eq!(
            by_id(&c, "driver_loaded")[0].evidence,
            "open kernel module 580.159.04"
        );
        assert_eq!(
            by_id(&c, "uvm_hmm")[0].evidence,
            "nvidia_uvm is built without HMM (no uvm_hmm_* in /proc/kallsyms), uvm_disable_hmm=N"
        );
        let nodes: Vec<&str> = by_id(&c, "node")
            .iter()
            .map(|c| c.evidence.as_str())
            .collect();
        assert_eq!(
            nodes,
            [
                "/dev/nvidiactl is char 195:255, mode 0666",
                "/dev/nvidia0 is char 195:0, mode 0666",
                "/dev/nvidia-uvm is char 238:0, mode 0666",
                "/dev/nvidia-uvm-tools is char 238:1, mode 0666",
            ]
        );
    }

    #[test]
    fn a_proxmox_like_kernel_with_hmm_on() {
        let c = run(&tree("proxmox-hmm"));
        let h = by_id(&c, "uvm_hmm")[0];
        assert_eq!(h.verdict, Verdict::Warn);
        assert!(h.evidence.contains("built with HMM"), "{}", h.evidence);
        assert!(
            h.evidence.contains("CONFIG_DEVICE_PRIVATE=y"),
            "{}",
            h.evidence
        );
        let hint = h.hint.as_deref().expect("hint");
        assert!(
            hint.contains("uvm_disable_hmm=1") && hint.contains("797"),
            "{hint}"
        );
    }

    #[test]
    fn uvm_not_loaded_and_a_bad_node() {
        let c = run(&tree("no-uvm"));
        let u = by_id(&c, "uvm_loaded")[0];
        assert_eq!(u.verdict, Verdict::Fail);
        let p = by_id(&c, "params")[0];
        assert_eq!(p.verdict, Verdict::Warn);
        assert!(
            p.evidence
                .ends_with("DeviceFileMode=0660 ExcludedGpus=none"),
            "{}",
            p.evidence
        );
        assert!(u.hint.as_deref().is_some_and(|h| h.contains("999")));
        assert!(
            by_id(&c, "uvm_hmm").is_empty(),
            "no HMM verdict without the module"
        );
        let n = by_id(&c, "node");
        assert_eq!(n.len(), 2, "{}", text(&c));
        assert_eq!(n[0].verdict, Verdict::Warn);
        assert_eq!(
            n[0].evidence,
            "/dev/nvidiactl is char 195:255 with mode 0600: other users cannot open it read-write"
        );
        assert_eq!(n[1].verdict, Verdict::Fail);
        assert_eq!(
            n[1].evidence,
            "/dev/nvidia0 is missing (expected char 195:0)"
        );
    }

    #[test]
    fn no_driver_and_a_broken_manifest() {
        let dir = std::env::temp_dir().join(format!("nvprobe-doctor-{}", std::process::id()));
        fs::create_dir_all(dir.join("proc")).expect("mkdir");
        fs::write(dir.join("proc/devices"), "Character devices:\n  1 mem\n").expect("write");
        fs::write(dir.join("dev.manifest"), "/dev/nvidiactl c 195 0666\n").expect("write");
        let c = run(&dir);
        let d = by_id(&c, "driver_loaded")[0];
        assert_eq!(d.verdict, Verdict::Fail);
        assert_eq!(by_id(&c, "uvm_loaded")[0].verdict, Verdict::Fail);
        fs::write(dir.join("proc/devices"), "Character devices:\n195 nvidia\n").expect("write");
        let c = run(&dir);
        let m = by_id(&c, "manifest")[0];
        assert_eq!(m.verdict, Verdict::Fail);
        assert!(m.evidence.ends_with("dev.manifest:1: expected `PATH c MAJOR:MINOR MODE`, got \"/dev/nvidiactl c 195 0666\""), "{}", m.evidence);
        let _ = fs::remove_dir_all(&dir);
    }
}
