//! The verdict on one process's start-up: its result, the text a person
//! reads, what it rests on, and the diagnoses the rules found.

use serde::Serialize;

use super::{
    rules::{self, Diagnosis},
    signals::SignalInfo,
    stages::StageHit,
    tracker::{ProcInit, ms},
};

#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
pub struct FailedCall {
    pub call: String,
    /// The NV_STATUS name or errno.
    pub result: String,
    pub at_ms: f64,
    pub duration_ms: f64,
}

/// The verdict on one process's CUDA start-up.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
pub struct CuInit {
    pub pid: u32,
    pub comm: String,
    /// ok, failed, killed, exited, incomplete.
    pub result: &'static str,
    /// How the verdict was reached.
    pub source: &'static str,
    pub text: String,
    pub total_ms: f64,
    pub stages: Vec<StageHit>,
    pub calls: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_call: Option<FailedCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<SignalInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    /// What cuInit returned, when its uprobe saw the return.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curesult: Option<String>,
    pub diagnoses: Vec<Diagnosis>,
}

pub(crate) fn verdict(pid: u32, st: &ProcInit, exit: Option<(String, i32)>) -> CuInit {
    let last_stage = st
        .stages
        .iter()
        .max_by(|a, b| a.stage.cmp(b.stage))
        .map(|s| format!("{} {}", s.stage, s.name));
    let fatal_sig = exit.as_ref().map_or(0, |e| e.1);
    // The signal that explains the end: the last one of the fatal number,
    // else the last one that landed during a call.
    let signal = st
        .signals
        .iter()
        .rev()
        .find(|s| fatal_sig != 0 && s.sig == fatal_sig)
        .or_else(|| st.signals.iter().rev().find(|s| s.during.is_some()))
        .cloned();
    let diagnoses = rules::diagnose(&rules::Facts {
        st,
        fatal_sig,
        exited_ok: exit.as_ref().is_some_and(|e| e.1 == 0),
        signal: signal.as_ref(),
    });
    let (result, text, source, curesult) = if let Some((code, name)) = st.curesult {
        let r = format!("{} ({code})", name.unwrap_or("CUresult"));
        let (result, text) = if code == 0 {
            (
                "ok",
                format!(
                    "cuInit returned {r} after {}",
                    last_stage.as_deref().unwrap_or("no driver call")
                ),
            )
        } else {
            (
                "failed",
                match &st.last_failure {
                    Some(f) => format!(
                        "cuInit returned {r}; the driver call that explains it: {} returned {} (after {})",
                        f.call,
                        f.result,
                        last_stage.as_deref().unwrap_or("no stage")
                    ),
                    None => format!(
                        "cuInit returned {r} after {}{}",
                        last_stage.as_deref().unwrap_or("no driver call"),
                        diagnoses
                            .first()
                            .map_or(String::new(), |d| format!(": {}", d.evidence))
                    ),
                },
            )
        };
        (
            result,
            text,
            "libcuda uprobe (cuInit's return) and driver calls",
            Some(r),
        )
    } else {
        let (result, text) = driver_only(
            st,
            exit.as_ref(),
            signal.as_ref(),
            last_stage.as_deref(),
            &diagnoses,
        );
        let source = if st.cuinit_entered {
            "libcuda uprobe (cuInit entered and never returned) and driver calls"
        } else {
            "driver calls alone (no libcuda uprobe)"
        };
        (result, text, source, None)
    };
    CuInit {
        pid,
        comm: st.comm.clone(),
        result,
        source,
        text,
        total_ms: ms(st.last_ns, st.first_ns),
        stages: st.stages.clone(),
        calls: st.calls,
        failed_call: st.last_failure.clone(),
        signal,
        exit: exit.map(|e| e.0),
        curesult,
        diagnoses,
    }
}

/// The verdict's result and text from the driver calls and the process's
/// end, when cuInit's own return was not seen.
fn driver_only(
    st: &ProcInit,
    exit: Option<&(String, i32)>,
    signal: Option<&SignalInfo>,
    last_stage: Option<&str>,
    diagnoses: &[Diagnosis],
) -> (&'static str, String) {
    let reached_init = st.reached[7];
    match (exit, reached_init) {
        (_, true) => (
            "ok",
            "reached UVM GPU registration (S7): the driver side of cuInit completed".to_owned(),
        ),
        (Some((e, sig)), false) if *sig != 0 => (
            "killed",
            match signal {
                Some(s) => format!(
                    "killed by {} from {} after {:.1} ms{}",
                    s.name,
                    s.sender,
                    s.at_ms,
                    match &s.during {
                        Some(c) => format!(" in {c}; the call was still running"),
                        None => format!(", at {}", last_stage.unwrap_or("no stage yet")),
                    }
                ),
                None => format!("{e} at {}", last_stage.unwrap_or("no stage yet")),
            },
        ),
        _ if st.last_failure.is_some() || !diagnoses.is_empty() => (
            "failed",
            match &st.last_failure {
                Some(f) => format!(
                    "{} returned {} after {}",
                    f.call,
                    f.result,
                    last_stage.unwrap_or("no stage")
                ),
                None => format!(
                    "stopped after {}: {}",
                    last_stage.unwrap_or("no stage"),
                    diagnoses[0].evidence
                ),
            },
        ),
        (Some((e, _)), false) if !st.reached[4] && !st.cuinit_entered => (
            "exited",
            format!(
                "{e} after {} without touching UVM or cuInit: a driver client such as NVML, not a CUDA start-up",
                last_stage.unwrap_or("no stage")
            ),
        ),
        (Some((e, _)), false) => (
            "exited",
            format!(
                "{e} after {}, before any GPU was registered with UVM",
                last_stage.unwrap_or("no stage")
            ),
        ),
        (None, false) => (
            "incomplete",
            format!(
                "still at {} when tracing stopped",
                last_stage.unwrap_or("no stage")
            ),
        ),
    }
}
