//! Run-time faults: the kernel log's NVIDIA lines (`kernel_log` records,
//! each tied to its GPU, its process and that process's call), and, for a
//! process whose CUDA call returned a sticky or fatal error, or that the
//! driver named in an Xid, or that was killed while it waited for the GPU,
//! one `fault` verdict: the call and its CUresult, the Xid that explains
//! it, how the process ended, and what to do.
//!
//! Timing, measured on the H200 (580.159.04, tests/scripts/gpufault.py):
//! an MMU fault's Xid 31 and an exception's Xid 13 are logged while the
//! synchronisation that returns the error still waits (20–150 ms before
//! it returns); the channel reset's Xid 43 that follows comes 3 ms after
//! the call returned. So a verdict waits [`GRACE_NS`] after the process
//! ends for the lines that follow it. An Xid without a pid goes with the
//! line with a pid that follows it on its GPU within [`BURST_NS`], else
//! with a failing call on its GPU that was running when it was logged (or
//! returned at most [`AFTER_NS`] before, or began at most [`WINDOW_NS`]
//! after).

use std::collections::{HashMap, VecDeque};

mod judge;
pub mod types;

use judge::{best, judge, text_of};

use super::facts::Exit;
pub use types::*;

use crate::{
    decode::curesult,
    kmsg::{self},
};

/// How long a fault verdict waits after its process ended for the driver's
/// lines that follow (Xid 43 came 3 ms after the call on the H200).
pub const GRACE_NS: u64 = 500_000_000;
/// A process still running this long after its first fault (or the Xid
/// that named it) gets its verdict then.
pub const WAIT_NS: u64 = 10_000_000_000;
/// An Xid without a pid explains a failing call on its GPU that was
/// running when it was logged, or that began at most this long after.
pub const WINDOW_NS: u64 = 2_000_000_000;
/// An Xid without a pid logged this long before one with a pid on the
/// same GPU is of that process (on the H200 a misaligned access logged two
/// Xid 13 lines without a pid, then Xid 43 with it, 3.5 ms later).
pub const BURST_NS: u64 = 100_000_000;
/// An Xid without a pid is tied to a failing call on its GPU only while
/// the call ran or this soon after it returned: the lines without a pid
/// (31's and 13's details) are logged while the synchronisation waits; a
/// line 0.4 s after one process's failure was the next process's fault
/// on the H200.
pub const AFTER_NS: u64 = 20_000_000;
/// Xids kept per process, and without a process.
const XIDS_KEPT: usize = 8;
const RECENT_KEPT: usize = 64;
const PROCS_KEPT: usize = 4096;

/// Whether a call's failure is a run-time fault's: any call once the
/// process made its first context, and before that (or when nvprobe did
/// not see its start) every call but the start-up's own (cuInit, the
/// version, device and context calls, whose failures the `cuinit` verdict
/// judges).
pub fn run_time(func: u32, context: Option<&super::state::ContextStep>) -> bool {
    context.is_some_and(|c| c.code == 0) || !crate::decode::cudafn::is_startup(func)
}

/// A launch the driver refused at once held as a process's first failure
/// (the one failure kept that is not fatal): it ran nothing on the GPU.
fn refusal(f: &FaultCall) -> bool {
    f.result.is_some_and(|r| !curesult::fatal(r))
}

/// What the Xid table says of `n`.
pub fn meaning(n: u32) -> Option<XidMeaning> {
    kmsg::xid::info(n).map(|i| XidMeaning {
        name: i.name,
        meaning: i.meaning,
        action: i.action,
        what_to_do: i.what_to_do,
    })
}

/// The correlator's run-time part.
#[derive(Debug, Default)]
pub struct Faults {
    procs: HashMap<u32, Pending>,
    /// Xids without a pid, newest last.
    recent: VecDeque<Seen>,
    /// Calls entered and not returned (start-up set and `all`): tid ->
    /// (pid, function, start).
    inflight: HashMap<u32, (u32, &'static str, u64)>,
    /// PCI slot -> UUID, from the driver's lines.
    uuids: HashMap<String, String>,
    host_gpus: std::sync::Arc<Vec<crate::attribution::HostGpu>>,
    /// The kernel module's version (parsed once), for RM control names.
    pub(crate) driver: Option<crate::decode::version::DriverVersion>,
    next_due: u64,
}

impl Faults {
    pub fn new(host_gpus: std::sync::Arc<Vec<crate::attribution::HostGpu>>) -> Self {
        Self {
            host_gpus,
            next_due: u64::MAX,
            ..Self::default()
        }
    }

    pub fn set_host_gpus(&mut self, g: std::sync::Arc<Vec<crate::attribution::HostGpu>>) {
        self.host_gpus = g;
    }

    /// The earliest time a verdict is due (u64::MAX: none).
    pub fn next_due(&self) -> u64 {
        self.next_due
    }

    fn pending(&mut self, pid: u32, at: u64) -> Option<&mut Pending> {
        if !self.procs.contains_key(&pid) && self.procs.len() >= PROCS_KEPT {
            return None;
        }
        let p = self.procs.entry(pid).or_insert_with(|| Pending {
            due: at.saturating_add(WAIT_NS),
            ..Pending::default()
        });
        self.next_due = self.next_due.min(p.due);
        Some(p)
    }

    /// A libcuda call's entry (start-up set, or `all`).
    pub fn entered(&mut self, pid: u32, tid: u32, func: &'static str, start: u64) {
        if self.inflight.len() < 16384 || self.inflight.contains_key(&tid) {
            self.inflight.insert(tid, (pid, func, start));
        }
    }

    /// A libcuda call's return (`func`: its number). `gpus`: the process's
    /// GPU minors.
    #[allow(clippy::too_many_arguments)]
    pub fn returned(
        &mut self,
        pid: u32,
        tid: u32,
        comm: &str,
        number: u32,
        result: Option<i64>,
        span: (u64, u64),
        gpus: &[u32],
    ) {
        self.inflight.remove(&tid);
        let func = crate::decode::cudafn::name(number);
        let Some(r) = result.filter(|&r| r != 0) else {
            return;
        };
        let result_name = curesult::name(r);
        // A launch the driver refused at once is not sticky, but it is the
        // program's failure and no later call says it (--libcuda-hooks
        // launches).
        let refused_launch =
            crate::decode::cudafn::is_launch(number) && curesult::launch_refusal(r).is_some();
        if !curesult::fatal(r) && !refused_launch {
            if let Some(p) = self.procs.get_mut(&pid) {
                p.last_failed = Some(LogCall {
                    func: func.to_owned(),
                    state: "last_failed",
                    result: Some(r),
                    result_name,
                });
            }
            return;
        }
        // A refused launch held as the process's first failure gives way to
        // a fault that comes after it (a sticky error, the real story).
        let after_refusal = !refused_launch
            && self
                .procs
                .get(&pid)
                .and_then(|p| p.first.as_ref())
                .is_some_and(refusal);
        let first = self.procs.get(&pid).is_none_or(|p| p.first.is_none()) || after_refusal;
        let host = self.host_gpus.clone();
        let recent: Vec<FaultXid> = self
            .recent
            .iter_mut()
            // A launch that never ran caused no Xid.
            .filter(|_| first && !refused_launch)
            .filter(|s| !s.claimed)
            .filter(|s| {
                s.at.saturating_add(WINDOW_NS) >= span.0 && s.at <= span.1.saturating_add(AFTER_NS)
            })
            .filter(|s| gpu_fits(&host, &s.line.pci, gpus))
            .map(|s| {
                s.claimed = true;
                tie(s, "gpu_time")
            })
            .collect();
        let Some(p) = self.pending(pid, span.1) else {
            return;
        };
        p.comm = comm.to_owned();
        p.last_failed = Some(LogCall {
            func: func.to_owned(),
            state: "last_failed",
            result: Some(r),
            result_name,
        });
        if p.gpus.is_empty() {
            p.gpus = gpus.to_vec();
        }
        if p.first.is_some() && !after_refusal {
            p.later = p.later.saturating_add(1);
            return;
        }
        p.first = Some(FaultCall {
            func,
            tid,
            result: Some(r),
            result_name,
            start_ns: span.0,
            duration_ns: span.1.saturating_sub(span.0),
        });
        for x in recent {
            push_xid(&mut p.xids, x);
        }
        p.due = p.due.min(span.1.saturating_add(WAIT_NS));
        let due = p.due;
        self.next_due = self.next_due.min(due);
    }

    /// A hooked call still waiting when its thread ended.
    pub fn unfinished(
        &mut self,
        pid: u32,
        tid: u32,
        comm: &str,
        func: &'static str,
        span: (u64, u64),
    ) {
        let Some(p) = self.pending(pid, span.1) else {
            return;
        };
        p.comm = comm.to_owned();
        p.unfinished.get_or_insert(FaultCall {
            func,
            tid,
            result: None,
            result_name: None,
            start_ns: span.0,
            duration_ns: span.1.saturating_sub(span.0),
        });
    }

    /// A kernel-log line at `at` (nvprobe's clock); `comm_of` names a pid
    /// nvprobe follows.
    pub fn log_line(
        &mut self,
        line: LogLine,
        at: u64,
        comm_of: impl Fn(u32) -> Option<String>,
    ) -> Option<KernelLog> {
        // (The line read once: a driver's, else a seccomp audit line.)
        let seccomp = kmsg::audit::seccomp_audit(&line.message);
        let kind = kmsg::kind_of(&line.message)
            .or_else(|| seccomp.as_ref().map(|_| kmsg::LogKind::Seccomp))?;
        // A seccomp audit line is kept only for a process nvprobe follows
        // (its verdict reads it); the host's others are not nvprobe's.
        if let Some(a) = &seccomp
            && comm_of(a.pid).is_none()
        {
            return None;
        }
        if let Some((slot, uuid)) = kmsg::gpu_identity(&line.message)
            && (self.uuids.len() < 64 || self.uuids.contains_key(&slot))
        {
            self.uuids.insert(slot, uuid);
        }
        let xid = kmsg::parse_xid(&line.message);
        let pci = xid
            .as_ref()
            .map(|x| x.pci.clone())
            .or_else(|| kmsg::line_gpu(&line.message));
        let gpu = pci.as_deref().map(|s| self.gpu_of(s));
        let pid = xid
            .as_ref()
            .and_then(|x| x.pid)
            .or(seccomp.as_ref().map(|a| a.pid));
        let mut call = None;
        if let Some(x) = &xid {
            let seen = Seen {
                at,
                line: x.clone(),
                message: line.message.clone(),
                claimed: false,
            };
            match x.pid {
                Some(pid) => {
                    let inflight = self
                        .inflight
                        .values()
                        .filter(|(p, _, _)| *p == pid)
                        .max_by_key(|(_, _, s)| *s)
                        .map(|(_, f, _)| LogCall {
                            func: (*f).to_owned(),
                            state: "in_flight",
                            result: None,
                            result_name: None,
                        });
                    // The lines without a pid just before it on its GPU
                    // are the same event's.
                    let burst: Vec<FaultXid> = self
                        .recent
                        .iter_mut()
                        .filter(|s| !s.claimed && s.line.pci == x.pci)
                        .filter(|s| s.at <= at && at - s.at <= BURST_NS)
                        .map(|s| {
                            s.claimed = true;
                            tie(s, "same_burst")
                        })
                        .collect();
                    if let Some(p) = self.pending(pid, at) {
                        if p.comm.is_empty() {
                            p.comm = comm_of(pid).or_else(|| x.name.clone()).unwrap_or_default();
                        }
                        call = inflight.or_else(|| p.last_failed.clone());
                        for b in burst {
                            push_xid(&mut p.xids, b);
                        }
                        push_xid(&mut p.xids, tie(&seen, "pid"));
                    }
                }
                None => self.tie_by_gpu(seen, at),
            }
        }
        let meaning = xid.as_ref().and_then(|x| meaning(x.number));
        let rm_control = xid
            .as_ref()
            .filter(|x| matches!(x.number, 119 | 120))
            .and_then(|x| rm_control_of(&x.detail, self.driver));
        Some(KernelLog {
            rm_control,
            comm: pid
                .and_then(&comm_of)
                .or_else(|| xid.as_ref().and_then(|x| x.name.clone())),
            line,
            kind,
            xid,
            meaning,
            gpu,
            pid,
            call,
            seccomp,
        })
    }

    fn gpu_of(&self, slot: &str) -> FaultGpu {
        let host = self
            .host_gpus
            .iter()
            .find(|g| g.pci.as_deref().and_then(kmsg::pci_slot).as_deref() == Some(slot));
        FaultGpu {
            pci: Some(slot.to_owned()),
            minor: host.map(|g| g.minor),
            uuid: host
                .and_then(|g| g.uuid.clone())
                .or_else(|| self.uuids.get(slot).cloned()),
        }
    }

    /// The process ended (exit, or exec of a new program).
    pub(crate) fn ended(&mut self, pid: u32, how: Exit, at: u64) {
        if let Some(p) = self.procs.get_mut(&pid) {
            p.ended = Some(how);
            p.due = p.due.min(at.saturating_add(GRACE_NS));
            self.next_due = self.next_due.min(p.due);
        }
        self.inflight.retain(|_, (p, _, _)| *p != pid);
    }

    /// An Xid line without a pid: to the failing call already seen on its
    /// GPU, running then or just ended; kept a while for a line with a
    /// pid that follows it (the same burst).
    fn tie_by_gpu(&mut self, mut seen: Seen, at: u64) {
        let x = &seen.line;
        // A failing call already seen on this GPU, running
        // then or just ended.
        let host = self.host_gpus.clone();
        // (The one whose call was running then, else the one
        // that began soonest after.)
        let mut best: Option<(u64, &mut Pending)> = None;
        for p in self.procs.values_mut() {
            if let Some(f) = &p.first
                && !refusal(f)
                && f.start_ns <= at.saturating_add(WINDOW_NS)
                && at <= f.start_ns + f.duration_ns + AFTER_NS
                && gpu_fits(&host, &x.pci, &p.gpus)
            {
                let gap = f.start_ns.saturating_sub(at);
                if best.as_ref().is_none_or(|(g, _)| gap < *g) {
                    best = Some((gap, p));
                }
            }
        }
        if let Some((_, p)) = best {
            push_xid(&mut p.xids, tie(&seen, "gpu_time"));
            seen.claimed = true;
        }
        if self.recent.len() >= RECENT_KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back(seen);
    }

    /// The verdicts due at `now`.
    pub fn due(&mut self, now: u64, out: &mut Vec<super::record::Record>) {
        if now < self.next_due {
            return;
        }
        let mut pids: Vec<u32> = self
            .procs
            .iter()
            .filter(|(_, p)| p.due <= now)
            .map(|(&pid, _)| pid)
            .collect();
        pids.sort_unstable();
        for pid in pids {
            if let Some(p) = self.procs.remove(&pid) {
                self.emit(pid, p, out);
            }
        }
        self.next_due = self.procs.values().map(|p| p.due).min().unwrap_or(u64::MAX);
    }

    /// Every verdict still waiting (the stop).
    pub fn finish(&mut self, out: &mut Vec<super::record::Record>) {
        let mut pids: Vec<u32> = self.procs.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            if let Some(p) = self.procs.remove(&pid) {
                self.emit(pid, p, out);
            }
        }
        self.next_due = u64::MAX;
    }

    fn emit(&self, pid: u32, p: Pending, out: &mut Vec<super::record::Record>) {
        if p.first.is_none() && p.unfinished.is_none() && p.xids.is_empty() {
            return;
        }
        let killed = matches!(p.ended, Some(Exit::Signal(_)));
        let ended = p.ended.map_or_else(|| "still running".into(), Exit::text);
        if p.first.is_none() && p.xids.is_empty() && !killed {
            // A thread still waiting when its process exited on its own (or
            // exec'd) is not a fault: nothing failed and nothing was killed.
            return;
        }
        let xid = best(&p.xids).cloned();
        let gpu = xid.as_ref().map(|x| self.gpu_of(&x.pci)).or_else(|| {
            let m = *p.gpus.first()?;
            let h = self.host_gpus.iter().find(|g| g.minor == m);
            Some(FaultGpu {
                pci: h.and_then(|g| g.pci.as_deref()).and_then(kmsg::pci_slot),
                minor: Some(m),
                uuid: h.and_then(|g| g.uuid.clone()),
            })
        });
        let (class, drain, hint) = judge(p.first.as_ref(), p.unfinished.as_ref(), &p.xids, &ended);
        let text = text_of(&p, xid.as_ref(), &ended, true);
        // The text view names the Xid's meaning on a line of its own.
        let headline = xid
            .as_ref()
            .is_some_and(|x| x.meaning.is_some())
            .then(|| text_of(&p, xid.as_ref(), &ended, false));
        out.push(super::Record::Fault(Box::new(Fault {
            pid,
            comm: p.comm,
            call: p.first,
            later_failures: p.later,
            unfinished: p.unfinished,
            xid,
            xids: p.xids,
            gpu,
            ended,
            class,
            drain,
            hint,
            text,
            headline,
        })));
    }
}

fn tie(s: &Seen, how: &'static str) -> FaultXid {
    FaultXid {
        number: s.line.number,
        meaning: meaning(s.line.number),
        pci: s.line.pci.clone(),
        mmu_fault: s.line.mmu_fault.clone(),
        detail: s.line.detail.clone(),
        tied_by: how,
        mono_ns: s.at,
        message: s.message.clone(),
    }
}

fn push_xid(v: &mut Vec<FaultXid>, x: FaultXid) {
    if v.len() < XIDS_KEPT
        && !v
            .iter()
            .any(|o| o.message == x.message && o.mono_ns == x.mono_ns)
    {
        v.push(x);
        v.sort_by_key(|x| x.mono_ns);
    }
}

/// Whether an Xid on `slot` can be about a process on GPUs `minors` (none
/// known: any of the host's). A slot the host's GPU list lacks is no
/// process's here; without a list (a recording without one), any.
fn gpu_fits(host: &[crate::attribution::HostGpu], slot: &str, minors: &[u32]) -> bool {
    let Some(m) = host
        .iter()
        .find(|g| g.pci.as_deref().and_then(kmsg::pci_slot).as_deref() == Some(slot))
        .map(|g| g.minor)
    else {
        return host.is_empty();
    };
    minors.is_empty() || minors.contains(&m)
}

/// The control a GSP RPC timeout line names, after "(GSP_RM_CONTROL) (".
fn rm_control_of(
    detail: &str,
    driver: Option<crate::decode::version::DriverVersion>,
) -> Option<RmControlRef> {
    let r = detail.split_once("(GSP_RM_CONTROL) (0x")?.1;
    let hex: String = r.chars().take_while(char::is_ascii_hexdigit).collect();
    let control = u32::from_str_radix(&hex, 16).ok()?;
    let v = crate::decode::version::VersionCtx::from_version(driver);
    Some(RmControlRef {
        control,
        control_name: crate::decode::control::name(control, &v),
    })
}
