//! What the pipeline is given: how it renders and judges.

use nvprobe_model::render::Level;

use super::observe::Observers;

/// How the pipeline renders and judges.
pub struct PipeOpts {
    /// Decode/render threads.
    pub workers: usize,
    /// Only the per-process verdicts and the summary.
    pub summary_only: bool,
    /// What is shipped (`--events`); everything is still counted.
    pub level: Level,
    /// What watches the typed stream beside the writer (metrics, the
    /// Perfetto timeline, the `top` view): each sees every event and
    /// record, whatever `--events` writes.
    pub observers: Observers,
    /// Make UVM diagnoses specific to this host's nvidia_uvm (live runs
    /// only: a recording's host is not this one).
    pub host_facts: bool,
    /// Text: every followed process's fork, exec, exit and signal lines,
    /// not only those of processes that made an NVIDIA call
    /// ([`lifelines`]).
    pub all_processes: bool,
}
