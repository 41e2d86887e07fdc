//! Who ended a start-up, and the limits it met at its first context, on
//! the real driver: tests/scripts/record-kill-sources.sh ran each case of
//! kill-sources-workload.sh on the H200 (open module 580.159.04) under
//! `nvprobe watch --json --raw`. PyTorch's start-up in a 192 MiB memory
//! cgroup is killed by the kernel's OOM killer (the kernel log said
//! "Memory cgroup out of memory: Killed process"); the open-files limit
//! at 16, 24 and 32 lets cuInit succeed and fails the first context (304)
//! at an eventfd2, a dup of /dev/nvidia0's descriptor and an open of
//! /dev/nvidia0; a start-up stopped for 2 s says so.

mod common;

use common::case;

use nvprobe_model::correlate::{DiagId, Outcome};

const REC: &str = "h200-580.159.04-kill-sources.ndjson.gz";

#[test]
fn the_oom_killer_is_named_on_the_real_driver() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "oom_torch_192m");
    assert_eq!(x.result, Outcome::Killed, "{}", x.text);
    assert!(
        x.text
            .starts_with("killed by SIGKILL from the kernel's OOM killer after "),
        "{}",
        x.text
    );
    let d = &x.diagnoses[0];
    assert_eq!(d.id, DiagId::KilledBySignal);
    assert!(
        d.evidence
            .ends_with("of its memory.max 192 MiB when nvprobe read it"),
        "{}",
        d.evidence
    );
    assert!(
        d.hint.starts_with("the kernel's OOM killer ended it"),
        "{}",
        d.hint
    );
    // The same start-up with twice the memory, and a context in 48 MiB.
    for c in ["oom_torch_384m", "oom_ctx_48m", "ok"] {
        assert_eq!(case(&v, c).result, Outcome::Ok, "{c}");
    }
}

#[test]
fn the_first_contexts_failed_descriptor_call_is_named() {
    let (_, v) = common::verdicts(REC);
    for (c, call) in [
        (
            "nofile_16",
            "eventfd2() failed with EMFILE (an event descriptor)",
        ),
        (
            "nofile_24",
            "dup() failed with EMFILE (duplicating a descriptor of an NVIDIA file)",
        ),
        (
            "nofile_32",
            "the open of /dev/nvidia0 failed with EMFILE, 2 times (the first context opening an NVIDIA node)",
        ),
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Failed, "{c}: {}", x.text);
        assert!(
            x.text.ends_with(
                "then cuCtxCreate_v2 (device 0) returned CUDA_ERROR_OPERATING_SYSTEM (304)"
            ),
            "{c}: {}",
            x.text
        );
        let d: Vec<_> = x
            .diagnoses
            .iter()
            .filter(|d| d.id == DiagId::FileLimit)
            .collect();
        assert_eq!(d.len(), 1, "{c}: {:#?}", x.diagnoses);
        assert!(d[0].evidence.contains(call), "{c}: {}", d[0].evidence);
        assert!(
            d[0].evidence
                .contains("the process's open-file limit (RLIMIT_NOFILE) was reached"),
            "{c}: {}",
            d[0].evidence
        );
        assert!(
            x.diagnoses.iter().all(|d| d.id != DiagId::ContextFailed),
            "{c}: the generic context hint is not given: {:#?}",
            x.diagnoses
        );
    }
}

#[test]
fn a_stopped_start_up_says_how_long() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "stopped");
    assert_eq!(x.result, Outcome::Ok);
    assert!(
        x.text
            .contains("; stopped for 2.0 s of it (SIGSTOP from bash["),
        "{}",
        x.text
    );
}
