//! The fourth batch of start-ups under conditions no rule had been
//! written for, on the real driver: tests/scripts/record-unseen.sh 4 ran
//! each case of unseen4-workload.sh on an H100 host (open module
//! 580.159.04, kernel 6.18.44) untraced and under `nvprobe watch --json
//! --raw`, with the same results (tests/fixtures/gpu-host/h100-unseen4.txt).
//! The build that recorded it (before `ended_itself`, with the signal
//! sources of the third batch) got three wrong: a harness's timer whose
//! handler raised, and a graceful stop's handler that exited, were "ok"
//! with nothing said; the main thread returning with a thread in cuInit
//! was "failed" with UVM's NV_ERR_BUSY_RETRY blamed on HMM.

mod common;

use common::{case, only};

use nvprobe_model::correlate::{DiagId, Outcome};

const REC: &str = "h100-580.159.04-unseen4.ndjson.gz";

#[test]
fn eight_start_ups_at_once_are_eight_ok_verdicts() {
    let (_, v) = common::verdicts(REC);
    for c in ["ok"]
        .into_iter()
        .chain((1..=8).map(|i| Box::leak(format!("parallel_{i}").into_boxed_str()) as &str))
    {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        assert!(x.diagnoses.is_empty(), "{c}: {:#?}", x.diagnoses);
        assert!(x.text.contains("; first context: cuCtxCreate_v2"), "{c}");
    }
}

/// A handler of the process caught a signal in its start-up (a harness's
/// timer whose handler raises, as pytest-timeout's does; a launcher's
/// graceful stop), and the process exited with an error before a first
/// context: the signal is named, with the hint of its source.
#[test]
fn a_start_up_its_own_handler_ended_says_which_signal() {
    let (_, v) = common::verdicts(REC);
    for (c, status, sig, hint) in [
        (
            "alarm_raise",
            1,
            "its handler caught SIGALRM from the kernel (a timer the process set: alarm, setitimer) at ",
            "a timer the process itself set fired",
        ),
        // (The workload's thread sends it: the process itself.)
        (
            "term_exit",
            143,
            "its handler caught SIGTERM from python3[",
            "the process sent the signal to itself",
        ),
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Exited, "{c}: {}", x.text);
        assert!(
            x.text.starts_with(&format!(
                "cuInit returned CUDA_SUCCESS (0) after uvm_gpu_registered, then exited with status {status} \
before a first context: {sig}"
            )),
            "{c}: {}",
            x.text
        );
        let (id, _) = only(x);
        assert_eq!(id, DiagId::InterruptedBySignal, "{c}");
        let h = x.diagnoses[0].hint;
        assert!(
            h.starts_with(hint) && !h.contains("uvm_disable_hmm"),
            "{c}: {h}"
        );
    }
}

/// The main thread returned (exit 0) while a thread was in cuInit: the
/// process ended itself, and the call that end cut short is not the
/// driver's failure.
#[test]
fn the_main_thread_returning_mid_cuinit_is_the_process_ending_itself() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "main_exits");
    assert_eq!(x.result, Outcome::Exited, "{}", x.text);
    assert!(
        x.text.starts_with(
            "exited with status 0 (another of its threads ended it) while cuInit was still running (it never returned): \
the kernel's SIGKILL to the thread in UVM_REGISTER_GPU"
        ),
        "{}",
        x.text
    );
    let (id, _) = only(x);
    assert_eq!(id, DiagId::EndedItself);
}

/// A fault in another thread is the process's own (named by its code, no
/// harness remedy); a SIGKILL at a parent's death comes from the parent;
/// a harness's SIGKILL after its ignored SIGTERM names the harness.
#[test]
fn faults_and_kills_name_their_source() {
    let (_, v) = common::verdicts(REC);
    for (c, says) in [
        (
            "segv_thread",
            "killed by SIGSEGV from the kernel (a fault at the process's own access: SEGV_MAPERR, an address with \
nothing mapped there)",
        ),
        (
            "bus_thread",
            "killed by SIGBUS from the kernel (a fault at the process's own access: BUS_ADRERR, an address with \
nothing behind it, such as past the end of a mapped file)",
        ),
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Killed, "{c}: {}", x.text);
        assert!(x.text.starts_with(says), "{c}: {}", x.text);
        let (id, e) = only(x);
        assert_eq!(id, DiagId::KilledBySignal, "{c}");
        assert!(e.ends_with("a fault, not a kill"), "{c}: {e}");
        assert!(
            x.diagnoses[0].hint.starts_with("the process faulted"),
            "{c}"
        );
    }
    let x = case(&v, "pdeath");
    assert_eq!(x.result, Outcome::Killed, "{}", x.text);
    assert!(
        x.text.starts_with("killed by SIGKILL from python3["),
        "{}",
        x.text
    );
    let x = case(&v, "term_ignored_kill");
    assert_eq!(x.result, Outcome::Killed, "{}", x.text);
    assert!(
        x.text.starts_with("killed by SIGKILL from timeout["),
        "{}",
        x.text
    );
}
