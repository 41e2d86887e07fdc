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
    /// Its NVIDIA ioctls, those counted in the kernel instead of sent
    /// included.
    pub ioctls: u64,
    /// Of those, the successful ones the kernel counted instead of sending
    /// (`--events failures|verdicts`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unsent: u64,
    pub failed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
    /// Named after a thread other than the main one (its own name, e.g.
    /// `cuda-EvtHandlr`): the main thread's name replaces it when seen.
    #[serde(skip)]
    #[schemars(skip)]
    by_thread: bool,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct CallSummary {
    pub name: String,
    /// Every call, those counted in the kernel instead of sent included.
    pub count: u64,
    pub failed: u64,
    /// Of the calls sent (the kernel keeps no time of the others).
    pub total_ns: u64,
    pub max_ns: u64,
    /// Successful calls the kernel counted instead of sending
    /// (`--events failures|verdicts`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unsent: u64,
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
    /// Events that failed, but lookups that found nothing.
    pub failed: u64,
    /// Lookups that found nothing (`Event::lookup_missed`: a stat, an
    /// access or the loader's open of a path that does not exist): a
    /// healthy CUDA start-up makes a few dozen.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lookups_missed: u64,
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
    /// Text only: fork, exec, exit, signal and failed-call lines of processes that made
    /// no NVIDIA call (`--all-processes` writes them), and how many
    /// processes they were about.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lifecycle_lines_left_out: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lifecycle_processes_left_out: u64,
    /// Whether the descriptor programs stopped at their top for the
    /// processes without an NVIDIA descriptor (`nvprobe_common::fastpath`):
    /// absent when the probes it needs were not all attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor_gate: Option<DescriptorGate>,
}

/// The descriptor programs' gate: opened once a scan of /proc had put the
/// processes already holding an NVIDIA descriptor into the kernel's table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DescriptorGate {
    pub open: bool,
    /// Processes the scan looked at, and those holding an NVIDIA
    /// descriptor (or whose descriptors it could not all read).
    pub processes: u64,
    pub holders: u64,
    /// Passes over /proc (a holder forked before its parent went into
    /// the kernel's table is found by the next one).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub passes: u64,
    /// How long the scan took; until it ended, every call was resolved.
    pub scan_ms: f64,
    /// When the gate opened (CLOCK_MONOTONIC ns, as records' `mono_ns`;
    /// 0: it did not).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub opened_mono_ns: u64,
    /// Why the gate stayed shut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shut_because: Option<String>,
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
    /// A row per name its main thread had (an exec changes it); its
    /// other threads' events count in the row of the name it has then.
    rows: Vec<ProcSummary>,
    /// The row of its main thread's latest event: the program running.
    current: Option<usize>,
    /// Calls the kernel counted for the program before an exec whose row
    /// is in an earlier part (this part saw no event of it before the
    /// exec): added to that row when the parts are merged.
    exec_unsent: u64,
}

impl Life {
    fn events(&self) -> u64 {
        self.rows.iter().map(|r| r.events).sum()
    }
    fn failed(&self) -> u64 {
        self.rows.iter().map(|r| r.failed).sum()
    }
    /// The row of an event of pid `pid` made under the name `comm`, by its
    /// main thread or (`main` false) another: the row of that name, else
    /// a thread's event goes to the process's row as it is named now, and
    /// the main thread's name replaces a thread's; else a new row (an
    /// exec, or the process's first event).
    fn row_for(&mut self, pid: u32, comm: &str, main: bool) -> usize {
        let i = self.find_row(pid, comm, main);
        if main {
            self.current = Some(i);
        }
        i
    }
    fn find_row(&mut self, pid: u32, comm: &str, main: bool) -> usize {
        if let Some(i) = self.rows.iter().position(|r| r.comm == comm) {
            return i;
        }
        if let Some(last) = self.rows.last_mut()
            && (!main || last.by_thread)
        {
            if main {
                comm.clone_into(&mut last.comm);
                last.by_thread = false;
            }
            return self.rows.len() - 1;
        }
        self.rows.push(ProcSummary {
            pid,
            comm: comm.to_owned(),
            by_thread: !main,
            ..Default::default()
        });
        self.rows.len() - 1
    }

    /// Another part of the same process's counts (a later batch).
    fn absorb(&mut self, o: Life) {
        self.ended |= o.ended;
        self.add_exec_unsent(o.exec_unsent);
        for r in o.rows {
            let i = self.row_for(r.pid, &r.comm, !r.by_thread);
            let m = &mut self.rows[i];
            m.events += r.events;
            m.ioctls += r.ioctls;
            m.unsent += r.unsent;
            m.failed += r.failed;
            if r.last_failure.is_some() {
                m.last_failure = r.last_failure;
            }
        }
    }
    /// `n` calls the kernel counted for the program running before an
    /// exec: its row, or kept for the part that has it.
    fn add_exec_unsent(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        match self.current.and_then(|i| self.rows.get_mut(i)) {
            Some(r) => {
                r.ioctls += n;
                r.unsent += n;
            }
            None => self.exec_unsent += n,
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
    /// Lookups that found nothing.
    missed: u64,
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
        let missed = crate::decode::lookup_missed(ev);
        let ok = ev.ok() || missed;
        if !ok {
            self.failed += 1;
        }
        self.missed += u64::from(missed);
        let p = ev.proc();
        let life = self.life(p.pid, t);
        let i = life.row_for(p.pid, &p.comm, p.tid == p.pid || p.tid == 0);
        let ps = &mut life.rows[i];
        ps.events += 1;
        if !ok {
            ps.failed += 1;
            // The last failure the column can name (a libcuda call's is not
            // one), whatever batch it came in.
            if let Some(t) = failure_text(ev) {
                ps.last_failure = Some(t);
            }
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
            // An untimed call (its start not read) is in the count, not in
            // the times.
            if !e.untimed {
                c.total_ns = c.total_ns.saturating_add(e.duration_ns);
                c.max_ns = c.max_ns.max(e.duration_ns);
            }
        }
    }

    /// A process event (not counted as an event of the table): an exit
    /// ends the process, so that its pid, if reused, is another process.
    pub fn process(&mut self, ev: &Event, t: u64) {
        if let Event::Proc(p) = ev
            && p.op == crate::decode::ProcKind::Exec
            && let Some(n) = p.unsent
        {
            // The program running until the exec.
            self.life(p.target_pid, t).add_exec_unsent(n);
        }
        if let Event::Proc(p) = ev
            && p.op == crate::decode::ProcKind::Exit
        {
            // An exit with nothing before it here still ends the process
            // counted in an earlier batch (see `merge`).
            if let Some(n) = p.unsent {
                self.add_unsent_process(p.target_pid, &p.proc.comm, n, t);
            }
            self.life(p.target_pid, t).ended = true;
        }
    }

    /// `n` NVIDIA calls of `pid` that the kernel counted instead of sending
    /// (its exit record said so, or the maps at the end of tracing); an
    /// empty `comm` is the name it was last listed under.
    pub fn add_unsent_process(&mut self, pid: u32, comm: &str, n: u64, t: u64) {
        let life = self.life(pid, t);
        // The exit record is the last thread's, whatever its name.
        let i = match life.rows.len().checked_sub(1) {
            Some(last) if comm.is_empty() => last,
            _ => life.row_for(pid, comm, false),
        };
        life.rows[i].ioctls += n;
        life.rows[i].unsent += n;
    }

    /// `n` successful calls named `name` that the kernel counted instead of
    /// sending (their durations are not known).
    pub fn add_unsent_calls(&mut self, name: &'static str, n: u64) {
        if n == 0 {
            return;
        }
        let key = CallKey::Named(name);
        let c = self.calls.entry(key).or_insert_with(|| CallSummary {
            name: name.to_owned(),
            ..Default::default()
        });
        c.count += n;
        c.unsent += n;
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
        self.missed += o.missed;
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
            m.unsent += c.unsent;
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
            lookups_missed: self.missed,
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
            descriptor_gate: None,
        }
    }
}

impl Summary {
    pub fn to_text(&self) -> String {
        let total: u64 = self.events.values().sum();
        let missed = match self.lookups_missed {
            0 => String::new(),
            n => format!(" (and {n} lookups of paths that do not exist)"),
        };
        let mut s = format!(
            "--- nvprobe summary: {total} event{} in {:.1} s, {} failed{missed}, {} lost, {} undecodable ---\n",
            if total == 1 { "" } else { "s" },
            self.duration_s,
            self.failed,
            self.lost.total,
            self.decode_errors
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
                "{} fork, exec, exit, signal and failed-call lines of {} processes that made no NVIDIA call were left out (--all-processes shows them)",
                self.lifecycle_lines_left_out, self.lifecycle_processes_left_out
            );
        }
        self.processes_table(&mut s);
        if !self.calls.is_empty() {
            let _ = writeln!(
                s,
                "{:>8} {:>7} {:>12} {:>12}  call",
                "count", "failed", "total", "max"
            );
            for c in self.calls.iter().take(20) {
                let _ = writeln!(
                    s,
                    "{:>8} {:>7} {:>10.3}ms {:>10.3}ms  {}{}",
                    c.count,
                    c.failed,
                    c.total_ns as f64 / 1e6,
                    c.max_ns as f64 / 1e6,
                    c.name,
                    if c.unsent > 0 {
                        format!(
                            " ({} counted in the kernel, not sent: not in the times)",
                            c.unsent
                        )
                    } else {
                        String::new()
                    }
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

    /// The table of processes: their events, ioctls and failures.
    fn processes_table(&self, s: &mut String) {
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
    }
}

#[cfg(test)]
#[path = "summary_tests.rs"]
mod tests;
