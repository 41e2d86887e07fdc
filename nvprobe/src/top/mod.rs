//! `nvprobe top`: the live view. The pipeline feeds a [`View`] (events on
//! the decode threads, a batch under one lock; stages, verdicts and
//! signals on the output thread; the calls in flight on the collector's
//! tick), and a drawing thread of its own ([`draw`]) shows a copy of it a
//! few times a second: drawing can drop frames, never events.

pub mod draw;

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard},
};

use nvprobe_model::{
    correlate::{Class, Outcome, Record},
    decode::{CudaPhase, Event, Ioctl, ProcKind},
    render::Note,
};

pub use crate::pipeline::Flight;
use crate::pipeline::{EventSink, Observer};

/// The most processes kept (the oldest ended ones go first).
const MAX_ROWS: usize = 2000;
/// How long a process that ended stays in the view.
const ENDED_KEEP_NS: u64 = 60_000_000_000;
/// A process quiet this long is looked for in /proc.
const QUIET_NS: u64 = 30_000_000_000;
/// Lines of nvprobe's own messages kept for the view.
const MAX_MESSAGES: usize = 50;

/// The view shared by the pipeline and the drawing thread.
#[derive(Clone, Default)]
pub struct View(Arc<Mutex<State>>);

/// `top` sees the stream as one of the pipeline's observers: each event
/// (its own decode-thread sink is a handle on the same state), record and
/// note, under the view's lock.
impl Observer for View {
    fn event_sink(&self) -> Option<Box<dyn EventSink>> {
        Some(Box::new(self.clone()))
    }
    fn record(&self, mono_ns: u64, r: &Record) {
        self.lock().record(mono_ns, r);
    }
    fn note(&self, _: u64, n: &Note<'_>) {
        match n {
            Note::Stall(_) => self.lock().stall(),
            Note::Hang(h) => {
                self.lock().hangs.insert((h.pid, h.tid), h.text.clone());
            }
            Note::HangEnd(e) => {
                self.lock().hangs.remove(&(e.pid, e.tid));
            }
            Note::Lost { count, .. } => self.lock().lost(*count),
            _ => {}
        }
    }
    fn wants_flights(&self) -> bool {
        true
    }
    fn flights(&self, calls: Vec<Flight>) {
        View::flights(self, calls);
    }
}

impl EventSink for View {
    fn event(&mut self, mono_ns: u64, ev: &Event) {
        self.lock().event(mono_ns, ev);
    }
}

impl View {
    /// `live`: the processes are this host's (a quiet one whose exit was
    /// missed is looked for in /proc).
    pub fn new(probes: String, stall_after_ns: u64, live: bool) -> Self {
        Self(Arc::new(Mutex::new(State {
            probes,
            stall_after_ns,
            live,
            ..State::default()
        })))
    }

    /// The state, for a batch of updates (a poisoned lock is still usable:
    /// the view only shows what it holds).
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of what is to be shown at `now_ns` (CLOCK_MONOTONIC), in
    /// order: what is most likely wrong first.
    pub fn snapshot(&self, now_ns: u64) -> Snapshot {
        // Processes quiet for a while whose exit the view never saw (the
        // kernel dropped it): gone when /proc no longer has them.
        let quiet: Vec<u32> = {
            let st = self.lock();
            st.procs
                .values()
                .filter(|r| {
                    st.live && r.ended_ns.is_none() && now_ns.saturating_sub(r.last_ns) > QUIET_NS
                })
                .map(|r| r.pid)
                .collect()
        };
        let gone: Vec<u32> = quiet
            .into_iter()
            .filter(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
            .collect();
        // Copied under the lock, laid out after it.
        let (procs, copy) = {
            let mut st = self.lock();
            for pid in gone {
                if let Some(r) = st.procs.get_mut(&pid) {
                    r.ended_ns = Some(r.last_ns);
                }
            }
            st.expire(now_ns);
            let procs: Vec<Row> = st.procs.values().cloned().collect();
            let copy = State {
                flights: st.flights.clone(),
                events: st.events,
                lost: st.lost,
                stalls: st.stalls,
                hangs: st.hangs.clone(),
                faults: st.faults,
                xids: st.xids,
                probes: st.probes.clone(),
                stall_after_ns: st.stall_after_ns,
                messages: st.messages.clone(),
                ..State::default()
            };
            (procs, copy)
        };
        let st = copy;
        let mut rows: Vec<RowView> = procs.iter().map(|r| r.view(now_ns, &st)).collect();
        rows.sort_by(|a, b| {
            a.rank
                .cmp(&b.rank)
                .then(b.time_ms.total_cmp(&a.time_ms))
                .then(a.pid.cmp(&b.pid))
        });
        Snapshot {
            rows,
            events: st.events,
            lost: st.lost,
            stalls: st.stalls,
            hangs: st.hangs.len() as u64,
            faults: st.faults,
            xids: st.xids,
            probes: st.probes.clone(),
            messages: st.messages.iter().cloned().collect(),
        }
    }

    /// The calls in flight at a tick. Threads the view has not seen are
    /// looked up in /proc first, without the lock (the collector's thread
    /// calls this; the lock is held for a copy only).
    pub fn flights(&self, mut calls: Vec<Flight>) {
        let unknown: Vec<u32> = {
            let st = self.lock();
            calls
                .iter()
                .filter(|f| {
                    f.pid.is_none()
                        && !st.tids.contains_key(&f.tid)
                        && !st.looked.contains_key(&f.tid)
                })
                .map(|f| f.tid)
                .collect()
        };
        let found: Vec<(u32, u32)> = unknown
            .into_iter()
            .filter_map(|t| tgid_of(t).map(|g| (t, g)))
            .collect();
        let mut st = self.lock();
        st.looked.extend(found);
        for f in &mut calls {
            if f.pid.is_none() {
                f.pid = st.looked.get(&f.tid).copied();
            }
        }
        st.flights(calls);
    }

    /// One of nvprobe's own messages (what it would have written to
    /// stderr while the view owns the terminal).
    pub fn message(&self, line: String) {
        let mut st = self.lock();
        if st.messages.len() == MAX_MESSAGES {
            st.messages.pop_front();
        }
        st.messages.push_back(line);
    }
}

/// A call in flight, its process known.
#[derive(Clone, Debug)]
struct Flying {
    pid: u32,
    tid: u32,
    call: String,
    start_ns: u64,
}

/// One process as the view keeps it.
#[derive(Clone, Debug, Default)]
struct Row {
    pid: u32,
    comm: String,
    /// The verdict's class; before it, "cuda" once cuInit or UVM is seen.
    class: Option<Class>,
    stage: Option<String>,
    first_ns: u64,
    /// The end of its last event.
    last_ns: u64,
    calls: u64,
    last_failure: Option<String>,
    /// (result, text, total_ms) of the cuInit verdict.
    verdict: Option<(Outcome, String, f64)>,
    signal: Option<String>,
    ended_ns: Option<u64>,
    exit: Option<String>,
    /// The run-time fault verdict's line.
    fault: Option<String>,
}

/// The view's state.
#[derive(Default)]
pub struct State {
    procs: HashMap<u32, Row>,
    /// tid -> its process, for the calls in flight (a process's threads
    /// are forgotten when it exits).
    tids: HashMap<u32, u32>,
    /// Each call in flight at the last tick, until its thread's next
    /// event says it ended.
    flights: Vec<Flying>,
    /// Threads looked up in /proc (tid -> process), for calls in flight
    /// of threads the view has no event of yet.
    looked: HashMap<u32, u32>,
    /// Exits seen (pid -> time, how): an exit can reach the view before
    /// the process's last events (decode threads run side by side).
    ended: HashMap<u32, (u64, Option<String>)>,
    events: u64,
    lost: u64,
    stalls: u64,
    /// Hangs not ended: (pid, tid) -> the hang record's text.
    hangs: HashMap<(u32, u32), String>,
    /// Run-time fault verdicts, and Xids the driver logged.
    faults: u64,
    xids: u64,
    probes: String,
    stall_after_ns: u64,
    messages: VecDeque<String>,
    live: bool,
}

/// How a call is named in the view: the escape, UVM command or ioctl
/// number, with the RM control or class it carries.
pub fn ioctl_label(i: &Ioctl) -> String {
    let name = i
        .xfer
        .as_ref()
        .and_then(|x| x.name)
        .or(i.name)
        .map_or_else(|| format!("ioctl {:#x}", i.request), str::to_owned);
    let known = i.args.known();
    match known
        .control
        .and_then(|n| n.name)
        .or_else(|| known.class.and_then(|n| n.name))
    {
        Some(w) => format!("{name} {w}"),
        None => name,
    }
}

/// A failed call in a few words: the call and what it got.
fn failure(ev: &Event) -> Option<String> {
    if ev.ok() {
        return None;
    }
    Some(match ev {
        Event::Ioctl(i) => {
            let got = i
                .status
                .as_ref()
                .map(|s| {
                    s.name
                        .map_or_else(|| format!("status {:#x}", s.code), str::to_owned)
                })
                .or_else(|| i.errno.clone())
                .unwrap_or_else(|| format!("returned {}", i.ret));
            format!("{} = {got}", ioctl_label(i))
        }
        Event::Open(p) | Event::Mknod(p) => {
            // An open that succeeded on the wrong node (a bind-mounted
            // /dev/null) says what it found.
            let got = p.errno.clone().or_else(|| {
                p.mismatch
                    .as_ref()
                    .map(|m| m.split_once(" is ").map_or(m.as_str(), |x| x.1).to_owned())
            });
            format!(
                "{} {} = {}",
                p.syscall,
                p.path,
                got.as_deref().unwrap_or("failed")
            )
        }
        // A failed stat or access is a lookup, not a call into the driver
        // (libcuda probes paths that need not exist on every start-up).
        Event::Stat(_) | Event::Access(_) => return None,
        Event::Mmap(m) => format!("mmap = {}", m.errno.as_deref().unwrap_or("failed")),
        Event::Cuda(c) => format!(
            "{} = {}",
            c.func,
            c.result_name
                .map_or_else(|| format!("{}", c.result.unwrap_or(0)), str::to_owned)
        ),
        Event::Driver(d) => format!("{} failed", d.function),
        Event::Nccl(n) => format!("{} = {}", n.func, n.result_name.unwrap_or("failed")),
        Event::Close(_) | Event::Dup(_) | Event::Proc(_) => return None,
    })
}

impl State {
    fn row(&mut self, pid: u32, comm: &str, t: u64) -> &mut Row {
        self.procs.entry(pid).or_insert_with(|| Row {
            pid,
            comm: comm.to_owned(),
            first_ns: t,
            ..Row::default()
        })
    }

    /// One decoded event at `t` (its end). Events come from several decode
    /// threads: an exit may arrive before the last calls it follows.
    pub fn event(&mut self, t: u64, ev: &Event) {
        self.events += 1;
        let p = ev.proc();
        if let Event::Proc(pc) = ev {
            self.proc_event(t, pc);
            return;
        }
        let start = ev.span().0;
        let ended = match self.ended.get(&p.pid) {
            Some((at, exit)) if start <= *at => Some((*at, exit.clone())),
            // A new process with a reused pid.
            Some(_) => {
                self.ended.remove(&p.pid);
                None
            }
            None => None,
        };
        if self.procs.len() >= MAX_ROWS && !self.procs.contains_key(&p.pid) {
            self.evict();
        }
        if ended.is_none() {
            self.tids.insert(p.tid, p.pid);
        }
        // Calls of this thread that began by then have ended; cuInit ends
        // only with its own return (its driver calls begin inside it).
        if !self.flights.is_empty() {
            let cuinit_return =
                matches!(ev, Event::Cuda(c) if c.func == "cuInit" && c.phase == CudaPhase::Return);
            self.flights.retain(|f| {
                f.tid != p.tid || f.start_ns > start || (f.call == "cuInit" && !cuinit_return)
            });
        }
        let r = self.row(p.pid, &p.comm, start);
        r.calls += 1;
        r.last_ns = r.last_ns.max(t);
        if let Some((at, exit)) = ended {
            r.ended_ns = Some(at);
            r.exit = exit;
        }
        if r.class.is_none()
            && (matches!(ev, Event::Cuda(_))
                || matches!(ev, Event::Ioctl(i) if i.device.kind == nvprobe_model::decode::DeviceKind::Uvm))
        {
            r.class = Some(Class::Cuda);
        }
        if let Some(f) = failure(ev) {
            r.last_failure = Some(f);
        }
    }

    fn proc_event(&mut self, t: u64, pc: &nvprobe_model::decode::ProcCall) {
        let target = pc.target_pid;
        match pc.op {
            ProcKind::Exit => {
                self.tids.retain(|_, pid| *pid != target);
                self.flights.retain(|f| f.pid != target);
                if let Some(r) = self.procs.get_mut(&target) {
                    r.ended_ns = Some(t);
                    r.exit.clone_from(&pc.exit);
                }
                if self.ended.len() >= 2 * MAX_ROWS
                    && let Some(old) = self.ended.iter().min_by_key(|e| e.1.0).map(|e| *e.0)
                {
                    self.ended.remove(&old);
                }
                self.ended.insert(target, (t, pc.exit.clone()));
            }
            // A new program: a new start-up in the same process.
            ProcKind::Exec if self.procs.contains_key(&pc.proc.pid) => {
                let pid = pc.proc.pid;
                self.flights.retain(|f| f.pid != pid);
                self.procs.insert(
                    pid,
                    Row {
                        pid,
                        comm: pc.proc.comm.clone(),
                        first_ns: t,
                        last_ns: t,
                        ..Row::default()
                    },
                );
            }
            ProcKind::SignalDelivered => {
                if let (Some(r), Some(s)) = (self.procs.get_mut(&target), &pc.signal) {
                    r.signal = Some(s.clone());
                }
            }
            _ => {}
        }
    }

    /// A record of the correlator.
    pub fn record(&mut self, t: u64, rec: &Record) {
        match rec {
            Record::Stage { pid, comm, hit } => {
                // The milestone reached last shows (ids are names, not an
                // order: the real driver reaches S2 before S1).
                let r = self.row(*pid, comm, t);
                r.stage = Some(hit.name.to_owned());
            }
            Record::Cuinit(v) => {
                let r = self.row(v.pid, &v.comm, t);
                r.class = Some(v.class);
                let first = v.text.lines().next().unwrap_or_default().to_owned();
                r.verdict = Some((v.result, first, v.total_ms));
            }
            Record::Signal(s) => {
                if let Some(r) = self.procs.get_mut(&s.pid) {
                    r.signal = Some(format!("{} ({})", s.signal, s.outcome));
                }
            }
            // The start-up came to a failed context after its verdict.
            Record::FirstContext(c) if !c.ok => {
                let r = self.row(c.pid, &c.comm, t);
                r.verdict = Some((
                    crate::correlate::Outcome::Failed,
                    format!("first context failed: {}", c.text),
                    c.context.at_ms,
                ));
            }
            Record::Fault(f) => {
                self.faults = self.faults.saturating_add(1);
                let r = self.row(f.pid, &f.comm, t);
                r.fault = Some(format!(
                    "{}{}",
                    f.text,
                    if f.drain { " [drain the node]" } else { "" }
                ));
            }
            Record::KernelLog(k) => {
                if k.xid.is_some() {
                    self.xids = self.xids.saturating_add(1);
                }
            }
            Record::FirstContext(_) | Record::Breakdown(_) => {}
        }
    }

    /// Events the kernel could not deliver.
    pub fn lost(&mut self, n: u64) {
        self.lost = self.lost.saturating_add(n);
    }

    /// A stall report was made.
    pub fn stall(&mut self) {
        self.stalls += 1;
    }

    /// The calls in flight at this tick (the previous tick's are
    /// replaced); a thread the view has not seen is looked up in /proc.
    pub fn flights(&mut self, calls: Vec<Flight>) {
        self.flights = calls
            .into_iter()
            .filter_map(|f| {
                let pid = f
                    .pid
                    .or_else(|| self.tids.get(&f.tid).copied())
                    .or_else(|| self.looked.get(&f.tid).copied())?;
                // Only processes the view shows (--comm, --pid).
                if !self.procs.contains_key(&pid) {
                    return None;
                }
                Some(Flying {
                    pid,
                    tid: f.tid,
                    call: f.call,
                    start_ns: f.start_ns,
                })
            })
            .collect();
    }

    /// Drop what ended long ago.
    fn expire(&mut self, now_ns: u64) {
        self.procs.retain(|_, r| {
            r.ended_ns
                .is_none_or(|e| now_ns.saturating_sub(e) < ENDED_KEEP_NS)
        });
        self.ended
            .retain(|_, (at, _)| now_ns.saturating_sub(*at) < ENDED_KEEP_NS);
        let procs = &self.procs;
        self.tids.retain(|_, pid| procs.contains_key(pid));
        if self.looked.len() > 4096 {
            self.looked.clear();
        }
    }

    /// Make room: the process that ended first, else the oldest.
    fn evict(&mut self) {
        let victim = self
            .procs
            .values()
            .min_by_key(|r| (r.ended_ns.is_none(), r.ended_ns.unwrap_or(r.first_ns)))
            .map(|r| r.pid);
        if let Some(pid) = victim {
            self.procs.remove(&pid);
            self.tids.retain(|_, p| *p != pid);
        }
    }
}

/// The process of a thread nvprobe has not seen make a call yet (its
/// first call is the one in flight).
fn tgid_of(tid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Why a row is where it is: lower is more likely wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    /// A call in flight for longer than --stall-after, or a hang.
    Stalled = 0,
    /// Its start-up ended badly (failed, killed, incomplete).
    Failed = 1,
    /// Still starting, and a call already failed.
    Failing = 2,
    /// Still starting.
    Starting = 3,
    /// Ended well, or not a CUDA start-up.
    Done = 4,
}

/// One line of the view.
#[derive(Clone, Debug)]
pub struct RowView {
    pub pid: u32,
    pub comm: String,
    pub class: String,
    pub stage: String,
    /// Time in start-up: the verdict's, else since the first call.
    pub time_ms: f64,
    /// The longest call in flight and for how long.
    pub in_flight: String,
    pub last_failure: String,
    /// The verdict's result, or starting / ended.
    pub state: String,
    /// The verdict's first line, or the signal that landed.
    pub why: String,
    pub rank: Rank,
}

impl Row {
    fn view(&self, now_ns: u64, st: &State) -> RowView {
        let flight = st
            .flights
            .iter()
            .filter(|f| f.pid == self.pid && self.ended_ns.is_none())
            .min_by_key(|f| f.start_ns);
        let flight_ns = flight.map_or(0, |f| now_ns.saturating_sub(f.start_ns));
        let stalled = flight.is_some() && st.stall_after_ns > 0 && flight_ns >= st.stall_after_ns;
        let hang = st
            .hangs
            .iter()
            .filter(|((p, _), _)| *p == self.pid)
            .min_by_key(|((_, t), _)| *t)
            .map(|(_, text)| text);
        let rank = match &self.verdict {
            _ if stalled || hang.is_some() => Rank::Stalled,
            _ if self.fault.is_some() => Rank::Failed,
            Some((Outcome::Failed | Outcome::Killed, _, _)) => Rank::Failed,
            // A CUDA start-up that the process left before it completed.
            Some((Outcome::Exited, _, _)) if self.class == Some(Class::Cuda) => Rank::Failed,
            // Tracing stopped while it was still starting.
            Some((Outcome::Incomplete, _, _)) => Rank::Starting,
            Some(_) => Rank::Done,
            None if self.ended_ns.is_some() => Rank::Done,
            None if self.last_failure.is_some() => Rank::Failing,
            None => Rank::Starting,
        };
        let end = self.ended_ns.unwrap_or(now_ns);
        RowView {
            pid: self.pid,
            comm: self.comm.clone(),
            class: self.class.map_or("-", Class::as_str).to_owned(),
            stage: self.stage.clone().unwrap_or_else(|| "-".into()),
            time_ms: self
                .verdict
                .as_ref()
                .map_or(end.saturating_sub(self.first_ns) as f64 / 1e6, |v| v.2),
            // The time first: a narrow column still shows it.
            in_flight: flight
                .map_or_else(String::new, |f| format!("{} {}", secs(flight_ns), f.call)),
            last_failure: self.last_failure.clone().unwrap_or_default(),
            state: match (&self.verdict, self.ended_ns) {
                _ if hang.is_some() => "hang".into(),
                _ if self.fault.is_some() => "fault".into(),
                (Some((res, _, _)), _) => res.as_str().to_owned(),
                (None, Some(_)) => "ended".into(),
                (None, None) => "starting".into(),
            },
            why: match (&self.verdict, &self.signal) {
                _ if hang.is_some() => hang.cloned().unwrap_or_default(),
                _ if stalled => flight.map_or_else(String::new, |f| {
                    format!(
                        "{} has been running for {} (stage {})",
                        f.call,
                        secs(flight_ns),
                        self.stage.as_deref().unwrap_or("none yet")
                    )
                }),
                _ if self.fault.is_some() => self.fault.clone().unwrap_or_default(),
                (Some((_, text, _)), _) => text.clone(),
                (None, Some(s)) => format!("signal {s}"),
                (None, None) => self.exit.clone().unwrap_or_default(),
            },
            rank,
        }
    }
}

/// A duration for people: 850ms, 12.3s, 4m05s.
pub fn secs(ns: u64) -> String {
    let ms = ns / 1_000_000;
    if ms < 10 {
        format!("{:.1}ms", ns as f64 / 1e6)
    } else if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    }
}

/// What the drawing thread shows.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub rows: Vec<RowView>,
    pub events: u64,
    pub lost: u64,
    pub stalls: u64,
    /// Hang records not ended.
    pub hangs: u64,
    pub faults: u64,
    pub xids: u64,
    pub probes: String,
    pub messages: Vec<String>,
}

#[cfg(test)]
mod tests;
