//! Where a slow or failing NVIDIA call spent its time inside the driver
//! (driver layer): the spans of the hooked functions inside the call.

use serde::Serialize;

/// Where a slow or failing NVIDIA call spent its time inside the driver
/// (driver layer).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
pub struct Breakdown {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub call: String,
    pub duration_ns: u64,
    /// Innermost first (the order they returned).
    pub spans: Vec<Span>,
    pub text: String,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
pub struct Span {
    pub function: &'static str,
    pub duration_ns: u64,
    pub result: String,
    #[serde(skip)]
    pub ok: bool,
    #[serde(skip)]
    pub start: u64,
    #[serde(skip)]
    pub end: u64,
}

/// Calls at least this slow get a breakdown even when they succeed.
pub(crate) const BREAKDOWN_SLOW_NS: u64 = 10_000_000;

fn dur_text(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.2} s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} µs", ns as f64 / 1e3)
    }
}

impl Breakdown {
    /// "UVM_REGISTER_GPU 301.3 ms: 300.2 ms in uvm_pmm_devmem_init, which
    /// returned NV_ERR_NO_MEMORY (in uvm_gpu_retain_by_uuid <
    /// uvm_va_space_register_gpu < …)".
    pub(crate) fn new(
        pid: u32,
        tid: u32,
        comm: String,
        call: String,
        duration_ns: u64,
        failed: bool,
        spans: Vec<Span>,
    ) -> Self {
        // The focus: the innermost failing function of a failed call, else
        // the innermost one that took at least half of the call.
        let focus = spans
            .iter()
            .position(|s| failed && !s.ok)
            .or_else(|| spans.iter().position(|s| s.duration_ns * 2 >= duration_ns))
            .unwrap_or(spans.len() - 1);
        let f = &spans[focus];
        let outer: Vec<&str> = spans[focus + 1..]
            .iter()
            .filter(|o| o.start <= f.start && f.end <= o.end)
            .map(|o| o.function)
            .collect();
        let text = format!(
            "{call} {}: {} in {}, which returned {}{}",
            dur_text(duration_ns),
            dur_text(f.duration_ns),
            f.function,
            f.result,
            if outer.is_empty() {
                String::new()
            } else {
                format!(" (in {})", outer.join(" < "))
            }
        );
        Self {
            pid,
            tid,
            comm,
            call,
            duration_ns,
            spans,
            text,
        }
    }
}
