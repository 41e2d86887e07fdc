//! What a verdict on one process's start-up holds: how it ended, the
//! kind of process, and the record itself (the payload; `verdict.rs`
//! makes it).

use serde::Serialize;

use super::{
    stages::StageHit,
    state::{FailedCall, SignalInfo},
    table::Diagnosis,
};

crate::decode::named_enum!(
    /// How a start-up ended.
    Outcome {
        Ok => "ok",
        Failed => "failed",
        Killed => "killed",
        Exited => "exited",
        Incomplete => "incomplete",
    }
);

crate::decode::named_enum!(
    /// What kind of process a verdict is about.
    Class {
        /// Called cuInit or another CUDA driver API, or set up UVM.
        Cuda => "cuda",
        /// A driver client that never starts CUDA: nvidia-smi, DCGM,
        /// persistenced, device plugins.
        Nvml => "nvml",
        /// Only looked at NVIDIA paths.
        Probe => "probe",
        /// A program a CUDA process ran, e.g. nvidia-modprobe.
        Helper => "helper",
    }
);

/// Recordings made before verdicts had a class judged CUDA start-ups only.
impl Default for Class {
    fn default() -> Self {
        Self::Cuda
    }
}

/// The verdict on one process's CUDA start-up.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema, PartialEq)]
pub struct CuInit {
    pub pid: u32,
    pub comm: String,
    pub result: Outcome,
    /// How the verdict was reached.
    #[serde(deserialize_with = "crate::decode::intern::static_str")]
    pub source: crate::decode::Name,
    pub text: String,
    /// The text without the diagnosis evidence it cites at its end (None:
    /// it cites none): what the text view's first line says, the
    /// diagnosis below it saying the evidence once.
    #[serde(skip)]
    pub headline: Option<String>,
    /// What the text view says under its first line when no diagnosis
    /// says it: the driver call that explains the failure, who stopped the
    /// process.
    #[serde(skip)]
    pub detail: Vec<String>,
    /// The process was seen calling cuInit (its entry or its return), and
    /// the outcome is cuInit's (not a failure after cuInit returned
    /// CUDA_SUCCESS): the text view says "cuInit", else "CUDA start-up".
    #[serde(skip)]
    pub cuinit_seen: bool,
    pub total_ms: f64,
    #[serde(default)]
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
    /// After a successful cuInit: the first context made, or the device
    /// lookup or context call that failed before one was (the start-up
    /// ends there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<super::state::ContextStep>,
    #[serde(default)]
    pub diagnoses: Vec<Diagnosis>,
    /// cuda (called cuInit or another CUDA driver API, or set up UVM),
    /// nvml (a driver client that never starts CUDA: nvidia-smi, DCGM,
    /// persistenced, device plugins), probe (only looked at NVIDIA paths),
    /// helper (a program a CUDA process ran, e.g. nvidia-modprobe).
    #[serde(default)]
    pub class: Class,
    /// Who the process is (from /proc while it lived).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<crate::attribution::ProcessInfo>,
    /// Each GPU's progress: opened, registered with UVM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<super::state::GpuProgress>,
    /// A start-up that did not end well: the system calls that failed in
    /// it (every call, whatever its file; the kernel side's `call_failed`
    /// records), the newest first, at most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_syscalls: Vec<super::state::FailedSyscall>,
}
