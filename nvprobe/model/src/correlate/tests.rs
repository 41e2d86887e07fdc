use super::*;
use crate::correlate::{DiagId, Outcome};
use crate::decode::{Call, DeviceKind, Family, SigAction};
use crate::decode::{
    Device, Ioctl, PathCall, Proc,
    args::{Arg, Args},
};

pub(super) fn proc_() -> Proc {
    Proc {
        pid: 7,
        tid: 7,
        ns_pid: None,
        ns_tid: None,
        comm: "app".into(),
        uid: 0,
    }
}

fn kind_of(s: &str) -> DeviceKind {
    [
        DeviceKind::Ctl,
        DeviceKind::Gpu,
        DeviceKind::Uvm,
        DeviceKind::UvmTools,
        DeviceKind::Modeset,
        DeviceKind::Caps,
        DeviceKind::Other,
    ]
    .into_iter()
    .find(|k| k.as_str() == s)
    .unwrap_or(DeviceKind::None)
}

/// The command numbers behind a name, as the decoder would give them.
fn call_of(name: &str) -> Call {
    use crate::decode::{
        escape,
        uvm::{self, UVM_DEINITIALIZE, UVM_INITIALIZE},
        version::{DriverVersion, VersionCtx},
    };
    let v = VersionCtx::from_version(Some(DriverVersion::new(580, 159, 4)));
    if let Some(nr) = (0..=0xffu32).find(|nr| escape::name_for(*nr, &v) == Some(name)) {
        return Call::Escape(nr);
    }
    (0..=0x7ffu32)
        .chain([UVM_INITIALIZE, UVM_DEINITIALIZE])
        .find(|c| uvm::lookup(*c).is_some_and(|u| u.name == name))
        .map_or(Call::Unknown, Call::Uvm)
}

/// The number behind a control or class name.
fn number_of(key: &str, name: &str) -> Option<(&'static str, u32)> {
    use crate::decode::{
        class, control,
        version::{DriverVersion, VersionCtx},
    };
    let v = VersionCtx::from_version(Some(DriverVersion::new(580, 159, 4)));
    match key {
        "control_name" => [0x101, 0x214, 0x215, 0x289, 0x2080_0110u32]
            .into_iter()
            .find(|c| control::name(*c, &v) == Some(name))
            .map(|c| ("control", c)),
        "hClass_name" => (0..=0xffffu32)
            .find(|c| class::name(*c, &v) == Some(name))
            .map(|c| ("hClass", c)),
        _ => None,
    }
}

fn dev(kind: &str) -> Device {
    Device {
        major: 195,
        minor: 0,
        kind: kind_of(kind),
        node: None,
        extra: false,
    }
}

pub(super) fn io(
    t: u64,
    name: &'static str,
    arg: Option<(&'static str, &'static str)>,
    kind: &'static str,
) -> Event {
    let mut args = Args::new();
    if let Some((k, v)) = arg {
        match number_of(k, v) {
            Some(("control", n)) => args.control(n, Some(v)),
            Some((_, n)) => args.class(n, Some(v)),
            None => args.insert(k, Arg::Str(v)),
        }
    }
    let call = call_of(name);
    Event::Ioctl(Ioctl {
        proc: proc_(),
        fd: 3,
        device: dev(kind),
        request: 0,
        family: if matches!(call, Call::Uvm(_)) {
            Family::Uvm
        } else {
            Family::Escape
        },
        call,
        name: Some(name),
        xfer: None,
        size: 0,
        args,
        start_ns: t * 1_000_000,
        duration_ns: 1000,
        untimed: false,
        coarse: false,
        ret: 0,
        errno: None,
        status: None,
        status_note: None,
        ok: true,
        via: None,
        raw: None,
    })
}

pub(super) fn open(t: u64, path: &str, kind: &'static str) -> Event {
    Event::Open(PathCall {
        creates: false,
        proc: proc_(),
        syscall: "openat",
        path: path.into(),
        path_truncated: false,
        flags: "O_RDWR".into(),
        start_ns: t * 1_000_000,
        duration_ns: 1000,
        ret: 3,
        errno: None,
        fd: Some(3),
        device: Some(dev(kind)),
        mismatch: None,
        ok: true,
        raw: None,
    })
}

pub(super) fn stages(events: &[Event]) -> (Vec<&'static str>, CuInit) {
    let mut c = Correlator::default();
    let mut out = Vec::new();
    for e in events {
        c.observe(e, &mut out);
    }
    c.finish(&mut out);
    let v = out
        .into_iter()
        .find_map(|r| match r {
            Record::Cuinit(v) => Some(*v),
            _ => None,
        })
        .expect("verdict");
    (v.stages.iter().map(|s| s.stage).collect(), v)
}

const CTL: &str = "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION";

/// libcuda 545.29.06 on a Turing GPU (docs/NVIDIA-ABI.md §7.1), by its steps.
#[test]
fn the_545_sequence() {
    let ev = vec![
        open(1, "/dev/nvidiactl", "ctl"),
        io(2, "NV_ESC_SYS_PARAMS", None, "ctl"),
        io(3, "NV_ESC_CARD_INFO", None, "ctl"),
        io(
            4,
            "NV_ESC_RM_ALLOC",
            Some(("hClass_name", "NV01_ROOT_CLIENT")),
            "ctl",
        ),
        io(5, "NV_ESC_RM_CONTROL", Some(("control_name", CTL)), "ctl"),
        io(6, "NV_ESC_RM_FREE", None, "ctl"),
        open(7, "/dev/nvidiactl", "ctl"),
        io(
            8,
            "NV_ESC_RM_ALLOC",
            Some(("hClass_name", "NV01_ROOT_CLIENT")),
            "ctl",
        ),
        io(
            9,
            "NV_ESC_RM_ALLOC",
            Some(("hClass_name", "NV_CONFIDENTIAL_COMPUTE")),
            "ctl",
        ),
        io(10, "UVM_INITIALIZE", None, "uvm"),
        io(11, "UVM_MM_INITIALIZE", None, "uvm"),
        io(
            12,
            "NV_ESC_RM_CONTROL",
            Some(("control_name", "NV0000_CTRL_CMD_GPU_GET_PROBED_IDS")),
            "ctl",
        ),
        io(
            13,
            "NV_ESC_RM_CONTROL",
            Some(("control_name", "NV0000_CTRL_CMD_GPU_ATTACH_IDS")),
            "ctl",
        ),
        open(14, "/dev/nvidia0", "gpu"),
        io(15, "NV_ESC_REGISTER_FD", None, "gpu"),
        io(
            16,
            "NV_ESC_RM_ALLOC",
            Some(("hClass_name", "NV01_DEVICE_0")),
            "ctl",
        ),
        io(
            17,
            "NV_ESC_RM_ALLOC",
            Some(("hClass_name", "NV20_SUBDEVICE_0")),
            "ctl",
        ),
        io(
            18,
            "NV_ESC_RM_ALLOC",
            Some(("hClass_name", "FERMI_VASPACE_A")),
            "ctl",
        ),
        io(19, "UVM_REGISTER_GPU", None, "uvm"),
        io(30, "UVM_REGISTER_GPU_VASPACE", None, "uvm"),
    ];
    let (s, v) = stages(&ev);
    assert_eq!(s, ["S0", "S2", "S1", "S4", "S3", "S5", "S6", "S7", "S8"]);
    assert_eq!(v.result, Outcome::Ok);
    assert_eq!(v.stages[7].via, "UVM_REGISTER_GPU");
    assert_eq!(v.stages[1].via, "NV_ESC_RM_ALLOC");
}

/// tinygrad's minimal replay (§7.2): no version handshake, no attach.
#[test]
fn a_minimal_runtime_ordering() {
    let ev = vec![
        open(1, "/dev/nvidiactl", "ctl"),
        io(
            2,
            "NV_ESC_RM_ALLOC",
            Some(("hClass_name", "NV01_ROOT_CLIENT")),
            "ctl",
        ),
        io(3, "UVM_INITIALIZE", None, "uvm"),
        io(4, "NV_ESC_CARD_INFO", None, "ctl"),
        io(5, "NV_ESC_REGISTER_FD", None, "gpu"),
        io(
            6,
            "NV_ESC_RM_ALLOC",
            Some(("hClass_name", "NV01_DEVICE_0")),
            "ctl",
        ),
        io(
            7,
            "NV_ESC_RM_ALLOC",
            Some(("hClass_name", "NV20_SUBDEVICE_0")),
            "ctl",
        ),
        io(8, "UVM_REGISTER_GPU", None, "uvm"),
        io(9, "UVM_REGISTER_GPU_VASPACE", None, "uvm"),
    ];
    let (s, v) = stages(&ev);
    assert_eq!(s, ["S0", "S2", "S4", "S5", "S6", "S7", "S8"]);
    assert_eq!(v.result, Outcome::Ok);
}

#[test]
fn a_version_mismatch_is_named() {
    let mut bad = io(2, "NV_ESC_CHECK_VERSION_STR", None, "ctl");
    if let Event::Ioctl(i) = &mut bad {
        i.ok = false;
        i.ret = -22;
        i.errno = Some("EINVAL".into());
        i.ret = super::tests_classes::errno_ret("EINVAL");
    }
    let (_, v) = stages(&[open(1, "/dev/nvidiactl", "ctl"), bad]);
    assert_eq!(v.result, Outcome::Failed);
    let d = v
        .diagnoses
        .iter()
        .find(|d| d.id == DiagId::VersionMismatch)
        .expect("rule");
    assert_eq!(d.evidence, "NV_ESC_CHECK_VERSION_STR returned EINVAL");
    assert!(d.hint.contains("/proc/driver/nvidia/version"));
}

/// A process-layer record from `pid` (comm `comm`) about `target`.
pub(super) fn proc_call(
    op: ProcKind,
    pid: u32,
    comm: &str,
    target: u32,
    time_ns: u64,
) -> crate::decode::ProcCall {
    crate::decode::ProcCall {
        proc: Proc {
            pid,
            tid: pid,
            ns_pid: None,
            ns_tid: None,
            comm: comm.into(),
            uid: 0,
        },
        op,
        target_pid: target,
        target_tid: None,
        sig: None,
        signal: None,
        code: None,
        exit_code: None,
        exit: None,
        unsent: None,
        action: None,
        sa_restart: None,
        call: None,
        errno: None,
        path: None,
        seq: Some(1),
        args: None,
        mm: None,
        failed: None,
        time_ns,
        raw: None,
    }
}

pub(super) fn exit_of(t: u64, pid: u32, code: i32) -> Event {
    Event::Proc(crate::decode::ProcCall {
        exit_code: Some(code),
        ..proc_call(ProcKind::Exit, pid, "app", pid, t * 1_000_000)
    })
}

/// A pid reused after an exit is a new process with a new state.
#[test]
fn a_reused_pid_does_not_merge_two_processes() {
    let mut c = Correlator::default();
    let mut out = Vec::new();
    for e in [
        open(1, "/dev/nvidiactl", "ctl"),
        io(
            2,
            "NV_ESC_RM_ALLOC",
            Some(("hClass_name", "NV01_ROOT_CLIENT")),
            "ctl",
        ),
        exit_of(3, 7, 3 << 8),
        open(10, "/dev/nvidiactl", "ctl"),
        io(11, "UVM_INITIALIZE", None, "uvm"),
        exit_of(12, 7, 0),
    ] {
        c.observe(&e, &mut out);
    }
    let v: Vec<CuInit> = out
        .into_iter()
        .filter_map(|r| match r {
            Record::Cuinit(v) => Some(*v),
            _ => None,
        })
        .collect();
    assert_eq!(v.len(), 2, "two processes, two verdicts");
    assert_eq!(v[0].exit.as_deref(), Some("exited with status 3"));
    assert_eq!(
        v[0].stages.iter().map(|s| s.stage).collect::<Vec<_>>(),
        ["S0", "S2"]
    );
    assert_eq!(v[1].exit.as_deref(), Some("exited with status 0"));
    assert_eq!(
        v[1].stages.iter().map(|s| s.stage).collect::<Vec<_>>(),
        ["S0", "S4"]
    );
    assert_eq!(v[1].calls, 1, "the second process's calls only");
}

fn signal_to(t: u64, sig: i32) -> Event {
    Event::Proc(crate::decode::ProcCall {
        target_tid: Some(7),
        sig: Some(sig),
        code: Some(0),
        ..proc_call(ProcKind::Signal, 99, "timeout", 7, t * 1_000_000 + 500)
    })
}

pub(super) fn failed(mut e: Event, errno: &str) -> Event {
    if let Event::Ioctl(i) = &mut e {
        i.ok = false;
        i.ret = -1;
        i.errno = Some(errno.into());
        i.ret = super::tests_classes::errno_ret(errno);
    }
    e
}

/// Replays a stream; the signal records it produced.
fn signal_reports(events: &[Event]) -> Vec<SignalReport> {
    let mut c = Correlator::default();
    let mut out = Vec::new();
    for e in events {
        c.observe(e, &mut out);
    }
    c.finish(&mut out);
    out.into_iter()
        .filter_map(|r| match r {
            Record::Signal(s) => Some(*s),
            _ => None,
        })
        .collect()
}

const GET_NAME: Option<(&str, &str)> =
    Some(("control_name", "NV2080_CTRL_CMD_GPU_GET_NAME_STRING"));

/// What became of the call a signal landed in: EINTR retried by the
/// caller, restarted by the kernel, died in it, or completed.
#[test]
fn a_signal_says_what_became_of_its_call() {
    let ctl = || open(1, "/dev/nvidiactl", "ctl");
    let call = |t| io(t, "NV_ESC_RM_CONTROL", GET_NAME, "ctl");
    // The signal's record precedes the record of the call it landed in
    // (a call's record is written when it returns).
    let r = signal_reports(&[ctl(), signal_to(2, 14), failed(call(2), "EINTR"), call(3)]);
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!(r[0].outcome.as_str(), "eintr_retried");
    assert_eq!(
        r[0].in_flight,
        "NV_ESC_RM_CONTROL NV2080_CTRL_CMD_GPU_GET_NAME_STRING"
    );
    assert_eq!(r[0].stage.as_deref(), Some("ctl_opened"));
    assert_eq!(
        r[0].text,
        "SIGALRM from timeout[99] at 1.0 ms in NV_ESC_RM_CONTROL NV2080_CTRL_CMD_GPU_GET_NAME_STRING \
(after ctl_opened): the call returned EINTR and the caller made it again"
    );

    let r = signal_reports(&[
        ctl(),
        signal_to(2, 14),
        failed(call(2), "EINTR"),
        io(3, "NV_ESC_RM_FREE", None, "ctl"),
    ]);
    assert_eq!(r[0].outcome.as_str(), "eintr");
    assert!(
        r[0].text.ends_with("the call returned EINTR to the caller"),
        "{}",
        r[0].text
    );

    let r = signal_reports(&[
        ctl(),
        signal_to(2, 17),
        failed(call(2), "ERESTARTSYS"),
        call(3),
    ]);
    assert_eq!(r[0].outcome.as_str(), "restarted");
    assert!(
        r[0].text
            .ends_with("the kernel restarted the call (ERESTARTSYS)"),
        "{}",
        r[0].text
    );

    let r = signal_reports(&[
        ctl(),
        signal_to(2, 15),
        failed(call(2), "ERESTARTSYS"),
        exit_of(4, 7, 15),
    ]);
    assert_eq!(r[0].outcome.as_str(), "died_in_call");
    assert_eq!(r[0].signal, "SIGTERM");
    assert_eq!(r[0].sender_pid, Some(99));

    let r = signal_reports(&[ctl(), signal_to(2, 10), call(2)]);
    assert_eq!(r[0].outcome.as_str(), "completed");
    assert!(
        r[0].text.ends_with("the call completed successfully"),
        "{}",
        r[0].text
    );

    // The handler's SA_RESTART decides an ERESTARTSYS, as the kernel
    // does, when the signal is delivered.
    let delivered = |t: u64, restart: bool| {
        let mut e = signal_to(t, 14);
        if let Event::Proc(p) = &mut e {
            p.op = ProcKind::SignalDelivered;
            p.proc = proc_();
            p.action = Some(SigAction::Handler);
            p.sa_restart = Some(restart);
        }
        e
    };
    let r = signal_reports(&[
        ctl(),
        signal_to(2, 14),
        failed(call(2), "ERESTARTSYS"),
        delivered(3, true),
    ]);
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!(r[0].outcome.as_str(), "restarted");
    assert!(
        r[0].text.ends_with(
            "the kernel restarted the call (ERESTARTSYS) after the handler ran (SA_RESTART)"
        ),
        "{}",
        r[0].text
    );
    let r = signal_reports(&[
        ctl(),
        signal_to(2, 14),
        failed(call(2), "ERESTARTSYS"),
        delivered(3, false),
        call(4),
    ]);
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!(r[0].outcome.as_str(), "eintr");
    assert!(
        r[0].text
            .ends_with("the handler lacking SA_RESTART, returned EINTR to the caller"),
        "{}",
        r[0].text
    );

    // Between calls and outside cuInit: no report (the proc record
    // still shows the signal).
    let r = signal_reports(&[ctl(), call(2), signal_to(3, 10), call(4), exit_of(5, 7, 0)]);
    assert!(r.is_empty(), "{r:#?}");
}

fn span(start_ms: u64, end_ms: u64, function: &'static str, result: &str, ok: bool) -> Event {
    Event::Driver(crate::decode::DriverCall {
        proc: proc_(),
        function,
        module: "nvidia_uvm",
        start_ns: start_ms * 1_000_000,
        duration_ns: (end_ms - start_ms) * 1_000_000,
        ret: 0,
        result: result.into(),
        ok,
        call: None,
        device: None,
        rm_status: None,
        raw: None,
    })
}

fn breakdowns(events: &[Event]) -> Vec<Breakdown> {
    let mut c = Correlator::default();
    let mut out = Vec::new();
    for e in events {
        c.observe(e, &mut out);
    }
    out.into_iter()
        .filter_map(|r| match r {
            Record::Breakdown(b) => Some(*b),
            _ => None,
        })
        .collect()
}

/// A failed call's breakdown names the innermost failing function and
/// its callers; a slow successful one the innermost function that took
/// at least half the time; a fast successful one gets none.
#[test]
fn breakdowns_name_where_the_time_went() {
    let mut reg = io(100, "UVM_REGISTER_GPU", None, "uvm");
    if let Event::Ioctl(i) = &mut reg {
        i.duration_ns = 2_310_000_000;
        i.ok = false;
    }
    let b = breakdowns(&[
        span(100, 2390, "uvm_pmm_devmem_init", "NV_ERR_NO_MEMORY", false),
        span(
            100,
            2395,
            "uvm_gpu_retain_by_uuid",
            "NV_ERR_NO_MEMORY",
            false,
        ),
        span(100, 2400, "uvm_api_register_gpu", "NV_ERR_NO_MEMORY", false),
        reg,
    ]);
    assert_eq!(b.len(), 1);
    assert_eq!(
        b[0].text,
        "UVM_REGISTER_GPU 2.31 s: 2.29 s in uvm_pmm_devmem_init, which returned NV_ERR_NO_MEMORY (in uvm_gpu_retain_by_uuid < uvm_api_register_gpu)"
    );
    // Slow but fine: the function that took most of it, no failure.
    let mut slow = io(10, "UVM_REGISTER_GPU", None, "uvm");
    if let Event::Ioctl(i) = &mut slow {
        i.duration_ns = 170_000_000;
    }
    let b = breakdowns(&[
        span(10, 12, "uvm_va_space_create", "NV_OK", true),
        span(12, 175, "uvm_gpu_retain_by_uuid", "NV_OK", true),
        span(10, 178, "uvm_api_register_gpu", "NV_OK", true),
        slow,
    ]);
    assert_eq!(
        b[0].text,
        "UVM_REGISTER_GPU 170.0 ms: 163.0 ms in uvm_gpu_retain_by_uuid, which returned NV_OK (in uvm_api_register_gpu)"
    );
    // Fast and fine: nothing to say; spans of another call are dropped.
    let b = breakdowns(&[
        span(1, 1, "rm_ioctl", "NV_OK", true),
        io(1, "NV_ESC_RM_CONTROL", None, "ctl"),
    ]);
    assert!(b.is_empty(), "{b:?}");
}

/// Always-on: 20,000 short processes, each with driver spans on threads
/// that never make a matching ioctl (open and mmap paths), then an exit.
/// Nothing of them is held afterwards (a 9-minute run with 8,437 real
/// processes on the H200 grew by ~7 KB per process before this).
#[test]
fn exited_processes_leave_nothing_behind() {
    let mut c = Correlator::default();
    let mut out = Vec::new();
    let with = |mut e: Event, pid: u32, tid: u32| {
        match &mut e {
            Event::Driver(d) => (d.proc.pid, d.proc.tid) = (pid, tid),
            Event::Open(o) => (o.proc.pid, o.proc.tid) = (pid, tid),
            Event::Ioctl(i) => (i.proc.pid, i.proc.tid) = (pid, tid),
            _ => {}
        }
        e
    };
    for i in 0..20_000u32 {
        let pid = 1000 + i;
        let t = u64::from(i) * 10;
        for e in [
            with(open(t, "/dev/nvidiactl", "ctl"), pid, pid),
            with(span(t, t + 1, "nvidia_open", "0", true), pid, pid),
            with(span(t, t + 1, "nvidia_mmap", "0", true), pid, pid + 500_000),
            with(
                span(t, t + 1, "nvidia_mmap", "0", true),
                pid,
                pid + 1_000_000,
            ),
            with(io(t + 2, "NV_ESC_RM_ALLOC", None, "ctl"), pid, pid),
            exit_of(t + 3, pid, 0),
        ] {
            c.observe(&e, &mut out);
        }
        out.clear();
    }
    assert_eq!(c.held(), (0, 0));
}
