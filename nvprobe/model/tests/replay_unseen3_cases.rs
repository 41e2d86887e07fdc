//! The third batch of start-ups under conditions no rule had been written
//! for, on the real driver: tests/scripts/record-unseen.sh 3 ran each case
//! of unseen3-workload.sh on the H100 host (open module 580.159.04, kernel
//! 6.18.44) untraced and under `nvprobe watch --json --raw`, with the same
//! results (tests/fixtures/gpu-host/h100-unseen3.txt). The build that
//! recorded it got three wrong: a process that ended itself from another
//! thread (`_exit(3)`, an exec) mid-cuInit was "failed" with UVM's
//! NV_ERR_BUSY_RETRY blamed on HMM, and a socket refused by a seccomp
//! filter fell to the catch-all. What the real driver did decides what is
//! asserted.

mod common;

use common::{case, only};

use nvprobe_model::correlate::{DiagId, DiagSeverity, Outcome};

const REC: &str = "h100-580.159.04-unseen3.ndjson.gz";

#[test]
fn what_libcuda_got_past_is_ok_with_nothing_said() {
    let (_, v) = common::verdicts(REC);
    for c in [
        "ok",
        "threads8",
        "dev_private_ok",
        "caps_none",
        // CUDA takes a leading space, a trailing comma, a UUID's prefix
        // and a UUID in upper case.
        "visible_space",
        "visible_trailing_comma",
        "visible_uuid_prefix",
        "visible_uuid_upper",
        // libcuda 580 made no memfd_create call here: refusing or killing
        // at it changes nothing.
        "memfd_eperm",
        "memfd_enosys",
        "memfd_kill",
        "prctl_eperm",
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        assert!(x.diagnoses.is_empty(), "{c}: {:#?}", x.diagnoses);
    }
    // Stopped and continued: ok, and how long it was stopped.
    let x = case(&v, "stop_cont");
    assert_eq!(x.result, Outcome::Ok, "{}", x.text);
    assert!(
        x.text
            .contains("; stopped for 1.5 s of it (SIGSTOP from bash[")
            && x.text.contains("], SIGCONT from bash["),
        "{}",
        x.text
    );
}

/// A node of the wrong device in a private /dev: libcuda (its
/// nvidia-modprobe) made it again, and the start-up went on.
#[test]
fn a_node_of_the_wrong_device_that_libcuda_made_again_is_recovered() {
    let (_, v) = common::verdicts(REC);
    for (c, says) in [
        (
            "uvm_stale_major",
            "/dev/nvidia-uvm is device 200:0 (no NVIDIA module's device number), not the NVIDIA uvm node; libcuda created it (mknod 238:0)",
        ),
        (
            "ctl_is_modeset",
            "/dev/nvidiactl is device 195:254 (an NVIDIA modeset node), not the NVIDIA ctl node; libcuda created it (mknod 195:255)",
        ),
        (
            "gpu_minor_wrong",
            "/dev/nvidia0 is device 195:7 (another NVIDIA gpu node), not the NVIDIA gpu node (minor 0); libcuda created it (mknod 195:0)",
        ),
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        let (id, e) = only(x);
        assert_eq!(id, DiagId::NodeWrongDevice, "{c}");
        assert!(e.starts_with(says), "{c}: {e}");
        assert_eq!(x.diagnoses[0].severity, DiagSeverity::Recovered, "{c}");
    }
}

/// A signal the process sent itself (abort, and the kernel's SIGPIPE and
/// SIGXFSZ at its own write) is its own end, with no harness remedy; the
/// CPU-time limit is the kernel's.
#[test]
fn a_process_that_ended_itself_by_a_signal_is_told_so() {
    let (_, v) = common::verdicts(REC);
    for (c, sig, says, hint) in [
        (
            "abort",
            "SIGABRT",
            "itself (abort(): a failed assertion, an uncaught C++ exception or a fatal error a library reported)",
            "the process aborted itself",
        ),
        (
            "sigpipe",
            "SIGPIPE",
            "itself (a write to a pipe or socket that no one reads any more)",
            "whose reader had gone",
        ),
        (
            "xfsz",
            "SIGXFSZ",
            "itself (a write past its file-size limit, RLIMIT_FSIZE)",
            "RLIMIT_FSIZE",
        ),
        (
            "xcpu",
            "SIGXCPU",
            "the kernel (the CPU-time limit, RLIMIT_CPU)",
            "CPU-time limit",
        ),
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Killed, "{c}: {}", x.text);
        assert!(
            x.text.starts_with(&format!("killed by {sig} from "))
                && x.text.contains(says)
                && x.text.contains(" in UVM_REGISTER_GPU for GPU 1 of 1"),
            "{c}: {}",
            x.text
        );
        let (id, _) = only(x);
        assert_eq!(id, DiagId::KilledBySignal, "{c}");
        let h = x.diagnoses[0].hint;
        assert!(h.contains(hint) && !h.contains("harness"), "{c}: {h}");
    }
}

/// Another thread's `_exit(3)` or exec mid-cuInit: the kernel's SIGKILL
/// (sent by no one: zap_other_threads, de_thread) cut UVM_REGISTER_GPU
/// short, which answered NV_ERR_BUSY_RETRY. The process ended itself; the
/// driver and HMM are not blamed.
#[test]
fn a_process_that_ended_itself_from_another_thread_is_not_a_driver_failure() {
    let (_, v) = common::verdicts(REC);
    for (c, how) in [
        (
            "exit3",
            "exited with status 3 (another of its threads ended it) while cuInit was still running",
        ),
        (
            "execthread",
            "another of its threads exec'd a new program while cuInit was still running",
        ),
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Exited, "{c}: {}", x.text);
        assert!(
            x.text.starts_with(how)
                && x.text.ends_with(
                    "the kernel's SIGKILL to the thread in UVM_REGISTER_GPU for GPU 1 of 1 \
(GPU-3132e021-914b-5a9c-936e-4dd9400f9c10, /dev/nvidia0) cut it short (it returned NV_ERR_BUSY_RETRY)"
                ),
            "{c}: {}",
            x.text
        );
        let (id, e) = only(x);
        assert_eq!(id, DiagId::EndedItself, "{c}");
        assert!(
            e.starts_with(
                "UVM_REGISTER_GPU returned NV_ERR_BUSY_RETRY as the kernel ended its thread"
            ),
            "{c}: {e}"
        );
        assert!(!x.diagnoses[0].hint.contains("uvm_disable_hmm"), "{c}");
    }
}

/// Killed from outside: while stopped (the hint says it was stopped, not
/// slow), and a cgroup killed whole (the writer of cgroup.kill sends it).
#[test]
fn a_kill_says_who_and_whether_the_process_was_stopped() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "stop_kill");
    assert_eq!(x.result, Outcome::Killed, "{}", x.text);
    assert!(
        x.text.contains("then killed by SIGKILL from bash[")
            && x.text.ends_with(
                "; stopped for 1.5 s of it (SIGSTOP from bash[1047], and no SIGCONT before the SIGKILL)"
            ),
        "{}",
        x.text
    );
    let (id, _) = only(x);
    assert_eq!(id, DiagId::KilledBySignal);
    assert!(
        x.diagnoses[0].hint.starts_with("the process was stopped"),
        "{}",
        x.diagnoses[0].hint
    );
    let x = case(&v, "cgroup_kill");
    assert_eq!(x.result, Outcome::Killed, "{}", x.text);
    assert!(
        x.text.contains("killed by SIGKILL (from bash["),
        "{}",
        x.text
    );
}

/// What refused a call libcuda needs, named: an eventfd a filter answers
/// ENOSYS, a socket a filter answers EACCES (no file's mode is checked),
/// a full address space by the kernel's counts at the failure, the same
/// UUID twice in CUDA_VISIBLE_DEVICES, and a fork without exec.
#[test]
fn what_refused_the_start_up_is_named() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "eventfd_enosys");
    let (id, e) = only(x);
    assert_eq!(id, DiagId::StartCallRefused);
    assert!(e.contains("eventfd2() failed with ENOSYS"), "{e}");
    let x = case(&v, "socket_eacces");
    assert_eq!(
        x.curesult.as_deref(),
        Some("CUDA_ERROR_OPERATING_SYSTEM (304)")
    );
    let (id, e) = only(x);
    assert_eq!(id, DiagId::StartCallRefused);
    assert!(
        e.ends_with(
            "socket() failed with EACCES, 2 times (a socket): making a local (AF_UNIX) socket checks no permission, \
so a seccomp filter or a security module's socket rule refused it (the process ran under 1 seccomp filter)"
        ),
        "{e}"
    );
    let x = case(&v, "vafull");
    let (id, e) = only(x);
    assert_eq!(id, DiagId::MappingRefused);
    assert!(
        e.contains(
            "the process's own mappings took 64.0 TiB (70368865218560 bytes) of the 128 TiB"
        ) && e.contains("when the call failed, so the call's length cannot fit"),
        "{e}"
    );
    let x = case(&v, "visible_uuid_twice");
    assert_eq!(
        x.curesult.as_deref(),
        Some("CUDA_ERROR_INVALID_DEVICE (101)")
    );
    let (id, e) = only(x);
    assert_eq!(id, DiagId::InvalidDevice);
    assert!(e.contains("names /dev/nvidia0 twice"), "{e}");
    // /proc hidden: as in the first batch (replay_evidence_hints.rs).
    let (id, _) = only(case(&v, "proc_hidden"));
    assert_eq!(id, DiagId::ProcUnavailable);
    // The forked child's cuInit (the parent's is "forkinit" too: the
    // child has its command line).
    let child = v
        .iter()
        .find(|x| x.diagnoses.iter().any(|d| d.id == DiagId::ForkAfterInit))
        .expect("the forked child's verdict");
    assert_eq!(
        child.curesult.as_deref(),
        Some("CUDA_ERROR_NOT_INITIALIZED (3)")
    );
}
