//! Per-process cuInit progress: the milestones a process reaches, how its
//! start-up ended, and, when it went wrong, the call that explains it with
//! a hint. Split by concern: [`stages`] (which call completes which
//! milestone), [`obs`] (what is kept of each event), [`state`] (the
//! per-process state), [`tracker`] (one handler per event kind), [`signals`],
//! [`breakdown`] (driver-layer spans), [`rules`] (the diagnosis table) and
//! [`verdict`].

mod breakdown;
mod facts;
pub mod faults;
mod fds;
mod named;
pub mod needs;
mod obs;
mod outcome;
mod record;
pub mod rules;
mod rules_context;
mod rules_fds;
mod rules_kill;
mod rules_library;
mod rules_memory;
mod rules_nodes;
mod rules_refused;
mod rules_startcalls;
mod rules_visible;
mod signals;
pub mod stages;
mod state;
pub mod table;
mod tracker;
mod verdict;
mod verdict_driver;

use std::collections::HashMap;

pub use self::{
    breakdown::{Breakdown, Span},
    obs::Obs,
    outcome::{Class, CuInit, Outcome},
    record::{FirstContext, Record, SigOutcome, SignalReport},
    rules::apply_hmm_facts,
    stages::{STAGES, StageHit},
    state::{CONTEXT_WAIT_NS, ContextStep, FailedCall, FailedSyscall, GpuProgress, SignalInfo},
    table::{DiagId, DiagSeverity, Diagnosis, RULES, Rule},
};
use self::{
    facts::Exit,
    obs::ObsKind,
    state::ProcInit,
    tracker::{IoctlObs, PathObs},
    verdict::verdict,
};
use crate::decode::{Event, ProcCall, ProcKind};

/// The last stage each process reached, shared with the stall detector.
pub type StageBoard = std::sync::Arc<std::sync::Mutex<HashMap<u32, String>>>;

/// Follows every process that makes NVIDIA calls.
pub struct Correlator {
    procs: HashMap<u32, ProcInit>,
    /// Driver-layer spans per thread (tid -> its process, its spans), until
    /// the syscall they belong to returns (at most 32 per thread); a
    /// process's threads are forgotten when it exits or execs.
    spans: HashMap<u32, (u32, Vec<Span>)>,
    /// Kept up to date when set (stage transitions and exits are rare, so
    /// the lock costs nothing per call).
    pub board: Option<StageBoard>,
    /// The host's GPUs (minor, UUID), to tie UVM's UUIDs to nodes.
    host_gpus: std::sync::Arc<Vec<crate::attribution::HostGpu>>,
    host_driver: Option<std::sync::Arc<str>>,
    /// The earliest time a start-up's wait for its first context ends
    /// (`u64::MAX`: none waits).
    next_due: u64,
    /// Run-time faults and the kernel log's lines.
    faults: faults::Faults,
}

/// Who made an event and when.
struct At {
    pid: u32,
    tid: u32,
    comm: facts::Comm,
    start: u64,
    end: u64,
}

/// A libcuda call as its handler needs it.
struct CudaObs {
    func: u32,
    name: &'static str,
    enter: bool,
    unfinished: bool,
    end: tracker::CudaEnd,
}

impl Default for Correlator {
    fn default() -> Self {
        Self {
            faults: faults::Faults::new(Default::default()),
            procs: HashMap::new(),
            spans: HashMap::new(),
            board: None,
            host_gpus: Default::default(),
            host_driver: None,
            next_due: u64::MAX,
        }
    }
}

impl Correlator {
    /// A correlator that keeps `board` up to date with each process's
    /// last stage.
    pub fn with_board(board: StageBoard) -> Self {
        Self {
            board: Some(board),
            ..Self::default()
        }
    }

    /// Tie UVM's GPU UUIDs to /dev/nvidiaN minors with the host's list.
    pub fn set_host_gpus(&mut self, gpus: Vec<crate::attribution::HostGpu>) {
        self.host_gpus = std::sync::Arc::new(gpus);
        self.faults.set_host_gpus(self.host_gpus.clone());
    }

    /// The kernel module's version, to compare with the libcuda a process
    /// loads.
    pub fn set_host_driver(&mut self, version: Option<String>) {
        self.faults.driver = version.as_deref().and_then(|d| d.parse().ok());
        self.host_driver = version.map(Into::into);
    }

    /// The state of `pid`, made on first use.
    fn state(&mut self, pid: u32) -> &mut ProcInit {
        let (gpus, drv) = (&self.host_gpus, &self.host_driver);
        self.procs.entry(pid).or_insert_with(|| ProcInit {
            host_gpus: gpus.clone(),
            host_driver: drv.clone(),
            ..ProcInit::default()
        })
    }

    /// Feed one decoded event; stage transitions and verdicts go to `out`.
    pub fn observe(&mut self, ev: &Event, out: &mut Vec<Record>) {
        if let Some(o) = Obs::of(ev) {
            self.observe_obs(o, out);
        }
    }

    /// Feed what `Obs::of` kept of an event (the pipeline makes these on
    /// its decode threads, so the full event never crosses threads).
    pub fn observe_obs(&mut self, o: Obs, out: &mut Vec<Record>) {
        let (pid, start, end) = (o.pid, o.start, o.end);
        if end >= self.next_due {
            self.end_waits(end, out);
        }
        if end >= self.faults.next_due() {
            self.faults.due(end, out);
        }
        let at = At {
            pid,
            tid: o.tid,
            comm: o.comm,
            start,
            end,
        };
        // A call of the thread's own that ended after a stall report of it:
        // the thread went on (a signal's records, the identity, the reports
        // themselves are not its calls).
        let own_call = match &o.kind {
            ObsKind::Proc(p) => p.op == crate::decode::ProcKind::CallFailed,
            ObsKind::Identity(_) | ObsKind::Stall(_) | ObsKind::KernelLog(_) | ObsKind::Tick => {
                false
            }
            _ => true,
        };
        if own_call && let Some(st) = self.procs.get_mut(&pid) {
            st.moved_on(o.tid, end);
        }
        let via = match o.kind {
            ObsKind::Proc(p) => return self.on_proc(&p, out),
            ObsKind::Driver {
                function,
                ok,
                result,
            } => return self.on_driver(&at, function, ok, result),
            ObsKind::Identity(info) => return self.on_identity(pid, start, *info),
            ObsKind::Cuda {
                func,
                name,
                enter,
                result,
                result_name,
                device,
                value,
                interposer,
                unfinished,
            } => {
                let c = CudaObs {
                    func,
                    name,
                    enter,
                    unfinished,
                    end: tracker::CudaEnd {
                        interposer,
                        end,
                        result,
                        result_name,
                        device,
                        value,
                    },
                };
                return self.on_cuda(&at, c, out);
            }
            ObsKind::Tick => return,
            ObsKind::CallFailed(call, kind, errno) => {
                if let Some(st) = self.procs.get_mut(&pid)
                    && !st.done
                {
                    st.on_call_failed(call, (kind, errno), Default::default(), None);
                }
                return;
            }
            ObsKind::KernelLog(line) => return self.on_kernel_log(*line, start, out),
            ObsKind::Fds(c) => {
                if let Some(st) = self.procs.get_mut(&pid) {
                    st.fds.change(c, (o.tid, &o.comm.text(), start));
                }
                return;
            }
            ObsKind::Stall(r) => {
                if let Some(st) = self.procs.get_mut(&pid)
                    && !st.done
                {
                    st.on_stall(start, *r);
                }
                return;
            }
            kind => self.on_call(&at, o.stage.is_some(), kind, out),
        };
        if let Some(s) = o.stage {
            self.stage(pid, s, end, via, out);
        }
    }

    /// An ioctl or a path call: the process's state; the stage's "via"
    /// text when the call completes one (`stage`).
    fn on_call(
        &mut self,
        at: &At,
        stage: bool,
        kind: ObsKind,
        out: &mut Vec<Record>,
    ) -> Option<String> {
        let (pid, start, end) = (at.pid, at.start, at.end);
        match kind {
            ObsKind::Ioctl {
                ok,
                call,
                fd,
                failure,
                gpu,
                uvm,
                pageable,
                told_version,
                mem_alloc,
            } => {
                let st = self.state(pid);
                if told_version.is_some() {
                    st.told_version = told_version;
                }
                if mem_alloc {
                    st.mem_allocs = st.mem_allocs.saturating_add(1);
                }
                let io = IoctlObs {
                    pid,
                    tid: at.tid,
                    comm: at.comm,
                    span: (start, end),
                    ok,
                    call,
                    fd,
                    failure,
                    stage,
                    gpu,
                    uvm,
                    pageable,
                };
                self.on_ioctl(at, io, out)
            }
            ObsKind::LibLoad { path, failure } => {
                self.on_lib_load(at, path, failure);
                None
            }
            ObsKind::Path {
                opened_device,
                problem,
                open_path,
                path,
                ok,
                open,
                gpu_minor,
                mknod,
                fd,
            } => {
                let st = self.state(pid);
                if opened_device || (open && node_path(&path)) {
                    st.held_begins(start);
                }
                st.begin(start, &at.comm);
                st.last_ns = st.last_ns.max(end);
                let p = PathObs {
                    opened_device,
                    problem,
                    open_path,
                    path,
                    ok,
                    open,
                    gpu_minor,
                    mknod_ok: mknod.is_some() && ok,
                    mknod,
                    fd,
                };
                st.on_path(p, end)
            }
            _ => None,
        }
    }

    /// A driver-layer span: kept until the syscall it belongs to returns.
    fn on_driver(&mut self, at: &At, function: &'static str, ok: bool, result: String) {
        let (_, v) = self
            .spans
            .entry(at.tid)
            .or_insert_with(|| (at.pid, Vec::new()));
        if v.len() == 32 {
            v.remove(0);
        }
        v.push(Span {
            function,
            duration_ns: at.end.saturating_sub(at.start),
            result,
            ok,
            start: at.start,
            end: at.end,
        });
    }

    /// Who the process is. A later read that found the process gone does
    /// not replace what an earlier one learned; the libcuda files the
    /// loader opened add up over the reads, and a tracer seen once stays.
    fn on_identity(&mut self, pid: u32, at: u64, info: crate::attribution::ProcessInfo) {
        let st = self.state(pid);
        let opened = info.libcuda_opened.clone();
        if info.exe.is_some() || st.info.as_ref().is_none_or(|i| i.exe.is_none()) {
            // Only a read that is adopted dates the identity.
            st.info_ns = st.info_ns.max(at);
            let (before, held, tracer) = st
                .info
                .take()
                .map(|i| (i.libcuda_opened, i.held_at_start, i.tracer))
                .unwrap_or_default();
            let mut info = info;
            // A later read (at a failure) does not know the start's scan,
            // nor a tracer that has let go of the process since.
            info.held_at_start |= held;
            info.tracer = info.tracer.or(tracer);
            st.info = Some(info);
            crate::attribution::merge_opened(st.info.as_mut(), before);
        }
        crate::attribution::merge_opened(st.info.as_mut(), opened);
    }

    /// A libcuda call's entry or return: a run-time fault's, and the
    /// start-up's.
    fn on_cuda(&mut self, at: &At, c: CudaObs, out: &mut Vec<Record>) {
        let (pid, start, end) = (at.pid, at.start, at.end);
        if c.unfinished {
            let comm = at.comm.text();
            self.faults
                .unfinished(pid, at.tid, &comm, c.name, (start, end));
            return;
        }
        if c.enter {
            self.faults.entered(pid, at.tid, c.name, start);
        } else {
            // Every return ends its call in flight; only a run-time call's
            // failure can be a fault.
            let context = self.procs.get(&pid).and_then(|s| s.context.as_ref());
            let fault_result = c.end.result.filter(|_| faults::run_time(c.func, context));
            let gpus: Vec<u32> = self
                .procs
                .get(&pid)
                .map(|s| s.gpus.iter().filter_map(|g| g.minor).collect())
                .unwrap_or_default();
            let comm = at.comm.text();
            self.faults.returned(
                pid,
                at.tid,
                &comm,
                c.func,
                fault_result,
                (start, end),
                &gpus,
            );
        }
        let st = self.state(pid);
        if c.enter && c.func == crate::decode::cudafn::CU_INIT {
            st.held_begins(start);
        }
        st.begin(start, &at.comm);
        let before = out.len();
        if c.enter && c.end.interposer {
            st.on_interposer_entry(c.func);
        } else {
            if c.enter && c.func == crate::decode::cudafn::CU_INIT {
                st.cuinit_at.get_or_insert(start);
                st.cuinit_tid = Some(at.tid);
            }
            st.on_cuda(pid, c.func, (!c.enter).then_some(c.end), out);
        }
        if let Some(due) = self.procs.get(&pid).and_then(|s| s.context_due) {
            self.next_due = self.next_due.min(due);
        }
        self.what_holders_did(&mut out[before..]);
    }

    /// An NVIDIA line of the kernel log: its record.
    fn on_kernel_log(&mut self, line: faults::LogLine, at: u64, out: &mut Vec<Record>) {
        let procs = &self.procs;
        let comm_of = |p: u32| {
            procs
                .get(&p)
                .map(|s| s.comm.clone())
                .filter(|c| !c.is_empty())
        };
        if let Some(k) = self.faults.log_line(line, at, comm_of) {
            if let Some(a) = &k.seccomp
                && let Some(st) = self.procs.get_mut(&a.pid)
            {
                st.on_seccomp_audit(a, at);
            }
            out.push(Record::KernelLog(Box::new(k)));
        }
    }

    /// An ioctl returned: the process's state, with the driver spans its
    /// thread ran meanwhile. Returns the stage's "via" text.
    fn on_ioctl(&mut self, at: &At, io: IoctlObs, out: &mut Vec<Record>) -> Option<String> {
        let spans = self.spans.get_mut(&at.tid).map(|(_, v)| v);
        let (gpus, drv) = (&self.host_gpus, &self.host_driver);
        let st = self.procs.entry(at.pid).or_insert_with(|| ProcInit {
            host_gpus: gpus.clone(),
            host_driver: drv.clone(),
            ..ProcInit::default()
        });
        st.begin(at.start, &at.comm);
        st.last_ns = st.last_ns.max(at.end);
        st.on_ioctl(io, spans, out)
    }

    /// The dynamic loader opened (or failed to open) a libcuda. A loader's
    /// search is a few dozen opens at most (every hwcaps folder of every
    /// search path); a successful open is always kept.
    fn on_lib_load(&mut self, at: &At, path: String, failure: Option<facts::CallResult>) {
        let st = self.state(at.pid);
        st.held_begins(at.start);
        st.begin(at.start, &at.comm);
        st.last_ns = st.last_ns.max(at.end);
        st.lib_open_count = st.lib_open_count.saturating_add(1);
        if failure.is_none() || st.lib_opens.len() < 64 {
            st.lib_opens.push((path, failure));
        }
    }

    /// A first context refused for want of memory (or with every GPU
    /// busy): what nvprobe saw each holder of the GPU do since its start.
    fn what_holders_did(&self, recs: &mut [Record]) {
        for r in recs {
            let Record::Cuinit(v) = r else { continue };
            let Some(info) = v.process.as_ref() else {
                continue;
            };
            let seen: Vec<String> = info
                .gpu_holders
                .iter()
                .filter_map(|h| {
                    let st = self.procs.get(&h.pid)?;
                    Some(format!(
                        "pid {} made {} memory allocation{} (RM) and {} driver calls while nvprobe followed it",
                        h.pid,
                        st.mem_allocs,
                        if st.mem_allocs == 1 { "" } else { "s" },
                        st.calls
                    ))
                })
                .take(8)
                .collect();
            if seen.is_empty() {
                continue;
            }
            for d in v.diagnoses.iter_mut().filter(|d| {
                matches!(
                    d.id,
                    DiagId::ContextOutOfMemory | DiagId::DevicesUnavailable
                ) && d.about.holders
            }) {
                d.evidence.push_str(&format!("; {}", seen.join(", ")));
            }
        }
    }

    /// The verdicts of start-ups whose wait for a first context ran out by
    /// `now`.
    fn end_waits(&mut self, now: u64, out: &mut Vec<Record>) {
        let mut next = u64::MAX;
        let mut pids: Vec<u32> = Vec::new();
        for (pid, st) in self.procs.iter_mut() {
            match st.context_due {
                // A context call still running: its return decides.
                Some(due) if due <= now && st.ctx_in_flight => {
                    let later = now.saturating_add(1_000_000_000);
                    st.context_due = Some(later);
                    next = next.min(later);
                }
                Some(due) if due <= now => pids.push(*pid),
                Some(due) => next = next.min(due),
                None => {}
            }
        }
        pids.sort_unstable();
        for pid in pids {
            if let Some(st) = self.procs.get_mut(&pid) {
                st.context_waited = true;
                st.give_verdict(pid, out);
            }
        }
        self.next_due = next;
    }

    /// A stage reached: said once per process, and put on the board.
    fn stage(&mut self, pid: u32, s: usize, end: u64, via: Option<String>, out: &mut Vec<Record>) {
        let Some(st) = self.procs.get_mut(&pid) else {
            return;
        };
        let Some(hit) = st.reach(s, end, via) else {
            return;
        };
        if let Some(b) = &self.board
            && let Ok(mut b) = b.lock()
        {
            b.insert(pid, hit.name.to_owned());
        }
        out.push(Record::Stage {
            pid,
            comm: st.comm.clone(),
            hit,
        });
    }

    fn unboard(&self, pid: u32) {
        if let Some(b) = &self.board
            && let Ok(mut b) = b.lock()
        {
            b.remove(&pid);
        }
    }

    fn on_proc(&mut self, p: &ProcCall, out: &mut Vec<Record>) {
        match p.op {
            ProcKind::Signal => {
                if let Some(st) = self.procs.get_mut(&p.target_pid) {
                    st.on_signal(p);
                }
            }
            ProcKind::SignalDelivered => {
                if let Some(st) = self.procs.get_mut(&p.proc.pid) {
                    st.on_signal_delivered(p.proc.pid, p, out);
                }
            }
            ProcKind::Fork => self.on_fork(p),
            ProcKind::CallFailed => {
                // What a process does once its start-up has failed (a
                // Python script printing the error) is not its start-up.
                if let Some(st) = self.procs.get_mut(&p.proc.pid)
                    && !st.done
                    && !st.startup_failed()
                    && let Some(failed) = p.failed
                {
                    st.on_failed_syscall(p);
                    let call = p.call.as_deref().unwrap_or("?");
                    if rules_startcalls::may_explain(failed) && !p.remap_in_place() {
                        st.on_call_failed(call.to_owned(), failed, p.mem_ask(), p.arg(0));
                    }
                }
            }
            ProcKind::Exit => self.on_exit(p, out),
            ProcKind::Exec => self.on_exec(p, out),
            ProcKind::OomVictim => {
                if let Some(st) = self.procs.get_mut(&p.target_pid) {
                    st.on_oom_victim();
                }
            }
            ProcKind::ThreadExit => {
                // The thread that entered cuInit (one whose return was
                // missed and that ends later is not it: a tid seen entering
                // is compared).
                if let Some(st) = self.procs.get_mut(&p.target_pid)
                    && st.cuinit_running()
                    && st.cuinit_thread_ended.is_none()
                    && st.cuinit_tid.is_none_or(|t| Some(t) == p.target_tid)
                {
                    st.cuinit_thread_ended = Some((
                        p.time_ns,
                        p.target_tid.unwrap_or(p.target_pid),
                        p.exit_code.unwrap_or(0),
                    ));
                }
            }
            ProcKind::Unknown => {}
        }
    }

    fn on_fork(&mut self, p: &ProcCall) {
        let init_done = self
            .procs
            .get(&p.proc.pid)
            .is_some_and(|s| s.reached[7] || matches!(s.curesult, Some((0, _))));
        // With the host's facts, as every process's state.
        let child = self.state(p.target_pid);
        child.parent = Some((p.proc.pid, init_done));
        if child.first_ns == 0 {
            child.first_ns = p.time_ns;
            child.comm = p.proc.comm.clone();
        }
    }

    fn on_exit(&mut self, p: &ProcCall, out: &mut Vec<Record>) {
        let pid = p.target_pid;
        let exit = Exit::of_code(p.exit_code.unwrap_or(0));
        self.faults.ended(pid, exit, p.time_ns);
        // A helper such as nvidia-modprobe: tell its parent how it ended.
        if crate::decode::is_nvidia_modprobe(&p.proc.comm)
            && let Some((ppid, _)) = self.procs.get(&pid).and_then(|s| s.parent)
            && let Some(parent) = self.procs.get_mut(&ppid)
        {
            parent.modprobe.push((
                format!(
                    "nvidia-modprobe (pid {pid}) {}",
                    p.exit.as_deref().unwrap_or("exited")
                ),
                p.exit_code == Some(0),
            ));
        }
        if let Some(st) = self.procs.get_mut(&pid) {
            // The calls the kernel counted instead of sending are calls it
            // made; not for a start-up begun by a process that held its
            // descriptor when nvprobe started, whose count holds the calls
            // made on that descriptor before (its verdict counts the calls
            // of its start-up that reached nvprobe, at every level). Nor for
            // a program that made no NVIDIA call of its own after an exec:
            // in a recording made before exec records carried the old
            // program's count, the kernel's count is the process's, so
            // those calls were the program's before it.
            if !st.began && st.has_activity() {
                st.calls = st.calls.saturating_add(p.unsent.unwrap_or(0));
            }
            st.settle_all(pid, SigOutcome::DiedInCall, out);
        }
        if let Some(st) = self.procs.get_mut(&pid)
            && !st.done
            // Forked children that never touched NVIDIA get no verdict.
            && st.has_activity()
        {
            st.exit_sig = exit.signal();
            st.last_ns = st.last_ns.max(p.time_ns);
            st.take_cut_short(exit);
            st.settle_context();
            let v = verdict(pid, st, Some(exit));
            st.done = true;
            out.push(Record::Cuinit(Box::new(v)));
        }
        self.procs.remove(&pid);
        self.unboard(pid);
        self.spans.retain(|_, (p, _)| *p != pid);
    }

    /// Processes and threads held now (for the tests of boundedness).
    pub fn held(&self) -> (usize, usize) {
        (self.procs.len(), self.spans.len())
    }

    fn on_exec(&mut self, p: &ProcCall, out: &mut Vec<Record>) {
        // A new program: a new start-up to follow.
        self.faults.ended(p.target_pid, Exit::Exec, p.time_ns);
        let mut parent = None;
        let mut late_info = None;
        if let Some(st) = self.procs.get_mut(&p.target_pid) {
            // The old program's calls the kernel counted (as at an exit).
            if !st.began && st.has_activity() {
                st.calls = st.calls.saturating_add(p.unsent.unwrap_or(0));
            }
            st.settle_all(p.target_pid, SigOutcome::Eintr, out);
            parent = st.parent;
            // An identity read after the exec (the collector reads it when
            // the new program's first record is drained, and sends it
            // before that batch) is the new program's, not the old one's.
            if st.info_ns > p.time_ns {
                late_info = st.info.take().map(|i| (i, st.info_ns));
            }
        }
        if let Some(st) = self.procs.get_mut(&p.target_pid)
            && !st.done
            && st.has_activity()
        {
            st.take_cut_short(Exit::Exec);
            st.settle_context();
            out.push(Record::Cuinit(Box::new(verdict(
                p.target_pid,
                st,
                Some(Exit::Exec),
            ))));
        }
        self.procs.remove(&p.target_pid);
        self.unboard(p.target_pid);
        self.spans.retain(|_, (pid, _)| *pid != p.target_pid);
        // The new program is still its parent's child (a helper
        // such as nvidia-modprobe reports to it when it exits).
        if parent.is_some() || late_info.is_some() {
            let st = self.state(p.target_pid);
            st.parent = parent;
            if let Some((info, at)) = late_info {
                st.info = Some(info);
                st.info_ns = at;
            }
            st.first_ns = p.time_ns;
            st.comm = p.proc.comm.clone();
        }
    }

    /// Verdicts for processes still alive when tracing stops.
    pub fn finish(&mut self, out: &mut Vec<Record>) {
        self.faults.finish(out);
        let mut pids: Vec<u32> = self.procs.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            if let Some(st) = self.procs.get_mut(&pid) {
                st.settle_all(pid, SigOutcome::Interrupted, out);
            }
            if let Some(st) = self.procs.get_mut(&pid)
                && !st.done
                && st.has_activity()
            {
                st.settle_context();
                out.push(Record::Cuinit(Box::new(verdict(pid, st, None))));
                st.done = true;
            }
        }
    }
}

/// A path whose open, failed or not, ends the kernel side's `HELD` (an
/// NVIDIA node or its /dev/char link, `nvprobe-ebpf`'s `held_ends`).
pub(crate) fn node_path(path: &str) -> bool {
    nvprobe_common::NVIDIA_PATH_PREFIXES[..2]
        .iter()
        .any(|p| path.as_bytes().starts_with(p))
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_classes;
#[cfg(test)]
mod tests_context;
#[cfg(test)]
mod tests_faults;
#[cfg(test)]
mod tests_fds;
#[cfg(test)]
mod tests_hmm;
#[cfg(test)]
mod tests_kill;
#[cfg(test)]
mod tests_library;
#[cfg(test)]
mod tests_memory;
#[cfg(test)]
mod tests_refused;
#[cfg(test)]
mod tests_stall;
#[cfg(test)]
mod tests_startcalls;
