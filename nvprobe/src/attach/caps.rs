//! After the probes are attached, nvprobe keeps only the capabilities it
//! still uses (deploy/CAPABILITIES.md measured each one): BPF and PERFMON
//! for the uprobes it attaches to libcuda copies it meets later,
//! SYS_PTRACE and DAC_READ_SEARCH to read the identity of other users'
//! processes, and SYS_ADMIN only while something still needs it (kernel
//! stacks in stall reports, libcuda uprobes made as perf events where
//! uprobe_multi is refused), and SYSLOG where the kernel log is read
//! through syslog(2) (/dev/kmsg refused, as in a container). Everything else root holds (loading modules,
//! raw I/O, overriding file permissions, changing ids, chroot and so
//! setns into another mount namespace, …) is dropped from the effective,
//! permitted, inheritable, ambient and bounding sets, so that a
//! compromised nvprobe cannot regain it.

use caps::{CapSet, Capability, CapsHashSet};

/// What is kept once attached, always.
pub const KEPT: [Capability; 4] = [
    Capability::CAP_BPF,
    Capability::CAP_PERFMON,
    Capability::CAP_SYS_PTRACE,
    Capability::CAP_DAC_READ_SEARCH,
];

/// Drop every capability but [`KEPT`] (and CAP_SYS_ADMIN when `sys_admin`:
/// something the run does still needs it; CAP_SYSLOG when `syslog`: the
/// kernel log is followed through syslog(2), which checks it at every
/// read), those this process has, in the
/// calling thread, which must be the only one (capabilities are per
/// thread; threads made later inherit the reduced sets). Returns the names
/// kept, or why dropping failed (nvprobe then carries on with what it
/// had: it is a hardening step, not a requirement).
pub fn drop_unneeded(sys_admin: bool, syslog: bool) -> Result<Vec<String>, String> {
    let mut keep: CapsHashSet = KEPT.into_iter().collect();
    if sys_admin {
        keep.insert(Capability::CAP_SYS_ADMIN);
    }
    if syslog {
        keep.insert(Capability::CAP_SYSLOG);
    }
    let permitted = caps::read(None, CapSet::Permitted).map_err(|e| e.to_string())?;
    let kept: CapsHashSet = permitted.intersection(&keep).copied().collect();
    // Bounding first (needs CAP_SETPCAP, still held); without SETPCAP (a
    // unit's bounding set already narrowed) the bound stays as it is.
    if caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP).unwrap_or(false) {
        for c in caps::all() {
            if !kept.contains(&c) && caps::has_cap(None, CapSet::Bounding, c).unwrap_or(false) {
                caps::drop(None, CapSet::Bounding, c).map_err(|e| format!("bounding {c}: {e}"))?;
            }
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(|e| format!("ambient: {e}"))?;
    caps::clear(None, CapSet::Inheritable).map_err(|e| format!("inheritable: {e}"))?;
    caps::set(None, CapSet::Effective, &kept).map_err(|e| format!("effective: {e}"))?;
    caps::set(None, CapSet::Permitted, &kept).map_err(|e| format!("permitted: {e}"))?;
    let mut names: Vec<String> = kept.iter().map(|c| c.to_string()).collect();
    names.sort();
    Ok(names)
}
