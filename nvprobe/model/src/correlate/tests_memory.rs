//! A start-up's mapping refused (ENOMEM), with the call's protection and
//! flags: the limits that do not count it ruled out, the huge-page pool,
//! a split at the map count, the overcommit heuristic where it can
//! refuse, a full address space. Constructed streams; the real ones are
//! in nvprobe/model/tests.

use super::tests_startcalls::{GIB, MIB, failed_call, failed_init, failed_len, only, with_limits};
use super::*;
use crate::attribution::Limits;
use crate::correlate::DiagId;
use crate::decode::Event;

/// What `limits` make of one failed mmap in cuInit, with all four of its
/// arguments (address 0, `len`, `prot`, `flags`).
fn refused_mmap(l: Limits, len: u64, prot: u64, flags: u64) -> Diagnosis {
    let Event::Proc(p) = failed_len(1, "mmap", "ENOMEM", len) else {
        unreachable!("failed_len makes a proc record")
    };
    let ev = Event::Proc(crate::decode::ProcCall {
        args: Some(vec![0, len, prot, flags]),
        ..p
    });
    only(&failed_init(
        with_limits(l),
        &[ev],
        (2, "CUDA_ERROR_OUT_OF_MEMORY"),
    ))
    .clone()
}

/// [`refused_mmap`] with the kernel's own counts at the failure in the
/// record: `maps` mappings, `vm` bytes of address space, `data` of them
/// private writable.
fn refused_mmap_at(
    l: Limits,
    (len, prot, flags): (u64, u64, u64),
    (maps, vm, data): (u32, u64, u64),
) -> Diagnosis {
    let Event::Proc(p) = failed_len(1, "mmap", "ENOMEM", len) else {
        unreachable!("failed_len makes a proc record")
    };
    let ev = Event::Proc(crate::decode::ProcCall {
        args: Some(vec![0, len, prot, flags]),
        mm: Some(crate::decode::MmAt {
            map_count: maps,
            vm_bytes: vm,
            data_bytes: data,
        }),
        ..p
    });
    only(&failed_init(
        with_limits(l),
        &[ev],
        (2, "CUDA_ERROR_OUT_OF_MEMORY"),
    ))
    .clone()
}

const PROT_NONE: u64 = 0;
const PROT_RW: u64 = 3;
/// MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE: libcuda's reservations.
const RESERVE: u64 = 0x4022;
/// MAP_PRIVATE|MAP_ANONYMOUS.
const PRIVATE_ANON: u64 = 0x22;
/// MAP_SHARED|MAP_ANONYMOUS.
const SHARED_ANON: u64 = 0x21;

/// A mapping's protection and flags rule out the limits that do not count
/// it (is_data_mapping, the overcommit accounting): a PROT_NONE
/// reservation is never the data-size limit's nor strict accounting's,
/// whatever the limits; a private writable one is, and is said to be.
#[test]
fn a_refused_mappings_protection_rules_out_the_limits_that_do_not_count_it() {
    let data_limit = Limits {
        address_space: Some((None, None)),
        data: Some((Some(256 * MIB), None)),
        vm_size: Some(30 * GIB),
        vm_data: Some(200 * MIB),
        map_count: Some(900),
        max_map_count: Some(65530),
        overcommit: Some(0),
        ..Limits::default()
    };
    // The map count read far from its maximum: by elimination, no free
    // range, unless the count was at its maximum then (it is read after
    // the failure, and one munmap gives back any number of mappings).
    let reserve = refused_mmap(data_limit.clone(), 64 * GIB, PROT_NONE, RESERVE);
    assert_eq!(reserve.id, DiagId::MappingRefused, "{}", reserve.evidence);
    assert!(
        reserve.evidence.contains(
            "no limit counts such a mapping and no overcommit policy refuses it here (no address-space limit, a \
data-size limit that does not count it, memory no overcommit policy counts): no free range of addresses as long as the \
call asked for, unless the map count was at vm.max_map_count (65530) then (the process had 900 mappings when cuInit had \
failed, which does not count any it gave back after the failure)"
        ),
        "{}",
        reserve.evidence
    );
    assert!(
        reserve.hint.contains("vm.max_map_count"),
        "{}",
        reserve.hint
    );
    // A call that names its address looks for no free range: not said.
    let fixed = refused_mmap(data_limit.clone(), 64 * GIB, PROT_NONE, RESERVE | 0x10_0000);
    assert!(
        !fixed.evidence.contains("no free range"),
        "{}",
        fixed.evidence
    );
    // The map count not read: the map count stays a candidate.
    let unread = Limits {
        map_count: None,
        ..data_limit.clone()
    };
    let reserve = refused_mmap(unread, 64 * GIB, PROT_NONE, RESERVE);
    assert!(
        reserve.evidence.contains(
            "no address-space limit was set when cuInit had failed, and the data-size limit does not count this \
mapping (it is not private writable memory): the map count (vm.max_map_count) or a lack of free addresses refused it \
(no overcommit policy counts such a mapping)"
        ) && reserve.evidence.contains(
            "the call asked for 64 GiB (68719476736 bytes) (PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE)"
        ),
        "{}",
        reserve.evidence
    );
    assert!(!reserve.hint.contains("ulimit -d"), "{}", reserve.hint);
    let writable = refused_mmap(data_limit.clone(), 64 * MIB, PROT_RW, PRIVATE_ANON);
    assert_eq!(writable.id, DiagId::DataSizeLimit, "{}", writable.evidence);
    assert!(
        writable.evidence.contains(
            "it counts private writable memory, this mapping is; the process had 200 MiB (209715200 bytes) of it"
        ),
        "{}",
        writable.evidence
    );
    // Shared memory is not data: not the data-size limit.
    let shared = refused_mmap(data_limit, 64 * MIB, PROT_RW, SHARED_ANON);
    assert_eq!(shared.id, DiagId::MappingRefused, "{}", shared.evidence);
    // Strict accounting counts private writable memory and shared
    // anonymous memory, not a PROT_NONE private reservation.
    let strict = Limits {
        address_space: Some((None, None)),
        data: Some((None, None)),
        overcommit: Some(2),
        ..Limits::default()
    };
    let d = refused_mmap(strict.clone(), 64 * GIB, PROT_NONE, RESERVE);
    assert!(
        d.id == DiagId::MappingRefused && !d.evidence.contains("strict"),
        "{}",
        d.evidence
    );
    for (prot, flags) in [(PROT_RW, PRIVATE_ANON), (PROT_NONE, SHARED_ANON)] {
        let d = refused_mmap(strict.clone(), 64 * GIB, prot, flags);
        assert!(
            d.evidence
                .contains("vm.overcommit_memory is 2 (strict accounting)"),
            "{prot} {flags:#x}: {}",
            d.evidence
        );
    }
}

/// A process whose own mappings fill what it can address: no free range
/// (get_unmapped_area refuses before any limit is looked at).
#[test]
fn a_refused_mapping_in_a_full_address_space_says_so() {
    const TIB: u64 = 1 << 40;
    let full = |vm_size: u64, len: u64| {
        refused_mmap(
            Limits {
                address_space: Some((None, None)),
                data: Some((None, None)),
                vm_size: Some(vm_size),
                overcommit: Some(0),
                ..Limits::default()
            },
            len,
            PROT_NONE,
            RESERVE,
        )
    };
    #[cfg(not(target_arch = "aarch64"))]
    {
        let d = full(128 * TIB - 2 * GIB, 64 * GIB);
        assert_eq!(d.id, DiagId::MappingRefused);
        assert!(
            d.evidence.contains(
                "no free range of addresses: the process's own mappings took 128.0 TiB (140735340871680 bytes) of \
the 128 TiB (140737488355328 bytes) a process can address when cuInit had failed, so the call's length cannot fit"
            ),
            "{}",
            d.evidence
        );
        // Nearly full, the call would fit in sum: the holes are named.
        let d = full(127 * TIB, 64 * GIB);
        assert!(
            d.evidence
                .contains("the call needs one free range of its length among the holes left"),
            "{}",
            d.evidence
        );
    }
    // Far from full: not named.
    let d = full(30 * GIB, 64 * GIB);
    assert!(!d.evidence.contains("no free range"), "{}", d.evidence);
}

/// The flags decide more than the limits: huge pages are the pool's, a
/// MAP_FIXED into a mapping splits it at the map count, the overcommit
/// heuristic is named only where it can refuse, and a full address
/// space has a hint of its own.
#[test]
fn a_refused_mappings_flags_decide_the_pool_the_split_and_the_heuristic() {
    let plain = Limits {
        address_space: Some((None, None)),
        data: Some((None, None)),
        vm_size: Some(30 * GIB),
        map_count: Some(65530),
        max_map_count: Some(65530),
        overcommit: Some(0),
        ..Limits::default()
    };
    // MAP_PRIVATE|MAP_ANONYMOUS|MAP_HUGETLB.
    let huge = refused_mmap(plain.clone(), 2 * GIB, PROT_RW, 0x40022);
    assert!(
        huge.evidence.contains(
            "a mapping of huge pages (MAP_HUGETLB): the huge-page pool had too few free pages"
        ) && huge.hint.contains("HugePages_Free"),
        "{huge:#?}"
    );
    // At the map count: a new mapping passes (do_mmap refuses past it), a
    // MAP_FIXED one that splits a mapping does not.
    let new = refused_mmap(plain.clone(), 2 * MIB, PROT_RW, PRIVATE_ANON);
    assert!(
        !new.evidence.contains("the map count: "),
        "{}",
        new.evidence
    );
    let fixed = refused_mmap(plain.clone(), 2 * MIB, PROT_RW, PRIVATE_ANON | 0x10);
    assert!(
        fixed.evidence.contains(
            "the map count: the process had 65530 mappings when cuInit had failed, vm.max_map_count is 65530"
        ),
        "{}",
        fixed.evidence
    );
    // The heuristic: named in mode 0 for counted memory, not for
    // MAP_NORESERVE, not in mode 1.
    let below = Limits {
        map_count: Some(900),
        ..plain
    };
    let heuristic = "the kernel's overcommit heuristic";
    let d = refused_mmap(below.clone(), 8 * GIB, PROT_RW, PRIVATE_ANON);
    assert!(d.evidence.contains(heuristic), "{}", d.evidence);
    // (The map count not read, so that the causes are listed, not
    // eliminated.)
    let unread = Limits {
        map_count: None,
        ..below.clone()
    };
    let d = refused_mmap(unread.clone(), 8 * GIB, PROT_RW, RESERVE);
    assert!(
        !d.evidence.contains(heuristic)
            && d.evidence
                .contains("no overcommit policy counts such a mapping"),
        "{}",
        d.evidence
    );
    // With it read, far from its maximum: the addresses first, the map
    // count not ruled out.
    let d = refused_mmap(below.clone(), 8 * GIB, PROT_RW, RESERVE);
    assert!(
        d.evidence.contains(
            "no free range of addresses as long as the call asked for, unless the map count was at vm.max_map_count"
        ) && d.hint.contains("no free range of addresses"),
        "{}",
        d.evidence
    );
    let always = Limits {
        overcommit: Some(1),
        ..unread
    };
    let d = refused_mmap(always, 8 * GIB, PROT_RW, PRIVATE_ANON);
    assert!(
        !d.evidence.contains(heuristic)
            && d.evidence
                .contains("the overcommit policy read does not refuse such a mapping"),
        "{}",
        d.evidence
    );
    // A full address space: its own hint, no sysctl or memory remedy.
    #[cfg(not(target_arch = "aarch64"))]
    {
        let full = refused_mmap(
            Limits {
                address_space: Some((None, None)),
                data: Some((None, None)),
                vm_size: Some((128u64 << 40) - GIB),
                ..Limits::default()
            },
            64 * GIB,
            PROT_NONE,
            RESERVE,
        );
        assert!(
            full.hint
                .starts_with("the process's own mappings left no free range")
                && !full.hint.contains("overcommit"),
            "{}",
            full.hint
        );
    }
}

/// An mremap that may not move (no MREMAP_MAYMOVE) and cannot grow in
/// place is the caller's to handle: it explains no failed start-up.
#[test]
fn an_mremap_that_may_not_move_explains_nothing() {
    let remap = |flags: u64| {
        let Event::Proc(p) = failed_call(1, "mremap", "ENOMEM") else {
            unreachable!("failed_call makes a proc record")
        };
        Event::Proc(crate::decode::ProcCall {
            args: Some(vec![0x7f00_0000_0000, MIB, 2 * MIB, flags]),
            ..p
        })
    };
    let ids = |flags| {
        failed_init(
            with_limits(Limits::default()),
            &[remap(flags)],
            (2, "CUDA_ERROR_OUT_OF_MEMORY"),
        )[0]
        .diagnoses
        .iter()
        .map(|d| d.id)
        .collect::<Vec<_>>()
    };
    assert!(!ids(0).contains(&DiagId::MappingRefused), "{:?}", ids(0));
    // MREMAP_MAYMOVE: the kernel looked for room anywhere; a limit's.
    assert!(
        ids(1)
            .iter()
            .any(|id| matches!(id, DiagId::MappingRefused | DiagId::AddressSpaceLimit)),
        "{:?}",
        ids(1)
    );
}

/// With the kernel's own counts at the failure (the record's), each check
/// is decided with the numbers the kernel had: the map count is blamed
/// only past its maximum, a limit the counts stay under is not blamed,
/// and what no check explains is named by elimination, without the
/// hedges a count read later needs. A limit that could not be read stays
/// a candidate.
#[test]
fn the_kernels_counts_at_the_failure_decide_each_check() {
    let unlimited = Limits {
        address_space: Some((None, None)),
        data: Some((None, None)),
        // Read later, after the reservations were given back: not used.
        vm_size: Some(200 * MIB),
        map_count: Some(108),
        max_map_count: Some(65530),
        overcommit: Some(0),
        ..Limits::default()
    };
    // Past vm.max_map_count then, whatever was read later.
    let d = refused_mmap_at(
        unlimited.clone(),
        (GIB, PROT_NONE, RESERVE),
        (65531, 30 * GIB, MIB),
    );
    assert_eq!(d.id, DiagId::MappingRefused);
    assert!(
        d.evidence.contains(
            "the map count: the process had 65531 mappings when the call failed, vm.max_map_count is 65530"
        ),
        "{}",
        d.evidence
    );
    // Far from it, nothing counts a reservation: no free range, said
    // without "unless".
    let d = refused_mmap_at(
        unlimited.clone(),
        (64 * GIB, PROT_NONE, RESERVE),
        (900, 30 * GIB, MIB),
    );
    assert!(
        d.evidence.contains(
            "the kernel's counts when the call failed pass every limit that applies: 900 mappings of \
vm.max_map_count 65530, an address space of 30 GiB (32212254720 bytes), 1 MiB (1048576 bytes) of private writable \
memory: no free range of addresses as long as the call asked for; the call asked for 64 GiB"
        ) && !d.evidence.contains("unless"),
        "{}",
        d.evidence
    );
    assert!(
        d.hint
            .starts_with("the process's own mappings left no free range"),
        "{}",
        d.hint
    );
    #[cfg(not(target_arch = "aarch64"))]
    {
        // The reservations still held then: a full address space, at once.
        let d = refused_mmap_at(
            unlimited.clone(),
            (64 << 40, PROT_NONE, RESERVE),
            (900, (128u64 << 40) - 500 * MIB, MIB),
        );
        assert!(
            d.evidence
                .contains("no free range of addresses: the process's own mappings took")
                && d.evidence
                    .contains("when the call failed, so the call's length cannot fit"),
            "{}",
            d.evidence
        );
    }
    // An address-space limit: blamed when the counts pass it, not when
    // they stay under it (a reservation then is no limit's).
    let as_4g = Limits {
        address_space: Some((Some(4 * GIB), None)),
        ..unlimited.clone()
    };
    let d = refused_mmap_at(
        as_4g.clone(),
        (GIB, PROT_NONE, RESERVE),
        (900, 3 * GIB + GIB / 2, MIB),
    );
    assert_eq!(d.id, DiagId::AddressSpaceLimit, "{}", d.evidence);
    assert!(
        d.evidence
            .contains("its address space was 3.5 GiB (3758096384 bytes) when the call failed"),
        "{}",
        d.evidence
    );
    let d = refused_mmap_at(as_4g, (GIB, PROT_NONE, RESERVE), (900, GIB, MIB));
    assert_eq!(d.id, DiagId::MappingRefused, "{}", d.evidence);
    assert!(!d.evidence.contains("RLIMIT_AS"), "{}", d.evidence);
    // Private writable memory in mode 0: the heuristic or the addresses.
    let d = refused_mmap_at(
        unlimited.clone(),
        (8 * GIB, PROT_RW, PRIVATE_ANON),
        (900, GIB, MIB),
    );
    assert!(
        d.evidence.contains("the kernel's overcommit heuristic")
            && !d.evidence.contains("map count"),
        "{}",
        d.evidence
    );
    // The address-space limit unread: still a candidate, no hint of the
    // addresses alone.
    let unread = Limits {
        address_space: None,
        ..unlimited
    };
    let d = refused_mmap_at(unread, (64 * GIB, PROT_NONE, RESERVE), (900, 30 * GIB, MIB));
    assert!(
        d.evidence
            .contains("(the address-space limit could not be read)")
            && d.evidence
                .contains("or a check whose setting could not be read"),
        "{}",
        d.evidence
    );
    assert!(
        !d.hint
            .starts_with("the process's own mappings left no free range"),
        "{}",
        d.hint
    );
}
