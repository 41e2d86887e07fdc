//! The per-process start-up state, and one handler per kind of event the
//! correlator sees (ioctl, path, libcuda, driver span, process lifecycle).

use super::{
    FailedCall, Record, STAGES, StageHit,
    breakdown::{BREAKDOWN_SLOW_NS, Breakdown, Span},
    obs::{CallRef, Comm},
    signals::{PendingSig, SignalInfo},
};

#[derive(Default)]
pub(crate) struct ProcInit {
    pub(crate) comm: String,
    pub(crate) first_ns: u64,
    pub(crate) last_ns: u64,
    pub(crate) reached: [bool; 9],
    pub(crate) stages: Vec<StageHit>,
    pub(crate) calls: u64,
    pub(crate) last_failure: Option<FailedCall>,
    /// (start_ns, end_ns, name) of recent calls, for "during which call".
    pub(crate) last_call: Option<(u64, u64, CallRef)>,
    /// Signals generated for the process (the last 16).
    pub(crate) signals: Vec<SignalInfo>,
    pub(crate) path_problems: Vec<(String, String)>,
    /// The first NVIDIA call was an ioctl on an fd this process was never
    /// seen opening: (call, fd).
    pub(crate) inherited: Option<(String, i32)>,
    pub(crate) opened_any: bool,
    /// A failed version check: (call, result).
    pub(crate) version_check: Option<(String, String)>,
    /// (parent pid, whether the parent had finished cuInit) for a process
    /// seen forking.
    pub(crate) parent: Option<(u32, bool)>,
    /// "nvidia-modprobe (pid N) exited with status S" for helpers it ran.
    pub(crate) modprobe: Vec<String>,
    /// cuInit's uprobe: entry seen, and its CUresult.
    pub(crate) cuinit_entered: bool,
    pub(crate) curesult: Option<(i64, Option<&'static str>)>,
    pub(crate) done: bool,
    /// Signals whose call has not yet returned (at most 4).
    pub(crate) pending: Vec<PendingSig>,
    /// UVM's answers to UVM_PAGEABLE_MEM_ACCESS, per uvm fd (its
    /// va_space; a new UVM_INITIALIZE on the fd forgets it): at most 16.
    pub(crate) pageable: Vec<(i32, bool)>,
    /// What UVM_PAGEABLE_MEM_ACCESS had answered on the last failed call's
    /// fd (its va_space) when that call failed.
    pub(crate) pageable_at_failure: Option<bool>,
    /// UVM_INITIALIZEs seen without an fd (the driver layer's records
    /// carry none): with more than one, answers cannot be told apart.
    pub(crate) fdless_va_spaces: u32,
    /// The in-driver breakdown of the last failed call (driver layer).
    pub(crate) last_breakdown: Option<String>,
    /// Who the process is (the live collector's `process` record).
    pub(crate) info: Option<crate::attribution::ProcessInfo>,
    /// Per GPU: opened, registered with UVM.
    pub(crate) gpus: Vec<GpuProgress>,
    /// Paths that failed and later succeeded (start-up got past them).
    pub(crate) fixed_paths: Vec<String>,
    /// mknods of NVIDIA nodes: (path, device, errno if it failed).
    pub(crate) mknods: Vec<(String, String, Option<String>)>,
    /// NVIDIA path lookups and opens, successful device opens.
    pub(crate) lookups: u64,
    /// It opened /dev/nvidia-uvm or made a UVM call: only CUDA does.
    pub(crate) uvm_touched: bool,
    /// libcuda calls seen by the uprobes (any function).
    pub(crate) cuda_calls: u64,
    /// The dynamic loader's opens of a libcuda: (path, errno if it failed);
    /// the successful ones all, failures up to a bound.
    pub(crate) lib_opens: Vec<(String, Option<String>)>,
    /// How many opens the loader made in all.
    pub(crate) lib_open_count: u32,
    /// The first libcuda call other than cuInit that returned
    /// CUDA_ERROR_NOT_INITIALIZED (3).
    pub(crate) not_initialized: Option<String>,
    /// The host's GPUs (minor, UUID), shared by every process.
    pub(crate) host_gpus: std::sync::Arc<Vec<crate::attribution::HostGpu>>,
    /// The kernel module's version, when the host said.
    pub(crate) host_driver: Option<std::sync::Arc<str>>,
}

impl ProcInit {
    pub(crate) fn last_stage(&self) -> Option<String> {
        self.stages
            .iter()
            .max_by(|a, b| a.stage.cmp(b.stage))
            .map(|s| format!("{} {}", s.stage, s.name))
    }

    pub(crate) fn cuinit_running(&self) -> bool {
        self.cuinit_entered && self.curesult.is_none()
    }
}

pub(crate) fn ms(ns: u64, since: u64) -> f64 {
    (ns.saturating_sub(since) as f64 / 1e4).round() / 100.0
}

/// libcuda calls that start nothing: nvidia-smi asks for export tables
/// without a cuInit, and a version query or a symbol lookup is no CUDA
/// start-up either.
const NOT_STARTING: &[&str] = &[
    "cuGetExportTable",
    "cuDriverGetVersion",
    "cuGetProcAddress",
    "cuGetProcAddress_v2",
    "cuGetErrorString",
    "cuGetErrorName",
];

/// A path event as the tracker needs it.
pub(crate) struct PathObs {
    pub(crate) opened_device: bool,
    pub(crate) problem: Option<(String, String)>,
    pub(crate) open_path: Option<String>,
    pub(crate) path: String,
    pub(crate) ok: bool,
    pub(crate) open: bool,
    pub(crate) gpu_minor: Option<u32>,
    pub(crate) mknod: Option<String>,
    pub(crate) mknod_ok: bool,
}

/// How a call names a GPU.
pub(crate) enum GpuKey {
    Minor(u32),
    Uuid(String),
    Both(u32, String),
}

/// One GPU's start-up in one process.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct GpuProgress {
    /// The /dev/nvidiaN minor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minor: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// When /dev/nvidiaN was opened (ms since the first NVIDIA call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opened_ms: Option<f64>,
    /// When UVM_REGISTER_GPU returned for it, and what.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registered_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub register_result: Option<String>,
}

/// An ioctl as the tracker needs it.
pub(crate) struct IoctlObs {
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) comm: Comm,
    pub(crate) span: (u64, u64),
    pub(crate) ok: bool,
    pub(crate) call: CallRef,
    pub(crate) fd: i32,
    pub(crate) failure: Option<String>,
    pub(crate) stage: bool,
    pub(crate) gpu: Option<super::obs::GpuRef>,
    pub(crate) uvm: bool,
    pub(crate) pageable: Option<bool>,
}

impl ProcInit {
    /// Whether the process did anything NVIDIA-related itself (a forked
    /// child that only inherited the map entry did not): only those get a
    /// verdict.
    pub(crate) fn has_activity(&self) -> bool {
        self.calls > 0
            || self.lookups > 0
            || self.cuda_calls > 0
            || !self.lib_opens.is_empty()
            || self.cuinit_entered
            || !self.stages.is_empty()
            || self.info.as_ref().is_some_and(|i| !i.libcuda.is_empty())
    }

    /// The libcuda the loader opened, when one open succeeded.
    pub(crate) fn lib_loaded(&self) -> Option<&str> {
        self.lib_opens
            .iter()
            .find(|(_, f)| f.is_none())
            .map(|(p, _)| p.as_str())
    }

    /// The first event of a process names it and starts its clock.
    pub(crate) fn begin(&mut self, start: u64, comm: &Comm) {
        if self.first_ns == 0 {
            self.first_ns = start;
            self.comm = comm.text();
        }
    }

    /// A libcuda call: cuInit's entry, or its return with the verdict.
    pub(crate) fn on_cuda(
        &mut self,
        pid: u32,
        func: &str,
        end: Option<(u64, Option<i64>, Option<&'static str>)>,
        out: &mut Vec<Record>,
    ) {
        if !NOT_STARTING.contains(&func) {
            self.cuda_calls += 1;
        }
        if func != "cuInit" {
            if let Some((_, Some(3), _)) = end {
                self.not_initialized.get_or_insert_with(|| func.to_owned());
            }
            return;
        }
        let Some((end, result, result_name)) = end else {
            self.cuinit_entered = true;
            return;
        };
        self.last_ns = self.last_ns.max(end);
        self.curesult = Some((result.unwrap_or(0), result_name));
        if !self.done {
            out.push(Record::Cuinit(Box::new(super::verdict::verdict(
                pid, self, None,
            ))));
            self.done = true;
        }
    }

    /// An ioctl returned; `spans` are the driver functions this thread ran
    /// meanwhile (driver layer). Returns the stage's "via" text when the
    /// call completes a stage.
    pub(crate) fn on_ioctl(
        &mut self,
        o: IoctlObs,
        spans: Option<&mut Vec<Span>>,
        out: &mut Vec<Record>,
    ) -> Option<String> {
        let (start, end) = o.span;
        if let Some(v) = spans {
            self.breakdown(&o, v, out);
        }
        if self.calls == 0 && !self.opened_any {
            self.inherited = Some((o.call.text(), o.fd));
        }
        if o.uvm {
            self.uvm_touched = true;
        }
        if o.uvm && o.fd < 0 && o.call.name == Some("UVM_INITIALIZE") {
            self.fdless_va_spaces = self.fdless_va_spaces.saturating_add(1);
        }
        if o.uvm && (o.pageable.is_some() || o.call.name == Some("UVM_INITIALIZE")) {
            self.pageable.retain(|(fd, _)| *fd != o.fd);
            if let Some(p) = o.pageable
                && self.pageable.len() < 16
            {
                self.pageable.push((o.fd, p));
            }
        }
        self.note_gpu(&o);
        self.calls += 1;
        // A call that failed with EINTR (or a restart code) and was then
        // made again successfully is not what explains the end.
        if o.ok
            && let Some(f) = &self.last_failure
            && f.call == o.call.text()
            && matches!(
                f.result.as_str(),
                "EINTR" | "ERESTARTSYS" | "ERESTARTNOINTR" | "ERESTARTNOHAND" | "EAGAIN"
            )
        {
            self.last_failure = None;
        }
        if !o.ok {
            self.note_failure(&o);
        }
        // A signal that came while this call ran (its exit is recorded after
        // the signal) landed in this call.
        for sig in self.signals.iter_mut().rev().take(4) {
            if sig.during.is_none() && start <= sig.at_ns && sig.at_ns <= end {
                sig.during = Some(o.call.text());
            }
        }
        if !self.pending.is_empty() {
            let name = o.call.text();
            let result = if o.ok { None } else { o.failure.as_deref() };
            self.settle(o.pid, o.tid, (start, end), &name, result, out);
        }
        self.last_call = Some((start, end, o.call));
        o.stage.then(|| o.call.text())
    }

    /// A call that names a GPU: UVM registration's result and time.
    fn note_gpu(&mut self, o: &IoctlObs) {
        let Some(super::obs::GpuRef::Uuid(u)) = &o.gpu else {
            return;
        };
        let at = ms(o.span.1, self.first_ns);
        let result = if o.ok {
            "NV_OK".to_owned()
        } else {
            o.failure.clone().unwrap_or_default()
        };
        let key = match self.host_minor(u) {
            Some(m) => GpuKey::Both(m, u.clone()),
            None => GpuKey::Uuid(u.clone()),
        };
        let g = self.gpu(key);
        if o.ok {
            g.registered_ms.get_or_insert(at);
        }
        g.register_result = Some(result);
    }

    /// The minor of a GPU UUID, from the host's GPU list.
    fn host_minor(&self, uuid: &str) -> Option<u32> {
        self.host_gpus
            .iter()
            .find(|g| {
                g.uuid
                    .as_deref()
                    .is_some_and(|x| x.eq_ignore_ascii_case(uuid))
            })
            .map(|g| g.minor)
    }

    fn note_failure(&mut self, o: &IoctlObs) {
        self.pageable_at_failure = self
            .pageable
            .iter()
            .find(|(fd, _)| *fd == o.fd)
            .map(|(_, p)| *p)
            .filter(|_| o.fd >= 0 || self.fdless_va_spaces <= 1);
        let (start, end) = o.span;
        if let Some(f) = &o.failure
            && (f == "NV_ERR_LIB_RM_VERSION_MISMATCH"
                || o.call.name == Some("NV_ESC_CHECK_VERSION_STR")
                || o.call.control == Some("NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION"))
        {
            self.version_check = Some((o.call.text(), f.clone()));
        }
        self.last_failure = Some(FailedCall {
            call: o.call.text(),
            result: o.failure.clone().unwrap_or_default(),
            at_ms: ms(start, self.first_ns),
            duration_ms: end.saturating_sub(start) as f64 / 1e6,
        });
    }

    /// The driver spans inside this call, as a breakdown when the call
    /// failed or was slow.
    fn breakdown(&mut self, o: &IoctlObs, v: &mut Vec<Span>, out: &mut Vec<Record>) {
        let (start, end) = o.span;
        let inside: Vec<Span> = v
            .iter()
            .filter(|s| s.start >= start && s.end <= end)
            .cloned()
            .collect();
        v.retain(|s| s.end > end);
        if inside.is_empty() || (o.ok && end.saturating_sub(start) < BREAKDOWN_SLOW_NS) {
            return;
        }
        let b = Breakdown::new(
            o.pid,
            o.tid,
            o.comm.text(),
            o.call.text(),
            end.saturating_sub(start),
            !o.ok,
            inside,
        );
        if !o.ok {
            self.last_breakdown = Some(b.text.clone());
        }
        out.push(Record::Breakdown(Box::new(b)));
    }

    /// An open, stat or access of an NVIDIA path.
    pub(crate) fn on_path(&mut self, p: PathObs, at_ns: u64) -> Option<String> {
        self.lookups += 1;
        if p.opened_device {
            self.opened_any = true;
        }
        if p.path.contains("nvidia-uvm") && p.open {
            self.uvm_touched = true;
        }
        if let Some(m) = p.gpu_minor {
            let at = ms(at_ns, self.first_ns);
            let g = self.gpu(GpuKey::Minor(m));
            g.opened_ms.get_or_insert(at);
        }
        if let Some(dev) = p.mknod {
            self.mknods
                .push((p.path.clone(), dev, p.problem.as_ref().map(|x| x.1.clone())));
        }
        if let Some(pr) = p.problem {
            self.path_problems.push(pr);
        } else if p.ok
            && (p.open || p.mknod_ok)
            && self.path_problems.iter().any(|(path, _)| *path == p.path)
            && !self.fixed_paths.contains(&p.path)
        {
            self.fixed_paths.push(p.path.clone());
        }
        p.open_path.map(|x| format!("open {x}"))
    }

    /// The progress entry of a GPU, found by minor or UUID (the host's GPU
    /// list ties the two when it is known).
    pub(crate) fn gpu(&mut self, key: GpuKey) -> &mut GpuProgress {
        let i = self.gpus.iter().position(|g| match &key {
            GpuKey::Minor(m) => g.minor == Some(*m),
            GpuKey::Uuid(u) => g.uuid.as_deref() == Some(u.as_str()),
            GpuKey::Both(m, u) => g.minor == Some(*m) || g.uuid.as_deref() == Some(u.as_str()),
        });
        let i = i.unwrap_or_else(|| {
            self.gpus.push(GpuProgress::default());
            self.gpus.len() - 1
        });
        let g = &mut self.gpus[i];
        match key {
            GpuKey::Minor(m) => g.minor = Some(m),
            GpuKey::Uuid(u) => g.uuid = Some(u),
            GpuKey::Both(m, u) => {
                g.minor = Some(m);
                g.uuid = Some(u);
            }
        }
        g
    }

    /// Stage `s` reached at `end` through `via`, the first time.
    pub(crate) fn reach(&mut self, s: usize, end: u64, via: Option<String>) -> Option<StageHit> {
        if self.reached[s] {
            return None;
        }
        self.reached[s] = true;
        let hit = StageHit {
            stage: STAGES[s].0,
            name: STAGES[s].1,
            at_ms: ms(end, self.first_ns),
            via: via.unwrap_or_default(),
        };
        self.stages.push(hit.clone());
        Some(hit)
    }
}
