//! The diagnoses of the NVIDIA nodes and driver files a start-up could not
//! reach: missing, of another device, refused (by mode, a device cgroup,
//! a security module), or a module not loaded.

use super::facts::PathWhy;
use super::{
    state::ProcInit,
    table::{DiagId, Diagnosis, Facts, diag_at},
};
use crate::decode::{DeviceKind, node_kind};

pub(super) fn node_problems(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    for (path, why) in &f.st.path_problems {
        let errno = why.errno().filter(|_| matches!(why, PathWhy::Errno(_)));
        let id = node_problem_id(f, path, why, errno);
        let limits = f.st.info.as_ref().and_then(|i| i.limits.as_ref());
        let evidence = match id {
            DiagId::NodeCreateFailed => {
                format!(
                    "{path}: {why}{}",
                    super::rules_refused::mknod_facts(f.st, why)
                )
            }
            DiagId::ModuleNotLoaded => {
                let m = module_of_entry(path).unwrap_or("nvidia");
                format!("{path}: {why}: the {m} kernel module is not loaded")
            }
            DiagId::NodePermission | DiagId::NodeNodev | DiagId::SecurityModuleDenied => {
                format!("{path}: {why}{}", mode_facts(f.st, path, id))
            }
            DiagId::NotPermitted => format!(
                "{path}: {why}: not the file's mode (that refuses with EACCES): {}",
                super::rules_refused::eperm_cause(f.st, path)
            ),
            DiagId::FileLimit if errno == Some(libc::EMFILE) => format!(
                "{path}: {why}: the process's open-file limit (RLIMIT_NOFILE) was reached{}",
                match limits.and_then(|l| l.nofile.map(|n| (n, l.fds))) {
                    Some(((Some(soft), hard), fds)) => format!(
                        " (soft limit {soft}, hard {}{})",
                        hard.map_or_else(|| "unlimited".to_owned(), |h| h.to_string()),
                        fds.map_or_else(String::new, |n| format!(
                            "; {n} descriptors were open {}",
                            f.st.info
                                .as_ref()
                                .map_or("when nvprobe read it", |i| i.read_when())
                        ))
                    ),
                    _ => String::new(),
                }
            ),
            DiagId::FileLimit => {
                format!("{path}: {why}: the system's file table is full (fs.file-max)")
            }
            DiagId::NodeStale => format!(
                "{path}: {why}: no {} at this node's device number",
                if errno == Some(libc::ENXIO) {
                    "driver answers"
                } else {
                    "device of the driver"
                }
            ),
            // The decoder's words name the path already ("/dev/nvidia-uvm
            // is device 1:3 (/dev/null, no NVIDIA device), not the NVIDIA uvm node").
            _ if matches!(why, PathWhy::Mismatch(m) if m.starts_with(path.as_str())) => why.text(),
            _ => format!("{path}: {why}"),
        };
        if !out.iter().any(|d| d.evidence == evidence) {
            let mut d = diag_at(id, path, evidence);
            if !crate::decode::is_device_path(path) {
                // A file of the driver's in /sys or /proc, not a node: no
                // node to create, no device cgroup that decides it.
                match id {
                    DiagId::NodeMissing => d.hint = HINT_DRIVER_FILE_MISSING,
                    DiagId::NotPermitted => d.hint = super::rules_refused::HINT_EPERM_NOT_DEVICE,
                    _ => {}
                }
            }
            out.push(d);
        }
    }
}

/// A missing driver file that is not a device node (/sys/module/…,
/// /proc/driver/nvidia/…), with the module in use.
const HINT_DRIVER_FILE_MISSING: &str = "the path is the driver's own file in /sys or /proc, not a device node, and \
the process does not see it: its /sys or /proc is not this host's (a container or sandbox that mounts neither, or \
masks the path), or the module is not loaded (lsmod | grep nvidia). Mount sysfs and procfs into the container, as \
container runtimes do by default, or unmask the path";

/// Which rule a failed NVIDIA path call is, in the kernel's order of
/// checks (`errno`: the call's own, not a mknod's).
fn node_problem_id(f: &Facts<'_>, path: &str, why: &PathWhy, errno: Option<i32>) -> DiagId {
    // The cause decides the id (and so the hint); a missing or unusable
    // uvm node has its own, since CUDA needs it and NVML does not.
    let module_entry = module_of_entry(path).is_some_and(|m| {
        // Not when the module's own node was used (its entry was then
        // missing for another reason: a mask, a container's /sys).
        let used = match m {
            "nvidia_uvm" => f.st.uvm_touched,
            "nvidia" => f.st.calls > 0,
            _ => false,
        };
        !used
    });
    if matches!(why, PathWhy::Mknod(..)) {
        DiagId::NodeCreateFailed
    } else if errno == Some(libc::ENOENT) && module_entry {
        // Seen on the real module (535, nvprobe's kernel tier): without
        // nvidia_uvm, libcuda reads /sys/module/nvidia_uvm/initstate,
        // gets ENOENT and returns 999, running nothing to load it.
        DiagId::ModuleNotLoaded
    } else if matches!(errno, Some(libc::EMFILE | libc::ENFILE)) {
        // A limit, whichever path hit it: the node is not at fault.
        DiagId::FileLimit
    } else if errno == Some(libc::EACCES) {
        eacces_id(f.st, path)
    } else if errno == Some(libc::EPERM) {
        // The kernel's order of checks on an open: the mode and the
        // capabilities answer EACCES (generic_permission), the device
        // cgroup EPERM (devcgroup_inode_permission), a seccomp filter
        // whatever its profile says.
        DiagId::NotPermitted
    } else if matches!(errno, Some(libc::ENXIO | libc::ENODEV))
        && crate::decode::is_device_path(path)
    {
        // chrdev_open finds no driver at this device number (ENXIO), or
        // the driver has no device at this minor (ENODEV).
        DiagId::NodeStale
    } else if matches!(why, PathWhy::Mismatch(_)) {
        // Another file at the path (/dev/null bind-mounted over the uvm
        // node, a regular file): loading the module or creating the node
        // would not replace it, so this outranks the uvm rule.
        DiagId::NodeWrongDevice
    } else if matches!(
        node_kind(path),
        Some(DeviceKind::Uvm | DeviceKind::UvmTools)
    ) {
        DiagId::UvmUnusable
    } else if errno == Some(libc::ENOENT) {
        DiagId::NodeMissing
    } else {
        DiagId::NodeError
    }
}

/// The node as the process saw it, and who the process is.
fn node_access<'a>(
    st: &'a ProcInit,
    path: &str,
) -> Option<(
    &'a crate::attribution::Access,
    &'a crate::attribution::NodeFact,
)> {
    let a = st.info.as_ref()?.access.as_ref()?;
    Some((a, a.nodes.iter().find(|n| n.path == path && n.chr)?))
}

/// Which check refused an open with EACCES, in the kernel's order
/// (fs/namei.c `may_open`): a nodev mount first (`may_open_dev`, before
/// any permission), then the mode and owner against the process's ids,
/// groups and CAP_DAC_OVERRIDE (`inode_permission`), then a security
/// module (its inode or file hook). Without the facts, the mode is the
/// first suspect.
fn eacces_id(st: &ProcInit, path: &str) -> DiagId {
    let Some((a, n)) = node_access(st, path) else {
        return DiagId::NodePermission;
    };
    // The node's own mount (a recording made before nodes carried it:
    // the one holding /dev/nvidiactl).
    match (n.nodev.or(a.dev_nodev), a.mode_allows_rw(n)) {
        (Some(true), _) => DiagId::NodeNodev,
        (Some(false), Some(true)) => DiagId::SecurityModuleDenied,
        _ => DiagId::NodePermission,
    }
}

/// The facts behind an EACCES diagnosis.
fn mode_facts(st: &ProcInit, path: &str, id: DiagId) -> String {
    let Some((a, n)) = node_access(st, path) else {
        return String::new();
    };
    let node = format!("the node is {:04o} {}:{}", n.mode, n.uid, n.gid);
    match id {
        DiagId::NodeNodev if a.mode_allows_rw(n) == Some(false) => format!(
            ": the mount holding it is nodev, which the kernel checks before the mode (the mode would refuse it \
too: {node}; the process runs as {})",
            a.who()
        ),
        DiagId::NodeNodev if a.mode_allows_rw(n) == Some(true) => format!(
            ": the mode allows it ({node}; the process runs as {}), but the /dev it is in is mounted nodev",
            a.who()
        ),
        DiagId::NodeNodev => format!(": the mount holding it is nodev ({node})"),
        DiagId::SecurityModuleDenied => format!(
            ": the mode allows it ({node}; the process runs as {}) and /dev is not nodev: a security module refused it{}",
            a.who(),
            super::rules_refused::lsm_text(a)
        ),
        _ if a.mode_allows_rw(n) == Some(false) => format!(
            ": the mode refuses read and write ({node}; the process runs as {})",
            a.who()
        ),
        _ => String::new(),
    }
}

/// The module whose absence a missing `path` shows: `/sys/module/M`,
/// `/sys/module/M/initstate` (M one of NVIDIA's), `/proc/driver/nvidia`
/// and its `version` (nvidia). Other entries (parameters, other modules'
/// files, masked paths) say nothing about it.
pub(super) fn module_of_entry(path: &str) -> Option<&str> {
    if matches!(path, "/proc/driver/nvidia" | "/proc/driver/nvidia/version") {
        return Some("nvidia");
    }
    let rest = path.strip_prefix("/sys/module/")?;
    let m = rest.strip_suffix("/initstate").unwrap_or(rest);
    matches!(m, "nvidia" | "nvidia_uvm" | "nvidia_modeset" | "nvidia_drm").then_some(m)
}
