//! The records the correlator adds to the stream: below the handlers that
//! make them and the correlator that hands them on.

use serde::Serialize;

use super::{Breakdown, ContextStep, CuInit, Diagnosis, SignalReport, StageHit};

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
    KernelLog(Box<super::faults::KernelLog>),
    /// A run-time fault's verdict.
    Fault(Box<super::faults::Fault>),
}

/// A first context made after the start-up's verdict, which had waited
/// for one in vain ("no context made" within `CONTEXT_WAIT_NS`): what
/// the start-up came to after all. A program that asks whether CUDA is
/// there (torch.cuda.is_available()) and loads its model before its
/// first tensor reaches the GPU makes its context this late.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
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
    /// Why it failed (the diagnoses a failed first context gets in a
    /// verdict); empty when it worked.
    pub diagnoses: Vec<Diagnosis>,
}
