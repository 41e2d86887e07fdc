//! The evidence of the mechanisms that refuse a call before the driver
//! sees it, in the kernel's order: seccomp and the device cgroup (EPERM),
//! a user namespace (mknod), the security modules (EACCES when the mode
//! allows it), and the limits a process runs out of (rlimits, the
//! cgroup's pids and memory).

use super::{
    facts::{CallResult, PathWhy},
    state::ProcInit,
    table::{DiagId, Diagnosis, diag, diag_at, plural},
};
use crate::attribution::{Access, CgroupCount, DevRule, Limits};
use crate::decode::Call;

/// [`DiagId::NotPermitted`]'s hint for a call that is not on a device (the
/// device cgroup decides device opens only).
pub(crate) const HINT_EPERM_NOT_DEVICE: &str = "EPERM for a call on no device is a seccomp profile or sandbox \
that returns EPERM (Seccomp and Seccomp_filters in /proc/PID/status; docker --security-opt seccomp=, systemd \
SystemCallFilter=, a language runtime's or sandbox library's own filter): allow the call, or run without the filter \
to tell";

/// [`HINT_EPERM_NOT_DEVICE`] where no seccomp filter was in place when
/// nvprobe read the process.
pub(crate) const HINT_EPERM_NO_FILTER: &str = "EPERM for a call on no device, with no seccomp filter in place when \
nvprobe read the process: a filter installed after that (a sandbox library's, a language runtime's), or a \
permission the call checks: a capability (mlock and MAP_LOCKED without CAP_IPC_LOCK past RLIMIT_MEMLOCK, MAP_HUGETLB \
outside the hugetlb group), a noexec mount (an executable mapping of a file there), a sealed memory file; the \
failed call's arguments say which";

/// Who answered EPERM to a call on `path`: a seccomp filter (any path) or
/// the device cgroup (a device node), with the facts that decide between
/// them (the process's filters, the device programs of its cgroup, cgroup
/// v1's devices.list).
pub(crate) fn eperm_cause(st: &ProcInit, path: &str) -> String {
    let info = st.info.as_ref();
    let filters = info
        .and_then(|i| i.limits.as_ref())
        .and_then(|l| l.seccomp_filters);
    let access = info.and_then(|i| i.access.as_ref());
    let programs = access.and_then(|a| a.device_programs);
    let list = access
        .map(|a| a.devices_list.as_slice())
        .unwrap_or_default();
    let when = info.map_or("", |i| i.read_when());
    let seccomp = match filters {
        Some(n) if n > 0 => format!("the process ran under {n} seccomp filter{}", plural(n)),
        Some(_) => format!("no seccomp filter was in place when nvprobe read the process ({when})"),
        None => String::new(),
    };
    if !crate::decode::is_device_path(path) {
        return join(
            "not a device, so not the device cgroup: a seccomp filter or sandbox refused it",
            &seccomp,
        );
    }
    let node = access.and_then(|a| a.node_devno(path));
    let rules = access.map(|a| a.device_rules()).unwrap_or_default();
    let v1_refuses = !list.is_empty() && !rules.iter().any(|r| v1_allows(r, node));
    let cgroup = match (programs, v1_refuses) {
        (_, true) => format!(
            "the cgroup's devices.list allows no NVIDIA device ({})",
            list.join(", ")
        ),
        (Some(n), _) if n > 0 => format!(
            "{n} device program{} (cgroup v2 BPF_CGROUP_DEVICE) decide{} this process's device opens",
            plural(n),
            if n == 1 { "s" } else { "" }
        ),
        (Some(_), _) => "no device program is attached to the process's cgroup".to_owned(),
        (None, _) => String::new(),
    };
    let no_filter = filters == Some(0);
    let devcg_possible = v1_refuses || programs.is_some_and(|n| n > 0);
    let verdict = match (
        devcg_possible,
        no_filter,
        programs.is_some() || !list.is_empty(),
    ) {
        (true, true, _) => "the device cgroup refused it",
        (false, false, true) => "a seccomp filter refused it (no device cgroup rule applies)",
        (false, true, true) => {
            "neither a seccomp filter nor a device cgroup was in place when nvprobe read the process: one set up later, \
or another sandbox, refused it"
        }
        _ => "the device cgroup or a seccomp filter refused it",
    };
    let facts: Vec<&str> = [cgroup.as_str(), seccomp.as_str()]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    if facts.is_empty() {
        verdict.to_owned()
    } else {
        format!("{verdict} ({})", facts.join("; "))
    }
}

/// Whether one cgroup v1 `devices.list` rule lets the process read or
/// write the node `node` (its device number as the process saw it; any
/// NVIDIA char device when it is unknown).
fn v1_allows(rule: &DevRule, node: Option<(u32, u32)>) -> bool {
    if !rule.read_or_write {
        return false;
    }
    if rule.all {
        return true;
    }
    if !rule.char_dev {
        return false;
    }
    let matches = |want: Option<u32>, have: u32| want.is_none_or(|w| w == have);
    match node {
        Some((maj, min)) => matches(rule.major, maj) && matches(rule.minor, min),
        // Unknown node: any entry for the NVIDIA major or any major.
        None => rule.major.is_none_or(|m| m == nvprobe_common::NVIDIA_MAJOR),
    }
}

fn join(a: &str, b: &str) -> String {
    if b.is_empty() {
        a.to_owned()
    } else {
        format!("{a}; {b}")
    }
}

/// Why a mknod was refused, from what the process ran under: a
/// read-only /dev (EROFS), a user namespace (EPERM whatever its
/// capabilities there), no CAP_MKNOD.
pub(crate) fn mknod_facts(st: &ProcInit, why: &PathWhy) -> String {
    let Some(a) = st.info.as_ref().and_then(|i| i.access.as_ref()) else {
        return String::new();
    };
    let mut v = Vec::new();
    if why.errno() == Some(libc::EROFS) || a.dev_readonly == Some(true) {
        v.push("the /dev it is in is mounted read-only".to_owned());
    }
    if let Some(m) = &a.userns {
        v.push(format!(
            "the process runs in a user namespace (uid_map {m}), where creating a device node is refused \
whatever its capabilities there"
        ));
    } else if why.errno() == Some(libc::EPERM)
        && let Some(c) = a
            .cap_eff
            .as_deref()
            .and_then(|c| u64::from_str_radix(c, 16).ok())
        && c & CAP_MKNOD == 0
    {
        v.push("the process has no CAP_MKNOD".to_owned());
    }
    v.into_iter().map(|x| format!("; {x}")).collect()
}

/// CAP_MKNOD (27).
const CAP_MKNOD: u64 = 1 << 27;

/// The security modules active on the host and the process's label.
pub(crate) fn lsm_text(a: &Access) -> String {
    let mut v = Vec::new();
    if let Some(l) = &a.lsm {
        v.push(format!("active on the host: {l}"));
    }
    if let Some(l) = &a.label {
        v.push(format!("the process's label: {l}"));
    }
    if v.is_empty() {
        String::new()
    } else {
        format!(" ({})", v.join("; "))
    }
}

/// The limits a start-up can run out of besides descriptors: the cgroup's
/// tasks (a thread libcuda starts) and memory, the address-space rlimit.
pub(crate) fn limit_facts(l: &Limits) -> Vec<String> {
    let mut v = Vec::new();
    let count = |what: &str, c: &CgroupCount, unit: &str| {
        format!(
            "{what} {}{unit} of {}{}",
            c.current,
            c.max
                .map_or_else(|| "max".to_owned(), |m| format!("{m}{unit}")),
            if c.at_limit() { " (at the limit)" } else { "" }
        )
    };
    if let Some(p) = &l.pids {
        v.push(count("the cgroup's tasks (pids.current)", p, ""));
    }
    if let Some(m) = l.memory.as_ref().filter(|m| m.max.is_some()) {
        v.push(count("the cgroup's memory (memory.current)", m, " bytes"));
    }
    if let Some((Some(soft), _)) = l.address_space {
        v.push(format!("address-space limit (RLIMIT_AS) {soft} bytes"));
    }
    v
}

/// NV_ESC_SET_NUMA_STATUS: the one escape the driver itself refuses with
/// EACCES (to a process without root).
const SET_NUMA_STATUS: u32 = 0xD8;

/// The start-up's failed NVIDIA ioctl was refused with EACCES or EPERM
/// after its entry was traced (a filter answers before that:
/// `calls_blocked`). ioctl(2) runs the security modules' `file_ioctl`
/// hook (security_file_ioctl) before the driver, and the driver answers
/// EACCES to one escape only (NV_ESC_SET_NUMA_STATUS without root:
/// kernel-open/nvidia/nv.c, 580 and 595) and EPERM to none; nvidia-uvm
/// answers neither. So any other is a security module's ioctl rule.
pub(crate) fn ioctl_refused(st: &ProcInit) -> Option<Diagnosis> {
    let f = st.last_failure.as_ref()?;
    let errno = match f.result {
        CallResult::Errno(e @ (libc::EACCES | libc::EPERM)) => e,
        _ => return None,
    };
    if !matches!(f.call.call, Call::Escape(_) | Call::Uvm(_))
        || (f.call.call == Call::Escape(SET_NUMA_STATUS) && errno == libc::EACCES)
    {
        return None;
    }
    let lsm = st
        .info
        .as_ref()
        .and_then(|i| i.access.as_ref())
        .map_or(String::new(), lsm_text);
    Some(diag(
        DiagId::IoctlRefused,
        format!(
            "{} failed with {} on a descriptor that had opened: the driver answers no ioctl a start-up makes with \
EACCES or EPERM, and ioctl(2) asks the security modules (security_file_ioctl) before the driver, so a security \
module's ioctl rule refused it{lsm}",
            f.call.text(),
            f.result.text(),
        ),
    ))
}

/// An NVIDIA command refused with EPERM or EACCES at the system call's
/// exit with no ioctl record of it failing so (its entry was never
/// traced), while the process's other ioctls were: a seccomp filter on
/// that command (an argument filter: seccomp runs before the entry
/// tracepoint). [`ioctls_unseen`] says it when no ioctl was traced.
pub(crate) fn command_blocked(st: &ProcInit) -> Option<Diagnosis> {
    let e = st.command_refused?;
    if st.calls == 0 {
        return None;
    }
    let uvm = (e.request >> 8) & 0xff != u64::from(b'F');
    let call = if uvm {
        Call::Uvm(e.request as u32)
    } else {
        Call::Escape((e.request & 0xff) as u32)
    };
    // Traced and refused: the driver's or a security module's answer.
    if st.traced_refusals.contains(&call) {
        return None;
    }
    let name = if uvm {
        crate::decode::uvm::lookup(e.request as u32).map(|c| c.name)
    } else {
        crate::decode::escape::lookup((e.request & 0xff) as u32).map(|c| c.name)
    }
    .unwrap_or("an NVIDIA command");
    let node = if uvm {
        "/dev/nvidia-uvm"
    } else {
        "/dev/nvidiactl"
    };
    let filters = st
        .info
        .as_ref()
        .and_then(|i| i.limits.as_ref())
        .and_then(|l| l.seccomp_filters);
    let ran = filters.filter(|&n| n > 0).map_or(String::new(), |n| {
        format!("; the process ran under {n} seccomp filter{}", plural(n))
    });
    let who = match (filters, st.ioctls_in_driver) {
        (Some(0), _) => "no seccomp filter was in place, so a security module's ioctl rule refused that command \
before the driver saw it"
            .to_owned(),
        // The driver layer traces inside the driver: a security module's
        // refusal comes before it too.
        (_, true) => format!(
            "a seccomp filter or a security module's ioctl rule refused that command before the driver saw it{ran}"
        ),
        (_, false) => format!("a seccomp filter refused that command before the kernel traced it{ran}"),
    };
    let mut d = diag_at(
        DiagId::CallsBlocked,
        node,
        format!(
            "{name} (ioctl {:#x}) failed with {}{} at the system call's exit and never reached {}, while the \
process's other NVIDIA ioctls did: {who}",
            e.request,
            CallResult::Errno(e.errno).text(),
            if e.count > 1 {
                format!(", {} times", e.count)
            } else {
                String::new()
            },
            if st.ioctls_in_driver {
                "the driver"
            } else {
                "the kernel's syscall tracing"
            },
        ),
    );
    d.hint = HINT_COMMAND_BLOCKED;
    Some(d)
}

/// The hint of one NVIDIA command refused before the driver.
const HINT_COMMAND_BLOCKED: &str = "a seccomp profile (a rule on ioctl's request argument) or a security module's \
ioctl rule refuses this NVIDIA command before it reaches the driver, while it lets the others through: allow that \
request in the profile (docker --security-opt seccomp=, systemd SystemCallFilter=, a sandbox library's or a \
runtime's own filter; grep Seccomp /proc/PID/status) or in the module's policy (SELinux allowxperm, Landlock's \
IOCTL_DEV right). Not the driver and not the device's permissions";

/// The process opened /dev/nvidiactl and not one ioctl of it reached the
/// kernel's syscall tracepoints: a seccomp filter refuses a system call
/// before the kernel traces its entry (seccomp runs first), so every
/// escape libcuda makes after the open was refused there. Not where a
/// ptrace tracer skipped a call with an escape's arguments (number -1 at
/// the exit): that is its answer (`answered_by_tracer`), not a filter's.
pub(crate) fn ioctls_unseen(st: &ProcInit) -> Option<Diagnosis> {
    if st.calls > 0 || st.ctl_opens == 0 || st.skipped.is_some_and(|s| s.escape) {
        return None;
    }
    let filters = st
        .info
        .as_ref()
        .and_then(|i| i.limits.as_ref())
        .and_then(|l| l.seccomp_filters);
    let when = st.info.as_ref().map_or("", |i| i.read_when());
    // The raw sys_exit program sees a call a filter answered (its exit
    // runs, its entry was never traced): the errno the filter gave.
    let answered = st.escapes_failed.map_or(String::new(), |e| {
        let nr = ((e.request & 0xff) as u32, crate::decode::escape::lookup((e.request & 0xff) as u32));
        format!(
            "; {}{} escape{} failed with {} at the system call's exit (the first: {}), answered before {} ran",
            e.count,
            if st.failed_capped { " or more" } else { "" },
            plural(e.count),
            CallResult::Errno(e.errno).text(),
            nr.1.map_or_else(|| format!("escape {:#04x}", nr.0), |x| x.name.to_owned()),
            if e.count == 1 { "it" } else { "they" },
        )
    });
    Some(diag_at(
        DiagId::CallsBlocked,
        "/dev/nvidiactl",
        format!(
            "/dev/nvidiactl: opened {} time{} and no ioctl of it reached the kernel's syscall tracing{answered}: \
a seccomp filter refuses a call before the kernel traces it{}",
            st.ctl_opens,
            plural(st.ctl_opens),
            match filters {
                Some(0) => format!(
                    "; none was in place when nvprobe read the process ({when}): \
one installed later (a sandbox library, the program itself)"
                ),
                Some(n) => format!("; the process ran under {n} seccomp filter{}", plural(n)),
                None => String::new(),
            }
        ),
    ))
}
