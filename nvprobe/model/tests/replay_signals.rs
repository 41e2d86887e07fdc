//! Tier 1: real driver traffic recorded on the GPU machine (NVIDIA H200,
//! open kernel module 580.159.04, `nvprobe watch --json --raw`), replayed
//! through today's decoder. The raw kernel records are the truth; the
//! assertions are on what the decoder makes of them.
//!
//! These replays need the model crate alone (no BPF, no binary, no root);
//! the tier-1 tests that run the nvprobe binary (decode, doctor --root)
//! are in tests/tests/.
//!
//! This file: recorded signals (what they landed in, what became of the
//! call) and a recorded stop, with the stall reports made live.

mod common;

use nvprobe_model::correlate::{DiagId, Outcome};
use std::collections::BTreeMap;

use common::{replay, signal_reports, verdicts};
use serde_json::Value;

/// Real signals during cuInit (H200, 580.159.04): timeout's SIGTERM and an
/// alarm(2) SIGALRM both landed in UVM_REGISTER_GPU, which did not return
/// EINTR but NV_ERR_BUSY_RETRY. Each is reported once (timeout signals the
/// child and then its group), with the stage and the call.
#[test]
fn real_signals_name_the_call_they_landed_in() {
    let (records, _) = verdicts("h200-580.159.04-verdicts.ndjson");
    let signals: Vec<&nvprobe_model::correlate::SignalReport> = records
        .iter()
        .filter_map(|r| match r {
            nvprobe_model::correlate::Record::Signal(s) => Some(&**s),
            _ => None,
        })
        .collect();
    let term: Vec<_> = signals.iter().filter(|s| s.signal == "SIGTERM").collect();
    assert_eq!(term.len(), 1, "{signals:#?}");
    let t = term[0];
    assert_eq!(t.sender, "timeout[439]");
    assert_eq!(t.sender_pid, Some(439));
    assert_eq!(t.in_flight, "UVM_REGISTER_GPU");
    assert_eq!(t.stage.as_deref(), Some("device_objects"));
    assert_eq!(t.outcome.as_str(), "completed");
    assert_eq!(
        t.text,
        "SIGTERM from timeout[439] at 69.7 ms in UVM_REGISTER_GPU (after device_objects): the call returned NV_ERR_BUSY_RETRY, not EINTR"
    );
    let alrm = signals
        .iter()
        .find(|s| s.signal == "SIGALRM")
        .expect("the alarm's SIGALRM");
    assert_eq!(
        alrm.sender,
        "the kernel (a timer the process set: alarm, setitimer)"
    );
    assert_eq!(alrm.sender_pid, None);
    assert_eq!(alrm.in_flight, "UVM_REGISTER_GPU");
}

/// H200, 580.159.04, process layer on: `timeout -s TERM 0.15` and an itimer
/// kill cuInit; then two cuInits run while another process sends SIGUSR1
/// every millisecond, once to a handler with SA_RESTART and once without.
/// The real driver finishes every RM and UVM call it is in when a signal
/// comes (no EINTR, no ERESTARTSYS), so both cuInits succeed.
#[test]
fn real_handled_signals_leave_the_driver_calls_alone() {
    let r = replay("h200-580.159.04-signals.ndjson", None);
    // SA_RESTART as the kernel saw it at delivery, per process.
    let mut restart: BTreeMap<u64, std::collections::BTreeSet<bool>> = BTreeMap::new();
    for rec in &r.records {
        if rec["op"] == "signal_delivered" && rec["signal"] == "SIGUSR1" {
            restart
                .entry(rec["pid"].as_u64().expect("pid"))
                .or_default()
                .insert(rec["sa_restart"].as_bool().expect("sa_restart"));
        }
    }
    let flags: Vec<Vec<bool>> = restart
        .values()
        .map(|s| s.iter().copied().collect())
        .collect();
    assert_eq!(flags, [vec![true], vec![false]], "{restart:?}");

    let (records, v) = verdicts("h200-580.159.04-signals.ndjson");
    let sigs = signal_reports(&records);
    let usr1: Vec<_> = sigs.iter().filter(|s| s.signal == "SIGUSR1").collect();
    assert!(usr1.len() >= 10, "{usr1:#?}");
    assert!(
        usr1.iter().any(|s| s.outcome.as_str() == "completed")
            && usr1
                .iter()
                .all(|s| s.outcome.as_str() == "completed" || s.outcome.as_str() == "in_user_space"),
        "{usr1:#?}"
    );
    let landed = usr1
        .iter()
        .find(|s| s.outcome.as_str() == "completed")
        .expect("one in a call");
    assert!(
        landed.text.starts_with("SIGUSR1 from python3[")
            && landed.text.contains(" ms in ")
            && landed.text.contains(": the call "),
        "{}",
        landed.text
    );
    // timeout(1) follows its SIGTERM with a SIGCONT: not a report of its own.
    assert!(!sigs.iter().any(|s| s.signal == "SIGCONT"), "{sigs:#?}");
    assert_eq!(sigs.iter().filter(|s| s.signal == "SIGTERM").count(), 1);
    let results: Vec<&str> = v.iter().map(|x| x.result.as_str()).collect();
    assert_eq!(results, ["killed", "killed", "ok", "ok"], "{v:#?}");
    let term = &v[0];
    assert!(
        term.text.starts_with("killed by SIGTERM from timeout["),
        "{}",
        term.text
    );
    assert_eq!(term.diagnoses[0].id, DiagId::KilledBySignal);
    assert!(
        v[1].text.starts_with("killed by SIGALRM from the kernel"),
        "{}",
        v[1].text
    );
    for ok in &v[2..] {
        assert_eq!(ok.curesult.as_deref(), Some("CUDA_SUCCESS (0)"));
        assert!(ok.diagnoses.is_empty(), "{:?}", ok.diagnoses);
        assert!(ok.signal.is_some(), "the verdict keeps the signal it saw");
    }
}

/// H200: cuInit stopped by SIGSTOP from another process 0.12 s in, for
/// 3 s, traced with `--stall-after 1`. The stall reports recorded live say
/// the process is stopped, by whom, at which stage, with its kernel stack;
/// the verdict still ends in success, 3 s later.
#[test]
fn real_stopped_cuinit_is_a_stop_not_a_hang() {
    let r = replay("h200-580.159.04-stall-sigstop.ndjson", None);
    let stalls: Vec<&Value> = r.records.iter().filter(|x| x["type"] == "stall").collect();
    assert_eq!(stalls.len(), 2, "1 s, then 2 s (back-off)");
    let s = stalls[0];
    assert_eq!(s["call"], "cuInit");
    assert_eq!(s["state"], "T");
    assert_eq!(s["wchan"], "do_signal_stop");
    // Recorded live, by a build that put the id before the name.
    assert_eq!(s["stage"], "S7 uvm_gpu_registered");
    let by = s["stopped_by"].as_str().expect("stopped_by");
    assert!(by.starts_with("SIGSTOP from sh["), "{by}");
    assert!(
        s["text"].as_str().expect("text").ends_with(&format!(
            "the process is stopped (T) by {by}, not stuck in the driver"
        )),
        "{s}"
    );
    assert!(
        s["stack"][0]
            .as_str()
            .expect("stack")
            .starts_with("do_signal_stop+")
    );
    assert!(stalls[1]["elapsed_s"].as_f64() > stalls[0]["elapsed_s"].as_f64());

    let (records, v) = verdicts("h200-580.159.04-stall-sigstop.ndjson");
    let sigs = signal_reports(&records);
    let names: Vec<&str> = sigs.iter().map(|s| s.signal.as_str()).collect();
    assert_eq!(
        names,
        ["SIGSTOP", "SIGCONT"],
        "the SIGCONT after a stop is news"
    );
    assert_eq!(sigs[0].in_flight, "UVM_REGISTER_GPU");
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].result, Outcome::Ok);
    assert!(v[0].total_ms > 3000.0, "{}", v[0].total_ms);
    // The 3 s were not the driver's: the verdict says so (issue 37).
    assert!(
        v[0].text
            .ends_with("; stopped for 3.0 s of it (SIGSTOP from sh[601], SIGCONT from sh[601])"),
        "{}",
        v[0].text
    );
}
