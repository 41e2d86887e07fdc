//! The sixth batch of start-ups under conditions no rule had been written
//! for, on the real driver: tests/scripts/record-unseen.sh 6 ran each case
//! of unseen6-workload.sh on an H100 host (open module 580.159.04, kernel
//! 6.18.44, Landlock enabled) untraced and under `nvprobe watch --json
//! --raw`, with the same results (tests/fixtures/gpu-host/h100-unseen6.txt),
//! with the build that mended what a first run on the H200 got wrong: a
//! preloaded library failing libcuda's open or escape with no system call
//! was "no_visible_devices" (no visibility list was set) or the list of
//! failed calls, and a thread that a seccomp filter ended alone in cuInit
//! was the harness's SIGTERM 30 s later. This recording has the kernel's
//! thread_exit record, and the stall reports' frozen cgroups.

mod common;

use common::{case, only};

use nvprobe_model::correlate::{DiagId, DiagSeverity, Outcome};

const REC: &str = "h100-580.159.04-unseen6.ndjson.gz";

#[test]
fn what_libcuda_got_past_is_ok() {
    let (_, v) = common::verdicts(REC);
    for c in [
        "ok",
        "strace_plain",
        "strace_inject",
        "memlock0_nobody",
        "freeze_thaw",
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
    }
}

/// seccomp's kill and trap actions at socket() and at the first ioctl:
/// SIGSYS from the filter, with the call (si_syscall), confirmed on the
/// hardware.
#[test]
fn a_seccomp_kill_names_the_call() {
    let (_, v) = common::verdicts(REC);
    // (socket_kill ended before its command line could be read: its
    // verdict, the same, has no case name.)
    for (c, call) in [("socket_trap", "socket()"), ("ioctl_kill", "ioctl()")] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Killed, "{c}");
        let (id, e) = only(x);
        assert_eq!(id, DiagId::KilledBySignal, "{c}");
        assert!(
            e.starts_with(&format!(
                "SIGSYS from a seccomp filter (its kill or trap action, at {call})"
            )),
            "{c}: {e}"
        );
    }
}

/// Landlock refusing ioctls on device files, or the open of /dev's
/// nodes; /dev mounted nodev: each by the kernel's own order of checks.
#[test]
fn a_sandbox_or_a_nodev_mount_is_named_by_the_check_that_refused() {
    let (_, v) = common::verdicts(REC);
    let (id, e) = only(case(&v, "landlock_ioctl"));
    assert_eq!(id, DiagId::IoctlRefused);
    assert!(e.starts_with("NV_ESC_CARD_INFO failed with EACCES"), "{e}");
    let (id, e) = only(case(&v, "landlock_open"));
    assert_eq!(id, DiagId::SecurityModuleDenied);
    assert!(
        e.contains("/dev/nvidiactl: EACCES: the mode allows it"),
        "{e}"
    );
    let (id, e) = only(case(&v, "dev_nodev"));
    assert_eq!(id, DiagId::NodeNodev);
    assert!(e.ends_with("but the /dev it is in is mounted nodev"), "{e}");
}

/// A preloaded library whose libc wrappers fail libcuda's open of a node
/// or one of its escapes, with no system call: nothing the kernel saw
/// failed. Where the kernel saw its mark (a descriptor no open returned,
/// no driver call at all) the preload is the diagnosis; where it did not
/// (an escape failed in the preload), a warning beside the generic one.
#[test]
fn a_failure_no_kernel_call_explains_names_the_preload() {
    let (_, v) = common::verdicts(REC);
    for (c, curesult, seen) in [
        (
            "preload_ctl_open",
            "CUDA_ERROR_NO_DEVICE (100)",
            "no driver call reached the kernel",
        ),
        (
            "preload_uvm_open",
            "CUDA_ERROR_UNKNOWN (999)",
            "every driver call it made succeeded",
        ),
    ] {
        let x = case(&v, c);
        assert_eq!(x.curesult.as_deref(), Some(curesult), "{c}");
        let (id, e) = only(x);
        assert_eq!(id, DiagId::AnsweredInProcess, "{c}");
        assert!(
            e.contains(seen) && e.contains("the process preloads /") && e.contains("libnvshim.so"),
            "{c}: {e}"
        );
        assert!(
            x.text
                .starts_with(&format!("cuInit returned {curesult} after "))
                && x.text.matches(curesult).count() == 1,
            "{c}: {}",
            x.text
        );
    }
    // The open of /dev/nvidia-uvm failed with EACCES in the preload, and
    // libcuda used what it got (-13) as the descriptor; the open of
    // nvidiactl failed with EPERM, and libcuda used -1.
    let (_, e) = only(case(&v, "preload_uvm_open"));
    assert!(
        e.ends_with("libcuda then made an ioctl on descriptor -13 (EBADF): -EACCES, the result of an open that failed without reaching the kernel"),
        "{e}"
    );
    let (_, e) = only(case(&v, "preload_ctl_open"));
    assert!(
        e.ends_with("libcuda then made an ioctl on descriptor -1 (EBADF): the result of an open that failed without reaching the kernel"),
        "{e}"
    );
    let x = case(&v, "preload_escape");
    let d: Vec<(DiagId, DiagSeverity)> = x.diagnoses.iter().map(|d| (d.id, d.severity)).collect();
    assert_eq!(
        d,
        [
            (DiagId::NoVisibleDevices, DiagSeverity::Error),
            (DiagId::AnsweredInProcess, DiagSeverity::Warning)
        ],
        "{:#?}",
        x.diagnoses
    );
}

/// A seccomp filter's kill-thread action ended the thread in cuInit
/// alone at 3.5 ms; libcuda's other thread kept the process alive until
/// the harness's SIGTERM at 7.9 s. The kernel's thread_exit record says
/// so, and the verdict's end is the thread's, with no more-time hint.
#[test]
fn a_thread_ended_alone_in_cuinit_is_the_end() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "ioctl_killthread");
    assert_eq!(x.result, Outcome::Killed);
    let (id, e) = only(x);
    assert_eq!(id, DiagId::CuinitThreadEnded);
    assert!(
        e.contains(") ended at 3.5 ms (killed alone by SIGSYS: a seccomp filter's kill-thread action); cuInit never returned, and the process went on without it for 7.9 s, until SIGTERM from timeout["),
        "{e}"
    );
    assert!(
        x.text.starts_with("killed by SIGTERM from timeout[")
            && x.text.ends_with("; its thread in cuInit had ended at 3.5 ms (killed alone by SIGSYS: a seccomp filter's kill-thread action)"),
        "{}",
        x.text
    );
}

/// The stall reports written live: a frozen cgroup is named as the
/// freezer's (v2, on that host), and the thread a filter ended is said
/// to have ended.
#[test]
fn stall_reports_say_frozen_and_ended() {
    let text = common::read_fixture(REC);
    let stalls: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| l.contains(r#""type":"stall""#))
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    for c in ["freeze_thaw", "freeze_kill"] {
        let s = stalls
            .iter()
            .find(|s| s["frozen_cgroup"] == format!("/nvprobe-u6-{c}"))
            .unwrap_or_else(|| panic!("no frozen stall report for {c}: {stalls:#?}"));
        assert!(
            s["text"].as_str().is_some_and(|t| t.contains(&format!(
                "s: frozen with its cgroup (/nvprobe-u6-{c}: the cgroup freezer, as docker pause or a checkpointer uses it), not stuck in the driver"
            ))),
            "{s}"
        );
    }
    assert!(
        stalls.iter().any(|s| s["state"] == "Z"
            && s["text"].as_str().is_some_and(|t| t
                .contains("the thread has ended (task state Z), so the call will never return"))),
        "{stalls:#?}"
    );
}

/// The cgroup frozen 0.15 s in and killed 6 s later: the stall report's
/// frozen cgroup goes into the kill's verdict, and its hint is the
/// freezer's, not more time for the driver.
#[test]
fn a_kill_of_a_frozen_start_up_says_it_was_frozen() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "freeze_kill");
    assert_eq!(x.result, Outcome::Killed, "{}", x.text);
    let (id, e) = only(x);
    assert_eq!(id, DiagId::KilledBySignal);
    let seen = "s, frozen with its cgroup (/nvprobe-u6-freeze_kill: the cgroup freezer)";
    assert!(
        e.starts_with("SIGKILL from bash[")
            && e.contains(
                "; when nvprobe's stall check looked, 0.8 s before the signal, cuInit had run "
            )
            && e.ends_with(seen),
        "{e}"
    );
    assert!(x.text.ends_with(seen), "{}", x.text);
    let hint = x.diagnoses[0].hint;
    assert!(
        hint.starts_with("its cgroup was frozen") && !hint.contains("Give cuInit more time"),
        "{hint}"
    );
}

/// The cgroup frozen for 6 s and thawed: the start-up got past it, and its
/// verdict says what held it.
#[test]
fn a_start_up_frozen_then_thawed_says_it_was_frozen() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "freeze_thaw");
    assert_eq!(x.result, Outcome::Ok, "{}", x.text);
    assert!(
        x.text.ends_with(
            "; when nvprobe's stall check looked, cuInit had run 5.3 s, frozen with its cgroup \
(/nvprobe-u6-freeze_thaw: the cgroup freezer)"
        ),
        "{}",
        x.text
    );
}
