//! Which GPUs the process was let see: CUDA_VISIBLE_DEVICES (a GPU named
//! twice, a list that names none), CUDA_DEVICE_ORDER, and a missing
//! device when neither hid it.

use super::{
    state::ProcInit,
    table::{DiagId, Diagnosis, Facts, INFERRED, diag, diag_after, unseen_stop},
};
use crate::decode::node_kind;

const HINT_VISIBLE_REPEAT: &str = "CUDA refuses a CUDA_VISIBLE_DEVICES that names one GPU twice (by index, by UUID \
or both) with CUDA_ERROR_INVALID_DEVICE: list each GPU once (a launcher or scheduler that builds the list for each rank \
can repeat one; nvidia-smi -L gives the indices and UUIDs)";

/// CUDA_VISIBLE_DEVICES names a GPU twice: cuInit returns
/// CUDA_ERROR_INVALID_DEVICE (101), or, its return not seen, the
/// start-up stops before any GPU is registered with UVM.
pub(super) fn visible_repeat(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let st = f.st;
    if device_order_refused(st, out) {
        return;
    }
    let Some(why) = st
        .info
        .as_ref()
        .and_then(|i| i.env.get("CUDA_VISIBLE_DEVICES"))
        .and_then(|v| crate::attribution::visible_repeat(v, &st.host_gpus))
    else {
        return;
    };
    let d = if matches!(st.curesult, Some((101, _))) {
        diag_after(
            DiagId::InvalidDevice,
            "cuInit returned CUDA_ERROR_INVALID_DEVICE (101)",
            "; ",
            &format!("{why}, which CUDA refuses"),
        )
    } else if let Some(stop) = unseen_stop(f).filter(|_| st.calls > 0 && !st.host_gpus.is_empty()) {
        // Inferred only where the host's GPUs say the list's indices are
        // real ones (an index past them stops CUDA's reading first).
        diag_after(
            DiagId::InvalidDevice,
            &stop,
            "; ",
            &format!("{why}, which CUDA refuses{INFERRED}"),
        )
    } else {
        return;
    };
    out.push(Diagnosis {
        hint: HINT_VISIBLE_REPEAT,
        ..d
    });
}

/// cuInit 101 with a CUDA_DEVICE_ORDER CUDA does not know (it takes
/// FASTEST_FIRST, the default, and PCI_BUS_ID; on the H200, 580.159.04,
/// "junk" gave 101 after the GPU was opened). True when said.
fn device_order_refused(st: &ProcInit, out: &mut Vec<Diagnosis>) -> bool {
    let Some(order) = st
        .info
        .as_ref()
        .and_then(|i| i.env.get("CUDA_DEVICE_ORDER"))
        .filter(|o| !matches!(o.as_str(), "FASTEST_FIRST" | "PCI_BUS_ID"))
    else {
        return false;
    };
    if !matches!(st.curesult, Some((101, _))) {
        return false;
    }
    out.push(Diagnosis {
        hint: HINT_DEVICE_ORDER,
        ..diag_after(
            DiagId::InvalidDevice,
            "cuInit returned CUDA_ERROR_INVALID_DEVICE (101)",
            "; ",
            &format!(
                "CUDA_DEVICE_ORDER={order} is not an order CUDA knows (FASTEST_FIRST or PCI_BUS_ID), which it refuses"
            ),
        )
    });
    true
}

const HINT_DEVICE_ORDER: &str = "CUDA_DEVICE_ORDER takes FASTEST_FIRST (the default) or PCI_BUS_ID (the order \
nvidia-smi lists): set one of them, or unset it";

/// Whether a diagnosis already made explains a missing device: a GPU node
/// refused by a mechanism already named (the visibility list is not what
/// hid it), escapes refused before or by a security module, a descriptor
/// taken from the start-up.
fn explained(out: &[Diagnosis]) -> bool {
    out.iter().any(|d| {
        let refused_node = matches!(
            d.id,
            DiagId::FileLimit
                | DiagId::NotPermitted
                | DiagId::NodePermission
                | DiagId::NodeStale
                | DiagId::NodeWrongDevice
                | DiagId::NodeNodev
                | DiagId::SecurityModuleDenied
                | DiagId::NodeMissing
                | DiagId::NodeCreateFailed
        ) && d.about.path.as_deref().and_then(node_kind).is_some();
        refused_node
            || matches!(
                d.id,
                DiagId::CallsBlocked | DiagId::IoctlRefused | DiagId::DescriptorClosed
            )
    })
}

pub(super) fn no_visible_devices(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let st = f.st;
    // A repeat is told by its own check.
    if out.iter().any(|d| d.id == DiagId::InvalidDevice) {
        return;
    }
    // What the process's CUDA_VISIBLE_DEVICES selects (None: unset or
    // unknown; Err: none of this host's GPUs).
    let selects = st
        .info
        .as_ref()
        .and_then(|i| i.env.get("CUDA_VISIBLE_DEVICES"))
        .map(|v| (v, crate::attribution::resolve_visible(v, &st.host_gpus)));
    let list_hides = matches!(selects, Some((_, Err(_))));
    // cuInit's return not seen: the driver calls stopped before a GPU was
    // registered, and the variable hides every GPU.
    let inferred = unseen_stop(f).filter(|_| st.calls > 0 && matches!(selects, Some((_, Err(_)))));
    let no_device = matches!(st.curesult, Some((100, _)))
        || inferred.is_some()
        || (st.curesult.is_none()
            && st.reached[4]
            && !st.reached[3]
            && !st.reached[5]
            && f.exited_ok);
    if no_device && !explained(out) {
        let visible = selects.map_or_else(String::new, |(v, m)| match m {
            Err(why) => why,
            Ok(m) => format!("CUDA_VISIBLE_DEVICES={v} selects /dev/nvidia{m:?}"),
        });
        let sep = if visible.is_empty() { "" } else { "; " };
        if let Some(stop) = inferred {
            return out.push(diag_after(
                DiagId::NoVisibleDevices,
                &stop,
                sep,
                &format!("{visible}{INFERRED}"),
            ));
        }
        out.push(if st.curesult.is_some() {
            let mut d = diag_after(
                DiagId::NoVisibleDevices,
                "cuInit returned CUDA_ERROR_NO_DEVICE (100)",
                sep,
                &visible,
            );
            // No list was set and a GPU node was opened: neither the
            // variable nor the container's nodes hid it.
            // (Unknown where the identity was not read whole.)
            let set = st
                .info
                .as_ref()
                .is_none_or(|i| {
                    i.note.is_some() || i.env_cut || i.env.contains_key("CUDA_VISIBLE_DEVICES")
                });
            if let Some(g) = st.gpus.iter().find(|g| g.opened_ms.is_some())
                && !set
            {
                d.evidence.push_str(&format!(
                    "; its environment (/proc/PID/environ) held no CUDA_VISIBLE_DEVICES, and /dev/nvidia{} was \
opened at {:.1} ms: what came after that open decided it",
                    g.minor.map_or_else(|| "N".to_owned(), |m| m.to_string()),
                    g.opened_ms.unwrap_or_default()
                ));
                d.hint = HINT_GPU_OPENED_NONE_SEEN;
            } else if st.gpus.iter().any(|g| g.opened_ms.is_some()) && list_hides {
                // The list matched no GPU, and the GPU's node was there
                // and opened: the container passed it in.
                d.hint = HINT_LIST_MATCHES_NONE;
            }
            d
        } else {
            diag(
                DiagId::NoVisibleDevices,
                format!(
                    "UVM was initialised but no GPU was attached or opened before the process ended{sep}{visible}"
                ),
            )
        });
    }
}

/// No device, a list that names none of the host's GPUs, and a GPU node
/// opened (so the node was passed in).
const HINT_LIST_MATCHES_NONE: &str = "the GPU's node was passed in and opened, and CUDA_VISIBLE_DEVICES names none of \
this host's GPUs, so the list hid them: name them as nvidia-smi -L lists them, by index (0, 1, …) or by UUID with its \
GPU- prefix as printed (GPU-…; MIG-… for a MIG instance), or unset it to see them all";

/// No device, no visibility list, and a GPU node opened.
const HINT_GPU_OPENED_NONE_SEEN: &str = "the GPU's node was passed in and opened, and the environment the process \
started with set no CUDA_VISIBLE_DEVICES: a value the program sets itself before loading CUDA (os.environ in Python \
before importing torch) is not seen there, so check the program's own; otherwise libcuda decided from what came after \
the open: the GPU's state (nvidia-smi -q: a GPU in error, or one the driver will not use), the kernel log (dmesg | grep \
NVRM), or a preloaded library answering calls in the driver's place (see the warnings below)";
