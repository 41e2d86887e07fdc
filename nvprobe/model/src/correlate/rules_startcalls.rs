//! The calls a start-up needs besides the NVIDIA ones: threads, mappings,
//! descriptors. The kernel side reports their failures for processes in
//! start-up (`call_failed` records); when one failed and no call on an
//! NVIDIA file did, it explains the failed cuInit or first context, by
//! the limit or the filter that refused it.

use super::facts::CallResult;
use super::{
    state::{ProcInit, StartCallFailure},
    table::{DiagId, Diagnosis, diag_after, plural},
};
use crate::{attribution::Limits, decode::SysKind};

/// The errnos of a refusal or a limit: what a failed start-up can be
/// explained by (EPERM, EAGAIN, ENOMEM, EACCES, ENFILE, EMFILE, ENOSPC,
/// ENOSYS). EINVAL, EEXIST and the like are a caller's own business
/// (libcuda probes fixed addresses with MAP_FIXED_NOREPLACE).
const REFUSALS: [i32; 8] = [1, 11, 12, 13, 23, 24, 28, 38];
/// A hint of its own: a socket refused.
const HINT_SOCKET: &str = "a socket of the start-up was refused without any file being looked at (libcuda 580 makes \
local AF_UNIX sockets in cuInit, and fails it with 304 when it cannot): a seccomp profile that answers socket() with an \
error (docker --security-opt seccomp=, systemd SystemCallFilter=; Seccomp_filters in /proc/PID/status) or a security \
module's network rule for the process's label (SELinux, AppArmor `network unix`) did it: allow the process's sockets \
(at least AF_UNIX). Not the driver, and not a file's permissions";

/// For mappings and lookups of other files: the limits (EAGAIN, ENOMEM,
/// ENFILE, EMFILE) and EPERM (a filter: a file's mode answers EACCES),
/// not EACCES or ENOENT, which a search along a library path meets as a
/// matter of course.
const LIMITS: [i32; 5] = [1, 11, 12, 23, 24];

/// Whether a failed system call of a start-up may explain its end by
/// itself (a rule here names what refused it): a thread, a memory file,
/// an event descriptor or a pipe refused; a mapping, a lock of memory, an
/// open or a lookup stopped by a limit or a filter. The kernel side sends
/// every failed call; the others are shown as they are, newest first,
/// when no rule explains the start-up.
pub(crate) fn may_explain((kind, errno): (SysKind, i32)) -> bool {
    match kind {
        SysKind::Thread
        | SysKind::Clone3
        | SysKind::MemFile
        | SysKind::EventFd
        | SysKind::Pipe
        | SysKind::Socket => REFUSALS.contains(&errno),
        SysKind::Map
        | SysKind::Protect
        | SysKind::Open
        | SysKind::Lookup
        | SysKind::Mknod
        | SysKind::Lock => LIMITS.contains(&errno),
        SysKind::Dup | SysKind::NodeOpen => true,
        // A call with no permission check of its own refused with EPERM: a
        // filter's answer (a seccomp profile's default action). Calls that
        // do check (setpriority, mount, ptrace, kill) are left out.
        SysKind::Unchecked => errno == libc::EPERM,
        // A tracer's answer is answered_by_tracer's.
        SysKind::Other | SysKind::Skipped => false,
        // An escape refused is the ioctl records' (or, when none reached
        // the tracing, calls_blocked's); other ioctls fail as a matter of
        // course (TCGETS on a pipe).
        SysKind::Ioctl => false,
    }
}

/// The failure that explains the start-up's end: the first of those made
/// before cuInit returned (`after_init` false) or while the first context
/// was made (true). clone3's ENOSYS is never it: glibc falls back to
/// clone (seccomp profiles older than clone3 answer ENOSYS on purpose).
pub(crate) fn explaining(st: &ProcInit, after_init: bool) -> Option<&StartCallFailure> {
    st.start_calls
        .iter()
        .filter(|f| f.after_init == after_init)
        .find(|f| !(f.kind == SysKind::Clone3 && f.errno == libc::ENOSYS))
}

/// The diagnosis for `outcome` ("cuInit returned …", "cuCtxCreate_v2
/// returned …") when a start-up call failed and explains it.
pub(crate) fn diagnose(st: &ProcInit, after_init: bool, outcome: &str) -> Option<Diagnosis> {
    let f = explaining(st, after_init)?;
    let what = purpose(f.kind);
    // The kernel side sends at most nvprobe_common::call_failed::SENT_MAX
    // failed calls per program: past that bound, the count is a floor.
    let floor = st.failed_capped;
    let times = match (f.count, floor) {
        (1, false) => String::new(),
        (1, true) => ", once or more".to_owned(),
        (n, false) => format!(", {n} times"),
        (n, true) => format!(", {n} times or more"),
    };
    let (sep, head) = match f.kind {
        SysKind::Dup => (
            ": ",
            format!(
                "{}() failed with {}{times} ({what})",
                f.call,
                CallResult::Errno(f.errno)
            ),
        ),
        SysKind::NodeOpen => (
            ": ",
            format!(
                "the {} failed with {}{times} ({what})",
                f.call,
                CallResult::Errno(f.errno)
            ),
        ),
        _ => (
            " and ",
            format!(
                "no call on an NVIDIA file failed: {}() failed with {}{times}{}{}",
                f.call,
                CallResult::Errno(f.errno),
                if what.is_empty() { "" } else { " (" },
                if what.is_empty() {
                    String::new()
                } else {
                    format!("{what})")
                },
            ),
        ),
    };
    let (id, cause, hint) = cause(st, f);
    let mut d = diag_after(id, outcome, sep, &format!("{head}: {cause}"));
    if let Some(h) = hint {
        d.hint = h;
    }
    Some(d)
}

/// What refused the call `f` explains, by its errno and kind, and a hint
/// of the cause's own where the table's does not fit it.
fn cause(st: &ProcInit, f: &StartCallFailure) -> (DiagId, String, Option<&'static str>) {
    let thread = matches!(f.kind, SysKind::Thread | SysKind::Clone3);
    let memory = matches!(f.kind, SysKind::Map | SysKind::Protect);
    let info = st.info.as_ref();
    let limits = info.and_then(|i| i.limits.as_ref());
    let when = info.map_or("", |i| i.read_when());
    let mut hint = None;
    let (id, cause) = match f.errno {
        libc::EAGAIN if thread => (DiagId::ThreadLimit, thread_cause(limits, when)),
        libc::EAGAIN
            if f.kind == SysKind::Map
                && let Some(c) = super::rules_memory::lock_cause(
                    limits,
                    when,
                    f.ask,
                    info.and_then(|i| i.access.as_ref())
                        .and_then(|a| a.has_cap(14)),
                ) =>
        {
            (DiagId::LockLimit, c)
        }
        libc::ENOMEM if memory => {
            let (id, cause, own) = super::rules_memory::memory_cause(
                limits,
                when,
                f.ask,
                matches!(f.kind, SysKind::Protect),
            );
            hint = own;
            (id, cause)
        }
        libc::EMFILE => (DiagId::FileLimit, nofile_cause(limits, when)),
        libc::ENFILE => (
            DiagId::FileLimit,
            "the system's file table is full (fs.file-max)".to_owned(),
        ),
        // AF_UNIX: no permission is checked to make one.
        libc::EACCES | libc::EPERM if f.kind == SysKind::Socket && f.arg0 == Some(1) => {
            hint = Some(HINT_SOCKET);
            (
                DiagId::StartCallRefused,
                format!(
                    "making a local (AF_UNIX) socket checks no permission, so a seccomp filter or a security \
module's socket rule refused it{}",
                    seccomp_text(limits, when)
                ),
            )
        }
        libc::EACCES | libc::EPERM if f.kind == SysKind::Socket => (
            DiagId::StartCallRefused,
            format!(
                "a socket of family {}: a missing capability (a raw or packet socket needs CAP_NET_RAW), the \
ping group (an ICMP socket, net.ipv4.ping_group_range), a seccomp filter or a security module's socket rule \
refused it{}",
                f.arg0.map_or_else(|| "?".to_owned(), |a| a.to_string()),
                seccomp_text(limits, when)
            ),
        ),
        libc::EPERM => {
            // Not a device: the device cgroup's fix is ruled out; with no
            // filter in place when nvprobe read it, a filter is less sure.
            hint = Some(match limits.and_then(|l| l.seccomp_filters) {
                Some(0) => super::rules_refused::HINT_EPERM_NO_FILTER,
                _ => super::rules_refused::HINT_EPERM_NOT_DEVICE,
            });
            (
                DiagId::NotPermitted,
                super::rules_refused::eperm_cause(st, &f.call),
            )
        }
        libc::ENOSYS => (
            DiagId::StartCallRefused,
            format!(
                "the kernel does not have {}() or, far more often, a seccomp profile that does not know it answers \
ENOSYS{}",
                f.call,
                seccomp_text(limits, when)
            ),
        ),
        libc::EACCES if memory => (
            DiagId::StartCallRefused,
            format!(
                "the mode of the mapping was refused, as a security module does for executable memory (SELinux \
execmem, execheap){}",
                info.and_then(|i| i.access.as_ref())
                    .map_or(String::new(), super::rules_refused::lsm_text)
            ),
        ),
        _ => (
            DiagId::StartCallRefused,
            format!(
                "a limit or a filter refused it{}",
                seccomp_text(limits, when)
            ),
        ),
    };
    (id, cause, hint)
}

/// What a start-up makes with the call.
fn purpose(kind: SysKind) -> &'static str {
    match kind {
        SysKind::Thread | SysKind::Clone3 => "a new thread or process",
        SysKind::Map => "mapping memory",
        SysKind::Protect => "changing a mapping's protection",
        SysKind::MemFile => "a memory file",
        SysKind::EventFd => "an event descriptor",
        SysKind::Pipe => "a pipe",
        SysKind::Dup => "duplicating a descriptor of an NVIDIA file",
        SysKind::NodeOpen => "the first context opening an NVIDIA node",
        SysKind::Open => "opening a file",
        SysKind::Lookup => "looking up a path",
        SysKind::Mknod => "making a device node",
        SysKind::Lock => "locking memory",
        SysKind::Ioctl => "an ioctl",
        SysKind::Socket => "a socket",
        SysKind::Unchecked | SysKind::Skipped | SysKind::Other => "",
    }
}

/// Why a new task was refused with EAGAIN: the cgroup's pids.max, the
/// user's RLIMIT_NPROC, or neither (kernel.threads-max).
fn thread_cause(l: Option<&Limits>, when: &str) -> String {
    let Some(l) = l else {
        return "a task limit (the cgroup's pids.max, RLIMIT_NPROC or kernel.threads-max) was reached".to_owned();
    };
    let threads = l.threads.map_or(String::new(), |n| {
        format!("; it ran {n} thread{}", if n == 1 { "" } else { "s" })
    });
    if let Some(p) = l.pids.as_ref().filter(|p| p.max.is_some()) {
        let max = p.max.unwrap_or_default();
        if p.at_limit() {
            return format!(
                "the cgroup's pids.max refused it: its tasks (pids.current) {} of {max} (at the limit) {when}{threads}",
                p.current
            );
        }
        if let Some((Some(n), _)) = l.nproc {
            return format!(
                "the user's process limit (RLIMIT_NPROC) {n} or the cgroup's pids.max ({} of {max} {when}, not at \
the limit then){threads}",
                p.current
            );
        }
        return format!(
            "a task limit: the cgroup's tasks were {} of {max} {when} (not at the limit then: tasks that ended \
meanwhile free it), or kernel.threads-max{threads}",
            p.current
        );
    }
    match l.nproc {
        Some((Some(n), _)) => format!(
            "the user's process limit (RLIMIT_NPROC) {n}: it counts every task of the user, on the whole host \
({when}){threads}"
        ),
        _ => format!(
            "no task limit of the process or its cgroup was set {when}: the kernel's kernel.threads-max, or a \
limit of a cgroup above it{threads}"
        ),
    }
}

fn nofile_cause(l: Option<&Limits>, when: &str) -> String {
    match l.and_then(|l| l.nofile.map(|n| (n, l.fds))) {
        Some(((Some(soft), hard), fds)) => format!(
            "the process's open-file limit (RLIMIT_NOFILE) was reached (soft limit {soft}, hard {}{})",
            hard.map_or_else(|| "unlimited".to_owned(), |h| h.to_string()),
            fds.map_or_else(String::new, |n| format!(
                "; {n} descriptors were open {when}"
            ))
        ),
        _ => "the process's open-file limit (RLIMIT_NOFILE) was reached".to_owned(),
    }
}

fn seccomp_text(l: Option<&Limits>, when: &str) -> String {
    match l.and_then(|l| l.seccomp_filters) {
        Some(0) => format!(" (no seccomp filter was in place {when})"),
        Some(n) => format!(" (the process ran under {n} seccomp filter{})", plural(n)),
        None => String::new(),
    }
}

/// cuInit failed, no call on an NVIDIA file failed, and opens of procfs
/// files that exist wherever a procfs of the process's own PID namespace
/// is mounted failed with ENOENT: /proc is missing, or another
/// namespace's (its /proc/self names no process).
pub(super) fn proc_unavailable(st: &ProcInit, outcome: &str) -> Option<Diagnosis> {
    let missing: Vec<super::state::FailedSyscall> = st
        .failed_newest_first()
        .into_iter()
        .filter(|c| {
            c.errno == libc::ENOENT
                && c.path
                    .as_deref()
                    .is_some_and(crate::decode::is_procfs_own_path)
        })
        .collect();
    // One that every procfs of the process's namespace has: its own maps
    // and status, /proc/cpuinfo (a thread's entry, a descriptor's, a
    // /proc/sys entry some kernels do not build can be missing alone).
    if !missing.iter().any(|c| {
        c.path
            .as_deref()
            .is_some_and(crate::decode::is_procfs_core_path)
    }) {
        return None;
    }
    let first = missing.last()?;
    // Files of any procfs (/proc/cpuinfo, /proc/sys/…) missing: none is
    // there; only the process's own (/proc/self/…): another namespace's.
    let any_procfs = missing.iter().any(|c| {
        !c.path
            .as_deref()
            .is_some_and(crate::decode::is_procfs_self_path)
    });
    let d = diag_after(
        DiagId::ProcUnavailable,
        outcome,
        " and ",
        &format!(
            "no call on an NVIDIA file failed: {} open{} of procfs files failed with ENOENT ({} at {:.1} ms{}), \
files that exist wherever a procfs of the process's own PID namespace is mounted: {}",
            missing.len(),
            plural(missing.len() as u32),
            first.path.as_deref().unwrap_or_default(),
            first.at_ms,
            {
                // The others, oldest first (at most three more).
                let rest: Vec<&str> = missing
                    .iter()
                    .rev()
                    .skip(1)
                    .take(3)
                    .filter_map(|c| c.path.as_deref())
                    .collect();
                if rest.is_empty() {
                    String::new()
                } else {
                    format!(", then {}", rest.join(", "))
                }
            },
            if any_procfs {
                "its /proc is no procfs (not mounted, or covered by another file system)"
            } else {
                "its /proc is another PID namespace's procfs (its /proc/self names no process)"
            }
        ),
    );
    Some(d)
}
