//! How a start-up's verdict names a call: a UVM_REGISTER_GPU with the
//! GPU it was for, the call a signal landed in.

use super::{
    facts::CallRef,
    state::{ProcInit, SignalInfo},
};
use crate::decode::{Call, uvm};

/// A call as a CUDA start-up's verdict names it: UVM_REGISTER_GPU with
/// the GPU it was for ("UVM_REGISTER_GPU for GPU 6 of 8 (GPU-…,
/// /dev/nvidia5)").
pub(super) fn call_named(c: &CallRef, st: &ProcInit) -> String {
    match register_gpu(st) {
        Some(g) if c.is(Call::Uvm(uvm::UVM_REGISTER_GPU)) => format!("{c} for {g}"),
        _ => c.text(),
    }
}

/// The call a signal landed in, named as [`call_named`] names it.
pub(super) fn during_named(s: &SignalInfo, st: &ProcInit) -> Option<String> {
    s.during_call
        .map(|c| call_named(&c, st))
        .or_else(|| s.during.clone())
}

/// The GPU a UVM_REGISTER_GPU was for: the one whose registration failed,
/// else one with a UUID never registered (the call still running); "GPU
/// k of n" only where the host's GPU list ties the UUID to a node (a
/// recording without that list gives the UUID alone).
fn register_gpu(st: &ProcInit) -> Option<String> {
    let g = st.gpus.iter().find(|g| g.register_failed).or_else(|| {
        st.gpus
            .iter()
            .find(|g| g.uuid.is_some() && g.registered_ms.is_none())
    })?;
    let mut host: Vec<&crate::attribution::HostGpu> = st.host_gpus.iter().collect();
    host.sort_by(|a, b| a.pci.cmp(&b.pci).then(a.minor.cmp(&b.minor)));
    let pos = g.minor.and_then(|m| host.iter().position(|h| h.minor == m));
    Some(match (&g.uuid, g.minor, pos) {
        (Some(u), Some(m), Some(i)) => {
            format!("GPU {} of {} ({u}, /dev/nvidia{m})", i + 1, host.len())
        }
        (Some(u), _, _) => u.clone(),
        (None, Some(m), _) => format!("/dev/nvidia{m}"),
        (None, None, _) => return None,
    })
}
