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
    /// The in-driver breakdown of the last failed call (driver layer).
    pub(crate) last_breakdown: Option<String>,
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
}

impl ProcInit {
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
        if func != "cuInit" {
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

    fn note_failure(&mut self, o: &IoctlObs) {
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
    pub(crate) fn on_path(
        &mut self,
        opened_device: bool,
        problem: Option<(String, String)>,
        open_path: Option<String>,
    ) -> Option<String> {
        if opened_device {
            self.opened_any = true;
        }
        if let Some(pr) = problem {
            self.path_problems.push(pr);
        }
        open_path.map(|p| format!("open {p}"))
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
