//! Who ended a process with a signal: the kernel's OOM killer (named by
//! oom/mark_victim after its SIGKILL), the kernel's other kills, a timer
//! the process set, a task. The hint follows the source and offers no
//! remedy the evidence rules out (no harness timeout for an OOM kill).
//! Constructed streams; the real ones are in nvprobe/model/tests.

use super::{
    tests::{exit_of, proc_call},
    tests_classes::{cuda, verdicts_of},
    *,
};
use crate::attribution::{CgroupCount, Limits, ProcessInfo};
use crate::correlate::{DiagId, Outcome};
use crate::decode::{Event, ProcKind};

/// `sig` for pid 7 at `t` ms from `from` (pid 5) with si_code `code`.
pub(super) fn signal(t: u64, sig: i32, code: i32) -> Event {
    Event::Proc(crate::decode::ProcCall {
        target_tid: Some(7),
        sig: Some(sig),
        signal: Some(crate::decode::signal::name(sig)),
        code: Some(code),
        ..proc_call(ProcKind::Signal, 5, "python3", 7, t * 1_000_000)
    })
}

fn oom_victim(t: u64) -> Event {
    Event::Proc(crate::decode::ProcCall {
        sig: Some(9),
        ..proc_call(ProcKind::OomVictim, 5, "python3", 7, t * 1_000_000 + 1)
    })
}

pub(super) fn in_cgroup(max: Option<u64>) -> ProcessInfo {
    ProcessInfo {
        pid: 7,
        exe: Some("/usr/bin/python3".into()),
        limits: Some(Limits {
            memory: Some(CgroupCount {
                current: 250 << 20,
                max,
            }),
            ..Limits::default()
        }),
        ..ProcessInfo::default()
    }
}

/// cuInit entered, then `tail`: the one verdict and its kill diagnosis.
pub(super) fn killed(info: ProcessInfo, tail: &[Event]) -> (CuInit, Diagnosis) {
    let mut all = vec![cuda(0, "cuInit", None)];
    all.extend_from_slice(tail);
    let v = verdicts_of(vec![info], Vec::new(), &all);
    assert_eq!(v.len(), 1, "{v:#?}");
    let d = v[0]
        .diagnoses
        .iter()
        .find(|d| d.id == DiagId::KilledBySignal)
        .unwrap_or_else(|| panic!("no kill diagnosis: {:#?}", v[0]))
        .clone();
    (v[0].clone(), d)
}

#[test]
fn the_oom_killer_is_named_with_the_cgroup_and_no_timeout_is_suggested() {
    let (v, d) = killed(
        in_cgroup(Some(256 << 20)),
        &[signal(1, 9, 0x80), oom_victim(1), exit_of(2, 7, 9)],
    );
    assert_eq!(v.result, Outcome::Killed);
    assert!(
        v.text
            .starts_with("killed by SIGKILL from the kernel's OOM killer after "),
        "{}",
        v.text
    );
    assert!(
        d.evidence.ends_with(
            "; its memory cgroup held 250 MiB of its memory.max 256 MiB when nvprobe read it"
        ),
        "{}",
        d.evidence
    );
    assert!(
        d.hint.starts_with("the kernel's OOM killer ended it"),
        "{}",
        d.hint
    );
    assert!(!d.hint.contains("timeout"), "{}", d.hint);
    assert_eq!(
        v.signal.as_ref().map(|s| s.sender.as_str()),
        Some("the kernel's OOM killer")
    );
}

/// The OOM killer's choice without its signal (no signal probe): still
/// the OOM killer, and a cgroup without a limit says so.
#[test]
fn an_oom_choice_without_its_signal_still_names_the_oom_killer() {
    let (_, d) = killed(in_cgroup(None), &[oom_victim(1), exit_of(2, 7, 9)]);
    assert!(
        d.evidence.starts_with("SIGKILL from the kernel's OOM killer; its memory cgroup (holding 250 MiB) sets no memory.max"),
        "{}",
        d.evidence
    );
}

/// A SIGKILL of the kernel's with no OOM choice seen: no cause is
/// guessed, and the hint says where to look.
#[test]
fn the_kernels_sigkill_without_an_oom_choice_guesses_no_cause() {
    let (v, d) = killed(in_cgroup(None), &[signal(1, 9, 0x80), exit_of(2, 7, 9)]);
    assert!(
        v.text
            .contains("SIGKILL from the kernel (no process sent it; no OOM kill of it was seen)"),
        "{}",
        v.text
    );
    assert!(d.hint.contains("dmesg"), "{}", d.hint);
    assert!(!d.hint.contains("harness"), "{}", d.hint);
}

/// A timer the process set (SIGALRM, SI_KERNEL) is its own timeout; a
/// task's SIGTERM keeps the harness hint.
#[test]
fn a_timer_and_a_task_each_get_their_own_hint() {
    let (v, d) = killed(in_cgroup(None), &[signal(1, 14, 0x80), exit_of(2, 7, 14)]);
    assert!(
        v.text
            .contains("SIGALRM from the kernel (a timer the process set: alarm, setitimer)"),
        "{}",
        v.text
    );
    assert!(
        d.hint.starts_with("a timer the process itself set fired"),
        "{}",
        d.hint
    );
    let (v, d) = killed(in_cgroup(None), &[signal(1, 15, 0), exit_of(2, 7, 15)]);
    assert!(v.text.contains("SIGTERM from python3[5]"), "{}", v.text);
    assert!(d.hint.contains("harness"), "{}", d.hint);
}

/// A start-up that was stopped: its verdict says for how long and by
/// whom, whatever its result.
#[test]
fn time_spent_stopped_is_in_the_verdict() {
    let v = verdicts_of(
        vec![in_cgroup(None)],
        Vec::new(),
        &[
            cuda(0, "cuInit", None),
            signal(1, libc::SIGSTOP, 0),
            signal(7001, libc::SIGCONT, 0),
            cuda(7002, "cuInit", Some((0, "CUDA_SUCCESS"))),
            exit_of(7003, 7, 0),
        ],
    );
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].result, Outcome::Ok);
    assert!(
        v[0].text.ends_with(
            "; stopped for 7.0 s of it (SIGSTOP from python3[5], SIGCONT from python3[5])"
        ),
        "{}",
        v[0].text
    );
}

/// A process that lived through a harness's SIGINT and then sent itself
/// the same signal (Python's end on a KeyboardInterrupt: kill(getpid(),
/// SIGINT)) was ended by the harness: its verdict names the harness, not
/// the process, and says what the process did. A signal it sent itself
/// with none before it from elsewhere stays its own.
#[test]
fn a_signal_the_process_raised_again_names_who_sent_it_first() {
    let own = |t: u64| {
        Event::Proc(crate::decode::ProcCall {
            target_tid: Some(7),
            sig: Some(libc::SIGINT),
            signal: Some("SIGINT".into()),
            code: Some(0),
            ..proc_call(ProcKind::Signal, 7, "python3", 7, t * 1_000_000)
        })
    };
    let harness = Event::Proc(crate::decode::ProcCall {
        target_tid: Some(7),
        sig: Some(libc::SIGINT),
        signal: Some("SIGINT".into()),
        code: Some(0),
        ..proc_call(ProcKind::Signal, 5, "timeout", 7, 120_000_000)
    });
    let delivered = |t: u64, action| {
        Event::Proc(crate::decode::ProcCall {
            sig: Some(libc::SIGINT),
            signal: Some("SIGINT".into()),
            action: Some(action),
            sa_restart: Some(false),
            ..proc_call(ProcKind::SignalDelivered, 7, "python3", 7, t * 1_000_000)
        })
    };
    use crate::decode::SigAction;
    let (v, d) = killed(
        ProcessInfo::default(),
        &[
            harness.clone(),
            delivered(121, SigAction::Handler),
            own(300),
            exit_of(301, 7, libc::SIGINT),
        ],
    );
    assert_eq!(v.result, Outcome::Killed);
    assert!(
        d.evidence.starts_with(
            "SIGINT from python3[7] itself (raising again the SIGINT that timeout[5] sent at 120.0 ms) at 300.0 ms"
        ),
        "{}",
        d.evidence
    );
    assert_eq!(v.signal.as_ref().and_then(|s| s.sender_pid), Some(5));
    // The harness's SIGINT ignored, not caught: the process's own later
    // SIGINT is its own.
    let (v, _) = killed(
        ProcessInfo::default(),
        &[
            harness,
            delivered(121, SigAction::Ignored),
            own(300),
            exit_of(301, 7, libc::SIGINT),
        ],
    );
    assert_eq!(v.signal.as_ref().and_then(|s| s.sender_pid), Some(7));
    // Its own signal alone: its own.
    let (v, d) = killed(
        ProcessInfo::default(),
        &[own(300), exit_of(301, 7, libc::SIGINT)],
    );
    assert!(
        d.evidence
            .starts_with("SIGINT from python3[7] itself at 300.0 ms"),
        "{}",
        d.evidence
    );
    assert!(!d.hint.contains("harness"), "{}", d.hint);
    assert_eq!(v.signal.as_ref().and_then(|s| s.sender_pid), Some(7));
}

/// `sig` sent by pid 7 to itself (thread 8) at `t` ms, SI_USER or SI_TKILL.
pub(super) fn own_signal(t: u64, sig: i32, code: i32) -> Event {
    Event::Proc(crate::decode::ProcCall {
        target_tid: Some(7),
        sig: Some(sig),
        signal: Some(crate::decode::signal::name(sig)),
        code: Some(code),
        ..proc_call(ProcKind::Signal, 7, "python3", 7, t * 1_000_000)
    })
}

/// A signal the process sent itself is its own end, not a harness's:
/// abort() (SI_TKILL), and the kernel's SIGPIPE and SIGXFSZ, which come
/// as SI_USER from the process at its own write. Each hint says so and
/// offers no more time.
#[test]
fn a_signal_the_process_sent_itself_is_its_own_end() {
    let cases = [
        (
            libc::SIGABRT,
            -6,
            "SIGABRT from python3[7] itself (abort(): a failed assertion",
            "the process aborted itself",
        ),
        (
            libc::SIGPIPE,
            0,
            "SIGPIPE from python3[7] itself (a write to a pipe or socket that no one reads any more) at 1.0 ms",
            "whose reader had gone",
        ),
        (
            libc::SIGXFSZ,
            0,
            "SIGXFSZ from python3[7] itself (a write past its file-size limit, RLIMIT_FSIZE) at 1.0 ms",
            "RLIMIT_FSIZE",
        ),
        (
            libc::SIGKILL,
            0,
            "SIGKILL from python3[7] itself at 1.0 ms",
            "the process sent the signal to itself",
        ),
    ];
    for (sig, code, evidence, hint) in cases {
        let (v, d) = killed(
            ProcessInfo::default(),
            &[own_signal(1, sig, code), exit_of(2, 7, sig)],
        );
        assert_eq!(v.result, Outcome::Killed);
        assert!(d.evidence.starts_with(evidence), "{}", d.evidence);
        assert!(d.hint.contains(hint), "{}", d.hint);
        assert!(
            !d.hint.contains("harness") && !d.hint.contains("more time or"),
            "{}",
            d.hint
        );
        assert_eq!(v.signal.as_ref().and_then(|s| s.sender_pid), Some(7));
    }
}

/// A fault's si_code is the kernel's account of the process's own access,
/// not a sender: named in words; a machine check gets the hardware's
/// hint, not a library's.
#[test]
fn a_fault_is_named_by_its_code() {
    let (v, d) = killed(
        ProcessInfo::default(),
        &[signal(1, libc::SIGBUS, 2), exit_of(2, 7, libc::SIGBUS)],
    );
    assert_eq!(v.result, Outcome::Killed);
    assert!(
        d.evidence.starts_with(
            "SIGBUS from the kernel (a fault at the process's own access: BUS_ADRERR, an address with nothing \
behind it, such as past the end of a mapped file) at 1.0 ms: a fault, not a kill"
        ),
        "{}",
        d.evidence
    );
    assert!(d.hint.starts_with("the process faulted"), "{}", d.hint);
    assert_eq!(v.signal.as_ref().and_then(|s| s.sender_pid), None);
    let (_, d) = killed(
        ProcessInfo::default(),
        &[signal(1, libc::SIGBUS, 4), exit_of(2, 7, libc::SIGBUS)],
    );
    assert!(d.evidence.contains("BUS_MCEERR"), "{}", d.evidence);
    assert!(d.hint.starts_with("a hardware memory error"), "{}", d.hint);
    let (_, d) = killed(
        ProcessInfo::default(),
        &[signal(1, libc::SIGSEGV, 1), exit_of(2, 7, libc::SIGSEGV)],
    );
    assert!(d.evidence.contains("SEGV_MAPERR"), "{}", d.evidence);
}

/// SIGSYS with si_code SYS_SECCOMP is a seccomp filter's kill action
/// (force_sig_seccomp): the filter is named, and the hint says where the
/// kernel logged the call, with no harness or driver remedy. SIGSYS of
/// another code is not taken for it.
#[test]
fn a_seccomp_kill_is_named_as_the_filters() {
    let (v, d) = killed(
        ProcessInfo::default(),
        &[signal(1, libc::SIGSYS, 1), exit_of(2, 7, libc::SIGSYS)],
    );
    assert_eq!(v.result, Outcome::Killed);
    assert!(
        d.evidence.starts_with(
            "SIGSYS from a seccomp filter (its kill or trap action, at one of the process's system calls) at 1.0 ms"
        ),
        "{}",
        d.evidence
    );
    assert!(d.hint.contains("type=1326"), "{}", d.hint);
    assert!(
        !d.hint.contains("harness") && !d.hint.contains("modprobe"),
        "{}",
        d.hint
    );
    let (_, d) = killed(
        ProcessInfo::default(),
        &[signal(1, libc::SIGSYS, 0), exit_of(2, 7, libc::SIGSYS)],
    );
    assert!(!d.evidence.contains("seccomp"), "{}", d.evidence);
    // The call the kernel said the filter refused (siginfo's si_syscall).
    let Event::Proc(p) = signal(1, libc::SIGSYS, 1) else {
        unreachable!("signal makes a proc record")
    };
    let at_ioctl = Event::Proc(crate::decode::ProcCall {
        call: Some("ioctl".into()),
        ..p
    });
    let (_, d) = killed(
        ProcessInfo::default(),
        &[at_ioctl, exit_of(2, 7, libc::SIGSYS)],
    );
    assert!(
        d.evidence.starts_with(
            "SIGSYS from a seccomp filter (its kill or trap action, at ioctl()) at 1.0 ms"
        ),
        "{}",
        d.evidence
    );
}

/// Another thread's exit cut the driver call in flight short: a SIGKILL
/// delivered to that thread that no one sent, right after the call
/// returned what a dying caller gets. A real driver error, a zap of
/// another thread, or a kill someone sent is not it.
#[test]
fn a_call_the_process_s_own_end_cut_short_is_not_the_driver_s_failure() {
    use super::tests::{io, open};
    use crate::decode::SigAction;
    let register = |code: u32, name: &'static str| {
        let mut e = io(4, "UVM_REGISTER_GPU", None, "uvm");
        if let Event::Ioctl(i) = &mut e {
            i.ok = false;
            i.proc.pid = 7;
            i.proc.tid = 7;
            i.status = Some(crate::decode::Status {
                code,
                name: Some(name),
                offset: 36,
                layout: crate::decode::version::LayoutBasis::Stable,
            });
        }
        e
    };
    // SIGKILL taken by thread `tid` at `t_us` µs, with no signal sent.
    let zap = |t_us: u64, tid: u32| {
        let mut p = crate::decode::ProcCall {
            sig: Some(libc::SIGKILL),
            signal: Some("SIGKILL".into()),
            action: Some(SigAction::Default),
            sa_restart: Some(false),
            ..proc_call(ProcKind::SignalDelivered, 7, "python3", 7, t_us * 1000)
        };
        p.proc.tid = tid;
        Event::Proc(p)
    };
    let run = |result: (u32, &'static str), tail: Vec<Event>| {
        let mut ev = vec![cuda(0, "cuInit", None), open(1, "/dev/nvidiactl", "ctl")];
        ev.push(register(result.0, result.1));
        ev.extend(tail);
        let v = verdicts_of(vec![ProcessInfo::default()], Vec::new(), &ev);
        assert_eq!(v.len(), 1, "{v:#?}");
        v[0].clone()
    };
    // The call ended at 4.001 ms; the zap 20 µs later, then exit 3.
    let v = run(
        (0x3, "NV_ERR_BUSY_RETRY"),
        vec![zap(4021, 7), exit_of(5, 7, 3 << 8)],
    );
    assert_eq!(v.result, Outcome::Exited, "{}", v.text);
    assert_eq!(v.diagnoses[0].id, DiagId::EndedItself);
    assert!(
        v.text.starts_with(
            "exited with status 3 (another of its threads ended it) while cuInit was still running"
        ),
        "{}",
        v.text
    );
    // A real error of the driver's: the failure stands.
    let v = run(
        (0x40, "NV_ERR_INVALID_STATE"),
        vec![zap(4021, 7), exit_of(5, 7, 3 << 8)],
    );
    assert!(
        v.diagnoses.iter().all(|d| d.id != DiagId::EndedItself),
        "{:#?}",
        v.diagnoses
    );
    // Another thread zapped (a helper, at the process's ordinary exit).
    let v = run(
        (0x3, "NV_ERR_BUSY_RETRY"),
        vec![zap(4021, 9), exit_of(5, 7, 3 << 8)],
    );
    assert!(
        v.diagnoses.iter().all(|d| d.id != DiagId::EndedItself),
        "{:#?}",
        v.diagnoses
    );
    // Long after the call: the thread ran on in user space.
    let v = run(
        (0x3, "NV_ERR_BUSY_RETRY"),
        vec![zap(70_000, 7), exit_of(71, 7, 3 << 8)],
    );
    assert!(
        v.diagnoses.iter().all(|d| d.id != DiagId::EndedItself),
        "{:#?}",
        v.diagnoses
    );
    // libcuda's clean-up after the failure: the call was not cut short.
    let v = run(
        (0x3, "NV_ERR_BUSY_RETRY"),
        vec![
            io(5, "NV_ESC_RM_FREE", None, "ctl"),
            zap(5021, 7),
            exit_of(6, 7, 3 << 8),
        ],
    );
    assert!(
        v.diagnoses.iter().all(|d| d.id != DiagId::EndedItself),
        "{:#?}",
        v.diagnoses
    );
}

/// A handler caught a signal in the start-up and the process exited with
/// an error before a first context (pytest-timeout's SIGALRM that raises):
/// the signal is named, with its source's hint. An exit 0, or a caught
/// signal whose default ends nothing (SIGCHLD), names none.
#[test]
fn a_start_up_its_handler_ended_names_the_signal() {
    use crate::decode::SigAction;
    let delivered = |t: u64, sig: i32| {
        Event::Proc(crate::decode::ProcCall {
            sig: Some(sig),
            signal: Some(crate::decode::signal::name(sig)),
            action: Some(SigAction::Handler),
            sa_restart: Some(true),
            ..proc_call(ProcKind::SignalDelivered, 7, "python3", 7, t * 1_000_000)
        })
    };
    let run = |sig: i32, code: i32, status: i32| {
        let v = verdicts_of(
            vec![ProcessInfo::default()],
            Vec::new(),
            &[
                cuda(1, "cuInit", None),
                signal(50, sig, code),
                cuda(100, "cuInit", Some((0, "CUDA_SUCCESS"))),
                delivered(101, sig),
                exit_of(102, 7, status << 8),
            ],
        );
        assert_eq!(v.len(), 1, "{v:#?}");
        v[0].clone()
    };
    let v = run(libc::SIGALRM, 0x80, 1);
    assert_eq!(v.result, Outcome::Exited, "{}", v.text);
    assert!(
        v.text.ends_with(
            "then exited with status 1 before a first context: its handler caught SIGALRM from the kernel (a \
timer the process set: alarm, setitimer) at 49.0 ms"
        ),
        "{}",
        v.text
    );
    assert_eq!(v.diagnoses[0].id, DiagId::InterruptedBySignal);
    assert!(
        v.diagnoses[0]
            .hint
            .starts_with("a timer the process itself set fired"),
        "{}",
        v.diagnoses[0].hint
    );
    let v = run(libc::SIGTERM, 0, 143);
    assert!(
        v.diagnoses[0]
            .hint
            .starts_with("the process's own handler for the signal ended it"),
        "{}",
        v.diagnoses[0].hint
    );
    // An exit 0; a signal whose default ends nothing; a profiler's timer;
    // a fault a runtime handles: none is named.
    for (sig, code, status) in [
        (libc::SIGALRM, 0x80, 0),
        (libc::SIGCHLD, 1, 1),
        (libc::SIGPROF, 0x80, 1),
        (libc::SIGSEGV, 1, 1),
    ] {
        let v = run(sig, code, status);
        assert!(
            v.diagnoses
                .iter()
                .all(|d| d.id != DiagId::InterruptedBySignal),
            "{sig} {status}: {:#?}",
            v.diagnoses
        );
    }
    // A signal caught before cuInit was entered is not the start-up's.
    let v = verdicts_of(
        vec![ProcessInfo::default()],
        Vec::new(),
        &[
            signal(1, libc::SIGTERM, 0),
            delivered(2, libc::SIGTERM),
            cuda(3, "cuInit", None),
            cuda(100, "cuInit", Some((0, "CUDA_SUCCESS"))),
            exit_of(102, 7, 1 << 8),
        ],
    );
    assert!(
        v[0].diagnoses
            .iter()
            .all(|d| d.id != DiagId::InterruptedBySignal),
        "{:#?}",
        v[0].diagnoses
    );
}

/// The thread in cuInit ended alone (the kernel's thread_exit record: a
/// seccomp filter's kill-thread action), and a harness's SIGTERM came 30
/// s later to a process waiting for it: the start-up's end is the
/// thread's, the timeout's "more time" is ruled out. Within 100 ms of the
/// process's end, the thread's end is part of that end.
#[test]
fn a_thread_ended_alone_in_cuinit_is_the_end_not_the_later_kill() {
    let thread_exit_of = |tid: u32, t: u64| {
        Event::Proc(crate::decode::ProcCall {
            target_tid: Some(tid),
            exit_code: Some(libc::SIGSYS),
            ..proc_call(ProcKind::ThreadExit, 7, "python3", 7, t * 1_000_000)
        })
    };
    let thread_exit = |t: u64| thread_exit_of(7, t);
    let all = [
        cuda(0, "cuInit", None),
        thread_exit(3),
        signal(30_000, 15, 0),
        exit_of(30_001, 7, 15),
    ];
    let v = verdicts_of(vec![in_cgroup(None)], Vec::new(), &all);
    assert_eq!(v[0].result, Outcome::Killed, "{:#?}", v[0]);
    let ids: Vec<DiagId> = v[0].diagnoses.iter().map(|d| d.id).collect();
    assert_eq!(ids, [DiagId::CuinitThreadEnded], "{:#?}", v[0].diagnoses);
    let d = &v[0].diagnoses[0];
    assert_eq!(
        d.evidence,
        "its thread in cuInit (tid 7) ended at 3.0 ms (killed alone by SIGSYS: a seccomp filter's kill-thread \
action); cuInit never returned, and the process went on without it for 30.0 s, until SIGTERM from python3[5]"
    );
    assert!(d.hint.contains("more time will not help"), "{}", d.hint);
    assert!(
        v[0].text.starts_with("killed by SIGTERM from python3[5]")
            && v[0]
                .text
                .ends_with("; its thread in cuInit had ended at 3.0 ms (killed alone by SIGSYS: a seccomp filter's kill-thread action)"),
        "{}",
        v[0].text
    );
    // Another thread than the one that entered cuInit (one whose own
    // cuInit's return was missed): not cuInit's end.
    let all = [
        cuda(0, "cuInit", None),
        thread_exit_of(8, 3),
        signal(30_000, 15, 0),
        exit_of(30_001, 7, 15),
    ];
    let v = verdicts_of(vec![in_cgroup(None)], Vec::new(), &all);
    let ids: Vec<DiagId> = v[0].diagnoses.iter().map(|d| d.id).collect();
    assert_eq!(ids, [DiagId::KilledBySignal], "{:#?}", v[0].diagnoses);
    // Ended with the process (a group exit's last threads): the kill is
    // the end.
    let all = [
        cuda(0, "cuInit", None),
        signal(30_000, 15, 0),
        thread_exit(30_000),
        exit_of(30_001, 7, 15),
    ];
    let v = verdicts_of(vec![in_cgroup(None)], Vec::new(), &all);
    let ids: Vec<DiagId> = v[0].diagnoses.iter().map(|d| d.id).collect();
    assert_eq!(ids, [DiagId::KilledBySignal], "{:#?}", v[0].diagnoses);
}

/// The kernel's seccomp audit line (kernel 6.18's shape) names the call at
/// which the kill-thread action ended the thread in cuInit: its verdict
/// says which. A line of a process nvprobe does not follow makes no
/// record, and one logged long before the thread's end names nothing.
#[test]
fn the_audit_line_names_the_call_a_kill_thread_action_ended_cuinit_at() {
    let audit = |pid: u32, code: &str| {
        format!(
            "audit: type=1326 audit(1796629076.915:1): auid=4294967295 uid=0 gid=0 ses=4294967295 pid={pid} \
comm=\"python3\" exe=\"/usr/bin/python3.12\" sig=31 arch=c000003e syscall=16 compat=0 ip=0x7fa748b250bd code={code}"
        )
    };
    let run = |lines: &[(u64, String)]| {
        let mut c = Correlator::default();
        let mut out = Vec::new();
        c.observe_obs(Obs::identity(in_cgroup(None), 0), &mut out);
        c.observe(&cuda(0, "cuInit", None), &mut out);
        for (t, msg) in lines {
            let line = super::faults::LogLine {
                seq: *t,
                kernel_ts_us: t * 1000,
                level: 5,
                message: msg.clone(),
            };
            c.observe_obs(Obs::kernel_log(line, t * 1_000_000), &mut out);
        }
        c.observe(
            &Event::Proc(crate::decode::ProcCall {
                target_tid: Some(7),
                exit_code: Some(libc::SIGSYS),
                ..proc_call(ProcKind::ThreadExit, 7, "python3", 7, 3_000_000)
            }),
            &mut out,
        );
        c.observe(&signal(30_000, 15, 0), &mut out);
        c.observe(&exit_of(30_001, 7, 15), &mut out);
        c.finish(&mut out);
        out
    };
    let out = run(&[(3, audit(7, "0x0")), (4, audit(9, "0x0"))]);
    let logs: Vec<_> = out
        .iter()
        .filter_map(|r| match r {
            Record::KernelLog(k) => Some(&**k),
            _ => None,
        })
        .collect();
    assert_eq!(logs.len(), 1, "{logs:#?}");
    let a = logs[0].seccomp.as_ref().unwrap();
    assert_eq!(
        (
            logs[0].pid,
            logs[0].comm.as_deref(),
            a.call.as_str(),
            a.action
        ),
        (
            Some(7),
            Some("app"),
            "ioctl",
            crate::kmsg::audit::SeccompAction::KillThread
        )
    );
    let verdict = |out: &[Record]| {
        out.iter()
            .find_map(|r| match r {
                Record::Cuinit(v) => Some((**v).clone()),
                _ => None,
            })
            .unwrap()
    };
    let v = verdict(&out);
    assert!(
        v.text.ends_with(
            "; its thread in cuInit had ended at 3.0 ms (killed alone by SIGSYS: a seccomp filter's kill-thread \
action at ioctl() (the kernel's audit line names it))"
        ),
        "{}",
        v.text
    );
    assert_eq!(v.diagnoses[0].id, DiagId::CuinitThreadEnded);
    // A kill-process line, or a kill-thread line 1.5 s after the end:
    // not this end's.
    let other_call = audit(7, "0x0").replace("syscall=16", "syscall=41");
    for lines in [
        vec![(3, audit(7, "0x80000000"))],
        vec![(1500, audit(7, "0x0"))],
        // Two threads killed at two calls: which was cuInit's is not known.
        vec![(2, audit(7, "0x0")), (3, other_call)],
    ] {
        let v = verdict(&run(&lines));
        assert!(
            v.text
                .ends_with("(killed alone by SIGSYS: a seccomp filter's kill-thread action)"),
            "{}",
            v.text
        );
    }
}
