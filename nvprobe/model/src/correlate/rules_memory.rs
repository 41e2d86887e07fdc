//! Why a start-up's mapping was refused (ENOMEM from mmap or mprotect),
//! in the kernel's order of checks, from the process's limits and sizes
//! and what the call asked for.

use super::table::DiagId;
use crate::{
    attribution::Limits,
    decode::{MemAsk, MmAt, map_flag_names, prot_names},
};

/// The addresses a process's mappings get without a hint above them:
/// 128 TiB on x86_64 (47 bits; 5-level paging gives more only to a call
/// that asks for an address above), 256 TiB on arm64 (48 bits, the common
/// configuration).
#[cfg(target_arch = "aarch64")]
const USER_VA: u64 = 1 << 48;
#[cfg(not(target_arch = "aarch64"))]
const USER_VA: u64 = 1 << 47;

/// A hint of its own: no free range of addresses.
const HINT_NO_ROOM: &str = "the process's own mappings left no free range of addresses as long as the call asked \
for (no limit, and not the host's memory): look for what reserves so much address space in the process (a large \
PROT_NONE reservation of its own or of a library loaded before libcuda, an allocator's arenas), and start CUDA before \
it; an unlimited stack (ulimit -s unlimited) puts the process in the legacy layout, which leaves less room";

/// A hint of its own: no free range of addresses, by elimination (the
/// map count read too late to rule it out).
const HINT_NO_ROOM_OR_MAPS: &str = "no limit of the process's and no overcommit policy refuses such a mapping, so \
the kernel found no free range of addresses as long as the call asked for, or the process was at vm.max_map_count \
when it failed: look for what reserves so much address space in the process (a large PROT_NONE reservation of its \
own or of a library loaded before libcuda, an allocator's arenas) and start CUDA before it; count its mappings at the \
failure (wc -l /proc/PID/maps) against sysctl vm.max_map_count, and raise that if they reach it";

/// A hint of its own: the map count, which the evidence shows reached.
const HINT_MAP_COUNT: &str = "the process had as many mappings as vm.max_map_count allows, and the kernel refuses a \
new one past it (libcuda makes hundreds while it starts): raise the limit (sysctl vm.max_map_count=262144 or more, \
as databases and JVMs on the host may already need), or find what makes so many mappings in the process (an \
allocator's arenas, many small mmaps, memory-mapped files) and start CUDA before it. Not the host's memory, and not an \
overcommit policy";

/// A hint of its own: the huge-page pool.
const HINT_HUGE: &str = "a mapping of huge pages (MAP_HUGETLB) is refused when the pool has too few free ones: \
HugePages_Free in /proc/meminfo (or the page size's \
/sys/kernel/mm/hugepages/hugepages-*/free_hugepages); reserve more (sysctl vm.nr_hugepages) or let the program use \
ordinary pages. No ulimit and not the GPU's memory";

/// MAP_FIXED, MAP_HUGETLB, MAP_NORESERVE (uapi asm-generic/mman*.h).
const MAP_FIXED: u32 = 0x10;
/// A call that names its address or its range: MAP_FIXED,
/// MAP_FIXED_NOREPLACE, MAP_32BIT.
const PLACED: u32 = MAP_FIXED | 0x10_0000 | 0x40;
const MAP_HUGETLB: u32 = 0x40000;
const MAP_NORESERVE: u32 = 0x4000;

/// Why a mapping (`protect`: a change of protection) was refused with
/// ENOMEM, in the kernel's order of checks (mm/mmap.c, mm/mprotect.c):
/// the huge-page pool (MAP_HUGETLB: hugetlb_reserve_pages, before
/// do_mmap), the map count (do_mmap; a split at it: a MAP_FIXED into a
/// mapping, a change of protection), a free range of addresses
/// (get_unmapped_area), the address-space limit, then the data-size limit
/// for private writable memory (may_expand_vm; a change of protection
/// adds no addresses, and is refused by the data-size limit only when the
/// address-space one lets it through), then the overcommit accounting.
/// `ask` is what the call asked for (its protection and flags rule out
/// the limits that do not count it); the limits and sizes were read
/// `when` (after the failure: a reservation given back since is not in
/// them). With the cause, a hint of its own where the table's does not
/// fit it.
pub(super) fn memory_cause(
    l: Option<&Limits>,
    when: &str,
    ask: MemAsk,
    protect: bool,
) -> (DiagId, String, Option<&'static str>) {
    let flags = ask.flags.unwrap_or(0);
    if flags & MAP_HUGETLB != 0 {
        let m = l.map(|l| Mapping::new(l, when, ask));
        return (
            DiagId::MappingRefused,
            format!(
                "a mapping of huge pages (MAP_HUGETLB): the huge-page pool had too few free pages{}",
                m.map_or(String::new(), |m| m.asked)
            ),
            Some(HINT_HUGE),
        );
    }
    // The kernel's counts decide a new mapping the kernel places itself,
    // of a known length; a placed one (its overlap with what it replaces
    // is not known here), an mremap and a change of protection keep the
    // checks below.
    if let (Some(l), Some(at), Some(_), Some(f)) = (l, ask.at, ask.len, ask.flags)
        && !protect
        && f & PLACED == 0
    {
        return exact_cause(l, at, ask);
    }
    let Some(l) = l else {
        return (
            DiagId::AddressSpaceLimit,
            "the address-space limit (RLIMIT_AS), the data-size limit (RLIMIT_DATA), the overcommit policy or \
the map count refused it"
                .to_owned(),
            None,
        );
    };
    let m = Mapping::new(l, when, ask);
    // do_mmap refuses past the limit; a split of a mapping at it (a change
    // of protection, a MAP_FIXED into the middle of one: split_vma).
    let splits = protect || flags & MAP_FIXED != 0;
    if let (Some(n), Some(max)) = (l.map_count, l.max_map_count)
        && (n > max || (splits && n == max))
    {
        return (
            DiagId::MappingRefused,
            format!(
                "the map count: the process had {n} mappings {when}, vm.max_map_count is {max}{}",
                m.asked
            ),
            Some(HINT_MAP_COUNT),
        );
    }
    if !protect {
        if let Some(full) = m.no_room() {
            return (DiagId::MappingRefused, full, Some(HINT_NO_ROOM));
        }
        if let Some(left) = m.nothing_else() {
            return (DiagId::MappingRefused, left, Some(HINT_NO_ROOM_OR_MAPS));
        }
    }
    let (id, text) = limits_cause(l, &m, protect);
    (id, text, None)
}

/// When the kernel side read the address space: at the failure.
const AT_FAILURE: &str = "when the call failed";

/// [`memory_cause`] with the kernel's own map count and sizes at the
/// failure (`at`, from the record): each check the kernel made before
/// refusing is decided in its order, with the numbers it had; what no
/// check explains is said by elimination, and a limit that could not be
/// read stays a candidate.
fn exact_cause(l: &Limits, at: MmAt, ask: MemAsk) -> (DiagId, String, Option<&'static str>) {
    let l = Limits {
        map_count: Some(u64::from(at.map_count)),
        vm_size: Some(at.vm_bytes),
        vm_data: Some(at.data_bytes),
        ..l.clone()
    };
    let m = Mapping::new(&l, AT_FAILURE, ask);
    let n = u64::from(at.map_count);
    // do_mmap refuses past the limit (a new mapping the kernel places
    // splits nothing).
    if let Some(max) = l.max_map_count
        && n > max
    {
        return (
            DiagId::MappingRefused,
            format!(
                "the map count: the process had {n} mappings {AT_FAILURE}, vm.max_map_count is {max}{}",
                m.asked
            ),
            Some(HINT_MAP_COUNT),
        );
    }
    if let Some(full) = m.no_room() {
        return (DiagId::MappingRefused, full, Some(HINT_NO_ROOM));
    }
    let soft = |p: Option<(Option<u64>, Option<u64>)>| p.and_then(|(s, _)| s);
    let counted = ask.private_writable() != Some(false);
    let committed = ask.committed() != Some(false);
    if let Some(s) = soft(l.address_space).filter(|&s| m.exceeds(l.vm_size, s) == Some(true)) {
        let (id, text) = m.address_space(s, "");
        return (id, text, None);
    }
    // A soft data limit of 0 lets through what the hard one does (the
    // kernel's workaround for Valgrind, may_expand_vm).
    let data = l.data.and_then(|(s, h)| match s {
        Some(0) => h,
        s => s,
    });
    if counted && let Some(s) = data.filter(|&s| m.exceeds(l.vm_data, s) == Some(true)) {
        let (id, text) = m.data(s, "");
        return (id, text, None);
    }
    if l.overcommit == Some(2) && committed {
        let (id, text) = m.strict();
        return (id, text, None);
    }
    exact_rest(&m, n, (counted, committed))
}

/// What is left once the kernel's counts at the failure passed every
/// check nvprobe can decide, for a new mapping the kernel places: the
/// overcommit heuristic where it can refuse, or no free range of
/// addresses; a check whose setting could not be read stays named.
fn exact_rest(
    m: &Mapping<'_>,
    n: u64,
    (counted, committed): (bool, bool),
) -> (DiagId, String, Option<&'static str>) {
    let l = m.l;
    let flags = m.ask.flags.unwrap_or(0);
    let mut unread = Vec::new();
    if l.max_map_count.is_none() {
        unread.push("vm.max_map_count");
    }
    if l.address_space.is_none() {
        unread.push("the address-space limit");
    }
    if l.data.is_none() && counted {
        unread.push("the data-size limit");
    }
    if l.overcommit.is_none() && committed {
        unread.push("the overcommit policy");
    }
    let counts = format!(
        "the kernel's counts {AT_FAILURE} pass every limit that applies: {n} mappings{}, an address space of {}, {} of private writable memory{}",
        l.max_map_count
            .map_or(String::new(), |max| format!(" of vm.max_map_count {max}")),
        bytes(l.vm_size.unwrap_or(0)),
        bytes(l.vm_data.unwrap_or(0)),
        if unread.is_empty() {
            String::new()
        } else {
            format!(" ({} could not be read)", unread.join(", "))
        }
    );
    let noreserve = flags & MAP_NORESERVE != 0;
    let heuristic = committed && !noreserve && l.overcommit.is_none_or(|o| o == 0);
    let (rest, hint) = if heuristic {
        (
            "the kernel's overcommit heuristic (vm.overcommit_memory 0 refuses one mapping larger than the host's memory and swap together) or no free range of addresses as long as the call asked for",
            None,
        )
    } else if unread.is_empty() {
        (
            "no free range of addresses as long as the call asked for",
            Some(HINT_NO_ROOM),
        )
    } else {
        (
            "no free range of addresses as long as the call asked for, or a check whose setting could not be read",
            None,
        )
    };
    (
        DiagId::MappingRefused,
        format!("{counts}: {rest}{}", m.asked),
        hint,
    )
}

/// The limits and the overcommit accounting, in the kernel's order, for a
/// mapping the map count and the free addresses let through.
fn limits_cause(l: &Limits, m: &Mapping<'_>, protect: bool) -> (DiagId, String) {
    // What the data-size limit does not count (a PROT_NONE reservation, a
    // shared mapping) it cannot have refused; the same for the overcommit
    // accounting (which counts shared anonymous memory too).
    let counted = m.ask.private_writable() != Some(false);
    let committed = m.ask.committed() != Some(false);
    let soft = |p: Option<(Option<u64>, Option<u64>)>| p.and_then(|(s, _)| s);
    let as_passes = soft(l.address_space)
        .filter(|_| !protect)
        .map(|s| (s, m.exceeds(l.vm_size, s)));
    // A change of protection that the address-space check would refuse
    // too is not refused for its data (mprotect_fixup refuses only what
    // the old flags would have let through).
    let as_also =
        protect && soft(l.address_space).is_some_and(|s| m.exceeds(l.vm_size, s) == Some(true));
    let data_passes = soft(l.data)
        .filter(|_| counted && !as_also)
        .map(|s| (s, m.exceeds(l.vm_data, s)));
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
            && committed
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
        (None, None) => m.no_limit(protect, counted, committed),
    }
}

/// A refused mapping's facts, as the evidence says them.
struct Mapping<'a> {
    l: &'a Limits,
    when: &'a str,
    ask: MemAsk,
    /// "; its address space was …" (or nothing).
    size: String,
    /// "; the call asked for …" (or nothing).
    asked: String,
}

impl<'a> Mapping<'a> {
    fn new(l: &'a Limits, when: &'a str, ask: MemAsk) -> Self {
        let how = match (ask.prot, ask.flags) {
            (Some(p), Some(f)) => format!(" ({}, {})", prot_names(p), map_flag_names(f)),
            (Some(p), None) => format!(" ({})", prot_names(p)),
            _ => String::new(),
        };
        Mapping {
            l,
            when,
            ask,
            size: l.vm_size.map_or(String::new(), |v| {
                format!("; its address space was {} {when}", bytes(v))
            }),
            asked: ask.len.map_or(String::new(), |n| {
                format!("; the call asked for {}{how}", bytes(n))
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
        match (used, self.ask.len.map(pages)) {
            (_, Some(n)) if n > limit => Some(true),
            (Some(u), Some(n)) => Some((u / PAGE).saturating_add(n) > limit),
            _ => None,
        }
    }

    /// No free range of addresses (get_unmapped_area), where the sizes
    /// show it: the process's mappings and the call's length together
    /// pass what a process can address, or its mappings take all but a
    /// 64th of it (the call then needs one free range of its length
    /// among the holes left).
    fn no_room(&self) -> Option<String> {
        let used = self.l.vm_size?;
        let len = self.ask.len.unwrap_or(0);
        let certain = used.saturating_add(len) > USER_VA;
        if !certain && used < USER_VA - USER_VA / 64 {
            return None;
        }
        Some(format!(
            "no free range of addresses: the process's own mappings took {} of the {} a process can address {}{}{}",
            bytes(used),
            bytes(USER_VA),
            self.when,
            if certain {
                ", so the call's length cannot fit"
            } else {
                ", and the call needs one free range of its length among the holes left"
            },
            self.asked
        ))
    }

    /// No free range of addresses, by elimination: no limit counts the
    /// mapping and no overcommit policy that can be in force refuses it,
    /// so only the map count or the addresses are left. The map count is
    /// read after the failure (one munmap may have given back any number
    /// of mappings since), so it is not ruled out: what was read is said,
    /// and the addresses come first, where the count read is far from
    /// its maximum. Not for a call that names its address (MAP_FIXED,
    /// MAP_FIXED_NOREPLACE) or asks for the low 2 GiB (MAP_32BIT): no
    /// free range is looked for there, or another one.
    fn nothing_else(&self) -> Option<String> {
        let l = self.l;
        let unlimited = |p: Option<(Option<u64>, Option<u64>)>| matches!(p, Some((None, _)));
        let counted = self.ask.private_writable() != Some(false);
        let committed = self.ask.committed() != Some(false);
        let flags = self.ask.flags?;
        let noreserve = flags & MAP_NORESERVE != 0;
        let (n, max) = (l.map_count?, l.max_map_count?);
        let accounting_out = !committed
            || l.overcommit == Some(1)
            || (noreserve && l.overcommit.is_some_and(|o| o != 2));
        let data_out = unlimited(l.data) || !counted;
        if !unlimited(l.address_space)
            || !data_out
            || n > max / 2
            || !accounting_out
            || flags & PLACED != 0
            || self.ask.len.is_none()
        {
            return None;
        }
        Some(format!(
            "no limit counts such a mapping and no overcommit policy refuses it here (no address-space limit, {}, \
{}): no free range of addresses as long as the call asked for, unless the map count was at vm.max_map_count \
({max}) then (the process had {n} mappings {}, which does not count any it gave back after the failure){}{}{}",
            if unlimited(l.data) {
                "no data-size limit"
            } else {
                "a data-size limit that does not count it"
            },
            if committed {
                "an overcommit policy that lets it through"
            } else {
                "memory no overcommit policy counts"
            },
            self.when,
            self.asked,
            self.ask
                .len
                .filter(|&n| n >= USER_VA / 4)
                .map_or(String::new(), |n| format!(
                    ", {} of the {} a process can address",
                    fraction(n, USER_VA),
                    bytes(USER_VA)
                )),
            self.l.vm_size.map_or(String::new(), |v| format!(
                "; its address space was {} {} (what it gave back after the failure is not in it)",
                bytes(v),
                self.when
            ))
        ))
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
        let this = match (self.ask.private_writable(), self.ask.prot) {
            (Some(_), _) => "this mapping is",
            (None, Some(_)) => "this mapping too if it is private",
            (None, None) => "this mapping too if it was writable (its protection is not recorded)",
        };
        (
            DiagId::DataSizeLimit,
            format!(
                "the data-size limit (RLIMIT_DATA, ulimit -d) of {}: it counts private writable memory, {this}{}{}{note}",
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

    /// No memory limit set (or none that counts this mapping) and no
    /// strict accounting: the map count, the overcommit heuristic, or (a
    /// change of protection) a range that was not mapped. `counted`:
    /// whether the mapping may be private writable memory; `committed`:
    /// whether the overcommit accounting may count it.
    fn no_limit(&self, protect: bool, counted: bool, committed: bool) -> (DiagId, String) {
        let (l, when) = (self.l, self.when);
        let maps = match (l.map_count, l.max_map_count) {
            (Some(n), Some(max)) => {
                format!("; it had {n} mappings {when}, of vm.max_map_count {max}")
            }
            _ => String::new(),
        };
        // The heuristic (vm.overcommit_memory 0) refuses one mapping larger
        // than the memory and swap; mode 1 never refuses; MAP_NORESERVE
        // is not counted in either.
        let noreserve = self.ask.flags.is_some_and(|f| f & MAP_NORESERVE != 0);
        let heuristic = committed && !noreserve && l.overcommit.is_none_or(|o| o == 0);
        let rest = if protect {
            "the range was not mapped, or the split it needed passed the map count (vm.max_map_count)"
        } else if heuristic {
            "the map count (vm.max_map_count), the kernel's overcommit heuristic or a lack of free addresses \
refused it"
        } else if committed && !noreserve {
            "the map count (vm.max_map_count) or a lack of free addresses refused it (the overcommit policy \
read does not refuse such a mapping)"
        } else {
            "the map count (vm.max_map_count) or a lack of free addresses refused it (no overcommit policy \
counts such a mapping)"
        };
        let data_set = l.data.and_then(|(s, _)| s).is_some();
        // A change of protection adds no addresses: the address-space limit
        // does not apply to it; the data-size limit counts only private
        // writable memory.
        let limits = if l.address_space.is_none() && l.data.is_none() {
            format!("the process's limits could not be read {when}")
        } else if protect && l.address_space.and_then(|(s, _)| s).is_some() {
            format!(
                "no data-size limit was set {when} (the address-space limit does not count a change of protection)"
            )
        } else if data_set && !counted {
            format!(
                "no address-space limit was set {when}, and the data-size limit does not count this mapping (it \
is not private writable memory)"
            )
        } else {
            format!("no address-space or data-size limit was set {when}")
        };
        (
            DiagId::MappingRefused,
            format!("{limits}: {rest}{}{}{maps}", self.size, self.asked),
        )
    }
}

/// `part` of `whole` in words ("half", "a quarter") or as a percentage.
fn fraction(part: u64, whole: u64) -> String {
    if part == whole / 2 {
        "half".to_owned()
    } else if part == whole / 4 {
        "a quarter".to_owned()
    } else {
        format!("{:.0} %", part as f64 * 100.0 / whole as f64)
    }
}

/// MAP_ANONYMOUS, MAP_LOCKED (uapi asm-generic/mman*.h).
const MAP_ANONYMOUS: u32 = 0x20;
const MAP_LOCKED: u32 = 0x2000;

/// Why an mmap of anonymous memory failed with EAGAIN: the kernel's only
/// such answer there is the memory-lock check (mlock_future_ok in
/// do_mmap): the mapping is to be locked (MAP_LOCKED, or every new
/// mapping after mlockall(MCL_FUTURE)) and the process's locked memory
/// would pass RLIMIT_MEMLOCK without CAP_IPC_LOCK. None for a file's
/// mapping (its driver may answer EAGAIN itself), and where the limit is
/// known to be unlimited or the process holds CAP_IPC_LOCK (the check
/// cannot fail then). `ipc_lock`: whether it holds it, where read.
pub(super) fn lock_cause(
    l: Option<&Limits>,
    when: &str,
    ask: MemAsk,
    ipc_lock: Option<bool>,
) -> Option<String> {
    let flags = ask.flags?;
    if flags & MAP_ANONYMOUS == 0
        || ipc_lock == Some(true)
        || l.and_then(|l| l.memlock)
            .is_some_and(|(soft, _)| soft.is_none())
    {
        return None;
    }
    let how = if flags & MAP_LOCKED != 0 {
        "it asked MAP_LOCKED".to_owned()
    } else {
        "it did not ask MAP_LOCKED, so the process locks every new mapping (mlockall with MCL_FUTURE)".to_owned()
    };
    let limit = match l.and_then(|l| l.memlock) {
        Some((soft, _)) => format!(
            ", {} {when},",
            soft.map_or_else(|| "unlimited".to_owned(), bytes)
        ),
        None => String::new(),
    };
    let asked = ask.len.map_or(String::new(), |n| {
        format!(
            "; the call asked for {} ({}, {})",
            bytes(n),
            prot_names(ask.prot.unwrap_or(0)),
            map_flag_names(flags)
        )
    });
    // A seccomp filter can answer EAGAIN itself.
    let filters = match l.and_then(|l| l.seccomp_filters) {
        Some(n) if n > 0 => format!(
            " (the process ran under {n} seccomp filter{}, which could answer EAGAIN too)",
            if n == 1 { "" } else { "s" }
        ),
        _ => String::new(),
    };
    Some(format!(
        "the memory-lock limit: the kernel's mmap answers EAGAIN only for a mapping that is to be locked when the \
process's locked memory would pass RLIMIT_MEMLOCK{limit} and it lacks CAP_IPC_LOCK{filters}; {how}{asked}"
    ))
}

/// 1073741824 -> "1 GiB (1073741824 bytes)".
pub(super) fn bytes(v: u64) -> String {
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
