//! The start-up goes on past a successful cuInit to the first context:
//! its verdict waits for it, names it, or names the device lookup or the
//! context call that failed, with what was visible, what the driver
//! refused and who held the GPU. Constructed streams; the real ones are in
//! nvprobe/model/tests.

use super::{
    tests::{exit_of, io, open, proc_call},
    tests_classes::{cuda, verdicts_of},
    *,
};
use crate::attribution::{GpuHolder, HostGpu, ProcessInfo};
use crate::correlate::{DiagId, DiagSeverity, FirstContext, Outcome};
use crate::decode::{Event, ProcKind};

/// A libcuda return that names a device, or says a count.
pub(super) fn cuda_ret(
    t: u64,
    func: &'static str,
    code: i64,
    name: &'static str,
    device: Option<i32>,
    value: Option<i32>,
) -> Event {
    let mut e = cuda(t, func, Some((code, name)));
    if let Event::Cuda(c) = &mut e {
        c.device = device;
        c.value = value;
    }
    e
}

/// The calls of a cuInit that succeeds on GPU 0.
pub(super) fn good_init() -> Vec<Event> {
    vec![
        cuda(1, "cuInit", None),
        open(2, "/dev/nvidiactl", "ctl"),
        open(3, "/dev/nvidia0", "gpu"),
        cuda(4, "cuInit", Some((0, "CUDA_SUCCESS"))),
        cuda_ret(5, "cuDeviceGetCount", 0, "CUDA_SUCCESS", None, Some(1)),
    ]
}

pub(super) fn one_gpu() -> Vec<HostGpu> {
    vec![HostGpu {
        minor: 0,
        uuid: Some("GPU-aaaa".into()),
        ..HostGpu::default()
    }]
}

fn info(env: &[(&str, &str)], read_at: Option<&str>, holders: Vec<GpuHolder>) -> ProcessInfo {
    ProcessInfo {
        pid: 7,
        exe: Some("/usr/bin/python3".into()),
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        read_at: read_at.map(Into::into),
        gpu_holders: holders,
        ..ProcessInfo::default()
    }
}

/// An RM allocation the driver refused for want of memory.
fn rm_alloc_no_memory(t: u64) -> Event {
    let mut e = io(
        t,
        "NV_ESC_RM_ALLOC",
        Some(("hClass_name", "KEPLER_CHANNEL_GROUP_A")),
        "gpu",
    );
    if let Event::Ioctl(i) = &mut e {
        i.ok = false;
        i.status = Some(crate::decode::Status {
            code: 0x51,
            name: Some("NV_ERR_NO_MEMORY"),
            offset: 0,
            layout: crate::decode::version::LayoutBasis::Stable,
        });
    }
    e
}

#[test]
fn an_ordinal_past_the_visible_devices_is_named_with_what_was_visible() {
    let mut ev = good_init();
    ev.push(cuda_ret(
        5,
        "cuDeviceGet",
        101,
        "CUDA_ERROR_INVALID_DEVICE",
        Some(1),
        None,
    ));
    ev.push(exit_of(6, 7, 1 << 8));
    let v = verdicts_of(
        vec![info(&[("CUDA_VISIBLE_DEVICES", "0")], None, vec![])],
        one_gpu(),
        &ev,
    );
    assert_eq!(v.len(), 1);
    let v = &v[0];
    assert_eq!(v.result, Outcome::Failed);
    assert_eq!(v.curesult.as_deref(), Some("CUDA_SUCCESS (0)"));
    let c = v.context.as_ref().expect("the step after cuInit");
    assert_eq!(
        (c.call.as_str(), c.device, c.code),
        ("cuDeviceGet", Some(1), 101)
    );
    assert!(
        v.text
            .contains(", then cuDeviceGet (device 1) returned CUDA_ERROR_INVALID_DEVICE (101)"),
        "{}",
        v.text
    );
    assert_eq!(v.diagnoses.len(), 1, "{:?}", v.diagnoses);
    let d = &v.diagnoses[0];
    assert_eq!(
        (d.id, d.severity),
        (DiagId::InvalidDevice, DiagSeverity::Error)
    );
    assert_eq!(
        d.evidence,
        "cuDeviceGet (device 1) returned CUDA_ERROR_INVALID_DEVICE (101); cuDeviceGetCount said 1 device \
is visible (ordinal 0); CUDA_VISIBLE_DEVICES=0 selects /dev/nvidia[0] (the host has 1 GPU)"
    );
}

#[test]
fn an_out_of_memory_first_context_names_the_refusal_and_who_holds_the_gpu() {
    let mut ev = good_init();
    // The context call's entry, then the allocation the driver refuses inside it.
    ev.push(cuda(5, "cuCtxCreate_v2", None));
    ev.push(rm_alloc_no_memory(5));
    ev.push(cuda_ret(
        6,
        "cuCtxCreate_v2",
        2,
        "CUDA_ERROR_OUT_OF_MEMORY",
        Some(0),
        None,
    ));
    let holder = GpuHolder {
        pid: 99,
        comm: "trainer".into(),
        minors: vec![0],
    };
    let mut c = Correlator::default();
    c.set_host_gpus(one_gpu());
    let mut out = Vec::new();
    c.observe_obs(Obs::identity(info(&[], None, vec![]), 0), &mut out);
    for e in &ev[..7] {
        c.observe(e, &mut out);
    }
    // Read again at the failure, before the failed call is decoded.
    c.observe_obs(
        Obs::identity(info(&[], Some("context_failed"), vec![holder]), 6_000_000),
        &mut out,
    );
    c.observe(&ev[7], &mut out);
    // The verdict comes with the failed context, not at the exit.
    let v: Vec<CuInit> = out
        .into_iter()
        .filter_map(|r| match r {
            Record::Cuinit(v) => Some(*v),
            _ => None,
        })
        .collect();
    assert_eq!(v.len(), 1);
    let v = &v[0];
    assert_eq!(v.result, Outcome::Failed);
    assert_eq!(
        v.failed_call.as_ref().map(|f| f.result.as_str()),
        Some("NV_ERR_NO_MEMORY")
    );
    let d = &v.diagnoses[0];
    assert_eq!(d.id, DiagId::ContextOutOfMemory);
    assert!(
        d.evidence.starts_with("cuCtxCreate_v2 (device 0) returned CUDA_ERROR_OUT_OF_MEMORY (2); the driver refused NV_ESC_RM_ALLOC"),
        "{}",
        d.evidence
    );
    assert!(
        d.evidence.contains("with NV_ERR_NO_MEMORY"),
        "{}",
        d.evidence
    );
    assert!(
        d.evidence.ends_with(
            "; held open by pid 99 (trainer, /dev/nvidia0) when nvprobe looked (at the failure)"
        ),
        "{}",
        d.evidence
    );
    assert!(d.hint.contains("stop or wait for them"), "{}", d.hint);
}

#[test]
fn with_nobody_else_on_the_gpu_the_hint_does_not_blame_another_process() {
    let mut ev = good_init();
    ev.push(cuda_ret(
        6,
        "cuCtxCreate_v2",
        2,
        "CUDA_ERROR_OUT_OF_MEMORY",
        Some(0),
        None,
    ));
    let v = verdicts_of(
        vec![info(&[], Some("context_failed"), vec![])],
        one_gpu(),
        &ev,
    );
    let d = &v[0].diagnoses[0];
    assert_eq!(d.id, DiagId::ContextOutOfMemory);
    assert!(
        d.evidence.ends_with(
            "; no other process had /dev/nvidia0 open when nvprobe looked (at the failure)"
        ),
        "{}",
        d.evidence
    );
    assert!(!d.hint.contains("stop or wait"), "{}", d.hint);
    assert!(d.hint.contains("this process's own contexts"), "{}", d.hint);
}

#[test]
fn a_working_first_context_ends_the_start_up_at_once() {
    let mut ev = good_init();
    ev.push(cuda_ret(
        6,
        "cuDevicePrimaryCtxRetain",
        0,
        "CUDA_SUCCESS",
        Some(0),
        None,
    ));
    let mut c = Correlator::default();
    let mut out = Vec::new();
    for e in &ev {
        c.observe(e, &mut out);
    }
    let v: Vec<&CuInit> = out
        .iter()
        .filter_map(|r| match r {
            Record::Cuinit(v) => Some(&**v),
            _ => None,
        })
        .collect();
    assert_eq!(v.len(), 1, "given with the context, before any exit");
    assert_eq!(v[0].result, Outcome::Ok);
    assert!(
        v[0].text
            .ends_with("; first context: cuDevicePrimaryCtxRetain (device 0) at 5.0 ms"),
        "{}",
        v[0].text
    );
    assert!(v[0].diagnoses.is_empty());
}

#[test]
fn a_start_up_without_a_context_is_judged_when_the_wait_runs_out() {
    let ev = good_init();
    let mut c = Correlator::default();
    let mut out = Vec::new();
    for e in &ev {
        c.observe(e, &mut out);
    }
    c.observe_obs(Obs::tick(9_000_000_000), &mut out);
    assert!(
        !out.iter().any(|r| matches!(r, Record::Cuinit(_))),
        "still waiting"
    );
    // cuInit returned at 4 ms (and 1 µs).
    c.observe_obs(Obs::tick(4_001_000 + CONTEXT_WAIT_NS), &mut out);
    let v: Vec<&CuInit> = out
        .iter()
        .filter_map(|r| match r {
            Record::Cuinit(v) => Some(&**v),
            _ => None,
        })
        .collect();
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].result, Outcome::Ok);
    assert!(
        v[0].text.ends_with("; no context in the 10 s after it"),
        "{}",
        v[0].text
    );
    // Once: the exit adds no second verdict.
    let mut more = Vec::new();
    c.observe(&exit_of(20_000, 7, 0), &mut more);
    assert!(!more.iter().any(|r| matches!(r, Record::Cuinit(_))));
}

#[test]
fn killed_before_its_first_context_is_not_an_ok_start_up() {
    let mut ev = good_init();
    ev.push(Event::Proc(crate::decode::ProcCall {
        sig: Some(15),
        signal: Some("SIGTERM".into()),
        code: Some(0),
        ..proc_call(ProcKind::Signal, 99, "kill", 7, 5_000_000)
    }));
    ev.push(exit_of(6, 7, 15));
    let v = verdicts_of(vec![], vec![], &ev);
    assert_eq!(v[0].result, Outcome::Killed, "{}", v[0].text);
    assert!(
        v[0].text.contains(", then killed by SIGTERM")
            && v[0].text.ends_with("before a first context was made"),
        "{}",
        v[0].text
    );
}

#[test]
fn what_cuinit_got_past_does_not_explain_a_failed_first_context() {
    let mut ev = vec![
        cuda(1, "cuInit", None),
        super::tests_refused::refused(2, "/dev/nvidia-uvm", "ENOENT"),
        open(3, "/dev/nvidia-uvm", "uvm"),
    ];
    ev.extend(good_init().into_iter().skip(1));
    ev.push(cuda_ret(
        6,
        "cuCtxCreate_v2",
        999,
        "CUDA_ERROR_UNKNOWN",
        Some(0),
        None,
    ));
    let v = verdicts_of(vec![], vec![], &ev);
    let v = &v[0];
    assert_eq!(v.result, Outcome::Failed);
    let errors: Vec<DiagId> = v
        .diagnoses
        .iter()
        .filter(|d| d.severity == DiagSeverity::Error)
        .map(|d| d.id)
        .collect();
    assert_eq!(errors, [DiagId::ContextFailed], "{:?}", v.diagnoses);
    assert!(
        v.diagnoses
            .iter()
            .any(|d| d.id == DiagId::UvmUnusable && d.severity == DiagSeverity::Recovered),
        "{:?}",
        v.diagnoses
    );
}

#[test]
fn a_failed_probe_of_an_ordinal_then_a_context_is_an_ok_start_up() {
    let mut ev = good_init();
    // Probing ordinals until one fails, then a context on device 0.
    ev.push(cuda_ret(
        6,
        "cuDeviceGet",
        101,
        "CUDA_ERROR_INVALID_DEVICE",
        Some(1),
        None,
    ));
    ev.push(cuda_ret(
        7,
        "cuCtxCreate_v2",
        0,
        "CUDA_SUCCESS",
        Some(0),
        None,
    ));
    ev.push(exit_of(8, 7, 0));
    let v = verdicts_of(vec![], one_gpu(), &ev);
    assert_eq!(v[0].result, Outcome::Ok, "{}", v[0].text);
    assert!(v[0].diagnoses.is_empty(), "{:?}", v[0].diagnoses);
    // Without the context, the failed lookup is where it ended (at the exit).
    let mut ev = good_init();
    ev.push(cuda_ret(
        6,
        "cuDeviceGet",
        101,
        "CUDA_ERROR_INVALID_DEVICE",
        Some(1),
        None,
    ));
    ev.push(exit_of(8, 7, 1 << 8));
    let v = verdicts_of(vec![], one_gpu(), &ev);
    assert_eq!(v[0].result, Outcome::Failed, "{}", v[0].text);
    assert_eq!(v[0].diagnoses[0].id, DiagId::InvalidDevice);
}

fn late_contexts(out: &[Record]) -> Vec<&FirstContext> {
    out.iter()
        .filter_map(|r| match r {
            Record::FirstContext(c) => Some(&**c),
            _ => None,
        })
        .collect()
}

/// A context made after the verdict (which waited for one in vain) is a
/// `first_context` record: a failed one with the diagnoses it would have
/// had in the verdict, a working one without; a second context says
/// nothing more.
#[test]
fn a_first_context_after_the_verdict_is_reported_with_its_cause() {
    let run = |code: i64, name: &'static str| {
        let mut c = Correlator::default();
        c.set_host_gpus(one_gpu());
        let mut out = Vec::new();
        c.observe_obs(Obs::identity(info(&[], None, vec![]), 0), &mut out);
        for e in &good_init() {
            c.observe(e, &mut out);
        }
        c.observe_obs(Obs::tick(4_001_000 + CONTEXT_WAIT_NS), &mut out);
        // 15 s in: the model is loaded, the first tensor goes to the GPU.
        c.observe(&cuda(15_000, "cuCtxCreate_v2", None), &mut out);
        if code != 0 {
            c.observe(&rm_alloc_no_memory(15_000), &mut out);
        }
        c.observe(
            &cuda_ret(15_001, "cuCtxCreate_v2", code, name, Some(0), None),
            &mut out,
        );
        c.observe(
            &cuda_ret(16_000, "cuCtxCreate_v2", code, name, Some(0), None),
            &mut out,
        );
        out
    };
    let out = run(2, "CUDA_ERROR_OUT_OF_MEMORY");
    let verdicts = out
        .iter()
        .filter(|r| matches!(r, Record::Cuinit(_)))
        .count();
    assert_eq!(verdicts, 1, "one verdict");
    let late = late_contexts(&out);
    assert_eq!(late.len(), 1, "the first context only: {late:#?}");
    let l = late[0];
    assert!(!l.ok);
    assert_eq!(
        (l.context.call.as_str(), l.context.code),
        ("cuCtxCreate_v2", 2)
    );
    assert_eq!(l.diagnoses.len(), 1, "{:#?}", l.diagnoses);
    assert_eq!(l.diagnoses[0].id, DiagId::ContextOutOfMemory);
    assert!(
        l.text.starts_with(
            "cuCtxCreate_v2 (device 0) returned CUDA_ERROR_OUT_OF_MEMORY (2) at 15.0 s, after the verdict (no \
context had been made 10 s after cuInit): cuCtxCreate_v2 (device 0) returned CUDA_ERROR_OUT_OF_MEMORY (2); the \
driver refused NV_ESC_RM_ALLOC"
        ),
        "{}",
        l.text
    );
    let out = run(0, "CUDA_SUCCESS");
    let late = late_contexts(&out);
    assert_eq!(late.len(), 1);
    assert!(late[0].ok && late[0].diagnoses.is_empty(), "{:#?}", late[0]);
}

/// A start-up of 2.6 s in a cgroup allowed 5 % of a CPU: it worked, and
/// the quota is said (info, not a problem it recovered from); under a
/// quota of two CPUs, or when it was quick, nothing is said.
#[test]
fn a_slow_start_up_under_a_cpu_quota_says_so() {
    let v = quota_verdicts(Some(5000), 2600, Some((0, "CUDA_SUCCESS")));
    assert_eq!(v.result, Outcome::Ok, "{}", v.text);
    assert_eq!(v.diagnoses.len(), 1, "{:#?}", v.diagnoses);
    let d = &v.diagnoses[0];
    assert_eq!(d.id, DiagId::CpuQuota);
    assert_eq!(d.severity, crate::correlate::table::DiagSeverity::Info);
    assert_eq!(
        d.evidence,
        "the start-up took 2.6 s in a cgroup allowed 5 % of a CPU (cpu.max 5000 100000 of /pod): a second of its \
CPU work takes at least 20.0 s"
    );
    assert!(d.hint.contains("did not hang"), "{}", d.hint);
    // The verdict's text is the start-up's, not the quota's.
    assert!(!v.text.contains("cpu.max"), "{}", v.text);
    for (quota, end) in [(Some(200_000), 2600), (None, 2600), (Some(5000), 300)] {
        let v = quota_verdicts(quota, end, Some((0, "CUDA_SUCCESS")));
        assert!(v.diagnoses.is_empty(), "{quota:?}: {:#?}", v.diagnoses);
    }
}

/// A failed cuInit under a quota: the quota is a warning beside the
/// failure, never its cause or the verdict's text.
#[test]
fn a_cpu_quota_is_never_the_cause_of_a_failure() {
    let v = quota_verdicts(Some(30_000), 1500, Some((999, "CUDA_ERROR_UNKNOWN")));
    assert_eq!(v.result, Outcome::Failed);
    assert!(!v.text.contains("cpu.max"), "{}", v.text);
    let q = v
        .diagnoses
        .iter()
        .find(|d| d.id == DiagId::CpuQuota)
        .expect("the quota said");
    assert_eq!(q.severity, crate::correlate::table::DiagSeverity::Warning);
    assert!(q.evidence.contains("30 % of a CPU"), "{}", q.evidence);
    assert!(
        v.diagnoses.iter().all(|d| d.id == DiagId::CpuQuota
            || d.severity != crate::correlate::table::DiagSeverity::Info),
        "{:#?}",
        v.diagnoses
    );
}

/// The verdict of pid 7: cuInit at 1 ms returning `ret` at `end` - 100 ms,
/// a first context at `end` ms when it worked, in a cgroup with `quota`
/// microseconds of CPU each 100 ms.
fn quota_verdicts(quota: Option<u64>, end: u64, ret: Option<(i64, &'static str)>) -> CuInit {
    let mut ev = vec![
        cuda(1, "cuInit", None),
        open(2, "/dev/nvidiactl", "ctl"),
        open(3, "/dev/nvidia0", "gpu"),
        cuda(end - 100, "cuInit", ret),
    ];
    if ret.is_some_and(|r| r.0 == 0) {
        ev.push(cuda_ret(
            end,
            "cuCtxCreate_v2",
            0,
            "CUDA_SUCCESS",
            Some(0),
            None,
        ));
    }
    let info = ProcessInfo {
        limits: Some(crate::attribution::Limits {
            cpu_quota: quota.map(|quota| crate::attribution::CpuQuota {
                quota,
                period: 100_000,
                cgroup: "/pod".into(),
            }),
            ..Default::default()
        }),
        ..info(&[], None, vec![])
    };
    let mut v = verdicts_of(vec![info], one_gpu(), &ev);
    assert_eq!(v.len(), 1, "{v:#?}");
    v.remove(0)
}
