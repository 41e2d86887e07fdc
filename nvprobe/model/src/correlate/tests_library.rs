//! Library loading as part of start-up: a libcuda the loader found and
//! could not load, a libcuda copy of another version mapped after nvprobe
//! read the process, and a preloaded library that answers cuInit in
//! libcuda's place. Constructed streams; the real ones are in
//! nvprobe/model/tests.

use super::{
    tests::{exit_of, failed, io, open},
    tests_classes::{cuda, lib_open, verdicts_of},
};
use crate::attribution::{LibcudaOpened, ProcessInfo};
use crate::correlate::{Class, DiagId, DiagSeverity, Outcome};
use crate::decode::Event;

fn info(env: &[(&str, &str)], opened: Vec<LibcudaOpened>) -> ProcessInfo {
    ProcessInfo {
        pid: 7,
        exe: Some("/usr/bin/python3".into()),
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        libcuda_opened: opened,
        ..ProcessInfo::default()
    }
}

/// A libcuda call made to a preloaded library, not libcuda.
fn interposed(t: u64, func: &'static str, ret: Option<(i64, &'static str)>) -> Event {
    let mut e = cuda(t, func, ret);
    if let Event::Cuda(c) = &mut e {
        c.interposer = true;
    }
    e
}

#[test]
fn a_libcuda_the_loader_cannot_load_is_a_failed_cuda_start_up_with_why() {
    let path = "/opt/bad/libcuda.so.1";
    let bad = LibcudaOpened {
        path: path.into(),
        unloadable: Some("the file is empty (0 bytes): the loader says \"file too short\"".into()),
        ..LibcudaOpened::default()
    };
    let v = verdicts_of(
        vec![info(&[], vec![bad])],
        vec![],
        &[lib_open(1, path, None), exit_of(2, 7, 1 << 8)],
    );
    assert_eq!(v.len(), 1);
    let v = &v[0];
    assert_eq!(
        (v.class, v.result),
        (Class::Cuda, Outcome::Failed),
        "{}",
        v.text
    );
    assert_eq!(v.diagnoses.len(), 1, "{:?}", v.diagnoses);
    let d = &v.diagnoses[0];
    assert_eq!(
        (d.id, d.severity),
        (DiagId::LibcudaUnloadable, DiagSeverity::Error)
    );
    assert_eq!(
        d.evidence,
        "the dynamic loader opened /opt/bad/libcuda.so.1 and could not load it: the file is empty (0 bytes): \
the loader says \"file too short\""
    );
    assert!(
        v.text
            .starts_with("stopped before any driver call: the dynamic loader opened"),
        "{}",
        v.text
    );
}

#[test]
fn a_copy_of_another_version_mapped_late_is_named_by_its_file_and_the_handshake() {
    let path = "/opt/535/libcuda.so.535.261.03";
    let copy = LibcudaOpened {
        path: path.into(),
        version: Some("535.261.03".into()),
        ..LibcudaOpened::default()
    };
    let v = verdicts_of(
        vec![info(&[], vec![copy])],
        vec![],
        &[
            lib_open(1, path, None),
            open(2, "/dev/nvidiactl", "ctl"),
            failed(io(3, "NV_ESC_CHECK_VERSION_STR", None, "ctl"), "EINVAL"),
            exit_of(4, 7, 1 << 8),
        ],
    );
    let v = &v[0];
    assert_eq!(
        (v.class, v.result),
        (Class::Cuda, Outcome::Failed),
        "{}",
        v.text
    );
    let d = v
        .diagnoses
        .iter()
        .find(|d| d.id == DiagId::VersionMismatch)
        .expect("version_mismatch");
    assert_eq!(d.severity, DiagSeverity::Error);
    assert_eq!(
        d.evidence,
        "NV_ESC_CHECK_VERSION_STR returned EINVAL; libcuda /opt/535/libcuda.so.535.261.03 is 535.261.03, \
the kernel module is 580.159.04"
    );
    assert!(!v.text.contains("NVML"), "{}", v.text);
}

#[test]
fn a_preload_that_answers_cuinit_is_named_and_libcudas_meanings_are_not_given() {
    let v = verdicts_of(
        vec![info(&[("LD_PRELOAD", "/opt/shim/libfake.so")], vec![])],
        vec![],
        &[
            lib_open(1, "/usr/lib/libcuda.so.1", None),
            interposed(2, "cuInit", None),
            interposed(3, "cuInit", Some((100, "CUDA_ERROR_NO_DEVICE"))),
            exit_of(4, 7, 1 << 8),
        ],
    );
    let v = &v[0];
    assert_eq!(
        (v.class, v.result),
        (Class::Cuda, Outcome::Failed),
        "{}",
        v.text
    );
    assert!(
        v.text.starts_with(
            "cuInit, answered by the preloaded /opt/shim/libfake.so in libcuda's place, returned CUDA_ERROR_NO_DEVICE (100)"
        ),
        "{}",
        v.text
    );
    let ids: Vec<DiagId> = v.diagnoses.iter().map(|d| d.id).collect();
    assert_eq!(
        ids,
        [DiagId::CudaInterposer],
        "no no_visible_devices: {:?}",
        v.diagnoses
    );
    assert_eq!(
        v.diagnoses[0].evidence,
        "cuInit was answered by the preloaded /opt/shim/libfake.so in libcuda's place: it returned \
CUDA_ERROR_NO_DEVICE (100) and libcuda's own cuInit was not called"
    );
}

#[test]
fn a_preload_that_forwards_to_libcuda_leaves_libcudas_verdict() {
    let v = verdicts_of(
        vec![info(&[("LD_PRELOAD", "/opt/shim/libwrap.so")], vec![])],
        vec![],
        &[
            interposed(1, "cuInit", None),
            cuda(2, "cuInit", None),
            open(3, "/dev/nvidiactl", "ctl"),
            cuda(4, "cuInit", Some((0, "CUDA_SUCCESS"))),
            interposed(5, "cuInit", Some((0, "CUDA_SUCCESS"))),
            exit_of(6, 7, 0),
        ],
    );
    let v = &v[0];
    assert_eq!(v.result, Outcome::Ok);
    assert!(
        v.text.starts_with("cuInit returned CUDA_SUCCESS (0)"),
        "{}",
        v.text
    );
    assert!(v.diagnoses.is_empty(), "{:?}", v.diagnoses);
}

#[test]
fn a_preload_not_hooked_in_time_is_a_warning_with_what_was_seen() {
    // libcuda mapped (linked with -lcuda), the preload not hooked yet.
    let mut i = info(&[("LD_PRELOAD", "libfake.so")], vec![]);
    i.libcuda = vec![crate::attribution::LibcudaMapped {
        path: "/usr/lib/libcuda.so.1".into(),
        version: Some("580.159.04".into()),
        stub: false,
    }];
    let v = verdicts_of(
        vec![i],
        vec![],
        &[
            lib_open(1, "/usr/lib/libcuda.so.1", None),
            exit_of(2, 7, 1 << 8),
        ],
    );
    let v = &v[0];
    let d = v
        .diagnoses
        .iter()
        .find(|d| d.id == DiagId::CudaInterposer)
        .expect("cuda_interposer");
    assert_eq!(d.severity, DiagSeverity::Warning);
    assert!(
        d.evidence
            .starts_with("the process loaded libcuda under LD_PRELOAD=libfake.so"),
        "{}",
        d.evidence
    );
}

#[test]
fn a_wrapper_that_turns_success_into_failure_explains_the_failure() {
    let v = verdicts_of(
        vec![info(&[("LD_PRELOAD", "/opt/shim/libvgpu.so")], vec![])],
        vec![],
        &[
            interposed(1, "cuInit", None),
            cuda(2, "cuInit", None),
            open(3, "/dev/nvidiactl", "ctl"),
            cuda(4, "cuInit", Some((0, "CUDA_SUCCESS"))),
            interposed(5, "cuInit", Some((100, "CUDA_ERROR_NO_DEVICE"))),
            exit_of(6, 7, 1 << 8),
        ],
    );
    let v = &v[0];
    assert_eq!(v.result, Outcome::Failed, "{}", v.text);
    assert_eq!(v.curesult.as_deref(), Some("CUDA_ERROR_NO_DEVICE (100)"));
    let ids: Vec<DiagId> = v.diagnoses.iter().map(|d| d.id).collect();
    assert_eq!(
        ids,
        [DiagId::CudaInterposer],
        "no no_visible_devices: {:?}",
        v.diagnoses
    );
    assert_eq!(v.diagnoses[0].severity, DiagSeverity::Error);
    assert_eq!(
        v.diagnoses[0].evidence,
        "the preloaded /opt/shim/libvgpu.so wraps cuInit: libcuda's returned CUDA_SUCCESS (0), and the wrapper gave \
the program CUDA_ERROR_NO_DEVICE (100)"
    );
}

/// A verdict's diagnoses as (id, severity).
fn ids_of(v: &crate::correlate::CuInit) -> Vec<(DiagId, DiagSeverity)> {
    v.diagnoses.iter().map(|d| (d.id, d.severity)).collect()
}

/// A call a ptrace tracer skipped, as the kernel side records it: number
/// -1 with ENOSYS, the skipped call's first arguments.
fn skipped(t: u64, args: Vec<u64>) -> Event {
    Event::Proc(crate::decode::ProcCall {
        call: Some("syscall -1".into()),
        errno: Some("ENOSYS".into()),
        failed: Some((crate::decode::SysKind::Skipped, libc::ENOSYS)),
        args: Some(args),
        ..super::tests::proc_call(
            crate::decode::ProcKind::CallFailed,
            7,
            "app",
            7,
            t * 1_000_000,
        )
    })
}

fn traced_by(pid: u32, comm: &str) -> ProcessInfo {
    let mut i = info(&[], vec![]);
    i.tracer = Some(crate::attribution::Tracer {
        pid,
        comm: comm.into(),
    });
    i
}

/// strace answered libcuda's open of nvidiactl itself: the kernel saw the
/// open skipped (number -1) and no driver call, so the tracer is the
/// diagnosis, named by what nvprobe read of it; with no tracer read, by
/// the skip alone. A tracer that skipped nothing (a debugger, a plain
/// strace) answered nothing: not named.
#[test]
fn a_call_a_tracer_skipped_is_the_diagnosis_and_a_tracer_that_skipped_none_is_not() {
    let run = |i: ProcessInfo, skip: bool| {
        let mut events = vec![cuda(1, "cuInit", None)];
        if skip {
            events.push(skipped(2, vec![0xffff_ff9c, 0x7ffd_0000_1000]));
        }
        events.push(cuda(3, "cuInit", Some((999, "CUDA_ERROR_UNKNOWN"))));
        events.push(exit_of(4, 7, 1 << 8));
        verdicts_of(vec![i], vec![], &events)
            .into_iter()
            .next()
            .expect("a verdict")
    };
    let tail = "the kernel saw 1 call of its start-up skipped (number -1 at the call's exit, which a ptrace tracer \
sets for a call it answers itself); no driver call reached the kernel: the process is traced by ";
    let v = run(traced_by(42, "strace"), true);
    assert_eq!(v.result, Outcome::Failed, "{}", v.text);
    let ids = ids_of(&v);
    assert_eq!(
        ids,
        [(DiagId::AnsweredByTracer, DiagSeverity::Error)],
        "{:#?}",
        v.diagnoses
    );
    assert_eq!(
        v.diagnoses[0].evidence,
        format!(
            "cuInit returned CUDA_ERROR_UNKNOWN (999) and {tail}strace[42], which answered it itself, as strace's \
-e inject does"
        )
    );
    let v = run(traced_by(42, ""), true);
    assert!(
        v.diagnoses[0]
            .evidence
            .contains("traced by process 42, which"),
        "{}",
        v.diagnoses[0].evidence
    );
    let v = run(info(&[], vec![]), true);
    assert!(
        v.diagnoses[0].evidence.contains(&format!(
            "{tail}a ptrace tracer nvprobe did not see (it attached after nvprobe read the process), which"
        )),
        "{}",
        v.diagnoses[0].evidence
    );
    for i in [traced_by(42, "gdb"), info(&[], vec![])] {
        let v = run(i, false);
        assert!(
            v.diagnoses.iter().all(|d| d.id != DiagId::AnsweredByTracer),
            "{:#?}",
            v.diagnoses
        );
    }
}

/// A library in /etc/ld.so.preload counts as a preload: with no mark the
/// kernel saw, a warning beside what the rules found; a debugger that
/// skipped nothing beside it is not named.
#[test]
fn a_system_preload_with_no_mark_is_a_warning_beside_the_rules() {
    let mut i = traced_by(42, "gdb");
    i.system_preloads = vec!["/usr/lib/libjemalloc.so.2".into()];
    let v = verdicts_of(
        vec![i],
        vec![],
        &[
            cuda(1, "cuInit", None),
            open(2, "/dev/nvidiactl", "ctl"),
            io(3, "NV_ESC_CARD_INFO", None, "ctl"),
            cuda(4, "cuInit", Some((100, "CUDA_ERROR_NO_DEVICE"))),
            exit_of(5, 7, 1 << 8),
        ],
    );
    let v = &v[0];
    let ids = ids_of(v);
    assert_eq!(
        ids,
        [
            (DiagId::NoVisibleDevices, DiagSeverity::Error),
            (DiagId::AnsweredInProcess, DiagSeverity::Warning),
        ],
        "{:#?}",
        v.diagnoses
    );
    assert!(
        v.diagnoses[1].evidence.ends_with(
            "every driver call it made succeeded, with no failed call the kernel saw that explains it; the \
process preloads /usr/lib/libjemalloc.so.2 (its /etc/ld.so.preload)"
        ),
        "{}",
        v.diagnoses[1].evidence
    );
}

/// Two calls skipped after driver calls had succeeded, the last with an
/// escape's arguments: the diagnosis names that escape. A visibility list
/// that selects a GPU does not stand in its way, and a cuInit failure of
/// another code (out of memory) is the tracer's as well.
#[test]
fn calls_a_tracer_skipped_name_the_last_escape_whatever_the_code() {
    let mut i = traced_by(42, "strace");
    i.env.insert("CUDA_VISIBLE_DEVICES".into(), "0".into());
    let gpu = crate::attribution::HostGpu {
        minor: 0,
        uuid: Some("GPU-0b1c".into()),
        ..Default::default()
    };
    for (code, name) in [
        (100, "CUDA_ERROR_NO_DEVICE"),
        (2, "CUDA_ERROR_OUT_OF_MEMORY"),
    ] {
        let v = verdicts_of(
            vec![i.clone()],
            vec![gpu.clone()],
            &[
                cuda(1, "cuInit", None),
                open(2, "/dev/nvidiactl", "ctl"),
                io(3, "NV_ESC_CARD_INFO", None, "ctl"),
                skipped(4, vec![0xffff_ff9c, 0x7ffd_0000_1000]),
                skipped(5, vec![3, 0xc020_462a, 0x7ffd_0000_2000]),
                cuda(6, "cuInit", Some((code, name))),
                exit_of(7, 7, 1 << 8),
            ],
        );
        let v = &v[0];
        let ids = ids_of(v);
        assert_eq!(
            ids,
            [(DiagId::AnsweredByTracer, DiagSeverity::Error)],
            "{:#?}",
            v.diagnoses
        );
        assert_eq!(
            v.diagnoses[0].evidence,
            format!(
                "cuInit returned {name} ({code}) and the kernel saw 2 calls of its start-up skipped (number -1 at \
the call's exit, which a ptrace tracer sets for a call it answers itself), the last with the arguments of \
NV_ESC_RM_CONTROL (descriptor 3, request 0xc020462a); every driver call it made succeeded: the process is traced \
by strace[42], which answered them itself, as strace's -e inject does"
            )
        );
    }
}
