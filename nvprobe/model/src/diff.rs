//! `nvprobe diff`: two processes' start-ups side by side ("it works on node
//! A"). Each side is the decoded NDJSON of one process: its calls as steps
//! named by what they are (escape or UVM command, RM control or class,
//! path), never by handles, fds or addresses, so that two machines' runs
//! line up. The steps are aligned (longest common subsequence of their
//! names), and the diff says where they first part, which calls only one
//! side made, which results differ, the time to each stage on both sides,
//! and the two verdicts.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::replay::Item;

mod fact;
pub mod typed;

pub use fact::{CallFact, Fact};

/// Steps kept per process (a start-up makes a few hundred calls; a long
/// run is cut, and the diff says so).
pub const MAX_STEPS: usize = 4000;
/// Processes whose records are kept while reading.
pub const MAX_PIDS: usize = 4096;
/// GPU nodes counted per process (NVIDIA's limit is 32 per host).
pub const MAX_GPUS: usize = 64;

/// One call of a process, as the diff compares it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    /// What the call is: "ioctl NV_ESC_RM_CONTROL NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION",
    /// "open /dev/nvidia-uvm", "signal SIGTERM".
    pub call: String,
    /// "ok", the NV_STATUS or errno name, or what the call found (an open
    /// of a node that is another device: "ok, device none").
    pub result: String,
    pub ok: bool,
    /// Milliseconds since the process's first recorded call.
    pub at_ms: f64,
    pub duration_ms: f64,
    /// Which GPU the call was about (the node of a call on a GPU, the UUID
    /// a call names): shown, never compared (another host's GPUs have
    /// other UUIDs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Whether `detail` is a GPU node (else a GPU UUID).
    #[serde(skip)]
    pub detail_is_node: bool,
}

/// One process's start-up.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Side {
    pub label: String,
    pub pid: u32,
    pub comm: String,
    pub steps: Vec<Step>,
    /// Steps past [`MAX_STEPS`] that were not kept.
    pub cut: u64,
    /// Stage → (name, ms since the first call).
    pub stages: BTreeMap<String, (String, f64)>,
    /// The verdict: result and text.
    pub verdict: Option<(String, String)>,
    /// Other CUDA start-ups in the same recording (pid, comm).
    pub others: Vec<(u32, String)>,
    /// Driver calls per GPU node (`/dev/nvidiaN`).
    pub gpu_calls: BTreeMap<String, u64>,
    /// The GPUs registered with UVM (UVM_REGISTER_GPU that succeeded), by
    /// UUID, in order.
    pub registered: Vec<String>,
}

/// Reads decoded NDJSON records and keeps, per process, what a diff needs.
#[derive(Default)]
pub struct Collector {
    procs: HashMap<u32, Side>,
    first_ns: HashMap<u32, u64>,
    /// Pids in the order their first call came.
    order: Vec<u32>,
    /// CUDA start-ups (pids with a `cuinit` verdict of class cuda).
    cuda: Vec<u32>,
}

impl Collector {
    /// One item of the replay's typed stream.
    pub fn item(&mut self, item: &Item<'_>) {
        if let Some((pid, comm, fact)) = Fact::of_item(item) {
            self.push(pid, &comm, fact);
        }
    }

    fn push(&mut self, pid: u32, comm: &str, fact: Fact) {
        if !self.procs.contains_key(&pid) {
            if self.procs.len() >= MAX_PIDS {
                return;
            }
            self.order.push(pid);
        }
        let side = self.procs.entry(pid).or_insert_with(|| Side {
            pid,
            comm: comm.to_owned(),
            ..Side::default()
        });
        match fact {
            Fact::Seen => {}
            Fact::Stage { stage, name, at_ms } => {
                side.stages.entry(stage).or_insert((name, at_ms));
            }
            Fact::Verdict { result, text, cuda } => {
                if side.verdict.is_none() {
                    side.verdict = Some((result, text));
                    if cuda {
                        self.cuda.push(pid);
                    }
                }
            }
            Fact::Call(c) => {
                if let Some((node, registered)) = c.ioctl {
                    if let Some(node) = node
                        && (side.gpu_calls.len() < MAX_GPUS || side.gpu_calls.contains_key(&node))
                    {
                        *side.gpu_calls.entry(node).or_default() += 1;
                    }
                    if let Some(u) = registered
                        && side.registered.len() < MAX_GPUS
                    {
                        side.registered.push(u);
                    }
                }
                let first = *self.first_ns.entry(pid).or_insert(c.start_ns);
                if side.steps.len() >= MAX_STEPS {
                    side.cut += 1;
                    return;
                }
                side.steps.push(Step {
                    call: c.call,
                    result: c.result,
                    ok: c.ok,
                    at_ms: c.start_ns.saturating_sub(first) as f64 / 1e6,
                    duration_ms: c.duration_ns as f64 / 1e6,
                    detail_is_node: c.detail.as_ref().is_some_and(|d| d.1),
                    detail: c.detail.map(|d| d.0),
                });
            }
        }
    }

    /// The process `pid`, or the first CUDA start-up of the recording.
    pub fn side(mut self, label: &str, pid: Option<u32>) -> Result<Side, String> {
        let chosen = match pid {
            Some(p) => {
                if !self.procs.contains_key(&p) {
                    return Err(format!("{label}: no process {p} in the recording"));
                }
                p
            }
            None => *self.cuda.first().ok_or_else(|| {
                format!("{label}: no CUDA start-up (no cuinit verdict of class cuda): give --pid")
            })?,
        };
        let others = self
            .cuda
            .iter()
            .filter(|p| **p != chosen)
            .filter_map(|p| self.procs.get(p).map(|s| (*p, s.comm.clone())))
            .collect();
        let mut side = self.procs.remove(&chosen).unwrap_or_default();
        side.label = label.to_owned();
        side.others = others;
        Ok(side)
    }
}

/// How two steps at aligned places compare.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Difference {
    /// Made by A only (B went on without it).
    OnlyA {
        step: Step,
        index_a: usize,
    },
    OnlyB {
        step: Step,
        index_b: usize,
    },
    /// The same call, another result.
    Result {
        call: String,
        a: String,
        b: String,
        index_a: usize,
        index_b: usize,
    },
}

#[derive(Clone, Debug, Serialize)]
pub struct StageRow {
    pub stage: String,
    pub name: String,
    pub a_ms: Option<f64>,
    pub b_ms: Option<f64>,
}

/// The comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Diff {
    pub a: SideSummary,
    pub b: SideSummary,
    /// The first place the two start-ups part, if they do.
    pub first_divergence: Option<Difference>,
    pub differences: Vec<Difference>,
    /// Calls made by one side only, grouped by call: (call, count in A, count in B).
    pub call_counts: Vec<(String, u64, u64)>,
    pub stages: Vec<StageRow>,
    pub same_calls: usize,
    /// How many of `differences` come before the two sides meet again.
    #[serde(skip)]
    pub first_gap: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct SideSummary {
    pub label: String,
    pub pid: u32,
    pub comm: String,
    pub steps: usize,
    pub cut: u64,
    pub verdict: Option<(String, String)>,
    pub other_cuda_processes: Vec<(u32, String)>,
    /// Driver calls per GPU node.
    pub gpu_calls: BTreeMap<String, u64>,
    /// GPUs registered with UVM, by UUID.
    pub registered_gpus: Vec<String>,
}

impl Diff {
    /// Whether the two start-ups part anywhere (diff(1)'s exit 1).
    pub fn differs(&self) -> bool {
        self.first_divergence.is_some() || !self.differences.is_empty()
    }
}

/// The milestones in the order the runs reached them (the earlier of the
/// two times), not by id: the real driver reaches S2 before S1.
fn in_time_order(mut rows: Vec<StageRow>) -> Vec<StageRow> {
    let first = |r: &StageRow| match (r.a_ms, r.b_ms) {
        (Some(a), Some(b)) => a.min(b),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => f64::INFINITY,
    };
    rows.sort_by(|x, y| first(x).total_cmp(&first(y)));
    rows
}

fn summary(s: &Side) -> SideSummary {
    SideSummary {
        label: s.label.clone(),
        pid: s.pid,
        comm: s.comm.clone(),
        steps: s.steps.len(),
        cut: s.cut,
        verdict: s.verdict.clone(),
        other_cuda_processes: s.others.clone(),
        gpu_calls: s.gpu_calls.clone(),
        registered_gpus: s.registered.clone(),
    }
}

/// Per step: the call, and the ordinal of its GPU among those the side
/// used (nodes and UUIDs counted apart).
fn align_keys(steps: &[Step]) -> Vec<String> {
    let mut nodes: Vec<&str> = Vec::new();
    let mut uuids: Vec<&str> = Vec::new();
    steps
        .iter()
        .map(|st| match &st.detail {
            None => st.call.clone(),
            Some(d) => {
                let (seen, tag) = if st.detail_is_node {
                    (&mut nodes, "node")
                } else {
                    (&mut uuids, "uuid")
                };
                let k = seen.iter().position(|x| *x == d).unwrap_or_else(|| {
                    seen.push(d);
                    seen.len() - 1
                });
                format!("{}\u{1f}{tag}#{k}", st.call)
            }
        })
        .collect()
}

/// Align `a` and `b` by call name (LCS) and list what differs.
pub fn diff(a: &Side, b: &Side) -> Diff {
    let (n, m) = (a.steps.len(), b.steps.len());
    // Steps align by call and by which of its GPUs the side was at: the
    // order in which the side first used a GPU node, and apart from that
    // the order in which it first named a GPU UUID (the first GPU a process
    // uses is its first on any host or container, whatever its node or
    // UUID there).
    let ka = align_keys(&a.steps);
    let kb = align_keys(&b.steps);
    // lcs[i][j]: LCS length of a[i..], b[j..] (n, m ≤ MAX_STEPS: 16 M
    // cells of u16 at most).
    let mut lcs = vec![0u16; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if ka[i] == kb[j] {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut differences = Vec::new();
    let mut same = 0;
    // The differences before the first match that follows the first
    // difference: where the two first part.
    let mut first_gap = None;
    while i < n || j < m {
        if i < n && j < m && ka[i] == kb[j] {
            if !differences.is_empty() && first_gap.is_none() {
                first_gap = Some(differences.len());
            }
            if a.steps[i].result != b.steps[j].result {
                differences.push(Difference::Result {
                    call: a.steps[i].call.clone(),
                    a: a.steps[i].result.clone(),
                    b: b.steps[j].result.clone(),
                    index_a: i,
                    index_b: j,
                });
            } else {
                same += 1;
            }
            i += 1;
            j += 1;
        } else if j >= m || (i < n && lcs[at(i + 1, j)] >= lcs[at(i, j + 1)]) {
            differences.push(Difference::OnlyA {
                step: a.steps[i].clone(),
                index_a: i,
            });
            i += 1;
        } else {
            differences.push(Difference::OnlyB {
                step: b.steps[j].clone(),
                index_b: j,
            });
            j += 1;
        }
    }
    let mut counts: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for d in &differences {
        match d {
            Difference::OnlyA { step, .. } => counts.entry(step.call.clone()).or_default().0 += 1,
            Difference::OnlyB { step, .. } => counts.entry(step.call.clone()).or_default().1 += 1,
            Difference::Result { .. } => {}
        }
    }
    let mut stages: BTreeMap<String, StageRow> = BTreeMap::new();
    for (side, s) in [(0, a), (1, b)] {
        for (stage, (name, ms)) in &s.stages {
            let row = stages.entry(stage.clone()).or_insert_with(|| StageRow {
                stage: stage.clone(),
                name: name.clone(),
                a_ms: None,
                b_ms: None,
            });
            if side == 0 {
                row.a_ms = Some(*ms);
            } else {
                row.b_ms = Some(*ms);
            }
        }
    }
    Diff {
        a: summary(a),
        b: summary(b),
        first_divergence: differences.first().cloned(),
        first_gap: first_gap.unwrap_or(differences.len()),
        differences,
        call_counts: counts.into_iter().map(|(k, (x, y))| (k, x, y)).collect(),
        stages: in_time_order(stages.into_values().collect()),
        same_calls: same,
    }
}

fn about(step: &Step) -> String {
    step.detail
        .as_ref()
        .map_or_else(String::new, |d| format!(" ({d})"))
}

/// One difference, in a line: every part of it came from a recording (a
/// path, a process name), so it is made safe for a terminal.
fn describe(d: &Difference, a: &str, b: &str) -> String {
    crate::decode::terminal_safe(&describe_raw(d, a, b)).into_owned()
}

fn describe_raw(d: &Difference, a: &str, b: &str) -> String {
    match d {
        Difference::OnlyA { step, index_a } => format!(
            "{a} call #{} {}{} = {} at {:.1} ms; {b} made no such call here",
            index_a + 1,
            step.call,
            about(step),
            step.result,
            step.at_ms
        ),
        Difference::OnlyB { step, index_b } => format!(
            "{b} call #{} {}{} = {} at {:.1} ms; {a} made no such call here",
            index_b + 1,
            step.call,
            about(step),
            step.result,
            step.at_ms
        ),
        Difference::Result {
            call,
            a: ra,
            b: rb,
            index_a,
            index_b,
        } => format!(
            "{call}: {a} (call #{}) got {ra}, {b} (call #{}) got {rb}",
            index_a + 1,
            index_b + 1
        ),
    }
}

impl Diff {
    /// The GPUs each side used: calls per GPU node, and those registered
    /// with UVM (by UUID: the same host's GPUs match, another host's do
    /// not, so only the counts are compared then).
    fn gpus_text(&self, s: &mut String) {
        use crate::decode::terminal_safe as safe;
        use std::fmt::Write as _;
        let (a, b) = (&self.a, &self.b);
        if a.gpu_calls.is_empty() && b.gpu_calls.is_empty() {
            return;
        }
        let _ = writeln!(
            s,
            "GPUs (driver calls on each GPU node: {} {}):",
            a.label, b.label
        );
        let nodes: std::collections::BTreeSet<&String> =
            a.gpu_calls.keys().chain(b.gpu_calls.keys()).collect();
        for n in nodes {
            let (x, y) = (
                a.gpu_calls.get(n).copied().unwrap_or(0),
                b.gpu_calls.get(n).copied().unwrap_or(0),
            );
            let only = match (x, y) {
                (_, 0) => format!("  only {}", a.label),
                (0, _) => format!("  only {}", b.label),
                _ => String::new(),
            };
            let _ = writeln!(s, "  {}: {x} {y}{only}", safe(n));
        }
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_owned()
            } else {
                safe(&v.join(", ")).into_owned()
            }
        };
        let _ = writeln!(
            s,
            "registered with UVM: {} {} ({}); {} {} ({})",
            a.label,
            a.registered_gpus.len(),
            list(&a.registered_gpus),
            b.label,
            b.registered_gpus.len(),
            list(&b.registered_gpus)
        );
    }

    /// For people.
    /// Every name, path and text in it came from a recording: made safe
    /// for a terminal field by field (a newline in a path is no new line).
    pub fn to_text(&self) -> String {
        self.text(false)
    }

    /// The text, every difference listed when `all` (`diff --all`); else
    /// the first 20 results and 30 calls, and how many more there are.
    pub fn text(&self, all: bool) -> String {
        let (max_results, max_calls) = if all {
            (usize::MAX, usize::MAX)
        } else {
            (20, 30)
        };
        use crate::decode::terminal_safe as safe;
        use std::fmt::Write as _;
        let (a, b) = (&self.a.label, &self.b.label);
        let mut s = String::new();
        self.sides_text(&mut s);
        match &self.first_divergence {
            None => {
                let _ = writeln!(
                    s,
                    "same calls with the same results ({} calls)",
                    self.same_calls
                );
            }
            Some(d) => {
                let _ = writeln!(s, "first divergence: {}", describe(d, a, b));
                // Where the two part by both going their own ways, the
                // other side's first own call too.
                let gap = self.differences.get(..self.first_gap).unwrap_or(&[]);
                let other = gap.iter().find(|x| {
                    matches!(
                        (d, x),
                        (Difference::OnlyA { .. }, Difference::OnlyB { .. })
                            | (Difference::OnlyB { .. }, Difference::OnlyA { .. })
                    )
                });
                if let Some(o) = other
                    && !matches!(d, Difference::Result { .. })
                {
                    let _ = writeln!(s, "  and: {}", describe(o, a, b));
                }
            }
        }
        let results: Vec<&Difference> = self
            .differences
            .iter()
            .filter(|d| matches!(d, Difference::Result { .. }))
            .collect();
        if !results.is_empty() {
            let _ = writeln!(s, "results that differ ({}):", results.len());
            for d in results.iter().take(max_results) {
                let _ = writeln!(s, "  {}", describe(d, a, b));
            }
            if results.len() > max_results {
                let _ = writeln!(
                    s,
                    "  … and {} more (--all lists them)",
                    results.len() - max_results
                );
            }
        }
        if !self.call_counts.is_empty() {
            let _ = writeln!(
                s,
                "calls one side made and the other did not (call: {a} {b}):"
            );
            for (call, x, y) in self.call_counts.iter().take(max_calls) {
                let _ = writeln!(s, "  {}: {x} {y}", safe(call));
            }
            if self.call_counts.len() > max_calls {
                let _ = writeln!(
                    s,
                    "  … and {} more (--all lists them)",
                    self.call_counts.len() - max_calls
                );
            }
        }
        self.gpus_text(&mut s);
        if !self.stages.is_empty() {
            let _ = writeln!(s, "stages (ms since the first call):   {a:>10} {b:>10}");
            let ms = |v: Option<f64>| v.map_or("-".to_owned(), |x| format!("{x:.1}"));
            for r in &self.stages {
                let _ = writeln!(
                    s,
                    "  {:<33} {:>10} {:>10}",
                    safe(&r.name),
                    ms(r.a_ms),
                    ms(r.b_ms)
                );
            }
        }
        for x in [&self.a, &self.b] {
            match &x.verdict {
                Some((r, t)) => {
                    let _ = writeln!(s, "{} verdict: {}: {}", safe(&x.label), safe(r), safe(t));
                }
                None => {
                    let _ = writeln!(s, "{} verdict: none", safe(&x.label));
                }
            }
        }
        s
    }

    /// Each side's header: the recording, its process, its cut and the
    /// other CUDA processes it holds.
    fn sides_text(&self, s: &mut String) {
        use crate::decode::terminal_safe as safe;
        use std::fmt::Write as _;
        for x in [&self.a, &self.b] {
            let _ = writeln!(
                s,
                "{}: {}[{}], {} calls{}{}",
                safe(&x.label),
                safe(&x.comm),
                x.pid,
                x.steps,
                if x.cut > 0 {
                    format!(" (+{} not compared)", x.cut)
                } else {
                    String::new()
                },
                if x.other_cuda_processes.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {} other CUDA start-up(s) in the recording (--pid to choose)",
                        x.other_cuda_processes.len()
                    )
                }
            );
        }
    }
}

#[cfg(test)]
#[path = "diff_tests.rs"]
mod tests;
