//! A failed start-up with no failed call on an NVIDIA file: the call of
//! its own that the kernel side saw fail (a thread, a mapping, a
//! descriptor) explains it, by the limit or filter that refused it, and
//! no hint offers a remedy for another limit. Constructed streams; the
//! real ones are in nvprobe/model/tests.

use super::{
    tests::proc_call,
    tests_classes::{cuda, verdicts_of},
    tests_context::{cuda_ret, good_init, one_gpu},
    *,
};
use crate::attribution::{CgroupCount, Limits, ProcessInfo};
use crate::correlate::{DiagId, Outcome};
use crate::decode::{Event, ProcKind};

/// The kernel side's record of a failed `call` of pid 7 at `t` ms.
pub(super) fn failed_call(t: u64, call: &str, errno: &str) -> Event {
    Event::Proc(crate::decode::ProcCall {
        call: Some(call.into()),
        errno: Some(errno.into()),
        failed: Some((
            crate::decode::SysKind::of(call),
            -super::tests_classes::errno_ret(errno) as i32,
        )),
        ..proc_call(ProcKind::CallFailed, 7, "app", 7, t * 1_000_000)
    })
}

pub(super) fn with_limits(l: Limits) -> ProcessInfo {
    ProcessInfo {
        pid: 7,
        exe: Some("/usr/bin/python3".into()),
        read_at: Some("cuinit_failed".into()),
        limits: Some(l),
        ..ProcessInfo::default()
    }
}

/// cuInit enters, `events` happen, cuInit returns `code`.
pub(super) fn failed_init(
    info: ProcessInfo,
    events: &[Event],
    code: (i64, &'static str),
) -> Vec<CuInit> {
    let mut all = vec![cuda(0, "cuInit", None)];
    all.extend_from_slice(events);
    all.push(cuda(3, "cuInit", Some(code)));
    verdicts_of(vec![info], Vec::new(), &all)
}

pub(super) fn only(v: &[CuInit]) -> &Diagnosis {
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].result, Outcome::Failed, "{}", v[0].text);
    assert_eq!(v[0].diagnoses.len(), 1, "{:#?}", v[0].diagnoses);
    &v[0].diagnoses[0]
}

const OS: (i64, &str) = (304, "CUDA_ERROR_OPERATING_SYSTEM");

#[test]
fn a_thread_refused_at_the_cgroups_task_limit_is_named() {
    let info = with_limits(Limits {
        seccomp_filters: Some(0),
        pids: Some(CgroupCount {
            current: 1,
            max: Some(1),
        }),
        threads: Some(1),
        ..Limits::default()
    });
    let v = failed_init(
        info,
        &[
            // glibc's clone3, refused by an old profile, then clone.
            failed_call(1, "clone3", "ENOSYS"),
            failed_call(1, "clone", "EAGAIN"),
            failed_call(2, "clone", "EAGAIN"),
        ],
        OS,
    );
    let d = only(&v);
    assert_eq!(d.id, DiagId::ThreadLimit);
    assert_eq!(
        d.evidence,
        "cuInit returned CUDA_ERROR_OPERATING_SYSTEM (304) and no call on an NVIDIA file failed: clone() failed \
with EAGAIN, 2 times (a new thread or process): the cgroup's pids.max refused it: its tasks (pids.current) 1 of 1 \
(at the limit) when cuInit had failed; it ran 1 thread"
    );
    assert!(
        d.hint.contains("pids.max") && !d.hint.contains("ulimit -n"),
        "{}",
        d.hint
    );
}

#[test]
fn a_thread_refused_without_a_cgroup_limit_names_the_users_process_limit() {
    let info = with_limits(Limits {
        nproc: Some((Some(4), Some(4))),
        ..Limits::default()
    });
    let d = only(&failed_init(
        info,
        &[failed_call(1, "clone3", "EAGAIN")],
        OS,
    ))
    .clone();
    assert_eq!(d.id, DiagId::ThreadLimit);
    assert!(
        d.evidence.ends_with(
            "clone3() failed with EAGAIN (a new thread or process): the user's process limit (RLIMIT_NPROC) 4: it \
counts every task of the user, on the whole host (when cuInit had failed)"
        ),
        "{}",
        d.evidence
    );
}

#[test]
fn a_reservation_refused_under_an_address_space_limit_is_named_with_its_size() {
    let info = with_limits(Limits {
        address_space: Some((Some(1 << 30), Some(1 << 30))),
        vm_size: Some(900 << 20),
        ..Limits::default()
    });
    let v = failed_init(
        info,
        &[failed_call(1, "mmap", "ENOMEM")],
        (2, "CUDA_ERROR_OUT_OF_MEMORY"),
    );
    let d = only(&v);
    assert_eq!(d.id, DiagId::AddressSpaceLimit);
    assert_eq!(
        d.evidence,
        "cuInit returned CUDA_ERROR_OUT_OF_MEMORY (2) and no call on an NVIDIA file failed: mmap() failed with \
ENOMEM (mapping memory): the address-space limit (RLIMIT_AS, ulimit -v) of 1 GiB (1073741824 bytes): libcuda \
reserves far more virtual addresses than it uses; its address space was 900 MiB (943718400 bytes) when cuInit had \
failed"
    );
    // Not the GPU's memory, not descriptors.
    assert!(
        !d.hint.contains("nvidia-smi") && !d.hint.contains("ulimit -n"),
        "{}",
        d.hint
    );
}

/// The kernel side's record of a failed `call` of pid 7 at `t` ms that
/// asked for `len` bytes (its second argument).
pub(super) fn failed_len(t: u64, call: &str, errno: &str, len: u64) -> Event {
    let Event::Proc(p) = failed_call(t, call, errno) else {
        unreachable!("failed_call makes a proc record")
    };
    Event::Proc(crate::decode::ProcCall {
        args: Some(vec![0, len]),
        ..p
    })
}

/// What `limits` make of one failed `call` of `len` bytes in cuInit.
fn refused_mapping(l: Limits, call: &str, len: u64) -> Diagnosis {
    only(&failed_init(
        with_limits(l),
        &[failed_len(1, call, "ENOMEM", len)],
        (2, "CUDA_ERROR_OUT_OF_MEMORY"),
    ))
    .clone()
}

pub(super) const GIB: u64 = 1 << 30;
pub(super) const MIB: u64 = 1 << 20;

/// The kernel's order of checks (may_expand_vm): the address-space limit
/// the call passes is named with what it asked for; under it, the
/// data-size limit the call passes is; neither hint offers the other's
/// remedy alone.
#[test]
fn a_refused_mapping_names_the_limit_the_call_passes_in_the_kernels_order() {
    let d = refused_mapping(
        Limits {
            address_space: Some((Some(4 * GIB), Some(4 * GIB))),
            data: Some((Some(64 * GIB), None)),
            vm_size: Some(188 * MIB),
            vm_data: Some(100 * MIB),
            ..Limits::default()
        },
        "mmap",
        8 * GIB + 64 * MIB,
    );
    assert_eq!(d.id, DiagId::AddressSpaceLimit);
    assert!(
        d.evidence.ends_with(
            "the address-space limit (RLIMIT_AS, ulimit -v) of 4 GiB (4294967296 bytes): libcuda reserves far more \
virtual addresses than it uses; its address space was 188 MiB (197132288 bytes) when cuInit had failed; the call asked \
for 8.1 GiB (8657043456 bytes)"
        ),
        "{}",
        d.evidence
    );
    // RLIMIT_DATA: the address space is unlimited, the private writable
    // memory plus the call passes the data limit.
    let d = refused_mapping(
        Limits {
            data: Some((Some(256 * MIB), Some(256 * MIB))),
            vm_size: Some(30 * GIB),
            vm_data: Some(200 * MIB),
            ..Limits::default()
        },
        "mmap",
        64 * MIB,
    );
    assert_eq!(d.id, DiagId::DataSizeLimit);
    assert!(
        d.evidence.ends_with(
            "the data-size limit (RLIMIT_DATA, ulimit -d) of 256 MiB (268435456 bytes): it counts private writable \
memory, this mapping too if it was writable (its protection is not recorded); the process had 200 MiB (209715200 bytes) \
of it (VmData) when cuInit had failed; the call asked for 64 MiB (67108864 bytes)"
        ),
        "{}",
        d.evidence
    );
    assert!(d.hint.contains("ulimit -d unlimited"), "{}", d.hint);
    // Both set, the address space fits and the data does not: the data
    // limit, although the address-space limit comes first.
    let d = refused_mapping(
        Limits {
            address_space: Some((Some(64 * GIB), None)),
            data: Some((Some(GIB), None)),
            vm_size: Some(8 * GIB),
            vm_data: Some(GIB - MIB),
            ..Limits::default()
        },
        "mmap",
        2 * MIB,
    );
    assert_eq!(d.id, DiagId::DataSizeLimit, "{}", d.evidence);
}

/// No limit of the process's is passed: strict accounting, the map count,
/// or neither; never a `ulimit` remedy the limits read rule out.
#[test]
fn a_refused_mapping_with_no_limit_passed_offers_no_ulimit() {
    let unlimited = Some((None, None));
    let no_limit = refused_mapping(
        Limits {
            address_space: unlimited,
            data: unlimited,
            vm_size: Some(30 * GIB),
            overcommit: Some(0),
            map_count: Some(812),
            max_map_count: Some(65530),
            ..Limits::default()
        },
        "mmap",
        8 * GIB,
    );
    assert_eq!(no_limit.id, DiagId::MappingRefused);
    assert!(
        no_limit.evidence.contains(
            "no address-space or data-size limit was set when cuInit had failed: the map count (vm.max_map_count), \
the kernel's overcommit heuristic or a lack of free addresses refused it"
        ) && no_limit
            .evidence
            .ends_with("; it had 812 mappings when cuInit had failed, of vm.max_map_count 65530"),
        "{}",
        no_limit.evidence
    );
    assert!(!no_limit.hint.contains("ulimit"), "{}", no_limit.hint);
    // do_mmap refuses past vm.max_map_count, not at it.
    let at_it = |call: &str| {
        refused_mapping(
            Limits {
                address_space: Some((Some(64 * GIB), None)),
                data: unlimited,
                vm_size: Some(GIB),
                map_count: Some(65530),
                max_map_count: Some(65530),
                ..Limits::default()
            },
            call,
            MIB,
        )
    };
    assert_eq!(at_it("mmap").id, DiagId::AddressSpaceLimit);
    // A change of protection splits a mapping, which is refused at it.
    assert!(
        at_it("mprotect").evidence.ends_with(
            "the map count: the process had 65530 mappings when cuInit had failed, vm.max_map_count is 65530; the \
call asked for 1 MiB (1048576 bytes)"
        ),
        "{}",
        at_it("mprotect").evidence
    );
    let maps = refused_mapping(
        Limits {
            address_space: Some((Some(64 * GIB), None)),
            vm_size: Some(GIB),
            map_count: Some(65531),
            max_map_count: Some(65530),
            ..Limits::default()
        },
        "mmap",
        MIB,
    );
    assert_eq!(maps.id, DiagId::MappingRefused);
    assert!(
        maps.evidence.ends_with(
            "the map count: the process had 65531 mappings when cuInit had failed, vm.max_map_count is 65530; the \
call asked for 1 MiB (1048576 bytes)"
        ),
        "{}",
        maps.evidence
    );
    let strict = refused_mapping(
        Limits {
            address_space: unlimited,
            overcommit: Some(2),
            ..Limits::default()
        },
        "mmap",
        8 * GIB,
    );
    assert_eq!(strict.id, DiagId::MappingRefused);
    assert!(
        strict
            .evidence
            .contains("vm.overcommit_memory is 2 (strict accounting)"),
        "{}",
        strict.evidence
    );
    // A change of protection adds no addresses: an address-space limit
    // does not refuse it, so it is not named.
    let protect = refused_mapping(
        Limits {
            address_space: Some((Some(GIB), None)),
            data: unlimited,
            vm_size: Some(GIB - MIB),
            ..Limits::default()
        },
        "mprotect",
        64 * MIB,
    );
    assert_eq!(protect.id, DiagId::MappingRefused, "{}", protect.evidence);
    assert!(
        protect.evidence.contains(
            "no data-size limit was set when cuInit had failed (the address-space limit does not count a change of \
protection): the range was not mapped"
        ),
        "{}",
        protect.evidence
    );
    // The same under a data-size limit it passes: that limit, where the
    // address-space check lets the change through (mprotect_fixup refuses
    // only what may_expand_vm refuses for the new flags and not the old).
    let protect_data = |as_limit: u64| {
        refused_mapping(
            Limits {
                address_space: Some((Some(as_limit), None)),
                data: Some((Some(512 * MIB), None)),
                vm_size: Some(GIB - MIB),
                vm_data: Some(500 * MIB),
                ..Limits::default()
            },
            "mprotect",
            64 * MIB,
        )
    };
    let d = protect_data(2 * GIB);
    assert_eq!(d.id, DiagId::DataSizeLimit, "{}", d.evidence);
    // Past the address-space limit, the old flags are refused too: not
    // the data-size limit's refusal.
    let d = protect_data(GIB);
    assert_eq!(d.id, DiagId::MappingRefused, "{}", d.evidence);
    // Nothing read: no limit is said to be unset.
    let unread = refused_mapping(Limits::default(), "mmap", GIB);
    assert!(
        unread
            .evidence
            .contains("the process's limits could not be read when cuInit had failed"),
        "{}",
        unread.evidence
    );
}

/// Both limits passed: the address-space limit, which the kernel checks
/// first; both set and the call's length unknown: both named.
#[test]
fn the_address_space_limit_comes_first_and_an_unknown_length_names_both() {
    let both = Limits {
        address_space: Some((Some(4 * GIB), None)),
        data: Some((Some(GIB), None)),
        vm_size: Some(3 * GIB),
        vm_data: Some(GIB - MIB),
        ..Limits::default()
    };
    let d = refused_mapping(both.clone(), "mmap", 2 * GIB);
    assert_eq!(d.id, DiagId::AddressSpaceLimit, "{}", d.evidence);
    let d = only(&failed_init(
        with_limits(both),
        &[failed_call(1, "mmap", "ENOMEM")],
        (2, "CUDA_ERROR_OUT_OF_MEMORY"),
    ))
    .clone();
    assert_eq!(d.id, DiagId::AddressSpaceLimit);
    assert!(
        d.evidence.ends_with(
            "the address-space limit (RLIMIT_AS, ulimit -v) of 4 GiB (4294967296 bytes) or the data-size limit \
(RLIMIT_DATA, ulimit -d) of 1 GiB (1073741824 bytes); its address space was 3 GiB (3221225472 bytes) when cuInit had \
failed, its private writable memory 1023 MiB (1072693248 bytes)"
        ),
        "{}",
        d.evidence
    );
    assert!(d.hint.contains("ulimit -d unlimited"), "{}", d.hint);
}

/// The sizes are read after the failure: a set limit they put the call
/// under is still named (a reservation given back is not in them), and
/// says so.
#[test]
fn a_limit_the_sizes_read_later_fit_under_is_named_with_a_caveat() {
    let d = refused_mapping(
        Limits {
            address_space: Some((Some(GIB), None)),
            vm_size: Some(188 * MIB),
            ..Limits::default()
        },
        "mmap",
        512 * MIB,
    );
    assert_eq!(d.id, DiagId::AddressSpaceLimit);
    assert!(
        d.evidence.ends_with(
            "the call asked for 512 MiB (536870912 bytes) (under it when read: a reservation given back after the \
failure is not counted there)"
        ),
        "{}",
        d.evidence
    );
}

#[test]
fn a_descriptor_and_a_filter_are_named_by_their_errno() {
    let emfile = with_limits(Limits {
        nofile: Some((Some(16), Some(16))),
        fds: Some(16),
        ..Limits::default()
    });
    let d = only(&failed_init(
        emfile,
        &[failed_call(1, "eventfd2", "EMFILE")],
        OS,
    ))
    .clone();
    assert_eq!(d.id, DiagId::FileLimit);
    assert!(
        d.evidence.ends_with(
            "eventfd2() failed with EMFILE (an event descriptor): the process's open-file limit (RLIMIT_NOFILE) was \
reached (soft limit 16, hard 16; 16 descriptors were open when cuInit had failed)"
        ),
        "{}",
        d.evidence
    );
    let filtered = with_limits(Limits {
        seccomp: Some(2),
        seccomp_filters: Some(1),
        ..Limits::default()
    });
    let d = only(&failed_init(
        filtered,
        &[failed_call(1, "clone", "EPERM")],
        OS,
    ))
    .clone();
    assert_eq!(d.id, DiagId::NotPermitted);
    assert!(
        d.evidence.ends_with(
            "clone() failed with EPERM (a new thread or process): not a device, so not the device cgroup: a seccomp \
filter or sandbox refused it; the process ran under 1 seccomp filter"
        ),
        "{}",
        d.evidence
    );
}

/// clone3's ENOSYS alone explains nothing (glibc falls back to clone):
/// the verdict keeps the general diagnosis.
#[test]
fn clone3_enosys_alone_is_not_the_cause() {
    let v = failed_init(
        with_limits(Limits::default()),
        &[failed_call(1, "clone3", "ENOSYS")],
        OS,
    );
    assert_eq!(only(&v).id, DiagId::OsCallFailed);
}

/// A mapping refused while the first context is made explains the
/// context's CUDA_ERROR_OUT_OF_MEMORY: the GPU's holders are not blamed.
#[test]
fn a_mapping_refused_in_the_first_context_is_not_the_gpus_memory() {
    let mut ev = good_init();
    ev.push(cuda(5, "cuCtxCreate_v2", None));
    ev.push(failed_call(5, "mmap", "ENOMEM"));
    ev.push(cuda_ret(
        6,
        "cuCtxCreate_v2",
        2,
        "CUDA_ERROR_OUT_OF_MEMORY",
        Some(0),
        None,
    ));
    let info = with_limits(Limits {
        address_space: Some((Some(8 << 30), None)),
        ..Limits::default()
    });
    let v = verdicts_of(vec![info], one_gpu(), &ev);
    let d = only(&v);
    assert_eq!(d.id, DiagId::AddressSpaceLimit);
    assert!(
        d.evidence.starts_with(
            "cuCtxCreate_v2 (device 0) returned CUDA_ERROR_OUT_OF_MEMORY (2) and no call on an NVIDIA file failed: \
mmap() failed with ENOMEM (mapping memory): the address-space limit (RLIMIT_AS, ulimit -v) of 8 GiB"
        ),
        "{}",
        d.evidence
    );
}

/// What failed before cuInit returned does not explain a context, and a
/// start-up that succeeded carries no start-call diagnosis.
#[test]
fn failures_a_start_up_got_past_explain_nothing() {
    let mut ev = vec![failed_call(0, "mmap", "ENOMEM")];
    ev.extend(good_init());
    ev.push(cuda_ret(
        6,
        "cuCtxCreate_v2",
        0,
        "CUDA_SUCCESS",
        Some(0),
        None,
    ));
    let v = verdicts_of(vec![with_limits(Limits::default())], one_gpu(), &ev);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].result, Outcome::Ok, "{}", v[0].text);
    assert!(v[0].diagnoses.is_empty(), "{:#?}", v[0].diagnoses);
}

/// The kernel side's record of a failed `call` naming `path`.
fn failed_path(t: u64, call: &str, errno: &str, path: &str, seq: u32) -> Event {
    let Event::Proc(p) = failed_call(t, call, errno) else {
        unreachable!()
    };
    Event::Proc(crate::decode::ProcCall {
        path: Some(path.into()),
        seq: Some(seq),
        ..p
    })
}

/// A file and a socket libcuda looks for are not there: no rule names a
/// missing file (a search meets them as a matter of course), so the
/// verdict lists the failed calls, the newest first, with their paths.
#[test]
fn a_failure_no_rule_explains_lists_the_failed_calls_newest_first() {
    // Times from 1 ms: a clock at 0 is one not started yet.
    let v = verdicts_of(
        vec![with_limits(Limits::default())],
        Vec::new(),
        &[
            cuda(1, "cuInit", None),
            failed_path(2, "openat", "ENOENT", "/etc/gpu.conf", 1),
            failed_path(3, "connect", "ENOENT", "/run/gpu.sock", 2),
            cuda(4, "cuInit", Some((999, "CUDA_ERROR_UNKNOWN"))),
        ],
    );
    let d = only(&v);
    assert_eq!(d.id, DiagId::FailedSyscalls, "{d:#?}");
    assert_eq!(
        d.evidence,
        "2 system calls failed in the start-up, the newest first: connect /run/gpu.sock ENOENT at 2.0 ms; \
openat /etc/gpu.conf ENOENT at 1.0 ms"
    );
    let calls: Vec<_> = v[0]
        .failed_syscalls
        .iter()
        .map(|f| (f.call.as_str(), f.path.as_deref(), f.errno))
        .collect();
    assert_eq!(
        calls,
        [
            ("connect", Some("/run/gpu.sock"), libc::ENOENT),
            ("openat", Some("/etc/gpu.conf"), libc::ENOENT)
        ]
    );
    // The verdict's JSON names the errno.
    let json = serde_json::to_value(&v[0].failed_syscalls[0]).expect("json");
    assert_eq!(json["errno"], "ENOENT");
}

/// Past the 64th record the kernel side counts instead of sending: the
/// list says so, and the count of a rule's failure is a floor.
#[test]
fn the_last_record_sent_makes_the_counts_floors() {
    let mut ev: Vec<Event> = (1..=nvprobe_common::call_failed::SENT_MAX)
        .map(|n| failed_path(1, "openat", "EACCES", "/etc/x", n))
        .collect();
    ev.push(failed_path(
        2,
        "eventfd2",
        "EMFILE",
        "",
        nvprobe_common::call_failed::SENT_MAX,
    ));
    let v = failed_init(with_limits(Limits::default()), &ev, OS);
    let d = only(&v);
    assert_eq!(d.id, DiagId::FileLimit, "{d:#?}");
    assert!(
        d.evidence
            .contains("eventfd2() failed with EMFILE, once or more (an event descriptor)"),
        "{}",
        d.evidence
    );
    assert_eq!(v[0].failed_syscalls.len(), 16, "the newest 16 are kept");
    assert_eq!(v[0].failed_syscalls[0].call, "eventfd2");
}

/// A start-up that ends well carries no failed calls, however many it
/// got past.
#[test]
fn a_start_up_that_ends_well_lists_no_failed_calls() {
    let mut ev = vec![failed_path(0, "openat", "ENOENT", "/etc/gpu.conf", 1)];
    ev.extend(good_init());
    let v = verdicts_of(vec![with_limits(Limits::default())], one_gpu(), &ev);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].result, Outcome::Ok, "{}", v[0].text);
    assert!(
        v[0].failed_syscalls.is_empty(),
        "{:#?}",
        v[0].failed_syscalls
    );
    assert!(v[0].diagnoses.is_empty(), "{:#?}", v[0].diagnoses);
}

/// What a process does once cuInit has failed (a Python script importing
/// what it needs to print the error) is not its start-up: those failed
/// calls are neither listed nor counted.
#[test]
fn failed_calls_after_the_start_up_failed_are_not_its_own() {
    let v = verdicts_of(
        vec![with_limits(Limits::default())],
        Vec::new(),
        &[
            cuda(1, "cuInit", None),
            failed_path(2, "openat", "ENOENT", "/etc/gpu.conf", 1),
            cuda(3, "cuInit", Some((999, "CUDA_ERROR_UNKNOWN"))),
            failed_call(4, "ioctl", "ENOTTY"),
            failed_path(5, "newfstatat", "ENOENT", "/usr/lib/python3/json.so", 3),
        ],
    );
    let d = only(&v);
    assert_eq!(d.id, DiagId::FailedSyscalls, "{d:#?}");
    assert_eq!(
        d.evidence,
        "1 system call failed in the start-up, the newest first: openat /etc/gpu.conf ENOENT at 1.0 ms"
    );
    assert_eq!(v[0].failed_syscalls.len(), 1, "{:#?}", v[0].failed_syscalls);
}

/// A call with no permission check of its own (uname) refused with EPERM
/// while cuInit failed with 304: a filter's answer, named as one, with the
/// process's filters.
#[test]
fn eperm_on_a_call_without_a_permission_check_is_a_filter() {
    let info = with_limits(Limits {
        seccomp_filters: Some(1),
        ..Limits::default()
    });
    let v = failed_init(info, &[failed_call(1, "uname", "EPERM")], OS);
    let d = only(&v);
    assert_eq!(d.id, DiagId::NotPermitted, "{d:#?}");
    assert!(
        d.evidence.contains("uname() failed with EPERM"),
        "{}",
        d.evidence
    );
    assert!(d.evidence.contains("1 seccomp filter"), "{}", d.evidence);
}
