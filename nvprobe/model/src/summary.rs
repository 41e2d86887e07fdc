//! Counts kept while tracing, and the summary printed at the end.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Write as _,
};

use serde::Serialize;

use crate::decode::Event;

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct ProcSummary {
    pub pid: u32,
    /// When this process was first seen (CLOCK_MONOTONIC ns of its first
    /// event), present only when the table lists more than one process
    /// with this pid (it was reused after an exit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ns: Option<u64>,
    pub comm: String,
    pub events: u64,
    pub ioctls: u64,
    pub failed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct CallSummary {
    pub name: String,
    pub count: u64,
    pub failed: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, serde::Deserialize)]
pub struct LostSummary {
    pub total: u64,
    pub per_cpu: Vec<u64>,
    pub per_kind: BTreeMap<String, u64>,
}

/// Run-time cost of one BPF program (`--bpf-stats`, BPF_ENABLE_STATS).
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct ProgStats {
    pub program: String,
    pub run_count: u64,
    pub run_time_ns: u64,
    pub ns_per_run: f64,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Summary {
    pub duration_s: f64,
    pub events: BTreeMap<String, u64>,
    pub failed: u64,
    pub lost: LostSummary,
    pub decode_errors: u64,
    /// Per process (pid and start: a reused pid is another row; an exec
    /// with a new name another row too): the busiest [`TOP_PROCESSES`] and
    /// up to [`TOP_FAILING`] more that had failures.
    pub processes: Vec<ProcSummary>,
    /// Processes left out of `processes`, and their events.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub processes_omitted: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub processes_omitted_events: u64,
    pub calls: Vec<CallSummary>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bpf: Vec<ProgStats>,
    /// Successful calls of processes past their start-up verdict that the
    /// kernel left out (`--events failures|verdicts`): not in `events`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quieted: u64,
    /// Text only: fork, exec, exit and signal lines of processes that made
    /// no NVIDIA call (`--all-processes` writes them), and how many
    /// processes they were about.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lifecycle_lines_left_out: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lifecycle_processes_left_out: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The busiest processes the summary lists.
pub const TOP_PROCESSES: usize = 100;
/// Processes with failures listed beyond the busiest.
pub const TOP_FAILING: usize = 100;
/// Processes kept while tracing before the table is cut back to the listed
/// ones and those still running: memory stays bounded however many
/// processes come and go.
const KEEP_AT_MOST: usize = 4 * (TOP_PROCESSES + TOP_FAILING);
/// Running processes kept through a cut (without the process layer no exit
/// is seen, and every process looks running).
const OPEN_MAX: usize = 2000;

/// How a call is counted: by its decoded name, or by its raw number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum CallKey {
    Named(&'static str),
    Raw(&'static str, u32),
}

/// One process: from its first event to its exit. After the exit its pid
/// may come back as another process (another `Life`).
#[derive(Clone, Debug, Default)]
struct Life {
    start_ns: u64,
    /// Its exit was seen.
    ended: bool,
    /// A row per name (an exec changes it).
    rows: Vec<ProcSummary>,
}

impl Life {
    fn events(&self) -> u64 {
        self.rows.iter().map(|r| r.events).sum()
    }
    fn failed(&self) -> u64 {
        self.rows.iter().map(|r| r.failed).sum()
    }
    /// Another part of the same process's counts (a later batch).
    fn absorb(&mut self, o: Life) {
        self.ended |= o.ended;
        for r in o.rows {
            match self.rows.iter_mut().find(|m| m.comm == r.comm) {
                Some(m) => {
                    m.events += r.events;
                    m.ioctls += r.ioctls;
                    m.failed += r.failed;
                    if r.last_failure.is_some() {
                        m.last_failure = r.last_failure;
                    }
                }
                None => self.rows.push(r),
            }
        }
    }
    /// Which lives are listed first: those with failures (most first, up
    /// to [`TOP_FAILING`]), then by events.
    fn rank(&self, pid: u32) -> (u64, u64, std::cmp::Reverse<(u32, u64)>) {
        (
            self.events(),
            self.failed(),
            std::cmp::Reverse((pid, self.start_ns)),
        )
    }
}

/// Accumulates per-process and per-call counts. A process is its pid and
/// its start (its first event): a pid reused after an exit is another
/// process; an exec (new comm) shows as its own row. The process table is
/// bounded ([`KEEP_AT_MOST`]): what is cut is counted, not listed. Nothing
/// on the per-event path allocates once a process and a call were seen.
#[derive(Default)]
pub struct Stats {
    events: HashMap<&'static str, u64>,
    failed: u64,
    decode_errors: u64,
    /// Per pid, its lives in order; only the last can still be running.
    procs: HashMap<u32, Vec<Life>>,
    /// Lives in `procs`.
    lives: usize,
    /// `lives` that makes the next cut (0: [`KEEP_AT_MOST`]).
    prune_at: usize,
    omitted: u64,
    omitted_events: u64,
    calls: HashMap<CallKey, CallSummary>,
    /// Text's lifecycle and signal lines left out, and their processes.
    left_out: (u64, u64),
}

fn failure_text(ev: &Event) -> Option<String> {
    match ev {
        Event::Ioctl(e) if !e.ok => {
            let name = e.name.unwrap_or("ioctl");
            let why = e
                .errno
                .clone()
                .or_else(|| e.status.as_ref().map(crate::decode::Status::text))
                .unwrap_or_default();
            Some(format!("{name} {why}"))
        }
        Event::Open(e) | Event::Stat(e) | Event::Access(e) if !e.ok => Some(format!(
            "{} {} {}",
            e.syscall,
            e.path,
            e.errno
                .clone()
                .or_else(|| e.mismatch.clone())
                .unwrap_or_default()
        )),
        _ => None,
    }
}

impl Stats {
    /// The running life of `pid`, begun at `t` if there is none.
    fn life(&mut self, pid: u32, t: u64) -> &mut Life {
        let lives = self.procs.entry(pid).or_default();
        if lives.last().is_none_or(|l| l.ended) {
            lives.push(Life {
                start_ns: t,
                ..Default::default()
            });
            self.lives += 1;
        }
        let last = lives.len() - 1;
        &mut lives[last]
    }

    /// Count an event made at `t` (CLOCK_MONOTONIC ns: a new process
    /// starts then).
    pub fn record(&mut self, ev: &Event, t: u64) {
        *self.events.entry(ev.type_name()).or_default() += 1;
        let ok = ev.ok();
        if !ok {
            self.failed += 1;
        }
        let p = ev.proc();
        let life = self.life(p.pid, t);
        let i = match life.rows.iter().position(|r| r.comm == p.comm) {
            Some(i) => i,
            None => {
                life.rows.push(ProcSummary {
                    pid: p.pid,
                    comm: p.comm.clone(),
                    ..Default::default()
                });
                life.rows.len() - 1
            }
        };
        let ps = &mut life.rows[i];
        ps.events += 1;
        if !ok {
            ps.failed += 1;
            ps.last_failure = failure_text(ev);
        }
        if let Event::Ioctl(e) = ev {
            ps.ioctls += 1;
            let key = match (e.name, &e.xfer) {
                (_, Some(x)) => x.name.map_or(CallKey::Raw("XFER", 0), CallKey::Named),
                (Some(n), None) => CallKey::Named(n),
                (None, None) => CallKey::Raw(e.family.as_str(), e.request),
            };
            let c = self.calls.entry(key).or_insert_with(|| CallSummary {
                name: match key {
                    CallKey::Named(n) => n.to_owned(),
                    CallKey::Raw(f, r) => format!("{f} {r:#x}"),
                },
                ..Default::default()
            });
            c.count += 1;
            c.failed += u64::from(!e.ok);
            c.total_ns = c.total_ns.saturating_add(e.duration_ns);
            c.max_ns = c.max_ns.max(e.duration_ns);
        }
    }

    /// A process event (not counted as an event of the table): an exit
    /// ends the process, so that its pid, if reused, is another process.
    pub fn process(&mut self, ev: &Event, t: u64) {
        if let Event::Proc(p) = ev
            && p.op == crate::decode::ProcKind::Exit
        {
            // An exit with nothing before it here still ends the process
            // counted in an earlier batch (see `merge`).
            self.life(p.target_pid, t).ended = true;
        }
    }

    /// Fold the counts of what came next (a later batch) into these.
    /// The text output left out `lines` lifecycle and signal lines of
    /// `processes` processes that made no NVIDIA call.
    pub fn left_out(&mut self, lines: u64, processes: u64) {
        self.left_out = (lines, processes);
    }

    pub fn merge(&mut self, o: Stats) {
        for (k, v) in o.events {
            *self.events.entry(k).or_default() += v;
        }
        self.failed += o.failed;
        self.decode_errors += o.decode_errors;
        self.omitted += o.omitted;
        self.omitted_events += o.omitted_events;
        for (pid, lives) in o.procs {
            let mine = self.procs.entry(pid).or_default();
            let before = mine.len();
            let mut lives = lives.into_iter();
            // The first may go on with the process running here.
            if let Some(first) = lives.next() {
                match mine.last_mut() {
                    Some(l) if !l.ended => l.absorb(first),
                    // An exit whose process is not held (cut, or filtered).
                    _ if first.rows.is_empty() => {}
                    _ => mine.push(first),
                }
            }
            mine.extend(lives.filter(|l| !l.rows.is_empty()));
            self.lives += mine.len() - before;
            if mine.is_empty() {
                self.procs.remove(&pid);
            }
        }
        if self.lives > self.prune_at.max(KEEP_AT_MOST) {
            self.prune();
        }
        for (k, c) in o.calls {
            let m = self.calls.entry(k).or_insert_with(|| CallSummary {
                name: c.name.clone(),
                ..Default::default()
            });
            m.count += c.count;
            m.failed += c.failed;
            m.total_ns = m.total_ns.saturating_add(c.total_ns);
            m.max_ns = m.max_ns.max(c.max_ns);
        }
    }

    /// Which lives the summary lists: the [`TOP_PROCESSES`] busiest, and up
    /// to [`TOP_FAILING`] of the others that had failures (most failures
    /// first); (pid, index) of each.
    fn listed(&self) -> Vec<(u32, usize)> {
        let mut all: Vec<(u32, usize, &Life)> = self
            .procs
            .iter()
            .flat_map(|(pid, lives)| lives.iter().enumerate().map(move |(i, l)| (*pid, i, l)))
            .collect();
        if all.len() > TOP_PROCESSES {
            all.sort_unstable_by_key(|x| std::cmp::Reverse(x.2.rank(x.0)));
            let rest = all.split_off(TOP_PROCESSES);
            let mut failing: Vec<_> = rest.into_iter().filter(|x| x.2.failed() > 0).collect();
            failing.sort_unstable_by_key(|x| std::cmp::Reverse((x.2.failed(), x.2.rank(x.0))));
            failing.truncate(TOP_FAILING);
            all.extend(failing);
        }
        all.into_iter().map(|(p, i, _)| (p, i)).collect()
    }

    /// Cut the table back to the lives the summary would list, and the
    /// processes still running unless they alone are too many ([`OPEN_MAX`]);
    /// the rest is counted. A process cut while running starts a new row if
    /// it is seen again.
    fn prune(&mut self) {
        let open = self
            .procs
            .values()
            .filter(|l| l.last().is_some_and(|l| !l.ended))
            .count();
        let keep_open = open <= OPEN_MAX;
        let listed: std::collections::HashSet<(u32, usize)> = self.listed().into_iter().collect();
        let (mut omitted, mut omitted_events) = (0, 0);
        for (pid, lives) in self.procs.iter_mut() {
            let n = lives.len();
            let mut i = 0;
            lives.retain(|l| {
                let kept = listed.contains(&(*pid, i)) || (keep_open && i + 1 == n && !l.ended);
                i += 1;
                if !kept {
                    omitted += 1;
                    omitted_events += l.events();
                }
                kept
            });
        }
        self.omitted += omitted;
        self.omitted_events += omitted_events;
        self.procs.retain(|_, l| !l.is_empty());
        self.lives = self.procs.values().map(Vec::len).sum();
        self.prune_at = KEEP_AT_MOST.max(2 * self.lives);
    }

    /// Processes held now (for tests and soak figures).
    pub fn processes_held(&self) -> usize {
        self.lives
    }

    pub fn decode_error(&mut self) {
        self.decode_errors += 1;
    }

    pub fn total_events(&self) -> u64 {
        self.events.values().sum()
    }

    pub fn finish(&self, duration_s: f64, lost: LostSummary) -> Summary {
        let mut calls: Vec<_> = self.calls.values().cloned().collect();
        calls.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
        let listed = self.listed();
        let mut omitted = self.omitted;
        let mut omitted_events = self.omitted_events;
        let shown: std::collections::HashSet<(u32, usize)> = listed.iter().copied().collect();
        for (pid, lives) in &self.procs {
            for (i, l) in lives.iter().enumerate() {
                if !shown.contains(&(*pid, i)) {
                    omitted += 1;
                    omitted_events += l.events();
                }
            }
        }
        let mut listed_per_pid: HashMap<u32, usize> = HashMap::new();
        for (pid, _) in &listed {
            *listed_per_pid.entry(*pid).or_default() += 1;
        }
        let mut processes: Vec<(u64, ProcSummary)> = Vec::new();
        for (pid, i) in listed {
            let l = &self.procs[&pid][i];
            let reused = listed_per_pid[&pid] > 1;
            for r in &l.rows {
                let mut r = r.clone();
                r.start_ns = reused.then_some(l.start_ns);
                processes.push((l.start_ns, r));
            }
        }
        processes.sort_by(|(sa, a), (sb, b)| {
            (a.pid, sa)
                .cmp(&(b.pid, sb))
                .then_with(|| a.comm.cmp(&b.comm))
        });
        Summary {
            duration_s,
            events: self
                .events
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect(),
            failed: self.failed,
            lost,
            decode_errors: self.decode_errors,
            processes: processes.into_iter().map(|(_, r)| r).collect(),
            processes_omitted: omitted,
            processes_omitted_events: omitted_events,
            calls,
            bpf: Vec::new(),
            quieted: 0,
            lifecycle_lines_left_out: self.left_out.0,
            lifecycle_processes_left_out: self.left_out.1,
        }
    }
}

impl Summary {
    pub fn to_text(&self) -> String {
        let total: u64 = self.events.values().sum();
        let mut s = format!(
            "--- nvprobe summary: {total} events in {:.1} s, {} failed, {} lost, {} undecodable ---\n",
            self.duration_s, self.failed, self.lost.total, self.decode_errors
        );
        if self.lost.total > 0 {
            let per_cpu: Vec<String> = self
                .lost
                .per_cpu
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(c, n)| format!("cpu{c}={n}"))
                .collect();
            let _ = writeln!(s, "lost per CPU: {}", per_cpu.join(" "));
        }
        if self.quieted > 0 {
            let _ = writeln!(
                s,
                "{} successful calls of processes past their verdict were left out in the kernel (--events)",
                self.quieted
            );
        }
        if self.lifecycle_lines_left_out > 0 {
            let _ = writeln!(
                s,
                "{} fork, exec, exit and signal lines of {} processes that made no NVIDIA call were left out (--all-processes shows them)",
                self.lifecycle_lines_left_out, self.lifecycle_processes_left_out
            );
        }
        if !self.processes.is_empty() {
            let _ = writeln!(
                s,
                "{:>8}  {:<16} {:>8} {:>8} {:>7}  last failure",
                "pid", "comm", "events", "ioctls", "failed"
            );
            for p in &self.processes {
                let _ = writeln!(
                    s,
                    "{:>8}  {:<16} {:>8} {:>8} {:>7}  {}",
                    p.pid,
                    p.comm,
                    p.events,
                    p.ioctls,
                    p.failed,
                    p.last_failure.as_deref().unwrap_or("-")
                );
            }
            if self.processes_omitted > 0 {
                let _ = writeln!(
                    s,
                    "{:>8}  and {} more processes ({} events), not listed",
                    "…", self.processes_omitted, self.processes_omitted_events
                );
            }
        }
        if !self.calls.is_empty() {
            let _ = writeln!(
                s,
                "{:>8} {:>7} {:>12} {:>12}  call",
                "count", "failed", "total", "max"
            );
            for c in self.calls.iter().take(20) {
                let _ = writeln!(
                    s,
                    "{:>8} {:>7} {:>10.3}ms {:>10.3}ms  {}",
                    c.count,
                    c.failed,
                    c.total_ns as f64 / 1e6,
                    c.max_ns as f64 / 1e6,
                    c.name
                );
            }
        }
        if !self.bpf.is_empty() {
            let _ = writeln!(
                s,
                "{:>12} {:>14} {:>10}  BPF program",
                "runs", "run time", "ns/run"
            );
            for b in &self.bpf {
                let _ = writeln!(
                    s,
                    "{:>12} {:>12.3}ms {:>10.1}  {}",
                    b.run_count,
                    b.run_time_ns as f64 / 1e6,
                    b.ns_per_run,
                    b.program
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        decode::{self, ProcKind},
        records::StartRecord,
    };

    /// An ioctl and a process exit decoded from a real recording; the tests
    /// change only who, when, and whether it failed.
    fn templates() -> (Event, Event) {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/h200-580.159.04-rules.ndjson"
        );
        let text = std::fs::read_to_string(path).expect("fixture");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        let start: StartRecord = serde_json::from_value(lines[0].clone()).expect("start");
        let ctx = start.context(None);
        let find = |pick: &dyn Fn(&serde_json::Value) -> bool| {
            let v = lines.iter().find(|v| pick(v)).expect("a line");
            let raw = decode::hex_decode(v["raw"].as_str().expect("raw")).expect("hex");
            decode::decode(&raw, &ctx).expect("decodes")
        };
        (
            find(&|v| v["type"] == "ioctl"),
            find(&|v| v["type"] == "proc" && v["op"] == "exit"),
        )
    }

    struct Make(Event, Event);

    impl Make {
        fn new() -> Self {
            let (i, x) = templates();
            Self(i, x)
        }
        fn ioctl(&self, pid: u32, comm: &str, t: u64, ok: bool) -> Event {
            let mut e = self.0.clone();
            if let Event::Ioctl(i) = &mut e {
                i.proc.pid = pid;
                i.proc.tid = pid;
                i.proc.comm = comm.into();
                i.start_ns = t;
                i.ok = ok;
            }
            e
        }
        fn exit(&self, pid: u32, t: u64) -> Event {
            let mut e = self.1.clone();
            if let Event::Proc(p) = &mut e {
                assert_eq!(p.op, ProcKind::Exit);
                p.proc.pid = pid;
                p.target_pid = pid;
                p.time_ns = t;
            }
            e
        }
    }

    /// Feed events as the pipeline does: each batch counted on its own,
    /// then merged in order.
    fn feed(total: &mut Stats, batch: &[Event]) {
        let mut s = Stats::default();
        for e in batch {
            match e {
                Event::Proc(p) => s.process(e, p.time_ns),
                Event::Ioctl(i) => s.record(e, i.start_ns),
                _ => s.record(e, 0),
            }
        }
        total.merge(s);
    }

    fn rows(s: &Summary, pid: u32) -> Vec<&ProcSummary> {
        s.processes.iter().filter(|p| p.pid == pid).collect()
    }

    /// Mangled recordings carry absurd durations (the decode fuzz found two
    /// near u64::MAX): a call's total saturates, in a batch and across the
    /// merge, instead of overflowing.
    #[test]
    fn call_totals_saturate() {
        let m = Make::new();
        let long = |t| {
            let mut e = m.ioctl(9, "w", t, true);
            if let Event::Ioctl(i) = &mut e {
                i.duration_ns = u64::MAX - 5;
            }
            e
        };
        let mut s = Stats::default();
        feed(&mut s, &[long(1), long(2)]);
        feed(&mut s, &[long(3)]);
        let sum = s.finish(0.0, LostSummary::default());
        assert_eq!(sum.calls.len(), 1);
        assert_eq!(sum.calls[0].count, 3);
        assert_eq!(sum.calls[0].total_ns, u64::MAX);
        assert_eq!(sum.calls[0].max_ns, u64::MAX - 5);
        assert!(sum.to_text().contains(&sum.calls[0].name));
    }

    /// A pid used again after an exit is another process (another row,
    /// each with its start), in one batch or across batches; without an
    /// exit between, later batches go on with the same process.
    #[test]
    fn a_reused_pid_is_another_process() {
        let m = Make::new();
        let mut one = Stats::default();
        feed(
            &mut one,
            &[
                m.ioctl(100, "app", 1_000, true),
                m.exit(100, 2_000),
                m.ioctl(100, "app", 5_000, false),
            ],
        );
        let mut split = Stats::default();
        feed(&mut split, &[m.ioctl(100, "app", 1_000, true)]);
        feed(&mut split, &[m.ioctl(200, "other", 1_500, true)]);
        feed(&mut split, &[m.exit(100, 2_000)]);
        feed(&mut split, &[m.ioctl(100, "app", 5_000, false)]);
        feed(&mut split, &[m.ioctl(200, "other", 6_000, true)]);
        for s in [
            one.finish(0.0, LostSummary::default()),
            split.finish(0.0, LostSummary::default()),
        ] {
            let r = rows(&s, 100);
            assert_eq!(r.len(), 2, "{r:?}");
            assert_eq!(
                (r[0].start_ns, r[0].events, r[0].failed),
                (Some(1_000), 1, 0)
            );
            assert_eq!(
                (r[1].start_ns, r[1].events, r[1].failed),
                (Some(5_000), 1, 1)
            );
            assert_eq!(s.processes_omitted, 0);
        }
        let s = split.finish(0.0, LostSummary::default());
        let r = rows(&s, 200);
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].start_ns, r[0].events),
            (None, 2),
            "no start shown: one process"
        );
    }

    /// An exec (new name, same process) is still its own row.
    #[test]
    fn an_exec_is_its_own_row() {
        let m = Make::new();
        let mut s = Stats::default();
        feed(&mut s, &[m.ioctl(7, "sh", 1, true)]);
        feed(
            &mut s,
            &[
                m.ioctl(7, "python3", 2, true),
                m.ioctl(7, "python3", 3, true),
            ],
        );
        let s = s.finish(0.0, LostSummary::default());
        let r = rows(&s, 7);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].comm.as_str(), r[0].events), ("python3", 2));
        assert_eq!((r[1].comm.as_str(), r[1].events), ("sh", 1));
    }

    /// 100,000 short processes (pids reused: pid_max 32768), each with an
    /// exit: the table held stays bounded the whole time, the summary lists
    /// the busiest and the failing ones up to their caps, and counts every
    /// other process and event it leaves out.
    #[test]
    fn the_process_table_stays_bounded_over_100000_processes() {
        let m = Make::new();
        let mut s = Stats::default();
        let (mut events, mut held_max) = (0u64, 0usize);
        let mut t = 0u64;
        let n = 100_000u32;
        let mut batch = Vec::new();
        for i in 0..n {
            let pid = 300 + i % 32_000;
            // A few busy processes, some failing ones, the rest small.
            let k = if i % 997 == 0 {
                50
            } else {
                1 + u64::from(i % 3)
            };
            for j in 0..k {
                t += 10;
                batch.push(m.ioctl(pid, "worker", t, !(i % 211 == 0 && j == 0)));
                events += 1;
            }
            t += 10;
            batch.push(m.exit(pid, t));
            if batch.len() >= 512 {
                feed(&mut s, &std::mem::take(&mut batch));
                held_max = held_max.max(s.processes_held());
            }
        }
        feed(&mut s, &batch);
        let sum = s.finish(1.0, LostSummary::default());
        eprintln!(
            "held at most {held_max} processes; listed {}, omitted {}",
            sum.processes.len(),
            sum.processes_omitted
        );
        assert!(held_max <= KEEP_AT_MOST + 512, "held {held_max}");
        assert!(sum.processes.len() <= TOP_PROCESSES + TOP_FAILING);
        assert_eq!(
            sum.processes.len() as u64 + sum.processes_omitted,
            u64::from(n)
        );
        let listed: u64 = sum.processes.iter().map(|p| p.events).sum();
        assert_eq!(listed + sum.processes_omitted_events, events);
        assert_eq!(sum.events["ioctl"], events);
        // The busiest (50 events each: 101 of them) fill the top; every
        // failing process (474 fail) past them is listed up to the cap.
        let busy = sum.processes.iter().filter(|p| p.events == 50).count();
        assert_eq!(busy, TOP_PROCESSES);
        let failing = sum.processes.iter().filter(|p| p.failed > 0).count();
        assert!(failing >= TOP_FAILING, "{failing}");
        // A pid listed twice (two processes) says each one's start.
        for p in &sum.processes {
            let twice = sum.processes.iter().filter(|q| q.pid == p.pid).count() > 1;
            assert_eq!(p.start_ns.is_some(), twice, "{p:?}");
        }
        let text = sum.to_text();
        assert!(text.contains(&format!("and {} more processes", sum.processes_omitted)));
        let line = serde_json::to_string(&sum).expect("json");
        assert!(
            line.len() < 64 << 10,
            "summary line of {} bytes",
            line.len()
        );
    }
}
