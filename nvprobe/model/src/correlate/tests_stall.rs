//! Who held a start-up while its time ran: a signal a ptrace tracer gave
//! as it resumed the process, and what the stall check found the thread
//! doing before a kill (frozen with its cgroup, inside the driver, held in
//! a ptrace stop). Constructed streams; the real ones are in
//! nvprobe/model/tests.

use super::{
    tests::exit_of,
    tests_classes::cuda,
    tests_kill::{in_cgroup, killed, own_signal, signal},
    *,
};
use crate::correlate::DiagId;
use crate::decode::Event;

/// A signal the kernel never raises in the task's own context (SIGUSR1,
/// SIGINT), given with SI_KERNEL from the process's own context: a ptrace
/// tracer resumed it with that signal (strace's -e inject=…:signal=).
/// Named as the tracer's, known or not, with a hint that offers no harness
/// remedy; SIGINT with SI_KERNEL from the tty's worker (another task) is
/// the terminal's Ctrl-C.
#[test]
fn a_signal_a_tracer_gave_is_named_as_the_tracers() {
    let mut info = in_cgroup(None);
    info.tracer = Some(crate::attribution::Tracer {
        pid: 40,
        comm: "strace".into(),
    });
    for sig in [libc::SIGUSR1, libc::SIGINT] {
        let (v, d) = killed(
            info.clone(),
            &[own_signal(1, sig, 0x80), exit_of(2, 7, sig)],
        );
        assert!(
            v.text.contains(&format!(
                "{} from its tracer strace[40] (it gave the signal as it resumed the process from a ptrace \
stop, as strace's -e inject=…:signal= does)",
                crate::decode::signal::name(sig)
            )),
            "{}",
            v.text
        );
        assert!(
            d.hint.starts_with("the process's ptrace tracer"),
            "{}",
            d.hint
        );
        assert!(!d.hint.contains("harness"), "{}", d.hint);
    }
    let (v, _) = killed(
        in_cgroup(None),
        &[
            own_signal(1, libc::SIGUSR1, 0x80),
            exit_of(2, 7, libc::SIGUSR1),
        ],
    );
    assert!(
        v.text.contains(
            "SIGUSR1 from a ptrace tracer nvprobe did not see (it gives a signal as it resumes"
        ) && v.text.contains(
            ", or the process itself, queueing the signal with the kernel's mark (rt_sigqueueinfo)"
        ),
        "{}",
        v.text
    );
    // The kernel's own in the task's context stays the kernel's.
    let (v, _) = killed(
        info.clone(),
        &[
            own_signal(1, libc::SIGALRM, 0x80),
            exit_of(2, 7, libc::SIGALRM),
        ],
    );
    assert!(
        v.text.contains("SIGALRM from the kernel (a timer"),
        "{}",
        v.text
    );
    let (v, d) = killed(
        info,
        &[signal(1, libc::SIGINT, 0x80), exit_of(2, 7, libc::SIGINT)],
    );
    assert!(
        v.text
            .contains("SIGINT from the kernel (its terminal: Ctrl-C or Ctrl-\\ typed there)"),
        "{}",
        v.text
    );
    assert!(d.hint.starts_with("Ctrl-C (SIGINT)"), "{}", d.hint);
}

/// cuInit entered at 0, a stall report of it at 5 s (`state`, frozen
/// with `cgroup`, inside `driver`), then SIGTERM from a task (pid 5) at
/// 6 s and the end: the verdict.
fn killed_after_stall(state: &str, cgroup: Option<&str>, driver: Option<&str>) -> CuInit {
    killed_after_stall_then(state, cgroup, driver, &[])
}

/// [`killed_after_stall`] with `between` after the stall report.
fn killed_after_stall_then(
    state: &str,
    cgroup: Option<&str>,
    driver: Option<&str>,
    between: &[Event],
) -> CuInit {
    let mut c = Correlator::default();
    let mut out = Vec::new();
    c.observe_obs(Obs::identity(in_cgroup(None), 0), &mut out);
    c.observe(&cuda(0, "cuInit", None), &mut out);
    let report = crate::records::StallReport {
        pid: 7,
        tid: 7,
        comm: "python3".into(),
        call: "cuInit".into(),
        fd: None,
        elapsed_s: 5.0,
        state: state.into(),
        text: String::new(),
        wchan: Some("do_freezer_trap".into()),
        stack: Vec::new(),
        stopped_by: None,
        frozen_cgroup: cgroup.map(Into::into),
        stage: None,
        driver_function: driver.map(Into::into),
    };
    c.observe_obs(Obs::stall(report, 5_000_000_000), &mut out);
    for e in between {
        c.observe(e, &mut out);
    }
    c.observe(&signal(6000, libc::SIGTERM, 0), &mut out);
    c.observe(&exit_of(6001, 7, libc::SIGTERM), &mut out);
    c.finish(&mut out);
    out.into_iter()
        .find_map(|r| match r {
            Record::Cuinit(v) => Some(*v),
            _ => None,
        })
        .expect("a verdict")
}

/// A harness's kill after the stall check found the start-up frozen with
/// its cgroup, inside the driver, or held by its tracer: the verdict says
/// what the thread was doing while the time ran out, and the hint follows
/// it (no "did not hang in the driver" for a thread found inside it, no
/// "more time" for a frozen one). Found merely running, the harness's own
/// hint stays.
#[test]
fn what_the_stall_check_found_goes_into_the_kills_verdict() {
    let kill_of = |v: &CuInit| {
        v.diagnoses
            .iter()
            .find(|d| d.id == DiagId::KilledBySignal)
            .cloned()
            .unwrap_or_else(|| panic!("{v:#?}"))
    };
    let v = killed_after_stall("S", Some("/docker/abc"), None);
    let d = kill_of(&v);
    let seen = "when nvprobe's stall check looked, 1.0 s before the signal, cuInit had run 5.0 s, frozen with its \
cgroup (/docker/abc: the cgroup freezer)";
    assert!(d.evidence.ends_with(seen), "{}", d.evidence);
    assert!(
        v.text.ends_with(seen) && v.text.matches(seen).count() == 1,
        "{}",
        v.text
    );
    assert!(d.hint.starts_with("its cgroup was frozen"), "{}", d.hint);
    assert!(!d.hint.contains("Give cuInit more time"), "{}", d.hint);
    let v = killed_after_stall("D", None, Some("uvm_gpu_retain_by_uuid (nvidia_uvm)"));
    let d = kill_of(&v);
    assert!(
        d.evidence.ends_with(
            "before the signal, cuInit had run 5.0 s, blocked in the kernel (D) in do_freezer_trap, inside the \
driver in uvm_gpu_retain_by_uuid (nvidia_uvm)"
        ),
        "{}",
        d.evidence
    );
    assert!(!d.hint.contains("did not hang in the driver"), "{}", d.hint);
    assert!(d.hint.contains("inside the NVIDIA driver"), "{}", d.hint);
    let d = kill_of(&killed_after_stall("t", None, None));
    assert!(
        d.evidence.ends_with("held in a ptrace stop by its tracer"),
        "{}",
        d.evidence
    );
    assert!(
        d.hint.starts_with("its ptrace tracer held the thread"),
        "{}",
        d.hint
    );
    let d = kill_of(&killed_after_stall("R", None, None));
    assert!(
        d.evidence.ends_with("cuInit had run 5.0 s, running (R)"),
        "{}",
        d.evidence
    );
    assert!(d.hint.contains("harness"), "{}", d.hint);
    // A stopped process's stop has its own words.
    let v = killed_after_stall("T", None, None);
    assert!(!kill_of(&v).evidence.contains("stall check"), "{v:#?}");
    // The thread went on after the look (a call of its own ended later):
    // the look is past, and the harness's hint stays.
    let v = killed_after_stall_then(
        "D",
        None,
        Some("uvm_gpu_retain_by_uuid (nvidia_uvm)"),
        &[super::tests_startcalls::failed_call(5500, "mmap", "ENOMEM")],
    );
    let d = kill_of(&v);
    assert!(
        !d.evidence.contains("stall check") && !v.text.contains("stall check"),
        "{v:#?}"
    );
    assert!(d.hint.contains("harness"), "{}", d.hint);
}
