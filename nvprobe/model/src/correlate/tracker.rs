//! One handler per kind of event the correlator sees (ioctl, path,
//! libcuda, driver span, process lifecycle), updating the process's
//! state (`state.rs`); signals have their own (`signals.rs`).

use super::{
    breakdown::{BREAKDOWN_SLOW_NS, Breakdown, Span},
    facts::{
        CallRef, CallResult, Comm, DevNo, ERESTARTNOHAND, ERESTARTNOINTR, ERESTARTSYS, PathWhy,
    },
    record::Record,
    stages::{NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION, STAGES, StageHit},
    state::{CONTEXT_WAIT_NS, ContextStep, Failure, GpuKey, ProcInit, ms},
};
use crate::decode::{
    Call, DeviceKind, SysKind,
    cudafn::{self, CU_DEVICE_GET_COUNT, CU_INIT, DEVICE_LOOKUPS, NOT_STARTING, makes_context},
    escape, node_kind, status, uvm,
};

/// A libcuda call's return, as the tracker needs it.
pub(crate) struct CudaEnd {
    /// The call went to an interposer, not libcuda.
    pub(crate) interposer: bool,
    pub(crate) end: u64,
    pub(crate) result: Option<i64>,
    pub(crate) result_name: Option<&'static str>,
    pub(crate) device: Option<i32>,
    pub(crate) value: Option<i32>,
}

/// A path event as the tracker needs it.
pub(crate) struct PathObs {
    pub(crate) opened_device: bool,
    pub(crate) problem: Option<(String, PathWhy)>,
    pub(crate) open_path: Option<String>,
    pub(crate) path: String,
    pub(crate) ok: bool,
    pub(crate) open: bool,
    pub(crate) gpu_minor: Option<u32>,
    pub(crate) mknod: Option<Option<DevNo>>,
    pub(crate) mknod_ok: bool,
    /// The descriptor a successful open gave (`opened_device`: of an
    /// NVIDIA node).
    pub(crate) fd: Option<i64>,
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
    pub(crate) failure: Option<CallResult>,
    pub(crate) stage: bool,
    pub(crate) gpu: Option<super::facts::GpuRef>,
    pub(crate) uvm: bool,
    pub(crate) pageable: Option<bool>,
}

impl ProcInit {
    /// The first event of a process names it and starts its clock.
    pub(crate) fn begin(&mut self, start: u64, comm: &Comm) {
        if self.first_ns == 0 {
            self.first_ns = start;
            self.comm = comm.text();
        }
    }

    /// A libcuda call: cuInit's entry, or a return. A failed cuInit gives
    /// the verdict; a successful one starts the wait for the first context
    /// ([`ContextStep`]), whose call (or a failed device lookup before it)
    /// gives the verdict.
    pub(crate) fn on_cuda(
        &mut self,
        pid: u32,
        func: u32,
        end: Option<CudaEnd>,
        out: &mut Vec<Record>,
    ) {
        if !NOT_STARTING.contains(&func) {
            self.cuda_calls += 1;
        }
        let Some(r) = end else {
            if func == CU_INIT {
                self.cuinit_entered = true;
                if let Some(during) = self.interposer_in.as_mut() {
                    *during = true;
                }
            }
            if makes_context(func) && (self.context_due.is_some() || self.late_context_awaited()) {
                // A context call in flight: its failures are what refused
                // it, and the wait does not end under it.
                self.ctx_in_flight = true;
            }
            return;
        };
        let code = r.result.unwrap_or(0);
        if r.interposer {
            if func != CU_INIT {
                return;
            }
            // Its cuInit returned: did it call libcuda's?
            let forwarded = self.interposer_in.take().unwrap_or(self.cuinit_entered);
            self.interposed = Some((code, r.result_name, forwarded));
            if forwarded {
                // A wrapper: the program got the wrapper's answer. One that
                // turns libcuda's success into a failure ends the start-up.
                if code != 0 && matches!(self.curesult, Some((0, _))) && !self.done {
                    self.wrapped_from = self.curesult;
                    self.curesult = Some((code, r.result_name));
                    self.give_verdict(pid, out);
                }
                return;
            }
            if self.curesult.is_some() {
                return;
            }
            // It answered in libcuda's place: its answer is what the
            // program got from cuInit.
        }
        if func == CU_INIT {
            self.last_ns = self.last_ns.max(r.end);
            self.curesult = Some((code, r.result_name));
            self.cuinit_stage = self.last_stage();
            if self.done || self.context_due.is_some() {
                return;
            }
            if code == 0 {
                self.context_due = Some(r.end.saturating_add(CONTEXT_WAIT_NS));
                return;
            }
            return self.give_verdict(pid, out);
        }
        if code == 3 {
            self.not_initialized.get_or_insert(func);
        }
        if func == CU_DEVICE_GET_COUNT && code == 0 && r.value.is_some() {
            self.visible = r.value;
        }
        if makes_context(func) && self.late_context_awaited() {
            return self.late_context(pid, func, &r, out);
        }
        if self.done || self.context_due.is_none() {
            return;
        }
        let step = || ContextStep {
            call: cudafn::name(func).to_owned(),
            device: r.device,
            result: format!("{} ({code})", r.result_name.unwrap_or("CUresult")),
            code,
            at_ms: ms(r.end, self.first_ns),
        };
        if code != 0 && DEVICE_LOOKUPS.contains(&func) {
            // A program may probe ordinals until one fails and then make a
            // context: the failed lookup decides only if no context comes.
            if self.lookup_failure.is_none() {
                self.lookup_failure = Some(step());
            }
            return;
        }
        if !makes_context(func) {
            return;
        }
        self.ctx_in_flight = false;
        self.last_ns = self.last_ns.max(r.end);
        self.context = Some(step());
        self.give_verdict(pid, out);
    }

    /// A preloaded library's function entered (its cuInit is followed, to
    /// learn whether it calls libcuda's).
    pub(crate) fn on_interposer_entry(&mut self, func: u32) {
        if !NOT_STARTING.contains(&func) {
            self.cuda_calls += 1;
        }
        if func == CU_INIT {
            self.interposer_in = Some(false);
        }
    }

    /// No context came: a device lookup that failed is where the start-up
    /// ended.
    pub(crate) fn settle_context(&mut self) {
        if self.context.is_none() && self.lookup_failure.is_some() {
            self.context = self.lookup_failure.take();
        }
    }

    /// The verdict said "no context made" and none has been since.
    fn late_context_awaited(&self) -> bool {
        self.done
            && self.context_waited
            && self.context.is_none()
            && matches!(self.curesult, Some((0, _)))
    }

    /// The first context, after the verdict: a `first_context` record,
    /// with the diagnoses of a failed one.
    fn late_context(&mut self, pid: u32, func: u32, r: &CudaEnd, out: &mut Vec<Record>) {
        let code = r.result.unwrap_or(0);
        self.ctx_in_flight = false;
        self.last_ns = self.last_ns.max(r.end);
        let step = ContextStep {
            call: cudafn::name(func).to_owned(),
            device: r.device,
            result: format!("{} ({code})", r.result_name.unwrap_or("CUresult")),
            code,
            at_ms: ms(r.end, self.first_ns),
        };
        self.context = Some(step.clone());
        let diagnoses = if code == 0 {
            Vec::new()
        } else {
            super::rules_context::diagnose(self)
        };
        let head = format!(
            "{}{} returned {} at {:.1} s, after the verdict (no context had been made {} s after cuInit)",
            step.call,
            step.device
                .map_or(String::new(), |d| format!(" (device {d})")),
            step.result,
            step.at_ms / 1000.0,
            CONTEXT_WAIT_NS / 1_000_000_000
        );
        let (text, headline) = match diagnoses.first() {
            Some(d) => (format!("{head}: {}", d.evidence), Some(head)),
            None => (head, None),
        };
        out.push(Record::FirstContext(Box::new(
            super::record::FirstContext {
                pid,
                comm: self.comm.clone(),
                context: step,
                ok: code == 0,
                text,
                headline,
                diagnoses,
            },
        )));
    }

    /// The start-up's verdict, now (once).
    pub(crate) fn give_verdict(&mut self, pid: u32, out: &mut Vec<Record>) {
        if self.done {
            return;
        }
        self.context_due = None;
        self.settle_context();
        out.push(Record::Cuinit(Box::new(super::verdict::verdict(
            pid, self, None,
        ))));
        self.done = true;
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
            self.inherited = Some((o.call, o.fd));
        }
        if o.uvm {
            self.uvm_touched = true;
        }
        let uvm_init = o.call.is(Call::Uvm(uvm::UVM_INITIALIZE));
        if o.uvm && o.fd < 0 && uvm_init {
            self.fdless_va_spaces = self.fdless_va_spaces.saturating_add(1);
        }
        if o.uvm && (o.pageable.is_some() || uvm_init) {
            self.pageable.retain(|(fd, _)| *fd != o.fd);
            if let Some(p) = o.pageable
                && self.pageable.len() < 16
            {
                self.pageable.push((o.fd, p));
            }
        }
        self.note_gpu(&o);
        self.calls += 1;
        self.ioctls_in_driver |= o.fd < 0;
        // A call that failed with EINTR (or a restart code, or EAGAIN) and
        // was then made again successfully is not what explains the end.
        if o.ok
            && let Some(f) = &self.last_failure
            && f.call.same(&o.call)
            && matches!(
                f.result.errno(),
                Some(libc::EINTR | ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND | libc::EAGAIN)
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
                sig.during_call = Some(o.call);
            }
        }
        if !self.pending.is_empty() {
            let result = if o.ok { None } else { o.failure };
            self.settle(o.pid, o.tid, (start, end), o.call, result, out);
        }
        self.last_call = Some((start, end, o.call));
        o.stage.then(|| o.call.text())
    }

    /// A call that names a GPU: UVM registration's result and time.
    fn note_gpu(&mut self, o: &IoctlObs) {
        let Some(super::facts::GpuRef::Uuid(u)) = &o.gpu else {
            return;
        };
        let at = ms(o.span.1, self.first_ns);
        let result = match o.failure {
            Some(f) if !o.ok => f.text(),
            _ => "NV_OK".to_owned(),
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
        g.register_failed = !o.ok;
    }

    fn note_failure(&mut self, o: &IoctlObs) {
        self.pageable_at_failure = self
            .pageable
            .iter()
            .find(|(fd, _)| *fd == o.fd)
            .map(|(_, p)| *p)
            .filter(|_| o.fd >= 0 || self.fdless_va_spaces <= 1);
        let (start, end) = o.span;
        let Some(result) = o.failure else { return };
        if result == CallResult::Status(status::NV_ERR_LIB_RM_VERSION_MISMATCH)
            || o.call.is(Call::Escape(escape::NV_ESC_CHECK_VERSION_STR))
            || o.call.control == Some(NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION)
        {
            self.version_check = Some((o.call, result));
        }
        if matches!(result, CallResult::Errno(libc::EPERM | libc::EACCES))
            && self.traced_refusals.len() < 8
        {
            self.traced_refusals.push(o.call.call);
        }
        let failed = Failure {
            call: o.call,
            result,
            start,
            end,
            tid: o.tid,
        };
        // What refused the first context: the first failure inside its call.
        if self.ctx_in_flight && self.after_init_failure.is_none() {
            self.after_init_failure = Some(failed);
        }
        self.last_failure = Some(failed);
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
        match p.fd {
            Some(fd) if p.opened_device => self.fds.opened(fd, &p.path, at_ns),
            // The number is another file's now (an NVIDIA path that is no
            // node: the driver's /proc files).
            Some(fd) => self.fds.forget(fd),
            None => {}
        }
        if p.opened_device {
            self.opened_any = true;
            if node_kind(&p.path) == Some(DeviceKind::Ctl) {
                self.ctl_opens = self.ctl_opens.saturating_add(1);
            }
        }
        if matches!(
            node_kind(&p.path),
            Some(DeviceKind::Uvm | DeviceKind::UvmTools)
        ) && p.open
        {
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
            // Past cuInit, an open refused by a limit is one of the first
            // context's own failed calls (cuInit's problems are settled).
            if let (
                true,
                PathWhy::Errno(e @ (libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::EAGAIN)),
            ) = (p.open && matches!(self.curesult, Some((0, _))), &pr.1)
            {
                self.on_call_failed(
                    format!("open of {}", pr.0),
                    (SysKind::NodeOpen, *e),
                    Default::default(),
                    None,
                );
            } else {
                self.path_problems.push(pr);
            }
        } else if p.ok
            && (p.open || p.mknod_ok)
            && self.path_problems.iter().any(|(path, _)| *path == p.path)
            && !self.fixed_paths.contains(&p.path)
        {
            self.fixed_paths.push(p.path.clone());
        }
        p.open_path.map(|x| format!("open {x}"))
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
