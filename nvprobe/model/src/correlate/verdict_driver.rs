//! The verdict of a start-up whose cuInit's return was not seen: from
//! its driver calls and how the process ended (killed after the driver
//! side completed, ended by itself with a call in flight, exited, still
//! running).

use super::outcome::Outcome;
use super::{
    facts::{CallRef, Exit},
    state::{CONTEXT_WAIT_NS, ProcInit, SignalInfo},
    table::Diagnosis,
};

/// Whether a signal that ended a process whose driver side of cuInit
/// completed (S7) came in its start-up: no context made (S8), and within
/// the wait for one after S7 (a process killed later, hours into its
/// work with no uprobes to show its contexts, is not judged by it).
fn killed_in_start_up(st: &ProcInit, signal: Option<&SignalInfo>) -> bool {
    let s7 = st.stages.iter().find(|h| h.stage == "S7").map(|h| h.at_ms);
    let wait_ms = CONTEXT_WAIT_NS as f64 / 1e6;
    !st.reached[8] && matches!((signal, s7), (Some(sig), Some(t)) if sig.at_ms - t <= wait_ms)
}

/// A process whose driver side of cuInit completed (S7) and that was
/// killed before a first context: in cuInit, or after it.
fn killed_after_s7(st: &ProcInit, e: Exit, signal: Option<&SignalInfo>) -> String {
    let by = signal.map_or_else(
        || e.text().replacen("killed by ", "", 1),
        |s| format!("{} from {} after {:.1} ms", s.name, s.sender, s.at_ms),
    );
    let when = if st.cuinit_entered {
        "while cuInit was still running (it never returned)"
    } else {
        "before a first context was made"
    };
    format!("reached UVM GPU registration (S7), then killed by {by} {when}")
}

/// The first line of a start-up whose process ended itself with a driver
/// call in flight ([`ProcInit::take_cut_short`]; the call follows it).
fn ended_itself(st: &ProcInit, e: Exit) -> String {
    let how = match e {
        Exit::Exec => "another of its threads exec'd a new program".to_owned(),
        e => format!("{} (another of its threads ended it)", e.text()),
    };
    let when = if st.cuinit_entered {
        "while cuInit was still running (it never returned)"
    } else {
        "in the middle of its start-up"
    };
    format!("{how} {when}")
}

/// What follows the first line of a verdict made from the driver calls:
/// the call the process's own end cut short, or, for a start-up that
/// stopped with no failed call and no kill before GPU registration, its
/// first diagnosis.
fn driver_cause(
    st: &ProcInit,
    exit: Option<Exit>,
    diagnoses: &[Diagnosis],
    named: &dyn Fn(&CallRef) -> String,
) -> Option<String> {
    let reached_init = st.reached[7];
    match st.cut {
        // The call its own end cut short, after the text's first line.
        Some(c) if exit.is_some_and(|e| e.signal() == 0) => Some(format!(
            "the kernel's SIGKILL to the thread in {} cut it short (it returned {})",
            named(&c.call),
            c.result
        )),
        Some(_) => None,
        None => {
            (!reached_init && exit.is_none_or(|e| e.signal() == 0) && st.last_failure.is_none())
                .then(|| diagnoses.first().map(|d| d.evidence.clone()))
                .flatten()
        }
    }
}

/// The verdict's result and text from the driver calls and the process's
/// end, when cuInit's own return was not seen.
pub(super) fn driver_only(
    st: &ProcInit,
    (exit, signal, last_stage): (Option<Exit>, Option<&SignalInfo>, Option<&str>),
    diagnoses: &[Diagnosis],
    named: &dyn Fn(&CallRef) -> String,
) -> (Outcome, String, Option<String>) {
    let reached_init = st.reached[7];
    // Stopped after a stage with no failed call: the first diagnosis is
    // the cause, said after the text.
    let cause = driver_cause(st, exit, diagnoses, named);
    let (outcome, text) = match (exit, reached_init) {
        // It ended itself with a driver call in flight (another thread's
        // exit or exec): that call's answer is the end's.
        (Some(e), _) if e.signal() == 0 && st.cut.is_some() => {
            (Outcome::Exited, ended_itself(st, e))
        }
        // Killed before a first context: not a start-up that ended well,
        // however far its driver side got.
        (Some(e), true) if e.signal() != 0 && killed_in_start_up(st, signal) => {
            (Outcome::Killed, killed_after_s7(st, e, signal))
        }
        (_, true) => (
            Outcome::Ok,
            "reached UVM GPU registration (S7): the driver side of cuInit completed".to_owned(),
        ),
        (Some(e), false) if e.signal() != 0 => (
            Outcome::Killed,
            match signal {
                Some(s) => format!(
                    "killed by {} from {} after {:.1} ms{}",
                    s.name,
                    s.sender,
                    s.at_ms,
                    match s
                        .during_call
                        .map(|c| named(&c))
                        .or_else(|| s.during.clone())
                    {
                        Some(c) => format!(" in {c}; the call was still running"),
                        None => format!(", at {}", last_stage.unwrap_or("no stage yet")),
                    }
                ),
                None => format!("{} at {}", e.text(), last_stage.unwrap_or("no stage yet")),
            },
        ),
        _ if st.last_failure.is_some() || !diagnoses.is_empty() => (
            Outcome::Failed,
            match &st.last_failure {
                Some(f) => format!(
                    "{} returned {} after {}",
                    named(&f.call),
                    f.result,
                    last_stage.unwrap_or("no stage")
                ),
                None => match last_stage {
                    Some(s) => format!("stopped after {s}"),
                    None => "stopped before any driver call".to_owned(),
                },
            },
        ),
        (Some(e), false) if st.calls == 0 && st.cuda_calls == 0 && !st.cuinit_entered => (
            Outcome::Exited,
            match st.lib_loaded() {
                Some(p) => format!("loaded {p} and {e} without a CUDA call or a driver call"),
                None => format!("{e} without a CUDA call or a driver call"),
            },
        ),
        (Some(e), false) if !st.reached[4] && !st.cuinit_entered => (
            Outcome::Exited,
            match st.lib_loaded() {
                // Its libcuda was loaded: the start-up's calls were not
                // seen (a copy hooked after its cuInit), not absent.
                Some(p) => format!(
                    "{e} after {}, having loaded {p}, before any UVM call; its cuInit was not seen (a libcuda copy \
hooked after its start-up)",
                    last_stage.unwrap_or("no stage")
                ),
                None => format!(
                    "{e} after {} without touching UVM or cuInit: a driver client such as NVML, not a CUDA start-up",
                    last_stage.unwrap_or("no stage")
                ),
            },
        ),
        (Some(e), false) => (
            Outcome::Exited,
            format!(
                "{e} after {}, before any GPU was registered with UVM",
                last_stage.unwrap_or("no stage")
            ),
        ),
        (None, false) => (
            Outcome::Incomplete,
            format!(
                "still at {} when tracing stopped",
                last_stage.unwrap_or("no stage")
            ),
        ),
    };
    (outcome, text, cause)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::correlate::stages::StageHit;

    /// A kill judges the start-up only while it could still be one: no
    /// context made, and within the wait for one after S7.
    #[test]
    fn a_kill_long_after_s7_or_after_a_context_is_not_the_start_ups() {
        let mut st = ProcInit::default();
        st.reached[7] = true;
        st.stages.push(StageHit {
            stage: "S7",
            name: "uvm_gpu_registered",
            at_ms: 100.0,
            via: String::new(),
        });
        let at = |ms: f64| SignalInfo {
            at_ns: 0,
            sig: libc::SIGTERM,
            name: "SIGTERM".into(),
            sender: "timeout[5]".into(),
            sender_pid: Some(5),
            at_ms: ms,
            during: None,
            during_call: None,
            source: super::super::state::SigSource::Task,
        };
        assert!(killed_in_start_up(&st, Some(&at(700.0))));
        // An hour into its work: not its start-up's.
        assert!(!killed_in_start_up(&st, Some(&at(3_600_000.0))));
        // No signal seen: not judged by one.
        assert!(!killed_in_start_up(&st, None));
        // A context was made: past its start-up.
        st.reached[8] = true;
        assert!(!killed_in_start_up(&st, Some(&at(700.0))));
    }
}
