//! The fifth batch of start-ups under conditions no rule had been written
//! for, on the real driver: tests/scripts/record-unseen.sh 5 ran each case
//! of unseen5-workload.sh on an H100 host (open module 580.159.04, kernel
//! 6.18.44) untraced and under `nvprobe watch --json --raw`, with the same
//! results (tests/fixtures/gpu-host/h100-unseen5.txt; strace was not on
//! that host, so its case did not run). The build that recorded it got
//! two wrong: a seccomp filter refusing one UVM command (UVM_INITIALIZE,
//! UVM_REGISTER_GPU) left the verdict to the list of failed calls.

mod common;

use common::{case, only};

use nvprobe_model::correlate::{DiagId, Outcome};

const REC: &str = "h100-580.159.04-unseen5.ndjson.gz";

#[test]
fn what_libcuda_got_past_is_ok_with_nothing_said() {
    let (_, v) = common::verdicts(REC);
    for c in [
        "ok",
        "madvise_eperm",
        // A dangling link and a directory by libcuda's name first on the
        // library path: the loader goes on to the real one.
        "lib_dangling",
        "lib_dir",
        "home_unwritable",
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        assert!(x.diagnoses.is_empty(), "{c}: {:#?}", x.diagnoses);
    }
}

/// One UVM command refused by a seccomp filter (a rule on ioctl's
/// request): its exit was seen, its entry never traced, while the other
/// ioctls were: the filter is named, with the command.
#[test]
fn one_nvidia_command_a_filter_refused_is_named() {
    let (_, v) = common::verdicts(REC);
    for (c, curesult, says) in [
        (
            "uvm_init_eperm",
            "CUDA_ERROR_UNKNOWN (999)",
            "UVM_INITIALIZE (ioctl 0x30000001) failed with EPERM",
        ),
        (
            "uvm_register_eperm",
            "CUDA_ERROR_NOT_INITIALIZED (3)",
            "UVM_REGISTER_GPU (ioctl 0x25) failed with EPERM",
        ),
    ] {
        let x = case(&v, c);
        assert_eq!(x.curesult.as_deref(), Some(curesult), "{c}");
        let (id, e) = only(x);
        assert_eq!(id, DiagId::CallsBlocked, "{c}");
        assert!(
            e.contains(says)
                && e.contains("never reached the kernel's syscall tracing, while the process's other NVIDIA ioctls did")
                && e.ends_with("the process ran under 1 seccomp filter"),
            "{c}: {e}"
        );
        assert!(
            x.diagnoses[0].hint.contains("rule on ioctl's request"),
            "{c}"
        );
    }
    // mprotect refused: a filter, named.
    let (id, e) = only(case(&v, "mprotect_eperm"));
    assert_eq!(id, DiagId::NotPermitted);
    assert!(e.contains("mprotect() failed with EPERM"), "{e}");
}

/// Ctrl-C to the whole process group: Python takes the SIGINT when cuInit
/// returns and ends by raising it again; the verdict names the sender.
#[test]
fn a_group_sigint_names_the_sender() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "sigint_pgrp");
    assert_eq!(x.result, Outcome::Killed, "{}", x.text);
    assert!(
        x.text.contains("(raising again the SIGINT that sh["),
        "{}",
        x.text
    );
}
