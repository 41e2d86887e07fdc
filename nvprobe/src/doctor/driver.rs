//! The driver area: the kernel modules (nvidia, nvidia_uvm and its HMM),
//! the driver's parameters, its GPUs, the PCI view of them, persistence,
//! and reads of /proc/driver/nvidia that did not come back.

use std::path::{Path, PathBuf};

use super::check::{Check, Verdict, check};
use super::kmsg;
use crate::{
    host::{DriverRead, Majors, driver_info, hmm_facts, read_driver_file, read_majors},
    safefs::{self, SafeReadError},
};

/// HMM on and nvidia-uvm errors in this host's kernel log.
const HMM_ERRORS_HINT: &str = concat!(
    "HMM is on in nvidia_uvm and nvidia-uvm reports errors on this host: the case where cuInit returns CUDA_ERROR_NOT_INITIALIZED (3) with 0 devices. ",
    "Reload it without HMM: ",
    nvprobe_model::hmm_reload!(),
    " (persist with options nvidia_uvm uvm_disable_hmm=1 in /etc/modprobe.d); ",
    "see ",
    nvprobe_model::hmm_issues!(),
    " and the CUDA 12.9/13 release notes"
);

/// HMM on, nothing wrong seen yet.
const HMM_ON_HINT: &str = concat!(
    "HMM is on in nvidia_uvm. It has made cuInit fail (CUDA_ERROR_NOT_INITIALIZED, 0 devices) on several kernels: ",
    "open-gpu-kernel-modules issues 797 (NixOS 6.13, 570.86), 901 (EL9 5.14, 570/575), 947 (EL10 6.12, 570-580.95), ",
    "ollama issue 11593 (RTX PRO 6000 Blackwell, 575); the CUDA 12.9 and 13 release notes give the workaround: ",
    nvprobe_model::hmm_reload!(),
    " (or options nvidia_uvm uvm_disable_hmm=1 in /etc/modprobe.d)"
);

/// Read everything under /proc/driver/nvidia in one guarded child: a read
/// that calls into a stuck driver must not hang doctor.
pub(super) fn prefetch(root: &Path) {
    let mut driver_files = vec![
        "proc/driver/nvidia/version".to_owned(),
        "proc/driver/nvidia/params".to_owned(),
    ];
    if let Some(gpus) = safefs::read_dir_noted(root, "proc/driver/nvidia/gpus") {
        driver_files.extend(
            gpus.iter()
                .map(|b| format!("proc/driver/nvidia/gpus/{b}/information")),
        );
    }
    let rels: Vec<&str> = driver_files.iter().map(String::as_str).collect();
    crate::host::prefetch_driver_files(root, &rels, crate::host::DRIVER_READ_TIMEOUT);
}

/// The driver files under ROOT whose read blocked: the driver is stuck.
pub(super) fn proc_driver_check(root: &Path) -> Option<Check> {
    let blocked: Vec<PathBuf> = crate::host::blocked_driver_files()
        .into_iter()
        .filter(|p| p.starts_with(root))
        .collect();
    if blocked.is_empty() {
        return None;
    }
    Some(check(
        "driver",
        "proc_driver",
        Verdict::Fail,
        format!(
            "reading {} did not finish within {} s: the driver is stuck in the kernel",
            blocked
                .iter()
                .map(|p| format!("/{}", p.strip_prefix(root).unwrap_or(p).display()))
                .collect::<Vec<_>>()
                .join(", "),
            crate::host::DRIVER_READ_TIMEOUT.as_secs()
        ),
        Some(
            "a hung GPU or a driver lock held by another process: CUDA calls will hang too. Check the kernel log (dmesg | grep -i -e nvrm -e xid), which processes hold /dev/nvidia* (fuser -v /dev/nvidia*), and whether a GPU reset or reboot is needed",
        ),
    ))
}

/// Kernel config: ROOT/proc/config.gz, else ROOT/boot/config-RELEASE, else
/// an uncompressed ROOT/proc/config; each at most `safefs::GUNZIP_CAP`.
pub(crate) fn kernel_config(root: &Path) -> Option<String> {
    let text = |d: Vec<u8>| String::from_utf8(d).ok();
    if let Ok(d) = safefs::read_gz_noted(root, "proc/config.gz", safefs::CAP, safefs::GUNZIP_CAP)
        && let Some(t) = text(d)
    {
        return Some(t);
    }
    let release =
        safefs::read_text(root, "proc/sys/kernel/osrelease", safefs::CAP).unwrap_or_default();
    let release = release.trim();
    let boot = (!release.is_empty() && !release.contains('/') && release != "..")
        .then(|| format!("boot/config-{release}"));
    boot.and_then(|b| safefs::read_noted(root, &b, safefs::GUNZIP_CAP).ok())
        .or_else(|| safefs::read_noted(root, "proc/config", safefs::GUNZIP_CAP).ok())
        .and_then(text)
}

/// The nvidia and nvidia_uvm modules, and HMM in nvidia_uvm when it is
/// loaded. Returns the majors /proc/devices gives them.
pub(super) fn driver_checks(root: &Path, log: &[String], out: &mut Vec<Check>) -> Majors {
    // Said first: no driver and no node can help a host without a GPU.
    let no_gpu = no_nvidia_gpu(root);
    if let Some(ev) = &no_gpu {
        out.push(check(
            "driver",
            "pci_gpu",
            Verdict::Fail,
            ev.clone(),
            Some("this machine (or VM) has no NVIDIA GPU on its PCI bus, so CUDA cannot start here whatever the driver: run on a GPU host, or pass a GPU through to this VM (its hypervisor's PCI passthrough); a container sees the host's bus, so this is the host's"),
        ));
    }
    out.push(driver_loaded(root, no_gpu.is_some()));
    let read = read_majors(root);
    let m = read.clone().unwrap_or_default();
    let uvm_loaded = safefs::exists(root, "sys/module/nvidia_uvm") || m.uvm.is_some();
    out.push(uvm_loaded_check(
        uvm_loaded,
        &m,
        read.err(),
        no_gpu.is_some(),
    ));
    if uvm_loaded {
        out.push(uvm_hmm(root, log));
    }
    m
}

/// The evidence that the PCI bus holds no NVIDIA GPU; None when it holds
/// one, or when it cannot be told (no readable /sys/bus/pci/devices, or an
/// empty one: a snapshot or a sandbox that hides the bus).
fn no_nvidia_gpu(root: &Path) -> Option<String> {
    let devices = safefs::read_dir_noted(root, "sys/bus/pci/devices")?;
    if devices.is_empty() || !pci_gpus(root).is_empty() {
        return None;
    }
    Some(format!(
        "no NVIDIA display or 3D controller (vendor 10de, class 03xx) among the {} devices of /sys/bus/pci/devices",
        devices.len()
    ))
}

fn driver_loaded(root: &Path, no_gpu: bool) -> Check {
    let info = driver_info(root);
    let why = if info.is_none() {
        unreadable_version(root)
    } else {
        None
    };
    match (info, why) {
        (Some(d), _) => check(
            "driver",
            "driver_loaded",
            Verdict::Ok,
            format!("{} kernel module {}", d.flavor, d.version),
            None,
        ),
        (None, Some(why)) => check(
            "driver",
            "driver_loaded",
            Verdict::Warn,
            format!("cannot tell whether the nvidia module is loaded: {why}"),
            Some(
                "run doctor as a user who may read these files (sudo), or fix the tree's permissions",
            ),
        ),
        (None, None) => check(
            "driver",
            "driver_loaded",
            Verdict::Fail,
            "no /proc/driver/nvidia/version and no /sys/module/nvidia/version: the nvidia module is not loaded",
            Some(if no_gpu {
                "there is no NVIDIA GPU for it to drive (driver/pci_gpu above): loading it would not help"
            } else {
                "load it (modprobe nvidia) and read the kernel log (dmesg | grep -i nvrm) if that fails"
            }),
        ),
    }
}

/// Why neither version file was read, when one of them is there but could
/// not be read (permission denied, a link out of the tree, ...): "/proc/
/// driver/nvidia/version: permission denied (EACCES); no /sys/module/nvidia/
/// version". None when both are simply absent.
fn unreadable_version(root: &Path) -> Option<String> {
    let proc = match read_driver_file(root, "proc/driver/nvidia/version") {
        Err(DriverRead::Failed(e)) => e,
        _ => SafeReadError::NotFound,
    };
    let sys = safefs::read_capped(root, "sys/module/nvidia/version", safefs::CAP)
        .err()
        .unwrap_or(SafeReadError::NotFound);
    if proc == SafeReadError::NotFound && sys == SafeReadError::NotFound {
        return None;
    }
    let say = |rel: &str, e: &SafeReadError| match e {
        SafeReadError::NotFound => format!("no /{rel}"),
        SafeReadError::LinkOutside { .. } | SafeReadError::NotRegular(_) => {
            format!("/{}", e.describe(rel))
        }
        e => format!("/{rel}: {e}"),
    };
    Some(format!(
        "{}; {}",
        say("proc/driver/nvidia/version", &proc),
        say("sys/module/nvidia/version", &sys)
    ))
}

/// Whether nvidia_uvm is loaded: its /sys/module folder or its
/// /proc/devices entry says so. DEVICES is why /proc/devices gave no
/// entries: an unreadable file is no evidence that the entry is absent.
fn uvm_loaded_check(
    uvm_loaded: bool,
    m: &Majors,
    devices: Option<SafeReadError>,
    no_gpu: bool,
) -> Check {
    let not_loaded_hint = if no_gpu {
        "it comes with a GPU to drive, and there is none (driver/pci_gpu above)"
    } else {
        "cuInit fails with 999 without it: modprobe nvidia-uvm (libcuda runs the setuid nvidia-modprobe for this; in a container the host must load it)"
    };
    if uvm_loaded {
        return check(
            "driver",
            "uvm_loaded",
            Verdict::Ok,
            match m.uvm {
                Some(ma) => format!("nvidia_uvm is loaded (char major {ma})"),
                None => "nvidia_uvm is loaded".to_owned(),
            },
            None,
        );
    }
    match devices {
        None => check(
            "driver",
            "uvm_loaded",
            Verdict::Fail,
            "nvidia_uvm is not loaded (no /sys/module/nvidia_uvm, no nvidia-uvm in /proc/devices)",
            Some(not_loaded_hint),
        ),
        Some(SafeReadError::NotFound) => check(
            "driver",
            "uvm_loaded",
            Verdict::Fail,
            "nvidia_uvm is not loaded (no /sys/module/nvidia_uvm, and no /proc/devices to list it)",
            Some(not_loaded_hint),
        ),
        Some(e) => check(
            "driver",
            "uvm_loaded",
            Verdict::Warn,
            format!(
                "cannot tell whether nvidia_uvm is loaded: no /sys/module/nvidia_uvm, and /proc/devices could not be read ({e})"
            ),
            Some(
                "run doctor as a user who may read /proc/devices (sudo), or fix the tree's proc/devices (a regular file, as /proc/devices is); without nvidia_uvm, cuInit fails with 999",
            ),
        ),
    }
}

/// Whether the kernel config has what HMM needs; None without a config.
fn kernel_hmm(root: &Path) -> Option<bool> {
    let cfg = kernel_config(root);
    let has = |k: &str| {
        cfg.as_ref()
            .map(|c| c.lines().any(|l| l == format!("{k}=y")))
    };
    match (has("CONFIG_HMM_MIRROR"), has("CONFIG_DEVICE_PRIVATE")) {
        (Some(a), Some(b)) => Some(a && b),
        _ => None,
    }
}

/// HMM in nvidia_uvm: compiled in (kallsyms, else the kernel config) and
/// not disabled, with nvidia-uvm errors in this host's kernel log as the
/// evidence that it bites here.
fn uvm_hmm(root: &Path, log: &[String]) -> Check {
    let f = hmm_facts(root);
    let kernel_hmm = kernel_hmm(root);
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
    // Evidence from this host: nvidia-uvm errors in the kernel log.
    let uvm_errors: Vec<&String> = kmsg::findings(log)
        .into_iter()
        .filter(|(k, _)| *k == "uvm_error")
        .map(|(_, l)| l)
        .collect();
    match (compiled, f.disabled) {
        (Some(true), Some(false)) if !uvm_errors.is_empty() => check(
            "driver",
            "uvm_hmm",
            Verdict::Fail,
            format!(
                "{evidence}; the kernel log has nvidia-uvm errors: {}",
                uvm_errors
                    .iter()
                    .rev()
                    .take(3)
                    .map(|l| l.trim())
                    .collect::<Vec<_>>()
                    .join(" | ")
            ),
            Some(HMM_ERRORS_HINT),
        ),
        (Some(true), Some(false)) => check(
            "driver",
            "uvm_hmm",
            Verdict::Warn,
            evidence,
            Some(HMM_ON_HINT),
        ),
        (_, Some(true)) => check("driver", "uvm_hmm", Verdict::Ok, evidence, None),
        (Some(false), _) => check("driver", "uvm_hmm", Verdict::Ok, evidence, None),
        _ => check(
            "driver",
            "uvm_hmm",
            Verdict::Warn,
            evidence,
            Some(
                "cannot tell whether nvidia_uvm has HMM (run as root so /proc/kallsyms shows module symbols); if cuInit fails with 3 and 0 devices, try uvm_disable_hmm=1",
            ),
        ),
    }
}

/// `/proc/driver/nvidia/params` (how the driver makes nodes, excluded
/// GPUs) and the GPUs under `/proc/driver/nvidia/gpus`.
pub(super) fn param_and_gpu_checks(root: &Path, out: &mut Vec<Check>) {
    if !safefs::exists(root, "proc/driver/nvidia/version") {
        return;
    }
    out.extend(params_check(root));
    gpu_checks(root, out);
}

/// The driver's parameters; None when their read blocked (`proc_driver`
/// reports that).
fn params_check(root: &Path) -> Option<Check> {
    let text = match read_driver_file(root, "proc/driver/nvidia/params") {
        Err(DriverRead::Blocked) => return None,
        Err(DriverRead::Failed(e)) => {
            return Some(check(
                "driver",
                "params",
                Verdict::Warn,
                format!("/proc/driver/nvidia/params: {e}"),
                Some(
                    "run as root, or check that /proc/driver/nvidia is visible here (containers may hide it)",
                ),
            ));
        }
        Ok(text) => text,
    };
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
    Some(if mode.is_some_and(|m| m & 0o006 != 0o006) {
        check(
            "driver",
            "params",
            Verdict::Warn,
            evidence,
            Some(
                "the driver creates its nodes without read-write for other users (NVreg_DeviceFileMode): users outside DeviceFileGID cannot start CUDA",
            ),
        )
    } else if excluded.is_some() {
        check(
            "driver",
            "params",
            Verdict::Warn,
            evidence,
            Some(
                "NVreg_ExcludedGpus hides these GPUs from CUDA: remove them from the module options if they should be used",
            ),
        )
    } else {
        check("driver", "params", Verdict::Ok, evidence, None)
    })
}

/// One check per GPU the driver lists, and a failure when it lists none.
fn gpu_checks(root: &Path, out: &mut Vec<Check>) {
    let mut gpus = 0;
    if let Some(mut dirs) = safefs::read_dir_noted(root, "proc/driver/nvidia/gpus") {
        dirs.sort();
        for d in dirs {
            if let Some(c) = gpu_check(root, &d) {
                gpus += 1;
                out.push(c);
            }
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

/// The GPU of /proc/driver/nvidia/gpus/BUS; None when its information
/// file cannot be read (it does not count as a GPU then).
fn gpu_check(root: &Path, bus: &str) -> Option<Check> {
    let info = match read_driver_file(root, &format!("proc/driver/nvidia/gpus/{bus}/information")) {
        Ok(i) => i,
        Err(DriverRead::Blocked) => {
            return Some(check(
                "driver",
                "gpu",
                Verdict::Fail,
                format!(
                    "{bus}: the driver did not answer for this GPU (its information file blocked)"
                ),
                Some(
                    "the GPU or its driver state is stuck: see the proc_driver check and the kernel log",
                ),
            ));
        }
        Err(_) => return None,
    };
    let field = |k: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_owned()))
            .unwrap_or_else(|| "?".into())
    };
    let excluded = field("GPU Excluded:") == "Yes";
    let evidence = format!(
        "{} at {bus}, minor {}{}",
        field("Model:"),
        field("Device Minor:"),
        if excluded { ", excluded" } else { "" }
    );
    Some(if excluded {
        check(
            "driver",
            "gpu",
            Verdict::Warn,
            evidence,
            Some(
                "the driver excluded this GPU (NVreg_ExcludedGpus, or it failed a check): CUDA will not see it",
            ),
        )
    } else {
        check("driver", "gpu", Verdict::Ok, evidence, None)
    })
}

/// NVIDIA display/3D controllers on the PCI bus: (bus id, "10de:2335",
/// subsystem, bound driver).
fn pci_gpus(root: &Path) -> Vec<(String, String, String, String)> {
    let Some(devices) = safefs::read_dir_noted(root, "sys/bus/pci/devices") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for bus in devices {
        let p = format!("sys/bus/pci/devices/{bus}");
        let read = |f: &str| {
            safefs::read_text(root, &format!("{p}/{f}"), safefs::CAP)
                .map(|s| s.trim().trim_start_matches("0x").to_owned())
                .unwrap_or_default()
        };
        if read("vendor") != "10de" || !read("class").starts_with("03") {
            continue;
        }
        // Live: a symlink to the driver; a snapshot: a file with its name.
        let driver = safefs::read_link(root, format!("{p}/driver"))
            .ok()
            .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
            .or_else(|| {
                safefs::read_text(root, &format!("{p}/driver"), safefs::CAP)
                    .map(|s| s.trim().to_owned())
            })
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "none".into());
        out.push((
            bus.clone(),
            format!("10de:{}", read("device")),
            format!("{}:{}", read("subsystem_vendor"), read("subsystem_device")),
            driver,
        ));
    }
    out.sort();
    out
}

/// PCI view of the GPUs: each NVIDIA display controller, its ids, whether
/// the nvidia driver holds it, and whether the kernel log says it was lost.
pub(super) fn pci_checks(root: &Path, log: &[String], out: &mut Vec<Check>) {
    let gpus = pci_gpus(root);
    let listed: Vec<String> = safefs::read_dir_noted(root, "proc/driver/nvidia/gpus")
        .map(|v| v.iter().map(|b| b.to_lowercase()).collect())
        .unwrap_or_default();
    let findings = kmsg::findings(log);
    for (bus, id, sub, driver) in gpus {
        let short = bus.trim_start_matches("0000:").to_lowercase();
        // The driver's lines about this GPU (its domain:bus:slot), of a kind.
        let slot = kmsg::pci_slot(&bus);
        let about = |kind: &str| -> Vec<&String> {
            findings
                .iter()
                .filter(|(k, l)| {
                    *k == kind && slot.is_some() && kmsg::line_gpu(kmsg::message(l)) == slot
                })
                .map(|(_, l)| *l)
                .collect()
        };
        let lost = about("gpu_lost");
        let failed_init = about("gpu_init_failed");
        let ev = format!("{bus} [{id}] subsystem {sub}, driver {driver}");
        out.push(if let Some(l) = lost.last() {
            check(
                "driver",
                "pci_gpu",
                Verdict::Fail,
                format!("{ev}; lost: {}", l.trim()),
                Some("the GPU fell off the bus (Xid 79): it is unusable until a reset or reboot; check power, cooling and PCIe (or the host's passthrough)"),
            )
        } else if let Some(l) = failed_init.last() {
            check(
                "driver",
                "pci_gpu",
                Verdict::Fail,
                format!("{ev}; {}", l.trim()),
                Some("the driver could not initialise this GPU: read the NVRM lines around it in the kernel log"),
            )
        } else if driver != "nvidia" {
            check(
                "driver",
                "pci_gpu",
                Verdict::Warn,
                format!("{ev}: not held by the nvidia driver"),
                Some(if driver == "vfio-pci" {
                    "bound to vfio-pci (kept for a VM): CUDA on this host cannot use it"
                } else if driver == "nouveau" {
                    "nouveau holds it: blacklist nouveau and load nvidia"
                } else {
                    "no driver holds it: load nvidia, and read the kernel log if it refuses the device"
                }),
            )
        } else if !listed.iter().any(|b| b.trim_start_matches("0000:") == short) {
            check(
                "driver",
                "pci_gpu",
                Verdict::Warn,
                format!("{ev}, but /proc/driver/nvidia/gpus does not list it"),
                Some("the driver holds the device without presenting it: see the kernel log"),
            )
        } else {
            check("driver", "pci_gpu", Verdict::Ok, ev, None)
        });
    }
}

/// Persistence: nvidia-persistenced running, or the driver's legacy
/// persistence mode (its kernel-log line). Off is a note: the first process
/// pays the GPU's cold initialisation.
pub(super) fn persistence_check(root: &Path, live: bool, log: &[String], out: &mut Vec<Check>) {
    if driver_info(root).is_none() {
        return;
    }
    let daemon = if live {
        procfs::process::all_processes().ok().is_some_and(|ps| {
            ps.flatten()
                .any(|p| p.stat().is_ok_and(|s| s.comm == "nvidia-persistenced"))
        })
    } else {
        safefs::read_text(root, "processes.list", safefs::CAP)
            .is_some_and(|t| t.lines().any(|l| l.trim() == "nvidia-persistenced"))
    };
    let legacy = log.iter().any(|l| {
        kmsg::message(l).starts_with("NVRM: Persistence mode is deprecated")
            && kmsg::driver_line(kmsg::message(l))
    });
    out.push(if daemon {
        check("driver", "persistence", Verdict::Ok, "nvidia-persistenced is running", None)
    } else if legacy {
        check(
            "driver",
            "persistence",
            Verdict::Ok,
            "legacy persistence mode is on (kernel log: \"Persistence mode is deprecated\")",
            Some("note: nvidia-persistenced replaces the legacy mode in future drivers"),
        )
    } else {
        check(
            "driver",
            "persistence",
            Verdict::Ok,
            "persistence looks off (no nvidia-persistenced process, no legacy-mode line in the kernel log)",
            Some("note: without persistence the first process to open a GPU pays its cold initialisation (hundreds of ms to seconds in cuInit); start nvidia-persistenced to keep GPUs initialised"),
        )
    });
}
