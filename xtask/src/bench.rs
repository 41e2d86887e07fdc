//! `cargo xtask bench`: interleaved runs of each workload untraced, under
//! nvprobe and under strace, reported as medians and ratios.
//!
//! Runs rotate the order of the modes every round, so that drift on a noisy
//! machine spreads over all modes. Nothing here asserts on time: it
//! measures and reports.

pub mod restart;
pub mod stress;
pub mod suite;

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Untraced,
    Nvprobe,
    /// `--events verdicts`: the always-on level.
    NvprobeVerdicts,
    Strace,
    /// An empty program (return 0) on the entry and exit of every syscall
    /// nvprobe watches and on raw sys_exit (`nvbench empty-tracepoints
    /// --all`): the floor of any tracer built where nvprobe's programs sit.
    Empty,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Untraced => "untraced",
            Mode::Nvprobe => "nvprobe",
            Mode::NvprobeVerdicts => "nvprobe --events verdicts",
            Mode::Strace => "strace -f",
            Mode::Empty => "empty programs",
        }
    }
}

#[derive(Clone, Debug)]
pub enum Metric {
    /// `ns_per_op` from the workload's JSON.
    NsPerOp,
    /// A seconds field from the workload's JSON.
    Seconds(&'static str),
    /// Wall time of the whole process.
    Wall,
}

#[derive(Clone, Debug)]
pub struct Workload {
    pub name: String,
    pub argv: Vec<String>,
    /// Lighter argv under strace (a tight loop at ~100 µs per call).
    pub argv_strace: Option<Vec<String>>,
    pub metric: Metric,
    pub modes: Vec<Mode>,
    pub nvprobe_args: Vec<String>,
}

pub struct Env {
    pub nvprobe: PathBuf,
    /// `nvbench`, beside nvprobe.
    pub nvbench: PathBuf,
    pub strace: Option<PathBuf>,
    pub tmp: PathBuf,
    /// Extra environment for strace (LD_LIBRARY_PATH when it is carried).
    pub strace_env: Vec<(String, String)>,
}

/// Each workload with its samples per mode.
pub type Results = Vec<(Workload, Vec<(Mode, Samples)>)>;

#[derive(Default, Debug, Clone)]
pub struct Samples {
    pub values: Vec<f64>,
    pub lost: u64,
    pub events: u64,
    /// Successful calls the kernel left out (`--events verdicts`).
    pub quieted: u64,
    /// ns per run of each BPF program, from nvprobe --bpf-stats.
    pub bpf: Vec<(String, f64, u64)>,
}

struct Probe {
    child: Child,
    out: PathBuf,
}

fn start_nvprobe(env: &Env, extra: &[String], tag: &str) -> anyhow::Result<Probe> {
    let tag: String = tag
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let out = env.tmp.join(format!("bench-{tag}.ndjson"));
    let _ = fs::remove_file(&out);
    let mut child = Command::new(&env.nvprobe)
        .args(["watch", "--json", "--bpf-stats", "-o"])
        .arg(&out)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", env.nvprobe.display()))?;
    let t0 = Instant::now();
    loop {
        if fs::read_to_string(&out).is_ok_and(|t| t.contains("\"type\":\"start\"")) {
            return Ok(Probe { child, out });
        }
        if let Ok(Some(st)) = child.try_wait() {
            bail!("nvprobe exited ({st}) before it attached");
        }
        if t0.elapsed() > Duration::from_secs(60) {
            bail!("nvprobe did not start within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `nvbench empty-tracepoints`, attached (it says so first), held until its
/// stdin closes.
fn start_empty(env: &Env) -> anyhow::Result<Child> {
    use std::io::BufRead as _;
    let mut c = Command::new(&env.nvbench)
        .arg("empty-tracepoints")
        .arg("--all")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {}", env.nvbench.display()))?;
    let mut line = String::new();
    std::io::BufReader::new(c.stdout.take().context("nvbench stdout")?).read_line(&mut line)?;
    let attached = serde_json::from_str::<Value>(&line)
        .ok()
        .and_then(|v| v["attached"].as_u64())
        .unwrap_or(0);
    // Every syscall nvprobe watches, entry and exit, and raw sys_exit.
    if attached < 3 {
        let _ = c.kill();
        bail!("nvbench empty-tracepoints did not attach: {line}");
    }
    Ok(c)
}

fn stop_nvprobe(mut p: Probe) -> anyhow::Result<Value> {
    std::thread::sleep(Duration::from_millis(200));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(p.child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )?;
    let st = p.child.wait()?;
    if !st.success() {
        bail!("nvprobe exited with {st}");
    }
    let text = fs::read_to_string(&p.out)?;
    let summary = text
        .lines()
        .rev()
        .find(|l| l.contains("\"type\":\"summary\""))
        .context("nvprobe wrote no summary")?;
    let v: Value = serde_json::from_str(summary)?;
    let _ = fs::remove_file(&p.out);
    Ok(v)
}

fn run_workload(env: &Env, w: &Workload, mode: Mode) -> anyhow::Result<(f64, Option<Value>)> {
    let argv = match (mode, &w.argv_strace) {
        (Mode::Strace, Some(a)) => a.clone(),
        _ => w.argv.clone(),
    };
    let probe = match mode {
        Mode::Nvprobe => Some(start_nvprobe(
            env,
            &w.nvprobe_args,
            &w.name.replace(' ', "_"),
        )?),
        Mode::NvprobeVerdicts => {
            let mut a = w.nvprobe_args.clone();
            a.extend(["--events".into(), "verdicts".into()]);
            Some(start_nvprobe(env, &a, &w.name.replace(' ', "_"))?)
        }
        _ => None,
    };
    let empty = match mode {
        Mode::Empty => Some(start_empty(env)?),
        _ => None,
    };
    let mut cmd = match mode {
        Mode::Strace => {
            let s = env.strace.as_ref().context("strace is not available")?;
            let mut c = Command::new(s);
            c.args(["-f", "-qq", "-o", "/dev/null", "--"]).args(&argv);
            c.envs(env.strace_env.iter().cloned());
            c
        }
        _ => {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        }
    };
    let t0 = Instant::now();
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {argv:?}"))?;
    let wall = t0.elapsed().as_secs_f64();
    if let Some(mut e) = empty {
        drop(e.stdin.take());
        let _ = e.wait();
    }
    let summary = match probe {
        Some(p) => Some(stop_nvprobe(p)?),
        None => None,
    };
    if !out.status.success() {
        bail!(
            "{} ({}) failed: {}",
            w.name,
            mode.name(),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let json: Value = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    let value = match &w.metric {
        Metric::NsPerOp => json["ns_per_op"]
            .as_f64()
            .context("no ns_per_op in the output")?,
        Metric::Seconds(k) => json[*k]
            .as_f64()
            .with_context(|| format!("no {k} in {text}"))?,
        Metric::Wall => wall,
    };
    Ok((value, summary))
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    s[s.len() / 2]
}

/// Run every workload `rounds` times in each of its modes, interleaved.
pub fn run(env: &Env, workloads: &[Workload], rounds: u32) -> anyhow::Result<Results> {
    let mut results: Results = workloads
        .iter()
        .map(|w| {
            (
                w.clone(),
                w.modes.iter().map(|m| (*m, Samples::default())).collect(),
            )
        })
        .collect();
    for round in 0..rounds {
        for (w, per_mode) in results.iter_mut() {
            let n = per_mode.len();
            for i in 0..n {
                let idx = (i + round as usize) % n;
                let mode = per_mode[idx].0;
                let (v, summary) = run_workload(env, w, mode)?;
                let s = &mut per_mode[idx].1;
                s.values.push(v);
                if let Some(sm) = summary {
                    s.lost += sm["lost"]["total"].as_u64().unwrap_or(0);
                    s.quieted += sm["quieted"].as_u64().unwrap_or(0);
                    s.events += sm["events"]
                        .as_object()
                        .map_or(0, |o| o.values().filter_map(Value::as_u64).sum());
                    for b in sm["bpf"].as_array().into_iter().flatten() {
                        s.bpf.push((
                            b["program"].as_str().unwrap_or("?").to_owned(),
                            b["ns_per_run"].as_f64().unwrap_or(0.0),
                            b["run_count"].as_u64().unwrap_or(0),
                        ));
                    }
                }
                eprintln!("round {round}: {} [{}] = {v:.4}", w.name, mode.name());
            }
        }
    }
    Ok(results)
}

/// The drain rate: traced ioctls (on /dev/null declared an NVIDIA ctl
/// node) at a paced `rate` per second (0: as fast as one thread can), with
/// `--json` going to a file. Reports what arrived and what was lost.
pub fn drain(env: &Env, nvbench: &Path, rate: u64, iters: u64) -> anyhow::Result<Value> {
    let threads = 1u32;
    let probe = start_nvprobe(env, &["--device".into(), "/dev/null=ctl".into()], "drain")?;
    let t0 = Instant::now();
    let out = Command::new(nvbench)
        .args([
            "--threads",
            &threads.to_string(),
            "--iters",
            &iters.to_string(),
            "--batches",
            "1",
        ])
        .args(["--rate", &rate.to_string()])
        .args(["ioctl", "--path", "/dev/null", "--cmd", "c020462a"])
        .output()?;
    let loop_s = t0.elapsed().as_secs_f64();
    // Time for the collector to empty the ring buffer after the flood.
    let summary = stop_nvprobe(probe)?;
    if !out.status.success() {
        bail!("drain flood failed");
    }
    let ioctls = summary["events"]["ioctl"].as_u64().unwrap_or(0);
    let lost = summary["lost"]["total"].as_u64().unwrap_or(0);
    let issued = u64::from(threads) * iters;
    Ok(json!({
        "target_rate": rate,
        "threads": threads,
        "issued": issued,
        "received_ioctl_events": ioctls,
        "lost": lost,
        "loop_seconds": loop_s,
        "events_per_second": ioctls as f64 / loop_s,
    }))
}

/// Markdown table of the results.
pub fn table(results: &[(Workload, Vec<(Mode, Samples)>)]) -> String {
    let mut s = String::from(
        "| workload | metric | untraced (median) | nvprobe (median) | nvprobe / untraced | nvprobe − untraced | `--events verdicts` (median) | verdicts / untraced | strace -f (median) | strace / untraced | runs | lost | calls left in the kernel (verdicts) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (w, per_mode) in results {
        let get = |m: Mode| per_mode.iter().find(|(x, _)| *x == m).map(|(_, s)| s);
        let base = get(Mode::Untraced).map(|s| median(&s.values));
        let nv = get(Mode::Nvprobe).map(|s| median(&s.values));
        let st = get(Mode::Strace).map(|s| median(&s.values));
        let quiet = get(Mode::NvprobeVerdicts).map(|s| median(&s.values));
        let quieted = get(Mode::NvprobeVerdicts).map_or("–".into(), |s| s.quieted.to_string());
        let unit = match w.metric {
            Metric::NsPerOp => "ns/op",
            _ => "s",
        };
        let fmt = |v: Option<f64>| match (v, &w.metric) {
            (Some(x), Metric::NsPerOp) => format!("{x:.0}"),
            (Some(x), _) => format!("{x:.3}"),
            (None, _) => "–".into(),
        };
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
            _ => "–".into(),
        };
        let delta = match (nv, base, &w.metric) {
            (Some(a), Some(b), Metric::NsPerOp) => format!("{:+.0} ns", a - b),
            (Some(a), Some(b), _) => format!("{:+.3} s", a - b),
            _ => "–".into(),
        };
        let runs = per_mode.first().map_or(0, |(_, s)| s.values.len());
        let lost = get(Mode::Nvprobe).map_or("–".into(), |s| s.lost.to_string());
        s.push_str(&format!(
            "| {} | {unit} | {} | {} | {} | {} | {} | {} | {} | {} | {runs} | {lost} | {quieted} |\n",
            w.name,
            fmt(base),
            fmt(nv),
            ratio(nv, base),
            delta,
            fmt(quiet),
            ratio(quiet, base),
            fmt(st),
            ratio(st, base),
        ));
    }
    s
}

/// The per-call tax of each ns/op workload that ran under the empty
/// programs: each mode against untraced, by medians and fastest runs
/// (min-to-min: on hosts whose timing is bimodal, the fastest runs compare
/// one state of the machine).
pub fn tax_table(results: &[(Workload, Vec<(Mode, Samples)>)]) -> String {
    let mut s = String::from(
        "| per-call tax (ns), median / min-to-min | empty programs | nvprobe | `--events verdicts` |\n|---|---|---|---|\n",
    );
    for (w, per_mode) in results {
        if !matches!(w.metric, Metric::NsPerOp) || !per_mode.iter().any(|(m, _)| *m == Mode::Empty)
        {
            continue;
        }
        let get = |m: Mode| {
            per_mode
                .iter()
                .find(|(x, _)| *x == m)
                .map(|(_, s)| &s.values)
                .filter(|v| !v.is_empty())
        };
        let Some(base) = get(Mode::Untraced) else {
            continue;
        };
        let min = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
        let tax = |m: Mode| match get(m) {
            Some(v) => format!(
                "{:+.0} / {:+.0}",
                median(v) - median(base),
                min(v) - min(base)
            ),
            None => "–".into(),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            w.name,
            tax(Mode::Empty),
            tax(Mode::Nvprobe),
            tax(Mode::NvprobeVerdicts)
        ));
    }
    s
}

/// Median ns per run of each BPF program across the nvprobe runs of a workload.
pub fn bpf_table(results: &[(Workload, Vec<(Mode, Samples)>)]) -> String {
    let mut s = String::from(
        "| workload | BPF program | runs (median per nvprobe run) | ns per run (median) |\n|---|---|---|---|\n",
    );
    for (w, per_mode) in results {
        let Some((_, sm)) = per_mode.iter().find(|(m, _)| *m == Mode::Nvprobe) else {
            continue;
        };
        let mut names: Vec<&str> = sm.bpf.iter().map(|b| b.0.as_str()).collect();
        names.sort();
        names.dedup();
        for n in names {
            let ns: Vec<f64> = sm.bpf.iter().filter(|b| b.0 == n).map(|b| b.1).collect();
            let runs: Vec<f64> = sm
                .bpf
                .iter()
                .filter(|b| b.0 == n)
                .map(|b| b.2 as f64)
                .collect();
            s.push_str(&format!(
                "| {} | {n} | {:.0} | {:.0} |\n",
                w.name,
                median(&runs),
                median(&ns)
            ));
        }
    }
    s
}

pub fn to_json(results: &[(Workload, Vec<(Mode, Samples)>)]) -> Value {
    Value::Array(
        results
            .iter()
            .map(|(w, per_mode)| {
                json!({
                    "workload": w.name,
                    "modes": per_mode.iter().map(|(m, s)| json!({
                        "mode": m.name(),
                        "values": s.values,
                        "median": median(&s.values),
                        "lost": s.lost,
                        "quieted": s.quieted,
                        "events": s.events,
                        "bpf": s.bpf.iter().map(|b| json!({"program": b.0, "ns_per_run": b.1, "runs": b.2})).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>()
                })
            })
            .collect(),
    )
}
