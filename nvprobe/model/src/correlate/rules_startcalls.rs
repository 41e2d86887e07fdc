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
        SysKind::Thread | SysKind::Clone3 | SysKind::MemFile | SysKind::EventFd | SysKind::Pipe => {
            REFUSALS.contains(&errno)
        }
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
        SysKind::Other => false,
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
    let info = st.info.as_ref();
    let limits = info.and_then(|i| i.limits.as_ref());
    let when = info.map_or("", |i| i.read_when());
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
    let thread = matches!(f.kind, SysKind::Thread | SysKind::Clone3);
    let memory = matches!(f.kind, SysKind::Map | SysKind::Protect);
    let (id, cause) = match f.errno {
        libc::EAGAIN if thread => (DiagId::ThreadLimit, thread_cause(limits, when)),
        libc::ENOMEM if memory => {
            memory_cause(limits, when, f.len, matches!(f.kind, SysKind::Protect))
        }
        libc::EMFILE => (DiagId::FileLimit, nofile_cause(limits, when)),
        libc::ENFILE => (
            DiagId::FileLimit,
            "the system's file table is full (fs.file-max)".to_owned(),
        ),
        libc::EPERM => (
            DiagId::NotPermitted,
            super::rules_refused::eperm_cause(st, &f.call),
        ),
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
    Some(diag_after(id, outcome, sep, &format!("{head}: {cause}")))
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
        SysKind::Unchecked => "",
        SysKind::Other => "",
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

/// Why a mapping (`protect`: a change of protection) was refused with
/// ENOMEM, in the kernel's order of checks (mm/mmap.c, mm/mprotect.c):
/// the map count (do_mmap), the address-space limit, then the data-size
/// limit for private writable memory (may_expand_vm; a change of
/// protection adds no addresses, so only the second), then the overcommit
/// accounting. `len` is what the call asked for; the limits and sizes
/// were read `when` (after the failure: a reservation given back since
/// is not in them).
fn memory_cause(
    l: Option<&Limits>,
    when: &str,
    len: Option<u64>,
    protect: bool,
) -> (DiagId, String) {
    let Some(l) = l else {
        return (
            DiagId::AddressSpaceLimit,
            "the address-space limit (RLIMIT_AS), the data-size limit (RLIMIT_DATA), the overcommit policy or \
the map count refused it"
                .to_owned(),
        );
    };
    let m = Mapping::new(l, when, len);
    // do_mmap refuses past the limit; a change of protection that splits a
    // mapping at it (split_vma).
    if let (Some(n), Some(max)) = (l.map_count, l.max_map_count)
        && (n > max || (protect && n == max))
    {
        return (
            DiagId::MappingRefused,
            format!(
                "the map count: the process had {n} mappings {when}, vm.max_map_count is {max}"
            ),
        );
    }
    let soft = |p: Option<(Option<u64>, Option<u64>)>| p.and_then(|(s, _)| s);
    let as_passes = soft(l.address_space)
        .filter(|_| !protect)
        .map(|s| (s, m.exceeds(l.vm_size, s)));
    let data_passes = soft(l.data).map(|s| (s, m.exceeds(l.vm_data, s)));
    // What was read came after the failure: a limit it puts under its
    // size may still have refused a reservation given back since.
    let under =
        " (under it when read: a reservation given back after the failure is not counted there)";
    match (as_passes, data_passes) {
        // A limit the call passes, in the kernel's order.
        (Some((s, Some(true))), _) => m.address_space(s, ""),
        (_, Some((s, Some(true)))) => m.data(s, ""),
        // Strict accounting, with no limit known to be passed.
        _ if l.overcommit == Some(2)
            && as_passes.is_none_or(|a| a.1.is_some())
            && data_passes.is_none_or(|d| d.1.is_some()) =>
        {
            m.strict()
        }
        (Some((a, None)), Some((d, None))) => m.either(a, d),
        (Some((s, None)), _) => m.address_space(s, ""),
        (_, Some((s, None))) => m.data(s, ""),
        (Some((s, Some(false))), _) => m.address_space(s, under),
        (_, Some((s, Some(false)))) => m.data(s, under),
        (None, None) => no_limit(l, when, protect, &m.size, &m.asked),
    }
}

/// A refused mapping's facts, as the evidence says them.
struct Mapping<'a> {
    l: &'a Limits,
    when: &'a str,
    len: Option<u64>,
    /// "; its address space was …" (or nothing).
    size: String,
    /// "; the call asked for …" (or nothing).
    asked: String,
}

impl<'a> Mapping<'a> {
    fn new(l: &'a Limits, when: &'a str, len: Option<u64>) -> Self {
        Mapping {
            l,
            when,
            len,
            size: l.vm_size.map_or(String::new(), |v| {
                format!("; its address space was {} {when}", bytes(v))
            }),
            asked: len.map_or(String::new(), |n| {
                format!("; the call asked for {}", bytes(n))
            }),
        }
    }

    /// Whether `used` plus the call's length exceeds `limit`, in pages as
    /// the kernel counts (the length rounded up): None when either is
    /// unknown (and the length alone does not exceed it).
    fn exceeds(&self, used: Option<u64>, limit: u64) -> Option<bool> {
        // 4 KiB pages (x86_64; an arm64 host with 64 KiB pages rounds
        // more, which only moves the edge by less than a page).
        const PAGE: u64 = 4096;
        let pages = |b: u64| b.div_ceil(PAGE);
        let limit = limit / PAGE;
        match (used, self.len.map(pages)) {
            (_, Some(n)) if n > limit => Some(true),
            (Some(u), Some(n)) => Some((u / PAGE).saturating_add(n) > limit),
            _ => None,
        }
    }

    fn address_space(&self, limit: u64, note: &str) -> (DiagId, String) {
        (
            DiagId::AddressSpaceLimit,
            format!(
                "the address-space limit (RLIMIT_AS, ulimit -v) of {}: libcuda reserves far more virtual addresses \
than it uses{}{}{note}",
                bytes(limit),
                self.size,
                self.asked
            ),
        )
    }

    fn data(&self, limit: u64, note: &str) -> (DiagId, String) {
        (
            DiagId::DataSizeLimit,
            format!(
                "the data-size limit (RLIMIT_DATA, ulimit -d) of {}: it counts private writable memory, this mapping \
too if it was writable (its protection is not recorded){}{}{note}",
                bytes(limit),
                self.l.vm_data.map_or(String::new(), |v| format!(
                    "; the process had {} of it (VmData) {}",
                    bytes(v),
                    self.when
                )),
                self.asked
            ),
        )
    }

    fn either(&self, as_limit: u64, data_limit: u64) -> (DiagId, String) {
        (
            DiagId::AddressSpaceLimit,
            format!(
                "the address-space limit (RLIMIT_AS, ulimit -v) of {} or the data-size limit (RLIMIT_DATA, \
ulimit -d) of {}{}{}{}",
                bytes(as_limit),
                bytes(data_limit),
                self.size,
                self.l.vm_data.map_or(String::new(), |v| format!(
                    ", its private writable memory {}",
                    bytes(v)
                )),
                self.asked
            ),
        )
    }

    fn strict(&self) -> (DiagId, String) {
        (
            DiagId::MappingRefused,
            format!(
                "vm.overcommit_memory is 2 (strict accounting): a mapping is refused once the commit limit \
(CommitLimit of /proc/meminfo) is reached{}{}",
                self.size, self.asked
            ),
        )
    }
}

/// A refused mapping with no memory limit set and no strict accounting:
/// the map count, the overcommit heuristic, or (a change of protection)
/// a range that was not mapped.
fn no_limit(l: &Limits, when: &str, protect: bool, size: &str, asked: &str) -> (DiagId, String) {
    let maps = match (l.map_count, l.max_map_count) {
        (Some(n), Some(max)) => format!("; it had {n} mappings {when}, of vm.max_map_count {max}"),
        _ => String::new(),
    };
    let rest = if protect {
        "the range was not mapped, or the split it needed passed the map count (vm.max_map_count)"
    } else {
        "the map count (vm.max_map_count), the kernel's overcommit heuristic or a lack of free addresses refused it"
    };
    // A change of protection adds no addresses: the address-space limit
    // does not apply to it.
    let limits = if l.address_space.is_none() && l.data.is_none() {
        format!("the process's limits could not be read {when}")
    } else if protect && l.address_space.and_then(|(s, _)| s).is_some() {
        format!(
            "no data-size limit was set {when} (the address-space limit does not count a change of protection)"
        )
    } else {
        format!("no address-space or data-size limit was set {when}")
    };
    (
        DiagId::MappingRefused,
        format!("{limits}: {rest}{size}{asked}{maps}"),
    )
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

/// 1073741824 -> "1 GiB (1073741824 bytes)".
fn bytes(v: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (n, u) in UNITS {
        if v >= n {
            let x = v as f64 / n as f64;
            let t = if x.fract() == 0.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.1}")
            };
            return format!("{t} {u} ({v} bytes)");
        }
    }
    format!("{v} bytes")
}
