//! The diagnoses of a start-up whose cuInit succeeded and whose first
//! device lookup or context failed: which device was asked for against
//! what was visible, and what the driver refused and who held the GPU.

use super::{
    state::{ContextStep, ProcInit},
    table::{DiagId, Diagnosis, diag},
};

/// CUresults a first context or device lookup fails with.
const OUT_OF_MEMORY: i64 = 2;
const DEVICES_UNAVAILABLE: i64 = 46;
const INVALID_DEVICE: i64 = 101;

/// When no other process held a GPU node at the failure, a shortage of
/// memory is not another process's doing.
const HINT_OOM_ALONE: &str = "a context needs device memory of its own (hundreds of MiB) and the GPU had none left, \
but no other process had a GPU node open when nvprobe looked: the memory went to this process's own contexts and \
allocations (one context per thread or per library, allocations before this context), or the GPU is partitioned \
(nvidia-smi -q: MIG mode, the instance's memory): make fewer contexts or allocate less";

pub(crate) fn diagnose(st: &ProcInit) -> Vec<Diagnosis> {
    let Some(c) = st.context.as_ref().filter(|c| c.code != 0) else {
        return Vec::new();
    };
    let step = step_text(c);
    // A driver call that refused the context explains it first.
    if st.after_init_failure.is_none()
        && let Some(d) = super::rules_fds::diagnose(st, &step, true)
    {
        return vec![d];
    }
    if st.after_init_failure.is_none()
        && let Some(d) = super::rules_startcalls::diagnose(st, true, &step)
    {
        // No driver call refused it: a thread or a mapping of its own did.
        return vec![d];
    }
    if st.after_init_failure.is_none()
        && let Some(d) = super::rules_fds::diagnose_after_recovery(st, Some(&step))
    {
        return vec![d];
    }
    let refused = st.after_init_failure.as_ref().map_or(String::new(), |f| {
        format!("; the driver refused {} with {}", f.call, f.result)
    });
    let d = match c.code {
        INVALID_DEVICE => diag(
            DiagId::InvalidDevice,
            format!("{step}{}{}", visible_text(st), visibility(st)),
        ),
        OUT_OF_MEMORY => {
            let (held, alone) = holders_text(st);
            let mut d = diag(DiagId::ContextOutOfMemory, format!("{step}{refused}{held}"));
            if alone {
                d.hint = HINT_OOM_ALONE;
            }
            d.about.holders = !alone && !held.is_empty();
            d
        }
        DEVICES_UNAVAILABLE => {
            let (held, alone) = holders_text(st);
            let mut d = diag(DiagId::DevicesUnavailable, format!("{step}{refused}{held}"));
            d.about.holders = !alone && !held.is_empty();
            d
        }
        _ => diag(DiagId::ContextFailed, format!("{step}{refused}")),
    };
    vec![d]
}

/// "cuDeviceGet (device 5) returned CUDA_ERROR_INVALID_DEVICE (101)".
fn step_text(c: &ContextStep) -> String {
    format!(
        "{}{} returned {}",
        c.call,
        c.device.map_or(String::new(), |d| format!(" (device {d})")),
        c.result
    )
}

/// How many devices cuDeviceGetCount said were visible.
fn visible_text(st: &ProcInit) -> String {
    match st.visible {
        Some(0) => "; cuDeviceGetCount said no device is visible".to_owned(),
        Some(1) => "; cuDeviceGetCount said 1 device is visible (ordinal 0)".to_owned(),
        Some(n) => format!(
            "; cuDeviceGetCount said {n} devices are visible (ordinals 0 to {})",
            n.saturating_sub(1)
        ),
        None => String::new(),
    }
}

/// What chose the visible devices: CUDA_VISIBLE_DEVICES, or every GPU
/// the host has.
fn visibility(st: &ProcInit) -> String {
    let host = st.host_gpus.len();
    let of_host = match host {
        0 => String::new(),
        1 => " (the host has 1 GPU)".to_owned(),
        n => format!(" (the host has {n} GPUs)"),
    };
    match st
        .info
        .as_ref()
        .and_then(|i| i.env.get("CUDA_VISIBLE_DEVICES"))
    {
        Some(v) => match crate::attribution::resolve_visible(v, &st.host_gpus) {
            Ok(m) => format!("; CUDA_VISIBLE_DEVICES={v} selects /dev/nvidia{m:?}{of_host}"),
            Err(why) => format!("; CUDA_VISIBLE_DEVICES={v}: {why}"),
        },
        None if st.info.is_some() => {
            format!(
                "; CUDA_VISIBLE_DEVICES is not set: every GPU the process can open is visible{of_host}"
            )
        }
        None => String::new(),
    }
}

/// Who held GPU nodes when nvprobe looked (at the failure), and whether
/// nobody else did.
fn holders_text(st: &ProcInit) -> (String, bool) {
    let Some(info) = st
        .info
        .as_ref()
        .filter(|i| i.read_at.as_deref() == Some("context_failed"))
    else {
        return (String::new(), false);
    };
    // The GPUs this process opened, when it is known; else every holder.
    let mine: Vec<u32> = st.gpus.iter().filter_map(|g| g.minor).collect();
    let relevant: Vec<&crate::attribution::GpuHolder> = info
        .gpu_holders
        .iter()
        .filter(|h| h.pid != info.pid)
        .filter(|h| mine.is_empty() || h.minors.iter().any(|m| mine.contains(m)))
        .collect();
    if relevant.is_empty() {
        let which = if mine.is_empty() {
            "a GPU node".to_owned()
        } else {
            nodes(&mine)
        };
        return (
            format!("; no other process had {which} open when nvprobe looked (at the failure)"),
            true,
        );
    }
    let list: Vec<String> = relevant
        .iter()
        .take(8)
        .map(|h| format!("pid {} ({}, {})", h.pid, h.comm, nodes(&h.minors)))
        .collect();
    let more = relevant.len().saturating_sub(list.len());
    (
        format!(
            "; held open by {}{} when nvprobe looked (at the failure)",
            list.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ),
        false,
    )
}

fn nodes(minors: &[u32]) -> String {
    let v: Vec<String> = minors.iter().map(|m| format!("/dev/nvidia{m}")).collect();
    v.join(" ")
}
