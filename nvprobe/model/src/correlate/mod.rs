//! Per-process cuInit progress, from the driver calls alone (no libcuda
//! uprobes yet): the milestones a process reaches, how its start-up ended,
//! and, when it went wrong, the call that explains it with a hint.
//!
//! Stages are milestones, not a strict order (ABI reference §7.3). On the
//! real 580.159.04 driver (tests/fixtures) the order is S0 S2 S1 S4 S3 S5 S6
//! S7: the version handshake runs on a throwaway client, and UVM init comes
//! before the GPU attach.
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

use std::collections::HashMap;

use serde::Serialize;

use crate::decode::{Event, Ioctl, ProcCall};

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

/// Index of the stage an event completes, if any.
fn stage_of(ev: &Event) -> Option<usize> {
    match ev {
        Event::Open(o) if o.ok && o.device.as_ref().is_some_and(|d| d.kind == "ctl") => Some(0),
        Event::Ioctl(i) if i.ok && i.ret == 0 => {
            let control = static_arg(i, "control_name").unwrap_or("");
            let class = static_arg(i, "hClass_name").unwrap_or("");
            match i.xfer.as_ref().and_then(|x| x.name).or(i.name)? {
                "NV_ESC_RM_CONTROL" if control == "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION" => {
                    Some(1)
                }
                "NV_ESC_CHECK_VERSION_STR" => Some(1),
                "NV_ESC_RM_ALLOC" if class == "NV01_ROOT_CLIENT" => Some(2),
                "NV_ESC_RM_CONTROL"
                    if matches!(
                        control,
                        "NV0000_CTRL_CMD_GPU_ATTACH_IDS" | "NV0000_CTRL_CMD_GPU_ASYNC_ATTACH_ID"
                    ) =>
                {
                    Some(3)
                }
                "UVM_INITIALIZE" => Some(4),
                "NV_ESC_REGISTER_FD" if i.device.kind == "gpu" => Some(5),
                "NV_ESC_RM_ALLOC" if class == "NV20_SUBDEVICE_0" => Some(6),
                "UVM_REGISTER_GPU" => Some(7),
                "UVM_REGISTER_GPU_VASPACE" => Some(8),
                _ => None,
            }
        }
        _ => None,
    }
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StageHit {
    pub stage: &'static str,
    pub name: &'static str,
    /// Milliseconds since the process's first NVIDIA call.
    pub at_ms: f64,
    pub via: String,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FailedCall {
    pub call: String,
    /// The NV_STATUS name or errno.
    pub result: String,
    pub at_ms: f64,
    pub duration_ms: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SignalInfo {
    #[serde(skip)]
    pub at_ns: u64,
    pub sig: i32,
    pub name: String,
    /// Who sent it: a task, or the kind of kernel source (timer).
    pub sender: String,
    pub sender_pid: Option<u32>,
    pub at_ms: f64,
    /// The NVIDIA call that was running when the signal came, if any.
    pub during: Option<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Diagnosis {
    pub id: &'static str,
    pub evidence: String,
    pub hint: &'static str,
}

/// The verdict on one process's CUDA start-up.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CuInit {
    pub pid: u32,
    pub comm: String,
    /// ok, failed, killed, exited, incomplete.
    pub result: &'static str,
    /// How the verdict was reached.
    pub source: &'static str,
    pub text: String,
    pub total_ms: f64,
    pub stages: Vec<StageHit>,
    pub calls: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_call: Option<FailedCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<SignalInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    /// What cuInit returned, when its uprobe saw the return.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curesult: Option<String>,
    pub diagnoses: Vec<Diagnosis>,
}

/// Records the correlator adds to the stream.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Stage {
        pid: u32,
        comm: String,
        #[serde(flatten)]
        hit: StageHit,
    },
    Cuinit(Box<CuInit>),
    Signal(Box<SignalReport>),
    Breakdown(Box<Breakdown>),
}

/// Where a slow or failing NVIDIA call spent its time inside the driver
/// (driver layer).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Breakdown {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub call: String,
    pub duration_ns: u64,
    /// Innermost first (the order they returned).
    pub spans: Vec<Span>,
    pub text: String,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Span {
    pub function: &'static str,
    pub duration_ns: u64,
    pub result: String,
    #[serde(skip)]
    pub ok: bool,
    #[serde(skip)]
    pub start: u64,
    #[serde(skip)]
    pub end: u64,
}

/// Calls at least this slow get a breakdown even when they succeed.
const BREAKDOWN_SLOW_NS: u64 = 10_000_000;

fn dur_text(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.2} s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} µs", ns as f64 / 1e3)
    }
}

impl Breakdown {
    /// "UVM_REGISTER_GPU 301.3 ms: 300.2 ms in uvm_pmm_devmem_init, which
    /// returned NV_ERR_NO_MEMORY (in uvm_gpu_retain_by_uuid <
    /// uvm_va_space_register_gpu < …)".
    fn new(
        pid: u32,
        tid: u32,
        comm: String,
        call: String,
        duration_ns: u64,
        failed: bool,
        spans: Vec<Span>,
    ) -> Self {
        // The focus: the innermost failing function of a failed call, else
        // the innermost one that took at least half of the call.
        let focus = spans
            .iter()
            .position(|s| failed && !s.ok)
            .or_else(|| spans.iter().position(|s| s.duration_ns * 2 >= duration_ns))
            .unwrap_or(spans.len() - 1);
        let f = &spans[focus];
        let outer: Vec<&str> = spans[focus + 1..]
            .iter()
            .filter(|o| o.start <= f.start && f.end <= o.end)
            .map(|o| o.function)
            .collect();
        let text = format!(
            "{call} {}: {} in {}, which returned {}{}",
            dur_text(duration_ns),
            dur_text(f.duration_ns),
            f.function,
            f.result,
            if outer.is_empty() {
                String::new()
            } else {
                format!(" (in {})", outer.join(" < "))
            }
        );
        Self {
            pid,
            tid,
            comm,
            call,
            duration_ns,
            spans,
            text,
        }
    }
}

/// A signal that reached a process inside an NVIDIA call or inside cuInit,
/// with what became of the call.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SignalReport {
    pub pid: u32,
    pub comm: String,
    pub sig: i32,
    pub signal: String,
    pub sender: String,
    pub sender_pid: Option<u32>,
    /// Milliseconds since the process's first NVIDIA call.
    pub at_ms: f64,
    /// The last stage reached when it arrived ("S4 uvm_initialized").
    pub stage: Option<String>,
    /// The NVIDIA call running when it arrived, or "cuInit" when only
    /// cuInit's uprobe says the process was starting up.
    pub in_flight: String,
    /// eintr, eintr_retried, restarted, completed, died_in_call,
    /// interrupted, in_user_space.
    pub outcome: &'static str,
    pub text: String,
}

/// A signal waiting for the end of the call it landed in.
#[derive(Debug)]
struct PendingSig {
    info: SignalInfo,
    tid: u32,
    stage: Option<String>,
    cuinit: bool,
    /// (call, result) of the call it landed in, once that call returned
    /// with EINTR or a restart code: the next call tells what followed.
    interrupted: Option<(String, String)>,
    /// The receiver's disposition when it was delivered: (action,
    /// SA_RESTART).
    handler: Option<(&'static str, bool)>,
}

#[derive(Default)]
struct ProcInit {
    comm: String,
    first_ns: u64,
    last_ns: u64,
    reached: [bool; 9],
    stages: Vec<StageHit>,
    calls: u64,
    last_failure: Option<FailedCall>,
    /// (start_ns, end_ns, name) of recent calls, for "during which call".
    last_call: Option<(u64, u64, CallRef)>,
    /// Signals generated for the process (the last 16).
    signals: Vec<SignalInfo>,
    path_problems: Vec<(String, String)>,
    /// The first NVIDIA call was an ioctl on an fd this process was never
    /// seen opening: (call, fd).
    inherited: Option<(String, i32)>,
    opened_any: bool,
    /// A failed version check: (call, result).
    version_check: Option<(String, String)>,
    /// (parent pid, whether the parent had finished cuInit) for a process
    /// seen forking.
    parent: Option<(u32, bool)>,
    /// "nvidia-modprobe (pid N) exited with status S" for helpers it ran.
    modprobe: Vec<String>,
    /// cuInit's uprobe: entry seen, and its CUresult.
    cuinit_entered: bool,
    curesult: Option<(i64, Option<&'static str>)>,
    done: bool,
    /// Signals whose call has not yet returned (at most 4).
    pending: Vec<PendingSig>,
    /// The in-driver breakdown of the last failed call (driver layer).
    last_breakdown: Option<String>,
}

const INTERRUPTED: [&str; 5] = [
    "EINTR",
    "ERESTARTSYS",
    "ERESTARTNOINTR",
    "ERESTARTNOHAND",
    "ERESTART_RESTARTBLOCK",
];

impl ProcInit {
    fn last_stage(&self) -> Option<String> {
        self.stages
            .iter()
            .max_by(|a, b| a.stage.cmp(b.stage))
            .map(|s| format!("{} {}", s.stage, s.name))
    }

    fn cuinit_running(&self) -> bool {
        self.cuinit_entered && self.curesult.is_none()
    }

    /// A call from `tid` spanning `start..=end` returned `result` (None:
    /// success): settle the signals it tells about.
    fn settle(
        &mut self,
        pid: u32,
        tid: u32,
        span: (u64, u64),
        call: &str,
        result: Option<&str>,
        out: &mut Vec<Record>,
    ) {
        let (start, end) = span;
        let mut keep = Vec::new();
        for mut p in std::mem::take(&mut self.pending) {
            if let Some((icall, ires)) = &p.interrupted {
                // The first call after the interrupted one: the same call
                // again is a restart (by the kernel for ERESTART*, by the
                // caller's retry loop for EINTR).
                let same = icall == call;
                let outcome = match (ires.as_str(), same) {
                    ("EINTR", true) => "eintr_retried",
                    ("EINTR", false) => "eintr",
                    (_, true) => "restarted",
                    (_, false) => "eintr",
                };
                let what = (icall.clone(), ires.clone());
                out.push(self.report(pid, p, Some(what), outcome));
                continue;
            }
            if start <= p.info.at_ns && p.info.at_ns <= end {
                p.info.during = Some(call.to_owned());
                match result {
                    Some(r) if INTERRUPTED.contains(&r) => {
                        p.interrupted = Some((call.to_owned(), r.to_owned()));
                        keep.push(p);
                    }
                    r => {
                        let what = (call.to_owned(), r.unwrap_or("success").to_owned());
                        out.push(self.report(pid, p, Some(what), "completed"));
                    }
                }
            } else if start > p.info.at_ns && (tid == p.tid || p.tid == 0) {
                // The thread it was sent to started a new call: it was not
                // in one when the signal came.
                if p.cuinit {
                    out.push(self.report(pid, p, None, "in_user_space"));
                }
            } else {
                keep.push(p);
            }
        }
        self.pending = keep;
    }

    /// The process is gone (or tracing stopped): settle what is left.
    /// `end`: died_in_call (exit), eintr (exec), interrupted (tracing
    /// stopped before the next call).
    fn settle_all(&mut self, pid: u32, end: &'static str, out: &mut Vec<Record>) {
        for p in std::mem::take(&mut self.pending) {
            match p.interrupted.clone() {
                Some(what) => out.push(self.report(pid, p, Some(what), end)),
                None if p.cuinit => out.push(self.report(pid, p, None, "in_user_space")),
                None => {}
            }
        }
    }

    fn report(
        &self,
        pid: u32,
        p: PendingSig,
        call: Option<(String, String)>,
        outcome: &'static str,
    ) -> Record {
        let i = &p.info;
        let in_flight = call
            .as_ref()
            .map_or_else(|| "cuInit".to_owned(), |c| c.0.clone());
        let what = match (outcome, &call) {
            ("completed", Some((_, r))) if r == "success" => {
                "the call completed successfully".to_owned()
            }
            ("completed", Some((_, r))) => format!("the call returned {r}, not EINTR"),
            ("eintr_retried", _) => {
                "the call returned EINTR and the caller made it again".to_owned()
            }
            ("eintr", Some((_, r))) if r == "EINTR" => {
                "the call returned EINTR to the caller".to_owned()
            }
            ("eintr", Some((_, r))) => match p.handler {
                Some(("handler", false)) if r == "ERESTARTSYS" => format!(
                    "the call was interrupted ({r}) and, the handler lacking SA_RESTART, returned EINTR to the caller"
                ),
                Some(("handler", _)) => {
                    format!(
                        "the call was interrupted ({r}) and returned EINTR to the caller after the handler ran"
                    )
                }
                _ => format!(
                    "the call was interrupted ({r}) and not made again: the caller saw EINTR"
                ),
            },
            ("restarted", Some((_, r))) => match p.handler {
                Some(("handler", true)) => {
                    format!(
                        "the kernel restarted the call ({r}) after the handler ran (SA_RESTART)"
                    )
                }
                Some(("handler", false)) => {
                    format!("the kernel restarted the call ({r}) after the handler ran")
                }
                _ => format!("the kernel restarted the call ({r})"),
            },
            ("died_in_call", Some((_, r))) => format!("the process died in the call ({r})"),
            ("interrupted", Some((_, r))) => {
                format!("the call was interrupted ({r}); tracing stopped before the next call")
            }
            _ => "it arrived in user space, between driver calls".to_owned(),
        };
        let text = format!(
            "{} from {} at {:.1} ms in {}{}: {what}",
            i.name,
            i.sender,
            i.at_ms,
            in_flight,
            p.stage
                .as_ref()
                .map_or(String::new(), |s| format!(" (after {s})")),
        );
        Record::Signal(Box::new(SignalReport {
            pid,
            comm: self.comm.clone(),
            sig: i.sig,
            signal: i.name.clone(),
            sender: i.sender.clone(),
            sender_pid: i.sender_pid,
            at_ms: i.at_ms,
            stage: p.stage,
            in_flight,
            outcome,
            text,
        }))
    }
}

fn ms(ns: u64, since: u64) -> f64 {
    (ns.saturating_sub(since) as f64 / 1e4).round() / 100.0
}

/// A name the decode tables gave (`control_name`, `hClass_name`).
fn static_arg(i: &Ioctl, key: &str) -> Option<&'static str> {
    match i.args.get(key) {
        Some(crate::decode::args::Arg::Str(s)) => Some(s),
        _ => None,
    }
}

/// A call, named without allocating (this runs for every event).
#[derive(Clone, Copy, Debug)]
struct CallRef {
    name: Option<&'static str>,
    control: Option<&'static str>,
    request: u32,
}

impl CallRef {
    fn of(i: &Ioctl) -> Self {
        Self {
            name: i.xfer.as_ref().and_then(|x| x.name).or(i.name),
            control: static_arg(i, "control_name"),
            request: u32::from_str_radix(i.request.trim_start_matches("0x"), 16).unwrap_or(0),
        }
    }
    fn text(&self) -> String {
        let base = self
            .name
            .map_or_else(|| format!("{:#x}", self.request), str::to_owned);
        match self.control {
            Some(c) => format!("{base} {c}"),
            None => base,
        }
    }
}

use crate::decode::signal::name as signal_name;

/// A process name kept inline (no allocation per event).
#[derive(Clone, Copy, Debug)]
pub struct Comm([u8; 64], u8);

impl Comm {
    fn new(s: &str) -> Self {
        let mut b = [0u8; 64];
        let mut n = s.len().min(64);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        b[..n].copy_from_slice(&s.as_bytes()[..n]);
        Self(b, n as u8)
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0[..self.1 as usize]).into_owned()
    }
}

/// What the correlator keeps of an event.
#[derive(Debug)]
pub struct Obs {
    pid: u32,
    tid: u32,
    comm: Comm,
    start: u64,
    end: u64,
    stage: Option<usize>,
    kind: ObsKind,
}

#[derive(Debug)]
enum ObsKind {
    Ioctl {
        ok: bool,
        call: CallRef,
        fd: i32,
        /// The errno or status name, for failed calls only.
        failure: Option<String>,
    },
    Path {
        opened_device: bool,
        /// (path, why) of a failed or mismatched NVIDIA path.
        problem: Option<(String, String)>,
        /// For the stage text of a ctl open.
        open_path: Option<String>,
    },
    Proc(Box<ProcCall>),
    Cuda {
        func: &'static str,
        enter: bool,
        result: Option<i64>,
        result_name: Option<&'static str>,
    },
    Driver {
        function: &'static str,
        ok: bool,
        result: String,
    },
}

impl Obs {
    pub fn of(ev: &Event) -> Option<Obs> {
        let pr = ev.proc();
        let (start, end) = ev.span();
        let stage = stage_of(ev);
        let kind = match ev {
            Event::Ioctl(i) => ObsKind::Ioctl {
                ok: i.ok,
                call: CallRef::of(i),
                fd: i.fd,
                failure: (!i.ok).then(|| {
                    i.errno
                        .clone()
                        .or_else(|| {
                            i.status
                                .as_ref()
                                .map(|s| s.name.map_or_else(|| s.code.clone(), str::to_owned))
                        })
                        .unwrap_or_default()
                }),
            },
            Event::Open(p) | Event::Stat(p) | Event::Access(p) => ObsKind::Path {
                opened_device: matches!(ev, Event::Open(_)) && p.ok && p.device.is_some(),
                // /dev/char/195:N links are refreshed opportunistically by
                // libcuda, and numa_status is probed; their absence is normal.
                problem: (!p.ok
                    && !p.path.starts_with("/dev/char/")
                    && !p.path.starts_with("/proc/driver/nvidia/gpus/"))
                .then(|| {
                    (
                        p.path.clone(),
                        p.mismatch
                            .clone()
                            .or_else(|| p.errno.clone())
                            .unwrap_or_default(),
                    )
                }),
                open_path: stage.map(|_| p.path.clone()),
            },
            Event::Proc(p) => ObsKind::Proc(Box::new(p.clone())),
            Event::Driver(d) => ObsKind::Driver {
                function: d.function,
                ok: d.ok,
                result: d
                    .rm_status
                    .as_ref()
                    .filter(|st| st.code != "0x0")
                    .map_or_else(
                        || d.result.clone(),
                        |st| st.name.unwrap_or(&st.code).to_owned(),
                    ),
            },
            Event::Cuda(c) => ObsKind::Cuda {
                func: c.func,
                enter: c.phase == "enter",
                result: c.result,
                result_name: c.result_name,
            },
            _ => return None,
        };
        Some(Obs {
            pid: pr.pid,
            tid: pr.tid,
            comm: Comm::new(&pr.comm),
            start,
            end,
            stage,
            kind,
        })
    }
}

/// Follows every process that makes NVIDIA calls.
/// The last stage each process reached, shared with the stall detector.
pub type StageBoard = std::sync::Arc<std::sync::Mutex<HashMap<u32, String>>>;

#[derive(Default)]
pub struct Correlator {
    procs: HashMap<u32, ProcInit>,
    /// Driver-layer spans per thread, until the syscall they belong to
    /// returns (at most 32 per thread).
    spans: HashMap<u32, Vec<Span>>,
    /// Kept up to date when set (stage transitions and exits are rare, so
    /// the lock costs nothing per call).
    pub board: Option<StageBoard>,
}

impl Correlator {
    /// A correlator that keeps `board` up to date with each process's
    /// last stage.
    pub fn with_board(board: StageBoard) -> Self {
        Self {
            procs: HashMap::new(),
            spans: HashMap::new(),
            board: Some(board),
        }
    }

    /// Feed one decoded event; stage transitions and verdicts go to `out`.
    /// Feed one decoded event; stage transitions and verdicts go to `out`.
    pub fn observe(&mut self, ev: &Event, out: &mut Vec<Record>) {
        if let Some(o) = Obs::of(ev) {
            self.observe_obs(o, out);
        }
    }

    /// Feed what `Obs::of` kept of an event (the collector makes these on its
    /// decode threads, so the full event never crosses threads).
    pub fn observe_obs(&mut self, o: Obs, out: &mut Vec<Record>) {
        let (pid, start, end) = (o.pid, o.start, o.end);
        match o.kind {
            ObsKind::Proc(p) => {
                self.observe_proc(&p, out);
                return;
            }
            ObsKind::Driver {
                function,
                ok,
                result,
            } => {
                let v = self.spans.entry(o.tid).or_default();
                if v.len() == 32 {
                    v.remove(0);
                }
                v.push(Span {
                    function,
                    duration_ns: end.saturating_sub(start),
                    result,
                    ok,
                    start,
                    end,
                });
                return;
            }
            ObsKind::Cuda {
                func,
                enter,
                result,
                result_name,
            } => {
                let st = self.procs.entry(pid).or_default();
                if st.first_ns == 0 {
                    st.first_ns = start;
                    st.comm = o.comm.text();
                }
                if func == "cuInit" {
                    if enter {
                        st.cuinit_entered = true;
                    } else {
                        st.last_ns = st.last_ns.max(end);
                        st.curesult = Some((result.unwrap_or(0), result_name));
                        if !st.done {
                            out.push(Record::Cuinit(Box::new(verdict(pid, st, None))));
                            st.done = true;
                        }
                    }
                }
                return;
            }
            _ => {}
        }
        let st = self.procs.entry(pid).or_default();
        if st.first_ns == 0 {
            st.first_ns = start;
            st.comm = o.comm.text();
        }
        st.last_ns = st.last_ns.max(end);
        let mut via = None;
        match o.kind {
            ObsKind::Ioctl {
                ok,
                call,
                fd,
                failure,
            } => {
                if let Some(v) = self.spans.get_mut(&o.tid) {
                    let inside: Vec<Span> = v
                        .iter()
                        .filter(|s| s.start >= start && s.end <= end)
                        .cloned()
                        .collect();
                    v.retain(|s| s.end > end);
                    if !inside.is_empty() && (!ok || end.saturating_sub(start) >= BREAKDOWN_SLOW_NS)
                    {
                        let b = Breakdown::new(
                            pid,
                            o.tid,
                            o.comm.text(),
                            call.text(),
                            end.saturating_sub(start),
                            !ok,
                            inside,
                        );
                        if !ok {
                            st.last_breakdown = Some(b.text.clone());
                        }
                        out.push(Record::Breakdown(Box::new(b)));
                    }
                }
                if st.calls == 0 && !st.opened_any {
                    st.inherited = Some((call.text(), fd));
                }
                st.calls += 1;
                // A call that failed with EINTR (or a restart code) and was
                // then made again successfully is not what explains the end.
                if ok
                    && let Some(f) = &st.last_failure
                    && f.call == call.text()
                    && matches!(
                        f.result.as_str(),
                        "EINTR" | "ERESTARTSYS" | "ERESTARTNOINTR" | "ERESTARTNOHAND" | "EAGAIN"
                    )
                {
                    st.last_failure = None;
                }
                if !ok
                    && let Some(f) = &failure
                    && (f == "NV_ERR_LIB_RM_VERSION_MISMATCH"
                        || call.name == Some("NV_ESC_CHECK_VERSION_STR")
                        || call.control == Some("NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION"))
                {
                    st.version_check = Some((call.text(), f.clone()));
                }
                if !ok {
                    st.last_failure = Some(FailedCall {
                        call: call.text(),
                        result: failure.clone().unwrap_or_default(),
                        at_ms: ms(start, st.first_ns),
                        duration_ms: end.saturating_sub(start) as f64 / 1e6,
                    });
                }
                // A signal that came while this call ran (its exit is
                // recorded after the signal) landed in this call.
                for sig in st.signals.iter_mut().rev().take(4) {
                    if sig.during.is_none() && start <= sig.at_ns && sig.at_ns <= end {
                        sig.during = Some(call.text());
                    }
                }
                if !st.pending.is_empty() {
                    let name = call.text();
                    let result = if ok { None } else { failure.as_deref() };
                    st.settle(pid, o.tid, (start, end), &name, result, out);
                }
                st.last_call = Some((start, end, call));
                if o.stage.is_some() {
                    via = Some(call.text());
                }
            }
            ObsKind::Path {
                opened_device,
                problem,
                open_path,
            } => {
                if opened_device {
                    st.opened_any = true;
                }
                if let Some(pr) = problem {
                    st.path_problems.push(pr);
                }
                via = open_path.map(|p| format!("open {p}"));
            }
            _ => {}
        }
        if let Some(s) = o.stage
            && !st.reached[s]
        {
            st.reached[s] = true;
            let hit = StageHit {
                stage: STAGES[s].0,
                name: STAGES[s].1,
                at_ms: ms(end, st.first_ns),
                via: via.unwrap_or_default(),
            };
            st.stages.push(hit.clone());
            if let Some(b) = &self.board
                && let Ok(mut b) = b.lock()
            {
                b.insert(pid, format!("{} {}", hit.stage, hit.name));
            }
            out.push(Record::Stage {
                pid,
                comm: st.comm.clone(),
                hit,
            });
        }
    }

    fn unboard(&self, pid: u32) {
        if let Some(b) = &self.board
            && let Ok(mut b) = b.lock()
        {
            b.remove(&pid);
        }
    }

    fn observe_proc(&mut self, p: &ProcCall, out: &mut Vec<Record>) {
        match p.op {
            "signal" => {
                let Some(st) = self.procs.get_mut(&p.target_pid) else {
                    return;
                };
                let at = p.time_ns;
                let during = st
                    .last_call
                    .as_ref()
                    .filter(|(s, e, _)| *s <= at && at <= *e + 1_000_000)
                    .map(|(_, _, c)| c.text());
                let code = p.code.unwrap_or(0);
                let sig = p.sig.unwrap_or(0);
                // SIGCONT to a process that was not stopped changes nothing
                // (timeout(1) sends one after its SIGTERM): not worth a report.
                // After a stop signal it says when the process went on.
                if sig == libc::SIGCONT
                    && !st.signals.last().is_some_and(|s| {
                        matches!(
                            s.sig,
                            libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                        )
                    })
                {
                    return;
                }
                let sender = match code {
                    0 | -1 | -6 => format!("{}[{}]", p.proc.comm, p.proc.pid),
                    0x80 => "the kernel (alarm/itimer or a fault)".to_owned(),
                    -2 => "a POSIX timer (timer_create)".to_owned(),
                    c => format!("{}[{}] (si_code {c})", p.proc.comm, p.proc.pid),
                };
                let sender_pid = matches!(code, 0 | -1 | -6).then_some(p.proc.pid);
                if st.signals.len() == 16 {
                    st.signals.remove(0);
                }
                let info = SignalInfo {
                    at_ns: at,
                    sig,
                    name: signal_name(sig),
                    sender,
                    sender_pid,
                    at_ms: ms(at, st.first_ns),
                    during,
                };
                // Its call, if any, has not returned yet (the call's record
                // comes at its end): settle it when it does.
                // timeout(1) signals its child, then its process group: one
                // signal to the process, reported once.
                let again = st.pending.iter().any(|q| {
                    q.info.sig == info.sig
                        && q.info.sender == info.sender
                        && q.interrupted.is_none()
                        && info.at_ns.saturating_sub(q.info.at_ns) < 10_000_000
                });
                if st.pending.len() == 8 {
                    st.pending.remove(0);
                }
                if !again {
                    st.pending.push(PendingSig {
                        info: info.clone(),
                        tid: p.target_tid.unwrap_or(0),
                        stage: st.last_stage(),
                        cuinit: st.cuinit_running(),
                        interrupted: None,
                        handler: None,
                    });
                }
                st.signals.push(info);
            }
            "signal_delivered" => {
                let pid = p.proc.pid;
                let Some(st) = self.procs.get_mut(&pid) else {
                    return;
                };
                let (Some(sig), Some(action)) = (p.sig, p.action) else {
                    return;
                };
                let restart = p.sa_restart.unwrap_or(false);
                let Some(i) = st
                    .pending
                    .iter()
                    .position(|q| q.info.sig == sig && q.handler.is_none())
                else {
                    return;
                };
                st.pending[i].handler = Some((action, restart));
                // A restart code and a handler: the kernel decides now
                // (x86 handle_signal): ERESTARTSYS restarts only with
                // SA_RESTART, ERESTARTNOINTR always, the others never.
                if action == "handler"
                    && let Some((_, res)) = &st.pending[i].interrupted
                    && res != "EINTR"
                {
                    let restarted = match res.as_str() {
                        "ERESTARTSYS" => restart,
                        "ERESTARTNOINTR" => true,
                        _ => false,
                    };
                    let q = st.pending.remove(i);
                    let what = q.interrupted.clone();
                    out.push(st.report(
                        pid,
                        q,
                        what,
                        if restarted { "restarted" } else { "eintr" },
                    ));
                }
            }
            "fork" => {
                let init_done = self
                    .procs
                    .get(&p.proc.pid)
                    .is_some_and(|s| s.reached[7] || matches!(s.curesult, Some((0, _))));
                let child = self.procs.entry(p.target_pid).or_default();
                child.parent = Some((p.proc.pid, init_done));
                if child.first_ns == 0 {
                    child.first_ns = p.time_ns;
                    child.comm = p.proc.comm.clone();
                }
            }
            "exit" => {
                let pid = p.target_pid;
                // A helper such as nvidia-modprobe: tell its parent how it ended.
                if p.proc.comm == "nvidia-modprobe"
                    && let Some((ppid, _)) = self.procs.get(&pid).and_then(|s| s.parent)
                    && let Some(parent) = self.procs.get_mut(&ppid)
                {
                    parent.modprobe.push(format!(
                        "nvidia-modprobe (pid {pid}) {}",
                        p.exit.as_deref().unwrap_or("exited")
                    ));
                }
                if let Some(st) = self.procs.get_mut(&pid) {
                    st.settle_all(pid, "died_in_call", out);
                }
                if let Some(st) = self.procs.get_mut(&pid)
                    && !st.done
                    // Forked children that never touched NVIDIA get no verdict.
                    && (st.calls > 0 || st.cuinit_entered || !st.stages.is_empty() || !st.path_problems.is_empty())
                {
                    let code = p.exit_code.unwrap_or(0);
                    let exit = if code & 0x7f != 0 {
                        format!("killed by {}", signal_name(code & 0x7f))
                    } else {
                        format!("exited with status {}", (code >> 8) & 0xff)
                    };
                    st.last_ns = st.last_ns.max(p.time_ns);
                    let v = verdict(pid, st, Some((exit, code & 0x7f)));
                    st.done = true;
                    out.push(Record::Cuinit(Box::new(v)));
                }
                self.procs.remove(&pid);
                self.unboard(pid);
            }
            "exec" => {
                // A new program: a new start-up to follow.
                let mut parent = None;
                if let Some(st) = self.procs.get_mut(&p.target_pid) {
                    st.settle_all(p.target_pid, "eintr", out);
                    parent = st.parent;
                }
                if let Some(st) = self.procs.get_mut(&p.target_pid)
                    && !st.done
                    && st.calls > 0
                {
                    out.push(Record::Cuinit(Box::new(verdict(
                        p.target_pid,
                        st,
                        Some(("exec'd a new program".into(), 0)),
                    ))));
                }
                self.procs.remove(&p.target_pid);
                self.unboard(p.target_pid);
                // The new program is still its parent's child (a helper
                // such as nvidia-modprobe reports to it when it exits).
                if parent.is_some() {
                    let st = self.procs.entry(p.target_pid).or_default();
                    st.parent = parent;
                    st.first_ns = p.time_ns;
                    st.comm = p.proc.comm.clone();
                }
            }
            _ => {}
        }
    }

    /// Verdicts for processes still alive when tracing stops.
    pub fn finish(&mut self, out: &mut Vec<Record>) {
        let mut pids: Vec<u32> = self.procs.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            if let Some(st) = self.procs.get_mut(&pid) {
                st.settle_all(pid, "interrupted", out);
            }
            if let Some(st) = self.procs.get_mut(&pid)
                && !st.done
                && st.calls > 0
            {
                out.push(Record::Cuinit(Box::new(verdict(pid, st, None))));
                st.done = true;
            }
        }
    }
}

const HMM_HINT: &str = "if this kernel has HMM (CONFIG_HMM_MIRROR and CONFIG_DEVICE_PRIVATE) and nvidia_uvm's \
uvm_disable_hmm is N, UVM's HMM support is a known cause (open-gpu-kernel-modules issues 797, 901, 947): \
reload it with `modprobe -r nvidia_uvm && modprobe nvidia_uvm uvm_disable_hmm=1`";

/// Make the UVM diagnoses of a live verdict specific to this host: whether
/// nvidia_uvm has HMM at all, and whether it is already disabled. (Not for
/// replays: a recording's host is not this one.)
pub fn apply_hmm_facts(v: &mut CuInit, f: &crate::records::HmmFacts) {
    for d in &mut v.diagnoses {
        if !matches!(d.id, "uvm_step_failed" | "uvm_busy_retry") {
            continue;
        }
        d.evidence = format!("{}; host: {}", d.evidence, f.describe());
        if d.id != "uvm_step_failed" {
            continue;
        }
        d.hint = match (f.compiled_in, f.disabled) {
            (_, Some(true)) => {
                "HMM is already disabled (uvm_disable_hmm=Y), so it is not the cause: read the kernel log \
(dmesg | grep -i nvidia) for the UVM error and check the GPU's state (nvidia-smi -q)"
            }
            (Some(false), _) => {
                "this nvidia_uvm was built without HMM (the kernel lacks CONFIG_HMM_MIRROR or CONFIG_DEVICE_PRIVATE, \
or is older than 6.1), so HMM is not the cause: read the kernel log (dmesg | grep -i nvidia) for the UVM error"
            }
            (Some(true), Some(false)) => {
                "this kernel's nvidia_uvm has HMM and it is enabled (uvm_disable_hmm=N): UVM's HMM support is a \
known cause (open-gpu-kernel-modules issues 797, 901, 947): reload it with \
`modprobe -r nvidia_uvm && modprobe nvidia_uvm uvm_disable_hmm=1`"
            }
            _ => HMM_HINT,
        };
    }
}

fn verdict(pid: u32, st: &ProcInit, exit: Option<(String, i32)>) -> CuInit {
    let last_stage = st
        .stages
        .iter()
        .max_by(|a, b| a.stage.cmp(b.stage))
        .map(|s| format!("{} {}", s.stage, s.name));
    let fatal_sig = exit.as_ref().map_or(0, |e| e.1);
    // The signal that explains the end: the last one of the fatal number,
    // else the last one that landed during a call.
    let signal = st
        .signals
        .iter()
        .rev()
        .find(|s| fatal_sig != 0 && s.sig == fatal_sig)
        .or_else(|| st.signals.iter().rev().find(|s| s.during.is_some()))
        .cloned();
    let mut diagnoses: Vec<Diagnosis> = Vec::new();
    for (path, why) in &st.path_problems {
        let id = if why.contains("not the NVIDIA") {
            "node_wrong_device"
        } else if why == "EACCES" || why == "EPERM" {
            "node_permission"
        } else if why == "ENOENT" {
            "node_missing"
        } else {
            "node_error"
        };
        let hint = match id {
            "node_wrong_device" => {
                "another file is mounted or created at this path: check the container's device bind mounts and /dev"
            }
            "node_permission" => {
                "the device cgroup or file mode denies access: allow char 195:* and the nvidia-uvm major in the container, or fix the node's mode"
            }
            "node_missing" => {
                "create the nodes (nvidia-modprobe -c0 -u, or udev) or pass them into the container"
            }
            _ => "check the node and the driver",
        };
        let uvm = path.contains("nvidia-uvm");
        let evidence = format!("{path}: {why}");
        if diagnoses.iter().any(|d| d.evidence == evidence) {
            continue;
        }
        diagnoses.push(Diagnosis {
            id: if uvm { "uvm_unusable" } else { id },
            evidence,
            hint: if uvm {
                "CUDA needs /dev/nvidia-uvm: load nvidia-uvm (modprobe nvidia-uvm) and create the node (nvidia-modprobe -u -c0); cuInit returns 999 without it"
            } else {
                hint
            },
        });
    }
    if let Some((call, fd)) = &st.inherited {
        diagnoses.push(Diagnosis {
            id: "inherited_nvidia_fds",
            evidence: format!("the first NVIDIA call, {call}, used fd {fd}, which this process was not seen opening"),
            hint: "the fd came from a parent (fork or exec after the parent's cuInit; CUDA does not support using a \
parent's context after fork: start workers with spawn, or initialise CUDA in the child) or was opened before tracing began",
        });
    }
    if let Some((call, result)) = &st.version_check {
        diagnoses.push(Diagnosis {
            id: "version_mismatch",
            evidence: format!("{call} returned {result}"),
            hint: "the user-space driver (libcuda, libnvidia-*) and the kernel module are different versions: \
compare /proc/driver/nvidia/version with the libcuda.so.VERSION in use (containers often carry their own), \
and make them match (or use the forward-compatibility package for a newer CUDA only)",
        });
    }
    for m in &st.modprobe {
        if !m.ends_with("exited with status 0") {
            diagnoses.push(Diagnosis {
                id: "nvidia_modprobe_failed",
                evidence: m.clone(),
                hint: "libcuda ran the setuid helper to load a module or create a node, and it failed: run \
`nvidia-modprobe -u -c0` as root to see why, or load nvidia and nvidia-uvm and create the nodes yourself",
            });
        }
    }
    if let Some((ppid, true)) = st.parent
        && (st.inherited.is_some() || matches!(st.curesult, Some((3, _))))
    {
        diagnoses.push(Diagnosis {
            id: "fork_after_init",
            evidence: format!("forked from pid {ppid} after its cuInit had completed"),
            hint: "CUDA state does not survive fork: start workers with spawn \
(multiprocessing.set_start_method('spawn')) or fork before the parent's first CUDA call",
        });
    } else if matches!(st.curesult, Some((3, _))) && st.calls == 0 {
        // Seen on the real driver: in a child forked after its parent's
        // cuInit, libcuda answers NOT_INITIALIZED without one driver call.
        diagnoses.push(Diagnosis {
            id: "fork_after_init",
            evidence: "cuInit returned CUDA_ERROR_NOT_INITIALIZED (3) without a single driver call".to_owned(),
            hint: "libcuda refuses in a process forked after its parent initialised CUDA: start workers with spawn \
(multiprocessing.set_start_method('spawn')) or fork before the parent's first CUDA call",
        });
    }
    let no_device = matches!(st.curesult, Some((100, _)))
        || (st.curesult.is_none()
            && st.reached[4]
            && !st.reached[3]
            && !st.reached[5]
            && exit.as_ref().is_some_and(|e| e.1 == 0));
    if no_device {
        diagnoses.push(Diagnosis {
            id: "no_visible_devices",
            evidence: if st.curesult.is_some() {
                "cuInit returned CUDA_ERROR_NO_DEVICE (100)".to_owned()
            } else {
                "UVM was initialised but no GPU was attached or opened before the process ended".to_owned()
            },
            hint: "no GPU is visible to this process: check CUDA_VISIBLE_DEVICES (empty or naming no GPU hides them all) and \
that the container or cgroup passes the /dev/nvidiaN nodes in",
        });
    }
    if let Some(sig) = &signal
        && fatal_sig != 0
    {
        diagnoses.push(Diagnosis {
            id: "killed_by_signal",
            evidence: format!(
                "{} from {} at {:.1} ms{}",
                sig.name,
                sig.sender,
                sig.at_ms,
                sig.during.as_ref().map_or(String::new(), |c| format!(", during {c}"))
            ),
            hint: "the process did not hang in the driver: something killed it (a test harness timeout, an orchestrator). Give cuInit more time or run it without the timeout to see its real result",
        });
    } else if let Some(f) = &st.last_failure {
        let uvm_step =
            f.call.starts_with("UVM_INITIALIZE") || f.call.starts_with("UVM_REGISTER_GPU");
        match (&signal, uvm_step) {
            (Some(sig), _) if sig.during.as_deref() == Some(f.call.as_str()) => diagnoses.push(Diagnosis {
                id: "interrupted_by_signal",
                evidence: format!("{} returned {} while {} from {} arrived", f.call, f.result, sig.name, sig.sender),
                hint: "the call was interrupted; the failure is the signal's doing, not the driver's",
            }),
            (_, true) if f.result == "NV_ERR_BUSY_RETRY" => diagnoses.push(Diagnosis {
                id: "uvm_busy_retry",
                evidence: format!("{} returned {}", f.call, f.result),
                hint: "UVM answers NV_ERR_BUSY_RETRY when a signal interrupts GPU registration (seen on the real \
driver when a harness timeout fired) or when a GPU was first registered without HMM device memory and a later \
process asks for HMM (ABI reference §6.3). Check how the process ended; if no signal came, see the HMM hint: \
modprobe nvidia_uvm uvm_disable_hmm=1",
            }),
            (_, true) => diagnoses.push(Diagnosis {
                id: "uvm_step_failed",
                evidence: match &st.last_breakdown {
                    Some(b) => format!("{} returned {}; in the driver: {b}", f.call, f.result),
                    None => format!("{} returned {}", f.call, f.result),
                },
                hint: HMM_HINT,
            }),
            _ => {}
        }
    }
    let (result, text, source, curesult) = if let Some((code, name)) = st.curesult {
        let r = format!("{} ({code})", name.unwrap_or("CUresult"));
        let (result, text) = if code == 0 {
            (
                "ok",
                format!(
                    "cuInit returned {r} after {}",
                    last_stage.as_deref().unwrap_or("no driver call")
                ),
            )
        } else {
            (
                "failed",
                match &st.last_failure {
                    Some(f) => format!(
                        "cuInit returned {r}; the driver call that explains it: {} returned {} (after {})",
                        f.call,
                        f.result,
                        last_stage.as_deref().unwrap_or("no stage")
                    ),
                    None => format!(
                        "cuInit returned {r} after {}{}",
                        last_stage.as_deref().unwrap_or("no driver call"),
                        diagnoses
                            .first()
                            .map_or(String::new(), |d| format!(": {}", d.evidence))
                    ),
                },
            )
        };
        (
            result,
            text,
            "libcuda uprobe (cuInit's return) and driver calls",
            Some(r),
        )
    } else {
        let (result, text) = driver_only(
            st,
            exit.as_ref(),
            signal.as_ref(),
            last_stage.as_deref(),
            &diagnoses,
        );
        let source = if st.cuinit_entered {
            "libcuda uprobe (cuInit entered and never returned) and driver calls"
        } else {
            "driver calls alone (no libcuda uprobe)"
        };
        (result, text, source, None)
    };
    CuInit {
        pid,
        comm: st.comm.clone(),
        result,
        source,
        text,
        total_ms: ms(st.last_ns, st.first_ns),
        stages: st.stages.clone(),
        calls: st.calls,
        failed_call: st.last_failure.clone(),
        signal,
        exit: exit.map(|e| e.0),
        curesult,
        diagnoses,
    }
}

/// The verdict's result and text from the driver calls and the process's
/// end, when cuInit's own return was not seen.
fn driver_only(
    st: &ProcInit,
    exit: Option<&(String, i32)>,
    signal: Option<&SignalInfo>,
    last_stage: Option<&str>,
    diagnoses: &[Diagnosis],
) -> (&'static str, String) {
    let reached_init = st.reached[7];
    match (exit, reached_init) {
        (_, true) => (
            "ok",
            "reached UVM GPU registration (S7): the driver side of cuInit completed".to_owned(),
        ),
        (Some((e, sig)), false) if *sig != 0 => (
            "killed",
            match signal {
                Some(s) => format!(
                    "killed by {} from {} after {:.1} ms{}",
                    s.name,
                    s.sender,
                    s.at_ms,
                    match &s.during {
                        Some(c) => format!(" in {c}; the call was still running"),
                        None => format!(", at {}", last_stage.unwrap_or("no stage yet")),
                    }
                ),
                None => format!("{e} at {}", last_stage.unwrap_or("no stage yet")),
            },
        ),
        _ if st.last_failure.is_some() || !diagnoses.is_empty() => (
            "failed",
            match &st.last_failure {
                Some(f) => format!(
                    "{} returned {} after {}",
                    f.call,
                    f.result,
                    last_stage.unwrap_or("no stage")
                ),
                None => format!(
                    "stopped after {}: {}",
                    last_stage.unwrap_or("no stage"),
                    diagnoses[0].evidence
                ),
            },
        ),
        (Some((e, _)), false) if !st.reached[4] && !st.cuinit_entered => (
            "exited",
            format!(
                "{e} after {} without touching UVM or cuInit: a driver client such as NVML, not a CUDA start-up",
                last_stage.unwrap_or("no stage")
            ),
        ),
        (Some((e, _)), false) => (
            "exited",
            format!(
                "{e} after {}, before any GPU was registered with UVM",
                last_stage.unwrap_or("no stage")
            ),
        ),
        (None, false) => (
            "incomplete",
            format!(
                "still at {} when tracing stopped",
                last_stage.unwrap_or("no stage")
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{
        Device, Ioctl, PathCall, Proc,
        args::{Arg, Args},
    };

    fn proc_() -> Proc {
        Proc {
            pid: 7,
            tid: 7,
            ns_pid: None,
            ns_tid: None,
            comm: "app".into(),
            uid: 0,
        }
    }

    fn dev(kind: &'static str) -> Device {
        Device {
            major: 195,
            minor: 0,
            kind,
            node: None,
            extra: false,
        }
    }

    fn io(
        t: u64,
        name: &'static str,
        arg: Option<(&'static str, &'static str)>,
        kind: &'static str,
    ) -> Event {
        let mut args = Args::new();
        if let Some((k, v)) = arg {
            args.insert(k, Arg::Str(v));
        }
        Event::Ioctl(Ioctl {
            proc: proc_(),
            fd: 3,
            device: dev(kind),
            request: "0x0".into(),
            family: "escape",
            name: Some(name),
            xfer: None,
            size: 0,
            args,
            start_ns: t * 1_000_000,
            duration_ns: 1000,
            ret: 0,
            errno: None,
            status: None,
            status_note: None,
            ok: true,
            via: None,
            raw: None,
        })
    }

    fn open(t: u64, path: &str, kind: &'static str) -> Event {
        Event::Open(PathCall {
            proc: proc_(),
            syscall: "openat",
            path: path.into(),
            path_truncated: false,
            flags: "O_RDWR".into(),
            start_ns: t * 1_000_000,
            duration_ns: 1000,
            ret: 3,
            errno: None,
            fd: Some(3),
            device: Some(dev(kind)),
            mismatch: None,
            ok: true,
            raw: None,
        })
    }

    fn stages(events: &[Event]) -> (Vec<&'static str>, CuInit) {
        let mut c = Correlator::default();
        let mut out = Vec::new();
        for e in events {
            c.observe(e, &mut out);
        }
        c.finish(&mut out);
        let v = out
            .into_iter()
            .find_map(|r| match r {
                Record::Cuinit(v) => Some(*v),
                _ => None,
            })
            .expect("verdict");
        (v.stages.iter().map(|s| s.stage).collect(), v)
    }

    const CTL: &str = "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION";

    /// libcuda 545.29.06 on a Turing GPU (ABI reference §7.1), by its steps.
    #[test]
    fn the_545_sequence() {
        let ev = vec![
            open(1, "/dev/nvidiactl", "ctl"),
            io(2, "NV_ESC_SYS_PARAMS", None, "ctl"),
            io(3, "NV_ESC_CARD_INFO", None, "ctl"),
            io(
                4,
                "NV_ESC_RM_ALLOC",
                Some(("hClass_name", "NV01_ROOT_CLIENT")),
                "ctl",
            ),
            io(5, "NV_ESC_RM_CONTROL", Some(("control_name", CTL)), "ctl"),
            io(6, "NV_ESC_RM_FREE", None, "ctl"),
            open(7, "/dev/nvidiactl", "ctl"),
            io(
                8,
                "NV_ESC_RM_ALLOC",
                Some(("hClass_name", "NV01_ROOT_CLIENT")),
                "ctl",
            ),
            io(
                9,
                "NV_ESC_RM_ALLOC",
                Some(("hClass_name", "NV_CONFIDENTIAL_COMPUTE")),
                "ctl",
            ),
            io(10, "UVM_INITIALIZE", None, "uvm"),
            io(11, "UVM_MM_INITIALIZE", None, "uvm"),
            io(
                12,
                "NV_ESC_RM_CONTROL",
                Some(("control_name", "NV0000_CTRL_CMD_GPU_GET_PROBED_IDS")),
                "ctl",
            ),
            io(
                13,
                "NV_ESC_RM_CONTROL",
                Some(("control_name", "NV0000_CTRL_CMD_GPU_ATTACH_IDS")),
                "ctl",
            ),
            open(14, "/dev/nvidia0", "gpu"),
            io(15, "NV_ESC_REGISTER_FD", None, "gpu"),
            io(
                16,
                "NV_ESC_RM_ALLOC",
                Some(("hClass_name", "NV01_DEVICE_0")),
                "ctl",
            ),
            io(
                17,
                "NV_ESC_RM_ALLOC",
                Some(("hClass_name", "NV20_SUBDEVICE_0")),
                "ctl",
            ),
            io(
                18,
                "NV_ESC_RM_ALLOC",
                Some(("hClass_name", "FERMI_VASPACE_A")),
                "ctl",
            ),
            io(19, "UVM_REGISTER_GPU", None, "uvm"),
            io(30, "UVM_REGISTER_GPU_VASPACE", None, "uvm"),
        ];
        let (s, v) = stages(&ev);
        assert_eq!(s, ["S0", "S2", "S1", "S4", "S3", "S5", "S6", "S7", "S8"]);
        assert_eq!(v.result, "ok");
        assert_eq!(v.stages[7].via, "UVM_REGISTER_GPU");
        assert_eq!(v.stages[1].via, "NV_ESC_RM_ALLOC");
    }

    /// tinygrad's minimal replay (§7.2): no version handshake, no attach.
    #[test]
    fn a_minimal_runtime_ordering() {
        let ev = vec![
            open(1, "/dev/nvidiactl", "ctl"),
            io(
                2,
                "NV_ESC_RM_ALLOC",
                Some(("hClass_name", "NV01_ROOT_CLIENT")),
                "ctl",
            ),
            io(3, "UVM_INITIALIZE", None, "uvm"),
            io(4, "NV_ESC_CARD_INFO", None, "ctl"),
            io(5, "NV_ESC_REGISTER_FD", None, "gpu"),
            io(
                6,
                "NV_ESC_RM_ALLOC",
                Some(("hClass_name", "NV01_DEVICE_0")),
                "ctl",
            ),
            io(
                7,
                "NV_ESC_RM_ALLOC",
                Some(("hClass_name", "NV20_SUBDEVICE_0")),
                "ctl",
            ),
            io(8, "UVM_REGISTER_GPU", None, "uvm"),
            io(9, "UVM_REGISTER_GPU_VASPACE", None, "uvm"),
        ];
        let (s, v) = stages(&ev);
        assert_eq!(s, ["S0", "S2", "S4", "S5", "S6", "S7", "S8"]);
        assert_eq!(v.result, "ok");
    }

    #[test]
    fn a_version_mismatch_is_named() {
        let mut bad = io(2, "NV_ESC_CHECK_VERSION_STR", None, "ctl");
        if let Event::Ioctl(i) = &mut bad {
            i.ok = false;
            i.ret = -22;
            i.errno = Some("EINVAL".into());
        }
        let (_, v) = stages(&[open(1, "/dev/nvidiactl", "ctl"), bad]);
        assert_eq!(v.result, "failed");
        let d = v
            .diagnoses
            .iter()
            .find(|d| d.id == "version_mismatch")
            .expect("rule");
        assert_eq!(d.evidence, "NV_ESC_CHECK_VERSION_STR returned EINVAL");
        assert!(d.hint.contains("/proc/driver/nvidia/version"));
    }

    /// A process-layer record from `pid` (comm `comm`) about `target`.
    fn proc_call(
        op: &'static str,
        pid: u32,
        comm: &str,
        target: u32,
        time_ns: u64,
    ) -> crate::decode::ProcCall {
        crate::decode::ProcCall {
            proc: Proc {
                pid,
                tid: pid,
                ns_pid: None,
                ns_tid: None,
                comm: comm.into(),
                uid: 0,
            },
            op,
            target_pid: target,
            target_tid: None,
            sig: None,
            signal: None,
            code: None,
            exit_code: None,
            exit: None,
            action: None,
            sa_restart: None,
            time_ns,
            raw: None,
        }
    }

    fn exit_of(t: u64, pid: u32, code: i32) -> Event {
        Event::Proc(crate::decode::ProcCall {
            exit_code: Some(code),
            ..proc_call("exit", pid, "app", pid, t * 1_000_000)
        })
    }

    /// A pid reused after an exit is a new process with a new state.
    #[test]
    fn a_reused_pid_does_not_merge_two_processes() {
        let mut c = Correlator::default();
        let mut out = Vec::new();
        for e in [
            open(1, "/dev/nvidiactl", "ctl"),
            io(
                2,
                "NV_ESC_RM_ALLOC",
                Some(("hClass_name", "NV01_ROOT_CLIENT")),
                "ctl",
            ),
            exit_of(3, 7, 3 << 8),
            open(10, "/dev/nvidiactl", "ctl"),
            io(11, "UVM_INITIALIZE", None, "uvm"),
            exit_of(12, 7, 0),
        ] {
            c.observe(&e, &mut out);
        }
        let v: Vec<CuInit> = out
            .into_iter()
            .filter_map(|r| match r {
                Record::Cuinit(v) => Some(*v),
                _ => None,
            })
            .collect();
        assert_eq!(v.len(), 2, "two processes, two verdicts");
        assert_eq!(v[0].exit.as_deref(), Some("exited with status 3"));
        assert_eq!(
            v[0].stages.iter().map(|s| s.stage).collect::<Vec<_>>(),
            ["S0", "S2"]
        );
        assert_eq!(v[1].exit.as_deref(), Some("exited with status 0"));
        assert_eq!(
            v[1].stages.iter().map(|s| s.stage).collect::<Vec<_>>(),
            ["S0", "S4"]
        );
        assert_eq!(v[1].calls, 1, "the second process's calls only");
    }

    /// A failing UVM_INITIALIZE with no signal points at HMM.
    #[test]
    fn a_failing_uvm_step_gets_the_hmm_hint() {
        let mut bad = io(3, "UVM_INITIALIZE", None, "uvm");
        if let Event::Ioctl(i) = &mut bad {
            i.ok = false;
            i.status = Some(crate::decode::Status {
                code: "0x56".into(),
                name: Some("NV_ERR_NOT_SUPPORTED"),
                offset: 8,
                layout: crate::decode::version::LayoutBasis::Stable,
            });
        }
        let ev = vec![open(1, "/dev/nvidiactl", "ctl"), bad];
        let (_, v) = stages(&ev);
        assert_eq!(v.result, "failed");
        assert_eq!(v.diagnoses[0].id, "uvm_step_failed");
        assert!(v.diagnoses[0].hint.contains("uvm_disable_hmm=1"));
        assert_eq!(
            v.text,
            "UVM_INITIALIZE returned NV_ERR_NOT_SUPPORTED after S0 ctl_opened"
        );
        // On a live host, the hint follows what the host says about HMM.
        let facts = |compiled_in, disabled| crate::records::HmmFacts {
            compiled_in,
            disabled,
        };
        let hint = |f| {
            let mut v = v.clone();
            apply_hmm_facts(&mut v, &f);
            (v.diagnoses[0].hint, v.diagnoses[0].evidence.clone())
        };
        let (h, e) = hint(facts(Some(true), Some(false)));
        assert!(
            h.contains("has HMM and it is enabled") && h.contains("uvm_disable_hmm=1"),
            "{h}"
        );
        assert_eq!(
            e,
            "UVM_INITIALIZE returned NV_ERR_NOT_SUPPORTED; host: nvidia_uvm is built with HMM \
(uvm_hmm_* in /proc/kallsyms), uvm_disable_hmm=N"
        );
        let (h, _) = hint(facts(Some(false), Some(false)));
        assert!(
            h.starts_with("this nvidia_uvm was built without HMM"),
            "{h}"
        );
        assert!(!h.contains("uvm_disable_hmm=1"), "{h}");
        let (h, _) = hint(facts(Some(true), Some(true)));
        assert!(h.starts_with("HMM is already disabled"), "{h}");
        let (h, _) = hint(facts(None, None));
        assert_eq!(h, HMM_HINT);
    }

    fn signal_to(t: u64, sig: i32) -> Event {
        Event::Proc(crate::decode::ProcCall {
            target_tid: Some(7),
            sig: Some(sig),
            code: Some(0),
            ..proc_call("signal", 99, "timeout", 7, t * 1_000_000 + 500)
        })
    }

    fn failed(mut e: Event, errno: &str) -> Event {
        if let Event::Ioctl(i) = &mut e {
            i.ok = false;
            i.ret = -1;
            i.errno = Some(errno.into());
        }
        e
    }

    /// Replays a stream; the signal records it produced.
    fn signal_reports(events: &[Event]) -> Vec<SignalReport> {
        let mut c = Correlator::default();
        let mut out = Vec::new();
        for e in events {
            c.observe(e, &mut out);
        }
        c.finish(&mut out);
        out.into_iter()
            .filter_map(|r| match r {
                Record::Signal(s) => Some(*s),
                _ => None,
            })
            .collect()
    }

    const GET_NAME: Option<(&str, &str)> =
        Some(("control_name", "NV2080_CTRL_CMD_GPU_GET_NAME_STRING"));

    /// What became of the call a signal landed in: EINTR retried by the
    /// caller, restarted by the kernel, died in it, or completed.
    #[test]
    fn a_signal_says_what_became_of_its_call() {
        let ctl = || open(1, "/dev/nvidiactl", "ctl");
        let call = |t| io(t, "NV_ESC_RM_CONTROL", GET_NAME, "ctl");
        // The signal's record precedes the record of the call it landed in
        // (a call's record is written when it returns).
        let r = signal_reports(&[ctl(), signal_to(2, 14), failed(call(2), "EINTR"), call(3)]);
        assert_eq!(r.len(), 1, "{r:#?}");
        assert_eq!(r[0].outcome, "eintr_retried");
        assert_eq!(
            r[0].in_flight,
            "NV_ESC_RM_CONTROL NV2080_CTRL_CMD_GPU_GET_NAME_STRING"
        );
        assert_eq!(r[0].stage.as_deref(), Some("S0 ctl_opened"));
        assert_eq!(
            r[0].text,
            "SIGALRM from timeout[99] at 1.0 ms in NV_ESC_RM_CONTROL NV2080_CTRL_CMD_GPU_GET_NAME_STRING \
(after S0 ctl_opened): the call returned EINTR and the caller made it again"
        );

        let r = signal_reports(&[
            ctl(),
            signal_to(2, 14),
            failed(call(2), "EINTR"),
            io(3, "NV_ESC_RM_FREE", None, "ctl"),
        ]);
        assert_eq!(r[0].outcome, "eintr");
        assert!(
            r[0].text.ends_with("the call returned EINTR to the caller"),
            "{}",
            r[0].text
        );

        let r = signal_reports(&[
            ctl(),
            signal_to(2, 17),
            failed(call(2), "ERESTARTSYS"),
            call(3),
        ]);
        assert_eq!(r[0].outcome, "restarted");
        assert!(
            r[0].text
                .ends_with("the kernel restarted the call (ERESTARTSYS)"),
            "{}",
            r[0].text
        );

        let r = signal_reports(&[
            ctl(),
            signal_to(2, 15),
            failed(call(2), "ERESTARTSYS"),
            exit_of(4, 7, 15),
        ]);
        assert_eq!(r[0].outcome, "died_in_call");
        assert_eq!(r[0].signal, "SIGTERM");
        assert_eq!(r[0].sender_pid, Some(99));

        let r = signal_reports(&[ctl(), signal_to(2, 10), call(2)]);
        assert_eq!(r[0].outcome, "completed");
        assert!(
            r[0].text.ends_with("the call completed successfully"),
            "{}",
            r[0].text
        );

        // The handler's SA_RESTART decides an ERESTARTSYS, as the kernel
        // does, when the signal is delivered.
        let delivered = |t: u64, restart: bool| {
            let mut e = signal_to(t, 14);
            if let Event::Proc(p) = &mut e {
                p.op = "signal_delivered";
                p.proc = proc_();
                p.action = Some("handler");
                p.sa_restart = Some(restart);
            }
            e
        };
        let r = signal_reports(&[
            ctl(),
            signal_to(2, 14),
            failed(call(2), "ERESTARTSYS"),
            delivered(3, true),
        ]);
        assert_eq!(r.len(), 1, "{r:#?}");
        assert_eq!(r[0].outcome, "restarted");
        assert!(
            r[0].text.ends_with(
                "the kernel restarted the call (ERESTARTSYS) after the handler ran (SA_RESTART)"
            ),
            "{}",
            r[0].text
        );
        let r = signal_reports(&[
            ctl(),
            signal_to(2, 14),
            failed(call(2), "ERESTARTSYS"),
            delivered(3, false),
            call(4),
        ]);
        assert_eq!(r.len(), 1, "{r:#?}");
        assert_eq!(r[0].outcome, "eintr");
        assert!(
            r[0].text
                .ends_with("the handler lacking SA_RESTART, returned EINTR to the caller"),
            "{}",
            r[0].text
        );

        // Between calls and outside cuInit: no report (the proc record
        // still shows the signal).
        let r = signal_reports(&[ctl(), call(2), signal_to(3, 10), call(4), exit_of(5, 7, 0)]);
        assert!(r.is_empty(), "{r:#?}");
    }

    fn span(start_ms: u64, end_ms: u64, function: &'static str, result: &str, ok: bool) -> Event {
        Event::Driver(crate::decode::DriverCall {
            proc: proc_(),
            function,
            module: "nvidia_uvm",
            start_ns: start_ms * 1_000_000,
            duration_ns: (end_ms - start_ms) * 1_000_000,
            ret: 0,
            result: result.into(),
            ok,
            call: None,
            device: None,
            rm_status: None,
            raw: None,
        })
    }

    fn breakdowns(events: &[Event]) -> Vec<Breakdown> {
        let mut c = Correlator::default();
        let mut out = Vec::new();
        for e in events {
            c.observe(e, &mut out);
        }
        out.into_iter()
            .filter_map(|r| match r {
                Record::Breakdown(b) => Some(*b),
                _ => None,
            })
            .collect()
    }

    /// A failed call's breakdown names the innermost failing function and
    /// its callers; a slow successful one the innermost function that took
    /// at least half the time; a fast successful one gets none.
    #[test]
    fn breakdowns_name_where_the_time_went() {
        let mut reg = io(100, "UVM_REGISTER_GPU", None, "uvm");
        if let Event::Ioctl(i) = &mut reg {
            i.duration_ns = 2_310_000_000;
            i.ok = false;
        }
        let b = breakdowns(&[
            span(100, 2390, "uvm_pmm_devmem_init", "NV_ERR_NO_MEMORY", false),
            span(
                100,
                2395,
                "uvm_gpu_retain_by_uuid",
                "NV_ERR_NO_MEMORY",
                false,
            ),
            span(100, 2400, "uvm_api_register_gpu", "NV_ERR_NO_MEMORY", false),
            reg,
        ]);
        assert_eq!(b.len(), 1);
        assert_eq!(
            b[0].text,
            "UVM_REGISTER_GPU 2.31 s: 2.29 s in uvm_pmm_devmem_init, which returned NV_ERR_NO_MEMORY (in uvm_gpu_retain_by_uuid < uvm_api_register_gpu)"
        );
        // Slow but fine: the function that took most of it, no failure.
        let mut slow = io(10, "UVM_REGISTER_GPU", None, "uvm");
        if let Event::Ioctl(i) = &mut slow {
            i.duration_ns = 170_000_000;
        }
        let b = breakdowns(&[
            span(10, 12, "uvm_va_space_create", "NV_OK", true),
            span(12, 175, "uvm_gpu_retain_by_uuid", "NV_OK", true),
            span(10, 178, "uvm_api_register_gpu", "NV_OK", true),
            slow,
        ]);
        assert_eq!(
            b[0].text,
            "UVM_REGISTER_GPU 170.0 ms: 163.0 ms in uvm_gpu_retain_by_uuid, which returned NV_OK (in uvm_api_register_gpu)"
        );
        // Fast and fine: nothing to say; spans of another call are dropped.
        let b = breakdowns(&[
            span(1, 1, "rm_ioctl", "NV_OK", true),
            io(1, "NV_ESC_RM_CONTROL", None, "ctl"),
        ]);
        assert!(b.is_empty(), "{b:?}");
    }
}
