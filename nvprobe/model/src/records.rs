//! Records that are not kernel events: what the live collector learns
//! from the host (stall reports read from /proc, HMM facts) in the shape
//! the outputs and replays share.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, schemars::JsonSchema, Deserialize, PartialEq)]
pub struct StallReport {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// The call still running: an escape/UVM name, or cuInit.
    pub call: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fd: Option<i32>,
    pub elapsed_s: f64,
    /// D, S, R, T, … as /proc/<tid>/stat says; "gone" if the task exited.
    pub state: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wchan: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// The cgroup that holds the task frozen: v2's `cgroup.events` says
    /// `frozen 1`, or v1's `freezer.state` FROZEN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen_cgroup: Option<String>,
    /// The cuInit milestone the process reached last ("uvm_initialized").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// The innermost frame of the kernel stack inside an NVIDIA module:
    /// the driver function the call is in ("uvm_gpu_retain_by_uuid
    /// (nvidia_uvm)").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_function: Option<String>,
}

/// What the host says about HMM in nvidia_uvm (docs/NVIDIA-ABI.md §6.3).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HmmFacts {
    /// Whether nvidia_uvm was built with HMM: its `uvm_hmm_*` functions
    /// exist only then. None: the module's symbols could not be read.
    pub compiled_in: Option<bool>,
    /// `uvm_disable_hmm` (Y/N), when the module is loaded.
    pub disabled: Option<bool>,
}

impl HmmFacts {
    /// One line for a diagnosis's evidence.
    pub fn describe(&self) -> String {
        let built = match self.compiled_in {
            Some(true) => "nvidia_uvm is built with HMM (uvm_hmm_* in /proc/kallsyms)",
            Some(false) => "nvidia_uvm is built without HMM (no uvm_hmm_* in /proc/kallsyms)",
            None => "whether nvidia_uvm has HMM is unknown (its symbols were not readable)",
        };
        match self.disabled {
            Some(d) => format!("{built}, uvm_disable_hmm={}", if d { "Y" } else { "N" }),
            None => built.to_owned(),
        }
    }
}

/// The first record of a trace: what nvprobe runs on and what it attached.
/// `nvprobe decode` rebuilds its decoding context from it, so every field
/// a replay needs has a default (older recordings lack the newer ones).
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize)]
#[serde(default)]
pub struct StartRecord {
    pub tool_version: String,
    /// The host's name (uname's nodename).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The capabilities nvprobe kept once attached (it drops the others;
    /// absent when it could not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities_kept: Option<Vec<String>>,
    pub kernel: String,
    pub driver: Option<crate::decode::version::DriverInfo>,
    /// The driver version whose struct layouts decode the statuses.
    pub decode_version: String,
    /// "known" (nvprobe's tables cover that version) or "assumed".
    pub layouts: String,
    pub nvidia_major: Option<u32>,
    pub uvm_major: Option<u32>,
    pub caps_major: Option<u32>,
    /// "major:minor" -> device node path.
    pub nodes: std::collections::BTreeMap<String, String>,
    pub extra_devices: Vec<ExtraDevice>,
    pub probes: Vec<ProbeState>,
    pub ringbuf_bytes: u32,
    pub filters: StartFilters,
    pub tracefs: String,
    pub tracefs_mounted_by_nvprobe: bool,
    /// The libcuda files hooked at start-up.
    pub libcuda: Vec<LibcudaHooked>,
    /// Which libcuda functions are hooked: "startup", "faults", "launches"
    /// or "all"
    /// (`--libcuda-hooks`); absent in recordings before the option.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub libcuda_hooks: String,
    /// How the libcuda uprobes are attached: "uprobe_multi" (one link per
    /// program and file) or "perf_event" (one per function, with why);
    /// absent in older recordings and without the libcuda layer.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub libcuda_attach: String,
    /// Who removes the probes once nvprobe ends: "kernel" (pinned in a
    /// private bpffs, dropped by a kernel worker however nvprobe ends) or
    /// "child" (a child process closes them after nvprobe's exit), with
    /// why; absent in older recordings.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub probe_removal: String,
    /// What the run wrote (`--events`: "all", "failures" or "verdicts");
    /// absent in recordings before the field. Below "all" the kernel
    /// events the verdicts rest on are not all in the recording, so
    /// `decode` shows its verdicts as recorded.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub events: String,
    /// Whether the driver layer's ioctl entry points make the ioctl records.
    pub ioctls_in_driver: bool,
    pub driver_layer: Option<DriverLayerStart>,
    /// The GPUs the driver lists (minor, UUID, PCI bus, model).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<crate::attribution::HostGpu>,
}

/// A file declared with `--device`.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize)]
pub struct ExtraDevice {
    pub path: String,
    pub kind: String,
    pub sdev: u32,
    pub ino: u64,
}

/// The state of one probe after attaching.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize)]
pub struct ProbeState {
    pub name: String,
    pub target: String,
    pub layer: String,
    pub attached: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize)]
pub struct StartFilters {
    pub pid: Vec<u32>,
    pub comm: Vec<String>,
}

/// A libcuda file and the functions hooked in it.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize)]
#[serde(default)]
pub struct LibcudaHooked {
    pub path: String,
    pub functions: Vec<String>,
    /// Exported `cu*` functions this nvprobe has no number for (a libcuda
    /// newer than its table), not hooked; `--libcuda-hooks all` only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
    /// "uprobe_multi" or "perf_event"; absent in older recordings.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub via: String,
}

/// The driver layer at start-up: attached or why not, and each hook.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize)]
pub struct DriverLayerStart {
    pub attached: bool,
    pub reason: Option<String>,
    pub hooks: Option<Vec<HookState>>,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize)]
pub struct HookState {
    pub name: String,
    pub module: String,
    pub present: bool,
    pub attached: bool,
    pub required: bool,
}

impl StartRecord {
    /// The decoding context this start record describes; `force` overrides
    /// the recorded driver version.
    pub fn context(
        &self,
        force: Option<crate::decode::version::DriverVersion>,
    ) -> crate::decode::Context {
        use crate::decode::version::{DriverVersion, VersionCtx};
        let recorded: Option<DriverVersion> = self.decode_version.parse().ok();
        let vctx = match force {
            Some(v) => VersionCtx::from_version(Some(v)),
            None if self.layouts == "known" => VersionCtx::from_version(recorded),
            None => VersionCtx::assumed(),
        };
        let mut ctx = crate::decode::Context::new(vctx);
        ctx.keep_raw = true;
        ctx.uvm_major = self.uvm_major.unwrap_or(0);
        ctx.caps_major = self.caps_major.unwrap_or(0);
        for (k, p) in &self.nodes {
            if let Some((ma, mi)) = k.split_once(':')
                && let (Ok(ma), Ok(mi)) = (ma.parse(), mi.parse())
            {
                ctx.nodes
                    .insert(nvprobe_common::kdev_make(ma, mi), p.as_str().into());
            }
        }
        for e in &self.extra_devices {
            ctx.extra.insert((e.sdev, e.ino), e.path.as_str().into());
        }
        ctx.host_gpus = self.gpus.clone();
        ctx.host_driver = self.driver.as_ref().map(|d| d.version.to_string());
        ctx
    }
}
