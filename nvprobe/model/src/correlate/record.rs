//! The records the correlator adds to the stream: below the handlers that
//! make them and the correlator that hands them on.

use serde::Serialize;

use super::{
    breakdown::Breakdown, outcome::CuInit, stages::StageHit, state::ContextStep, table::Diagnosis,
};

/// Records the correlator adds to the stream.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Stage {
        pid: u32,
        comm: String,
        #[serde(flatten)]
        hit: StageHit,
    },
    Cuinit(Box<CuInit>),
    Signal(Box<SignalReport>),
    Breakdown(Box<Breakdown>),
    FirstContext(Box<FirstContext>),
    /// An NVIDIA line of the kernel log.
    KernelLog(Box<super::faults::types::KernelLog>),
    /// A run-time fault's verdict.
    Fault(Box<super::faults::types::Fault>),
}

crate::decode::named_enum!(
    /// What became of the call a signal landed in.
    SigOutcome {
        /// The call returned EINTR to the caller.
        Eintr => "eintr",
        /// It returned EINTR and the caller made it again.
        EintrRetried => "eintr_retried",
        /// The kernel restarted it.
        Restarted => "restarted",
        /// It completed (successfully or with another result).
        Completed => "completed",
        /// The process died in it.
        DiedInCall => "died_in_call",
        /// Tracing stopped before the next call.
        Interrupted => "interrupted",
        /// It landed between driver calls.
        InUserSpace => "in_user_space",
    }
);

/// A first context made after the start-up's verdict, which had waited
/// for one in vain ("no context made" within `CONTEXT_WAIT_NS`): what
/// the start-up came to after all. A program that asks whether CUDA is
/// there (torch.cuda.is_available()) and loads its model before its
/// first tensor reaches the GPU makes its context this late.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema, PartialEq)]
pub struct FirstContext {
    pub pid: u32,
    pub comm: String,
    /// The context call and its CUresult.
    pub context: ContextStep,
    /// It made a context.
    pub ok: bool,
    /// One line: "cuCtxCreate_v2 (device 0) returned … at 15.2 s, after
    /// the verdict", with what explains a failure.
    pub text: String,
    /// The text view's first line: `text` without what the diagnoses
    /// below say.
    #[serde(skip)]
    pub headline: Option<String>,
    /// Why it failed (the diagnoses a failed first context gets in a
    /// verdict); empty when it worked.
    #[serde(default)]
    pub diagnoses: Vec<Diagnosis>,
}

/// A signal that reached a process inside an NVIDIA call or inside cuInit,
/// with what became of the call.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
pub struct SignalReport {
    pub pid: u32,
    pub comm: String,
    pub sig: i32,
    pub signal: String,
    pub sender: String,
    pub sender_pid: Option<u32>,
    /// Milliseconds since the process's first NVIDIA call.
    pub at_ms: f64,
    /// The milestone reached last when it arrived ("uvm_initialized").
    pub stage: Option<String>,
    /// The NVIDIA call running when it arrived, or "cuInit" when only
    /// cuInit's uprobe says the process was starting up.
    pub in_flight: String,
    /// eintr, eintr_retried, restarted, completed, died_in_call,
    /// interrupted, in_user_space.
    pub outcome: SigOutcome,
    pub text: String,
}
