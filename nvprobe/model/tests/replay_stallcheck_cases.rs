//! What a verdict says from outside the driver calls, live on the real
//! driver (H100, 580.159.04, kernel 6.18.44): tests/scripts/record-cases.sh
//! ran tests/scripts/stallcheck-workload.sh untraced and under `nvprobe
//! watch --json --raw`, with the same results
//! (tests/fixtures/gpu-host/h100-stallcheck.txt). The build that recorded
//! it is the one whose rules these are: the stall check's look in a
//! verdict, a hidden /proc and /sys, and the kernel's seccomp audit line.

mod common;

use common::{case, only};

use nvprobe_model::correlate::{DiagId, DiagSeverity, Outcome, Record};

const REC: &str = "h100-580.159.04-stallcheck.ndjson.gz";

/// A start-up held 6 s and then let go (strace's delay before an escape,
/// a cgroup frozen then thawed) is ok, and says what held it.
#[test]
fn a_start_up_that_got_past_a_hold_says_what_held_it() {
    let (_, v) = common::verdicts(REC);
    for (name, held) in [
        ("strace_delay", "held in a ptrace stop by its tracer"),
        (
            "freeze_thaw",
            "frozen with its cgroup (/nvprobe-sc-freeze_thaw: the cgroup freezer)",
        ),
    ] {
        let v = case(&v, name);
        assert_eq!(v.result, Outcome::Ok, "{name}");
        assert!(v.diagnoses.is_empty(), "{name}: {:#?}", v.diagnoses);
        assert!(
            v.text
                .contains("; when nvprobe's stall check looked, cuInit had run ")
                && v.text.ends_with(held),
            "{name}: {}",
            v.text
        );
    }
}

/// A frozen start-up killed: the look before the kill says it was frozen,
/// and the hint is the freezer's, not more time.
#[test]
fn a_frozen_start_up_killed_says_it_was_frozen() {
    let (_, v) = common::verdicts(REC);
    let v = case(&v, "freeze_kill");
    assert_eq!(v.result, Outcome::Killed);
    let (id, evidence) = only(v);
    assert_eq!(id, DiagId::KilledBySignal);
    assert!(
        evidence.starts_with("SIGKILL from bash[")
            && evidence.contains(" s before the signal, cuInit had run ")
            && evidence
                .ends_with("frozen with its cgroup (/nvprobe-sc-freeze_kill: the cgroup freezer)"),
        "{evidence}"
    );
    assert!(
        v.diagnoses[0].hint.starts_with("its cgroup was frozen"),
        "{}",
        v.diagnoses[0].hint
    );
}

/// /proc and /sys hidden by a tmpfs in a mount namespace.
#[test]
fn a_hidden_proc_fails_and_a_hidden_sys_is_got_past() {
    let (_, v) = common::verdicts(REC);
    let p = case(&v, "proc_hidden");
    assert_eq!(p.result, Outcome::Failed);
    let (id, evidence) = only(p);
    assert_eq!(id, DiagId::ProcUnavailable);
    assert!(
        evidence
            .ends_with("its /proc is no procfs (not mounted, or covered by another file system)"),
        "{evidence}"
    );
    let s = case(&v, "sys_hidden");
    assert_eq!(s.result, Outcome::Ok);
    assert_eq!(s.diagnoses.len(), 2, "{:#?}", s.diagnoses);
    for d in &s.diagnoses {
        assert_eq!(
            (d.id, d.severity),
            (DiagId::NodeMissing, DiagSeverity::Recovered)
        );
        assert!(d.hint.contains("not a device node"), "{}", d.hint);
    }
}

/// A seccomp kill-thread action at ioctl ended cuInit's thread; the
/// process lived on until timeout's SIGTERM 12 s later. The kernel printed
/// its audit line (no audit daemon), which names the call.
#[test]
fn the_audit_line_names_the_call_the_kill_thread_action_was_at() {
    let (records, v) = common::verdicts(REC);
    let v = case(&v, "ioctl_killthread");
    assert_eq!(v.result, Outcome::Killed);
    let (id, evidence) = only(v);
    assert_eq!(id, DiagId::CuinitThreadEnded);
    assert!(
        evidence.contains(
            "(killed alone by SIGSYS: a seccomp filter's kill-thread action at ioctl() (the kernel's audit line \
names it)); cuInit never returned"
        ) && evidence.ends_with("until SIGTERM from timeout[694]"),
        "{evidence}"
    );
    let audit: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::KernelLog(k) => k.seccomp.as_ref().map(|a| (k.pid, a)),
            _ => None,
        })
        .collect();
    assert_eq!(audit.len(), 1, "{audit:?}");
    let (pid, a) = audit[0];
    assert_eq!(
        (pid, a.syscall, a.call.as_str(), a.action.as_str(), a.signal),
        (Some(v.pid), 16, "ioctl", "kill_thread", 31)
    );
}
