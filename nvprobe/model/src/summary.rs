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
    pub processes: Vec<ProcSummary>,
    pub calls: Vec<CallSummary>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bpf: Vec<ProgStats>,
}

/// How a call is counted: by its decoded name, or by its raw number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum CallKey {
    Named(&'static str),
    Raw(&'static str, u32),
}

/// Accumulates per-process and per-call counts. Keyed by pid *and* comm so
/// that an exec (new comm) or a reused pid shows as its own row. Nothing on
/// the per-event path allocates once a process and a call were seen.
#[derive(Default)]
pub struct Stats {
    events: HashMap<&'static str, u64>,
    failed: u64,
    decode_errors: u64,
    procs: HashMap<u32, Vec<ProcSummary>>,
    calls: HashMap<CallKey, CallSummary>,
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
    pub fn record(&mut self, ev: &Event) {
        *self.events.entry(ev.type_name()).or_default() += 1;
        let p = ev.proc();
        let rows = self.procs.entry(p.pid).or_default();
        let i = match rows.iter().position(|r| r.comm == p.comm) {
            Some(i) => i,
            None => {
                rows.push(ProcSummary {
                    pid: p.pid,
                    comm: p.comm.clone(),
                    ..Default::default()
                });
                rows.len() - 1
            }
        };
        let ps = &mut rows[i];
        ps.events += 1;
        if !ev.ok() {
            self.failed += 1;
            ps.failed += 1;
            ps.last_failure = failure_text(ev);
        }
        if let Event::Ioctl(e) = ev {
            ps.ioctls += 1;
            let key = match (e.name, &e.xfer) {
                (_, Some(x)) => x.name.map_or(CallKey::Raw("XFER", 0), CallKey::Named),
                (Some(n), None) => CallKey::Named(n),
                (None, None) => CallKey::Raw(
                    e.family.as_str(),
                    u32::from_str_radix(e.request.trim_start_matches("0x"), 16).unwrap_or(0),
                ),
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
            c.total_ns += e.duration_ns;
            c.max_ns = c.max_ns.max(e.duration_ns);
        }
    }

    /// Fold another thread's counts into these.
    pub fn merge(&mut self, o: Stats) {
        for (k, v) in o.events {
            *self.events.entry(k).or_default() += v;
        }
        self.failed += o.failed;
        self.decode_errors += o.decode_errors;
        for (pid, rows) in o.procs {
            let mine = self.procs.entry(pid).or_default();
            for r in rows {
                match mine.iter_mut().find(|m| m.comm == r.comm) {
                    Some(m) => {
                        m.events += r.events;
                        m.ioctls += r.ioctls;
                        m.failed += r.failed;
                        if r.last_failure.is_some() {
                            m.last_failure = r.last_failure;
                        }
                    }
                    None => mine.push(r),
                }
            }
        }
        for (k, c) in o.calls {
            let m = self.calls.entry(k).or_insert_with(|| CallSummary {
                name: c.name.clone(),
                ..Default::default()
            });
            m.count += c.count;
            m.failed += c.failed;
            m.total_ns += c.total_ns;
            m.max_ns = m.max_ns.max(c.max_ns);
        }
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
        let mut processes: Vec<ProcSummary> = self.procs.values().flatten().cloned().collect();
        processes.sort_by(|a, b| a.pid.cmp(&b.pid).then_with(|| a.comm.cmp(&b.comm)));
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
            processes,
            calls,
            bpf: Vec::new(),
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
