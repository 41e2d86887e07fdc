//! The sixth batch of start-ups under conditions no rule had been written
//! for, on the real driver: tests/scripts/record-unseen.sh 6 ran each case
//! of unseen6-workload.sh on an H200 host (open module 580.159.04, kernel
//! 6.18.44, Landlock enabled) untraced and under `nvprobe watch --json
//! --raw`, with the same results (tests/fixtures/gpu-host/h200-unseen6.txt).
//! The build that recorded it got these wrong or said too little: a
//! preloaded library failing libcuda's open or escape with no system call
//! was "no_visible_devices" (no visibility list was set) or the list of
//! failed calls.

mod common;

use common::{case, only};

use nvprobe_model::correlate::{DiagId, Outcome};

const REC: &str = "h200-580.159.04-unseen6.ndjson.gz";

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
    for (c, call) in [
        ("socket_kill", "socket()"),
        ("socket_trap", "socket()"),
        ("ioctl_kill", "ioctl()"),
    ] {
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
/// failed, so the preload is named, and what the kernel did see.
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
            "preload_escape",
            "CUDA_ERROR_NO_DEVICE (100)",
            "every driver call it made succeeded",
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
}
