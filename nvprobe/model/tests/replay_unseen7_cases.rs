//! The seventh batch of start-ups under conditions no rule had been
//! written for, on the real driver: tests/scripts/record-unseen.sh 7 ran
//! each case of unseen7-workload.sh on an H100 host (open module
//! 580.159.04, kernel 6.18.44) untraced and under `nvprobe watch --json
//! --raw`, with the same results (tests/fixtures/gpu-host/h100-unseen7.txt).
//! strace answered libcuda's calls itself (-e inject): the kernel saw each
//! answered call as skipped (number -1 at its exit), and nothing of it
//! failing. This build named the tracer at its first run there.

mod common;

use common::{case, only};

use nvprobe_model::correlate::{DiagId, Outcome};

const REC: &str = "h100-580.159.04-unseen7.ndjson.gz";

/// What libcuda got past, or what changed nothing: an injected EIO at the
/// third escape on nvidiactl (libcuda went on), a 6 s delay at an escape's
/// entry, a user namespace mapping root, CUDA_VISIBLE_DEVICES as a UUID
/// prefix or with a leading space, an MPS control socket that never
/// answers or closes at once (580's cuInit and first context do not use
/// it).
#[test]
fn what_libcuda_got_past_is_ok() {
    let (_, v) = common::verdicts(REC);
    for c in [
        "ok",
        "strace_escape",
        "strace_delay",
        "userns_root",
        "visible_prefix",
        "visible_space",
        "mps_mute",
        "mps_closed",
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
    }
}

/// strace answering an open of each NVIDIA node, UVM_INITIALIZE, the
/// thread libcuda makes, or the mapping of nvidiactl, with an error the
/// kernel never gave: each verdict names the tracer and how many calls
/// the kernel saw skipped, and no node, limit or driver remedy.
#[test]
fn a_call_strace_answered_is_named_as_the_tracers() {
    let (_, v) = common::verdicts(REC);
    for (c, curesult, skipped, seen) in [
        (
            "strace_ctl_open",
            "CUDA_ERROR_NO_DEVICE (100)",
            "10 calls",
            "no driver call reached the kernel",
        ),
        (
            "strace_uvm_open",
            "CUDA_ERROR_UNKNOWN (999)",
            "2 calls",
            "every driver call it made succeeded",
        ),
        (
            "strace_gpu_open",
            "CUDA_ERROR_NO_DEVICE (100)",
            "4 calls",
            "every driver call it made succeeded",
        ),
        (
            "strace_uvm_init",
            "CUDA_ERROR_UNKNOWN (999)",
            "1 call",
            "every driver call it made succeeded",
        ),
        (
            "strace_clone",
            "CUDA_ERROR_OPERATING_SYSTEM (304)",
            "1 call",
            "no driver call reached the kernel",
        ),
        (
            "strace_mmap",
            "CUDA_ERROR_NO_DEVICE (100)",
            "1 call",
            "every driver call it made succeeded",
        ),
    ] {
        let x = case(&v, c);
        assert_eq!(
            (x.result, x.curesult.as_deref()),
            (Outcome::Failed, Some(curesult)),
            "{c}"
        );
        let (id, e) = only(x);
        assert_eq!(id, DiagId::AnsweredByTracer, "{c}");
        let tracer = x
            .process
            .as_ref()
            .and_then(|p| p.tracer.as_ref())
            .unwrap_or_else(|| panic!("{c}: no tracer read"));
        assert_eq!(tracer.comm, "strace", "{c}");
        assert_eq!(
            e,
            format!(
                "cuInit returned {curesult} and the kernel saw {skipped} of its start-up skipped (number -1 at the \
call's exit, which a ptrace tracer sets for a call it answers itself); {seen}: the process is traced by strace[{}], \
which answered {} itself, as strace's -e inject does",
                tracer.pid,
                if skipped == "1 call" { "it" } else { "them" }
            ),
            "{c}"
        );
    }
}

/// strace resumed the process from a stop at an escape with SIGUSR1
/// (-e inject=ioctl:signal=SIGUSR1): SI_KERNEL from the process's own
/// context, which only a tracer gives. The kill is named as the tracer's.
#[test]
fn a_signal_strace_gave_is_the_tracers() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "strace_signal");
    assert_eq!(x.result, Outcome::Killed, "{}", x.text);
    let (id, e) = only(x);
    assert_eq!(id, DiagId::KilledBySignal);
    assert!(
        e.starts_with(
            "SIGUSR1 from its tracer strace[",
        ) && e.contains(
            "] (it gave the signal as it resumed the process from a ptrace stop, as strace's -e inject=…:signal= does) at "
        ),
        "{e}"
    );
    assert!(
        x.diagnoses[0]
            .hint
            .starts_with("the process's ptrace tracer"),
        "{}",
        x.diagnoses[0].hint
    );
}

/// strace held the thread at an escape's entry for 6 s: the live stall
/// report said a ptrace stop by which tracer, not the driver.
#[test]
fn a_thread_strace_held_is_reported_as_held() {
    let text = common::read_fixture(REC);
    let stall: serde_json::Value = text
        .lines()
        .filter(|l| l.contains(r#""type":"stall""#))
        .map(|l| serde_json::from_str(l).expect("a stall record"))
        .next()
        .expect("a stall record");
    assert_eq!(stall["state"], "t", "{stall}");
    let t = stall["text"].as_str().expect("text");
    assert!(
        t.starts_with("cuInit (after version_handshake) has run ")
            && t.contains("s: the thread is held in a ptrace stop (t) by its tracer strace[")
            && t.ends_with("], not stuck in the driver"),
        "{t}"
    );
}

/// The start-up strace held for 6 s at an escape's entry got past it: its
/// verdict says what held it, from the stall check's look.
#[test]
fn a_start_up_strace_held_says_what_held_it() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "strace_delay");
    assert_eq!(x.result, Outcome::Ok, "{}", x.text);
    assert!(
        x.text.ends_with(
            "; when nvprobe's stall check looked, cuInit had run 5.4 s, held in a ptrace stop by its tracer"
        ),
        "{}",
        x.text
    );
}
