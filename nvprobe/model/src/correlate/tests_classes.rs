//! One verdict per process, with a class; diagnoses never contradict the
//! outcome (issue 10). Constructed streams; the real ones are in
//! nvprobe/model/tests.

use super::{
    tests::{exit_of, failed, io, open, proc_, proc_call},
    *,
};
use crate::correlate::{Class, DiagId, DiagSeverity, Outcome};
use crate::{
    attribution::{HostGpu, ProcessInfo},
    decode::CudaPhase,
};

fn lookup(t: u64, path: &str, errno: Option<&str>) -> Event {
    let Event::Open(mut p) = open(t, path, "none") else {
        unreachable!()
    };
    p.syscall = "newfstatat";
    p.device = None;
    p.fd = None;
    if let Some(e) = errno {
        p.errno = Some(e.into());
        p.ret = errno_ret(e);
        p.ok = false;
    } else {
        p.ret = 0;
    }
    Event::Stat(p)
}

fn mknod(t: u64, path: &str, minor: u32) -> Event {
    let Event::Open(mut p) = open(t, path, "gpu") else {
        unreachable!()
    };
    p.syscall = "mknodat";
    p.ret = 0;
    p.fd = None;
    if let Some(d) = p.device.as_mut() {
        d.minor = minor;
    }
    Event::Mknod(p)
}

pub(super) fn cuda(t: u64, func: &'static str, ret: Option<(i64, &'static str)>) -> Event {
    Event::Cuda(crate::decode::CudaCall {
        proc: proc_(),
        func,
        func_id: nvprobe_common::cuda_func_number(func).expect("a libcuda function"),
        phase: if ret.is_some() {
            CudaPhase::Return
        } else {
            CudaPhase::Enter
        },
        start_ns: t * 1_000_000,
        duration_ns: ret.map(|_| 1000),
        result: ret.map(|r| r.0),
        result_name: ret.map(|r| r.1),
        flags: None,
        interposer: false,
        value: None,
        device: None,
        raw: None,
    })
}

/// Every verdict a stream gives, with identities fed first.
pub(super) fn verdicts_of(
    ids: Vec<ProcessInfo>,
    gpus: Vec<HostGpu>,
    events: &[Event],
) -> Vec<CuInit> {
    let mut c = Correlator::default();
    c.set_host_gpus(gpus);
    c.set_host_driver(Some("580.159.04".into()));
    let mut out = Vec::new();
    for i in ids {
        c.observe_obs(Obs::identity(i, 0), &mut out);
    }
    for e in events {
        c.observe(e, &mut out);
    }
    c.finish(&mut out);
    out.into_iter()
        .filter_map(|r| match r {
            Record::Cuinit(v) => Some(*v),
            _ => None,
        })
        .collect()
}

fn with_libcuda(path: &str, version: Option<&str>, stub: bool) -> ProcessInfo {
    ProcessInfo {
        pid: 7,
        exe: Some("/usr/bin/python3".into()),
        libcuda: vec![crate::attribution::LibcudaMapped {
            path: path.into(),
            version: version.map(Into::into),
            stub,
        }],
        ..ProcessInfo::default()
    }
}

#[test]
fn processes_that_never_start_cuda_are_not_failed_cuda_start_ups() {
    // `ls /dev/nvidia*`: lookups only, one of them missing.
    let ls = verdicts_of(
        vec![],
        vec![],
        &[
            lookup(1, "/dev/nvidiactl", None),
            lookup(2, "/dev/nvidia-uvm", Some("ENOENT")),
            exit_of(3, 7, 0),
        ],
    );
    assert_eq!(ls.len(), 1);
    assert_eq!(
        (ls[0].class.as_str(), ls[0].result.as_str()),
        ("probe", "ok")
    );
    assert!(ls[0].diagnoses.is_empty(), "{:?}", ls[0].diagnoses);
    assert!(
        ls[0]
            .text
            .starts_with("looked up NVIDIA paths only (2 lookups"),
        "{}",
        ls[0].text
    );
    // A shell that creates /dev/nvidia-uvm as a regular file (`:
    // >/dev/nvidia-uvm`, seen on the GPU machine's who-refused run): it
    // makes a file at an NVIDIA path, it does not start CUDA.
    let Event::Open(mut mk) = open(1, "/dev/nvidia-uvm", "none") else {
        unreachable!()
    };
    mk.flags = "O_WRONLY|O_CREAT|O_TRUNC".into();
    mk.creates = true;
    mk.mismatch =
        Some("/dev/nvidia-uvm is not a character device: this is not the NVIDIA uvm node".into());
    let sh = verdicts_of(vec![], vec![], &[Event::Open(mk), exit_of(2, 7, 0)]);
    assert_eq!(
        (sh[0].class.as_str(), sh[0].result.as_str()),
        ("probe", "ok"),
        "{sh:#?}"
    );
    // nvidia-smi: the driver, no UVM, no libcuda.
    let smi = verdicts_of(
        vec![],
        vec![],
        &[
            open(1, "/dev/nvidiactl", "ctl"),
            io(
                2,
                "NV_ESC_RM_ALLOC",
                Some(("hClass_name", "NV01_ROOT_CLIENT")),
                "ctl",
            ),
            open(3, "/dev/nvidia0", "gpu"),
            exit_of(4, 7, 0),
        ],
    );
    assert_eq!(
        (smi[0].class.as_str(), smi[0].result.as_str()),
        ("nvml", "ok")
    );
    assert!(smi[0].text.contains("a driver client"), "{}", smi[0].text);
    // A CUDA start-up is one: its verdict comes once, at cuInit's return.
    let cu = verdicts_of(
        vec![],
        vec![],
        &[
            cuda(1, "cuInit", None),
            open(2, "/dev/nvidiactl", "ctl"),
            cuda(3, "cuInit", Some((0, "CUDA_SUCCESS"))),
            exit_of(4, 7, 0),
        ],
    );
    assert_eq!(cu.len(), 1, "exactly one verdict: {cu:#?}");
    assert_eq!(
        (cu[0].class.as_str(), cu[0].result.as_str()),
        ("cuda", "ok")
    );
}

#[test]
fn a_node_libcuda_created_is_a_recovered_problem_not_a_cause() {
    let v = verdicts_of(
        vec![],
        vec![],
        &[
            cuda(1, "cuInit", None),
            lookup(2, "/dev/nvidia0", Some("ENOENT")),
            mknod(3, "/dev/nvidia0", 0),
            open(4, "/dev/nvidia0", "gpu"),
            cuda(5, "cuInit", Some((0, "CUDA_SUCCESS"))),
        ],
    );
    assert_eq!(v[0].result, Outcome::Ok);
    let d = &v[0].diagnoses[0];
    assert_eq!(
        (d.id.as_str(), d.severity.as_str()),
        ("node_missing", "recovered")
    );
    assert_eq!(
        d.evidence,
        "/dev/nvidia0: ENOENT; libcuda created it (mknod 195:0); start-up recovered and succeeded"
    );
    // A failed start-up: the node that was opened later is not the cause.
    let v = verdicts_of(
        vec![],
        vec![],
        &[
            cuda(1, "cuInit", None),
            lookup(2, "/dev/nvidia-uvm", Some("ENOENT")),
            open(3, "/dev/nvidia-uvm", "uvm"),
            cuda(4, "cuInit", Some((999, "CUDA_ERROR_UNKNOWN"))),
        ],
    );
    assert_eq!(v[0].result, Outcome::Failed);
    assert_eq!(v[0].diagnoses[0].severity, DiagSeverity::Recovered);
    assert!(
        !v[0].text.contains("/dev/nvidia-uvm: ENOENT"),
        "a recovered problem must not explain the failure: {}",
        v[0].text
    );
}

#[test]
fn a_refused_mknod_is_named() {
    let Event::Mknod(mut p) = mknod(2, "/dev/nvidia0", 0) else {
        unreachable!()
    };
    p.ret = -1;
    p.errno = Some("EPERM".into());
    p.ret = errno_ret("EPERM");
    p.ok = false;
    let v = verdicts_of(
        vec![],
        vec![],
        &[
            cuda(1, "cuInit", None),
            Event::Mknod(p),
            cuda(3, "cuInit", Some((100, "CUDA_ERROR_NO_DEVICE"))),
        ],
    );
    let d = v[0]
        .diagnoses
        .iter()
        .find(|d| d.id == DiagId::NodeCreateFailed)
        .expect("named");
    assert_eq!(d.evidence, "/dev/nvidia0: mknod 195:0 failed: EPERM");
}

#[test]
fn the_toolkit_stub_is_named_with_its_path() {
    let stub = "/usr/local/cuda-13.0/targets/x86_64-linux/lib/stubs/libcuda.so";
    let v = verdicts_of(
        vec![with_libcuda(stub, None, true)],
        vec![],
        &[
            cuda(1, "cuInit", None),
            cuda(2, "cuInit", Some((34, "CUDA_ERROR_STUB_LIBRARY"))),
        ],
    );
    assert_eq!(
        (v[0].class.as_str(), v[0].result.as_str()),
        ("cuda", "failed")
    );
    assert_eq!(v[0].calls, 0);
    let d = &v[0].diagnoses[0];
    assert_eq!(d.id, DiagId::StubLibrary);
    assert!(d.evidence.contains(stub), "{}", d.evidence);
    assert!(v[0].text.contains("stub"), "{}", v[0].text);
}

#[test]
fn a_libcuda_of_another_version_is_named_with_both() {
    let v = verdicts_of(
        vec![with_libcuda(
            "/usr/lib/libcuda.so.1",
            Some("550.163.01"),
            false,
        )],
        vec![],
        &[
            cuda(1, "cuInit", None),
            open(2, "/dev/nvidiactl", "ctl"),
            failed(io(3, "NV_ESC_CHECK_VERSION_STR", None, "ctl"), "EINVAL"),
            cuda(
                4,
                "cuInit",
                Some((803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH")),
            ),
        ],
    );
    let d = v[0]
        .diagnoses
        .iter()
        .find(|d| d.id == DiagId::VersionMismatch)
        .expect("named");
    assert!(
        d.evidence.ends_with(
            "libcuda /usr/lib/libcuda.so.1 is 550.163.01, the kernel module is 580.159.04"
        ),
        "{}",
        d.evidence
    );
}

#[test]
fn any_cuda_call_refused_after_fork_is_fork_after_init() {
    let mut child = cuda(
        5,
        "cuDevicePrimaryCtxRetain",
        Some((3, "CUDA_ERROR_NOT_INITIALIZED")),
    );
    if let Event::Cuda(c) = &mut child {
        c.proc.pid = 8;
        c.proc.tid = 8;
    }
    let mut fork = proc_call(ProcKind::Fork, 7, "app", 8, 4_000_000);
    fork.proc.pid = 7;
    let mut exit = exit_of(6, 8, 1 << 8);
    if let Event::Proc(p) = &mut exit {
        p.proc.pid = 8;
    }
    let v = verdicts_of(
        vec![],
        vec![],
        &[
            cuda(1, "cuInit", None),
            cuda(2, "cuInit", Some((0, "CUDA_SUCCESS"))),
            Event::Proc(fork),
            child,
            exit,
        ],
    );
    let c = v.iter().find(|x| x.pid == 8).expect("the child's verdict");
    assert_eq!(c.class, Class::Cuda);
    assert!(
        c.diagnoses.iter().any(|d| d.id == DiagId::ForkAfterInit),
        "{:#?}",
        c.diagnoses
    );
}

#[test]
fn a_visibility_list_that_matches_nothing_is_said_plainly() {
    let mut info = with_libcuda("/usr/lib/libcuda.so.1", Some("580.159.04"), false);
    info.env
        .insert("CUDA_VISIBLE_DEVICES".into(), "GPU-deadbeef".into());
    let gpu = HostGpu {
        minor: 0,
        uuid: Some("GPU-f0568750-7765-f166-dd86-a87a8ebdc1bf".into()),
        pci: Some("0000:00:06.0".into()),
        model: None,
    };
    let v = verdicts_of(
        vec![info],
        vec![gpu],
        &[
            cuda(1, "cuInit", None),
            cuda(2, "cuInit", Some((100, "CUDA_ERROR_NO_DEVICE"))),
        ],
    );
    let d = &v[0].diagnoses[0];
    assert_eq!(d.id, DiagId::NoVisibleDevices);
    assert!(
        d.evidence
            .ends_with("CUDA_VISIBLE_DEVICES=GPU-deadbeef matches none of this host's 1 GPU"),
        "{}",
        d.evidence
    );
}

/// The dynamic loader's open of a libcuda (O_RDONLY|O_CLOEXEC): found, or
/// not (`errno`).
pub(super) fn lib_open(t: u64, path: &str, errno: Option<&str>) -> Event {
    let Event::Open(mut p) = open(t, path, "none") else {
        unreachable!()
    };
    p.device = None;
    p.flags = "O_RDONLY|O_CLOEXEC".into();
    if let Some(e) = errno {
        p.errno = Some(e.into());
        p.ret = errno_ret(e);
        p.ok = false;
        p.fd = None;
    }
    Event::Open(p)
}

#[test]
fn a_libcuda_read_but_never_mapped_is_no_cuda_start_up() {
    // `nvprobe doctor`, ldconfig, a backup: the file opened, nothing mapped,
    // no call.
    let v = verdicts_of(
        vec![],
        vec![],
        &[
            lib_open(1, "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04", None),
            exit_of(2, 7, 0),
        ],
    );
    assert_eq!(v.len(), 1);
    assert_eq!(
        (v[0].class.as_str(), v[0].result.as_str()),
        ("probe", "ok"),
        "{}",
        v[0].text
    );
    assert!(v[0].text.starts_with(
        "opened /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04 without being seen to map it"
    ));
    // A search that finds none is a CUDA start-up that could not begin.
    let v = verdicts_of(
        vec![],
        vec![],
        &[
            lib_open(1, "/opt/a/libcuda.so.1", Some("ENOENT")),
            lib_open(2, "/usr/lib/libcuda.so.1", Some("ENOENT")),
            exit_of(3, 7, 1 << 8),
        ],
    );
    assert_eq!(
        (v[0].class.as_str(), v[0].result.as_str()),
        ("cuda", "failed"),
        "{}",
        v[0].text
    );
    assert_eq!(v[0].diagnoses[0].id, DiagId::LibcudaNotFound);
    assert!(v[0].diagnoses[0].evidence.starts_with(
        "the dynamic loader looked for libcuda.so.1 2 times and found none: /opt/a/libcuda.so.1 (ENOENT), /usr/lib/libcuda.so.1 (ENOENT)"
    ));
}

/// The return value of a system call that failed with `name` (the
/// decoder reads the errno from it).
pub(super) fn errno_ret(name: &str) -> i64 {
    let e = match name {
        "EPERM" => libc::EPERM,
        "ENOENT" => libc::ENOENT,
        "EINTR" => libc::EINTR,
        "ENXIO" => libc::ENXIO,
        "EAGAIN" => libc::EAGAIN,
        "ENOMEM" => libc::ENOMEM,
        "EACCES" => libc::EACCES,
        "EINVAL" => libc::EINVAL,
        "EMFILE" => libc::EMFILE,
        "EROFS" => libc::EROFS,
        "ENOSYS" => libc::ENOSYS,
        "ENFILE" => libc::ENFILE,
        "ENOSPC" => libc::ENOSPC,
        "ENOTTY" => libc::ENOTTY,
        "EBADF" => libc::EBADF,
        "ERESTARTSYS" => 512,
        other => panic!("errno_ret: add {other}"),
    };
    -i64::from(e)
}

/// A process that already held an NVIDIA descriptor when nvprobe started
/// (a training job, a CUDA process past its start-up): its start-up was
/// not seen, so its calls on the descriptor it held are not a failed
/// start-up's; until it starts something nvprobe sees whole (an open of a
/// node, cuInit), its verdict is how it ended.
#[test]
fn a_process_that_held_a_descriptor_at_the_start_is_not_judged_a_start_up() {
    let held = ProcessInfo {
        held_at_start: true,
        ..with_libcuda("/usr/lib/libcuda.so.1", Some("580.159.04"), false)
    };
    let calls = [
        io(1, "NV_ESC_RM_ALLOC", None, "ctl"),
        io(2, "NV_ESC_RM_CONTROL", None, "ctl"),
    ];
    let ended = |code: i32, extra: &[Event]| {
        let mut ev: Vec<Event> = calls.to_vec();
        ev.extend_from_slice(extra);
        ev.push(exit_of(9, 7, code));
        verdicts_of(vec![held.clone()], vec![], &ev)
    };
    let ok = ended(0, &[]);
    assert_eq!(ok.len(), 1);
    assert_eq!(
        (ok[0].class, ok[0].result),
        (Class::Cuda, Outcome::Ok),
        "{}",
        ok[0].text
    );
    assert_eq!(
        ok[0].text,
        "exited with status 0; it held an NVIDIA descriptor when nvprobe started, so its start-up was not seen"
    );
    assert!(ok[0].diagnoses.is_empty(), "{:?}", ok[0].diagnoses);
    // A failure while followed is said; a non-zero status is an exit, not
    // a failed start-up.
    let bad = ended(
        1 << 8,
        &[failed(
            io(3, "UVM_MAP_EXTERNAL_ALLOCATION", None, "uvm"),
            "EINVAL",
        )],
    );
    assert_eq!(bad[0].result, Outcome::Exited, "{}", bad[0].text);
    assert!(
        bad[0].text.starts_with("exited with status 1; it held")
            && bad[0]
                .text
                .ends_with("last failed: UVM_MAP_EXTERNAL_ALLOCATION returned EINVAL"),
        "{}",
        bad[0].text
    );
    assert_eq!(ended(9, &[])[0].result, Outcome::Killed);
    // Still running at the stop.
    let running = verdicts_of(vec![held.clone()], vec![], &calls);
    assert_eq!(running[0].result, Outcome::Ok);
    assert!(
        running[0]
            .text
            .starts_with("still running when tracing stopped; it held")
    );
    // A start-up it begins while followed is judged as any other.
    let again = verdicts_of(
        vec![held.clone()],
        vec![],
        &[
            calls[0].clone(),
            cuda(2, "cuInit", None),
            open(3, "/dev/nvidiactl", "ctl"),
            cuda(4, "cuInit", Some((100, "CUDA_ERROR_NO_DEVICE"))),
            exit_of(5, 7, 1 << 8),
        ],
    );
    assert_eq!(again[0].result, Outcome::Failed, "{}", again[0].text);
    assert!(
        again[0]
            .text
            .starts_with("cuInit returned CUDA_ERROR_NO_DEVICE"),
        "{}",
        again[0].text
    );
    // The same calls without the mark: a process first seen through an
    // inherited descriptor, judged as before.
    let unmarked = verdicts_of(
        vec![with_libcuda(
            "/usr/lib/libcuda.so.1",
            Some("580.159.04"),
            false,
        )],
        vec![],
        &[calls[0].clone(), calls[1].clone(), exit_of(9, 7, 0)],
    );
    assert!(
        !unmarked[0].text.contains("held an NVIDIA descriptor"),
        "{}",
        unmarked[0].text
    );
}

/// What a process that held its descriptor when nvprobe started did on it
/// before it began a start-up is not the start-up's: a failure then is
/// neither the start-up's failed call nor in its text, its calls are not
/// counted, and its stages are timed from its own first step (cuInit's
/// entry), as the kernel side sends that start-up call by call from there.
#[test]
fn a_held_process_s_start_up_is_judged_from_its_own_first_step() {
    let held = ProcessInfo {
        held_at_start: true,
        ..with_libcuda("/usr/lib/libcuda.so.1", Some("580.159.04"), false)
    };
    let v = verdicts_of(
        vec![held],
        vec![],
        &[
            io(1, "NV_ESC_RM_ALLOC", None, "ctl"),
            failed(io(2, "NV_ESC_RM_CONTROL", None, "ctl"), "EINVAL"),
            cuda(10, "cuInit", None),
            open(11, "/dev/nvidiactl", "ctl"),
            io(12, "NV_ESC_RM_ALLOC", None, "ctl"),
            cuda(13, "cuInit", Some((100, "CUDA_ERROR_NO_DEVICE"))),
            exit_of(14, 7, 1 << 8),
        ],
    );
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].result, Outcome::Failed, "{}", v[0].text);
    assert!(
        v[0].text
            .starts_with("cuInit returned CUDA_ERROR_NO_DEVICE")
            && !v[0].text.contains("EINVAL"),
        "{}",
        v[0].text
    );
    assert!(v[0].failed_call.is_none(), "{:?}", v[0].failed_call);
    assert_eq!(v[0].calls, 1);
    let stages: Vec<(&str, f64)> = v[0].stages.iter().map(|s| (s.name, s.at_ms)).collect();
    assert_eq!(stages[0], ("ctl_opened", 1.0), "{stages:?}");
}

/// A failed open of a node (its /dev/char link here) begins a held
/// process's start-up as the kernel side's `held_ends` does: the verdict
/// is the start-up's, which that open stopped, not "it held an NVIDIA
/// descriptor"; the control refused on the held descriptor is not in it.
#[test]
fn a_held_process_s_failed_open_of_a_node_begins_its_start_up() {
    let held = ProcessInfo {
        held_at_start: true,
        ..with_libcuda("/usr/lib/libcuda.so.1", Some("580.159.04"), false)
    };
    let mut refused = open(5, "/dev/char/195:255", "ctl");
    if let Event::Open(o) = &mut refused {
        o.ret = -13;
        o.errno = Some("EACCES".into());
        o.fd = None;
        o.ok = false;
    }
    let v = verdicts_of(
        vec![held],
        vec![],
        &[
            failed(io(1, "NV_ESC_RM_CONTROL", None, "ctl"), "EINVAL"),
            refused,
            exit_of(6, 7, 1 << 8),
        ],
    );
    assert_eq!(v.len(), 1);
    assert!(
        !v[0].text.contains("it held an NVIDIA descriptor"),
        "{}",
        v[0].text
    );
    assert!(!v[0].text.contains("EINVAL"), "{}", v[0].text);
    assert!(v[0].failed_call.is_none(), "{:?}", v[0].failed_call);
    assert_eq!(v[0].calls, 0);
}
