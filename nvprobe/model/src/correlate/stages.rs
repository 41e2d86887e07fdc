//! The cuInit milestones (stages) and which call completes each.
//!
//! Stages are milestones, not a strict order (docs/NVIDIA-ABI.md §7.3). On the
//! real 580.159.04 driver (tests/fixtures) the order is S0 S2 S1 S4 S3 S5 S6
//! S7: the version handshake runs on a throwaway client, and UVM init comes
//! before the GPU attach; a driver whose libcuda checks its version with
//! CHECK_VERSION_STR reaches S1 before S2. So the ids (`S0`…`S8`, in JSON) are
//! names, not an order: what people read says the milestone's name, and
//! "after X" is the milestone reached last in time ([`latest`]).
//!
//! | stage | reached when |
//! |---|---|
//! | S0 ctl_opened | an open yields /dev/nvidiactl |
//! | S1 version_handshake | SYSTEM_GET_BUILD_VERSION or CHECK_VERSION_STR succeeds |
//! | S2 rm_client | an RM root client is allocated |
//! | S3 gpus_attached | GPU_ATTACH_IDS (or ASYNC_ATTACH_ID) succeeds |
//! | S4 uvm_initialized | UVM_INITIALIZE succeeds |
//! | S5 gpu_opened | REGISTER_FD on a GPU node succeeds |
//! | S6 device_objects | NV20_SUBDEVICE_0 is allocated |
//! | S7 uvm_gpu_registered | UVM_REGISTER_GPU succeeds (the last step of cuInit) |
//! | S8 context | UVM_REGISTER_GPU_VASPACE succeeds (first context) |

use serde::Serialize;

use crate::decode::{
    Call, DeviceKind, Event, Ioctl,
    escape::{NV_ESC_CHECK_VERSION_STR, NV_ESC_REGISTER_FD, NV_ESC_RM_ALLOC, NV_ESC_RM_CONTROL},
    uvm::{UVM_INITIALIZE, UVM_REGISTER_GPU, UVM_REGISTER_GPU_VASPACE},
};

/// RM controls and classes the stages rely on (ctrl0000system.h,
/// ctrl0000gpu.h, cl0041.h / nvos.h, cl2080.h).
pub const NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION: u32 = 0x101;
pub const NV0000_CTRL_CMD_GPU_ATTACH_IDS: u32 = 0x215;
pub const NV0000_CTRL_CMD_GPU_ASYNC_ATTACH_ID: u32 = 0x289;
pub const NV01_ROOT_CLIENT: u32 = 0x41;
pub const NV20_SUBDEVICE_0: u32 = 0x2080;

pub const STAGES: [(&str, &str); 9] = [
    ("S0", "ctl_opened"),
    ("S1", "version_handshake"),
    ("S2", "rm_client"),
    ("S3", "gpus_attached"),
    ("S4", "uvm_initialized"),
    ("S5", "gpu_opened"),
    ("S6", "device_objects"),
    ("S7", "uvm_gpu_registered"),
    ("S8", "context"),
];

/// The milestone reached last, in time (the order differs between driver
/// releases, so never the highest id).
pub fn latest(stages: &[StageHit]) -> Option<&StageHit> {
    // `max_by` keeps the last of equal times: the later one reached.
    stages.iter().max_by(|a, b| a.at_ms.total_cmp(&b.at_ms))
}

/// Index of the stage an event completes, if any.
pub(crate) fn stage_of(ev: &Event) -> Option<usize> {
    match ev {
        Event::Open(o) if o.ok && o.device.as_ref().is_some_and(|d| d.kind == DeviceKind::Ctl) => {
            Some(0)
        }
        Event::Ioctl(i) if i.ok && i.ret == 0 => ioctl_stage(i),
        _ => None,
    }
}

fn ioctl_stage(i: &Ioctl) -> Option<usize> {
    let known = i.args.known();
    let control = known.control.map(|c| c.code);
    let class = known.class.map(|c| c.code);
    match i.call {
        Call::Escape(NV_ESC_RM_CONTROL) => match control? {
            NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION => Some(1),
            NV0000_CTRL_CMD_GPU_ATTACH_IDS | NV0000_CTRL_CMD_GPU_ASYNC_ATTACH_ID => Some(3),
            _ => None,
        },
        Call::Escape(NV_ESC_CHECK_VERSION_STR) => Some(1),
        Call::Escape(NV_ESC_RM_ALLOC) => match class? {
            NV01_ROOT_CLIENT => Some(2),
            NV20_SUBDEVICE_0 => Some(6),
            _ => None,
        },
        Call::Uvm(UVM_INITIALIZE) => Some(4),
        Call::Escape(NV_ESC_REGISTER_FD) if i.device.kind == DeviceKind::Gpu => Some(5),
        Call::Uvm(UVM_REGISTER_GPU) => Some(7),
        Call::Uvm(UVM_REGISTER_GPU_VASPACE) => Some(8),
        _ => None,
    }
}

#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema, PartialEq)]
pub struct StageHit {
    #[serde(deserialize_with = "crate::decode::intern::static_str")]
    pub stage: crate::decode::Name,
    #[serde(deserialize_with = "crate::decode::intern::static_str")]
    pub name: crate::decode::Name,
    /// Milliseconds since the process's first NVIDIA call.
    pub at_ms: f64,
    pub via: String,
}
