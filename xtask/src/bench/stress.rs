//! The hardening runs of `cargo xtask bench` (issue 11): nvprobe under an
//! ioctl flood that does not end (how long SIGINT and `--duration` take,
//! whether `lost` records come during the flood), and a soak of short
//! processes (nvprobe's memory and its summary line as 100,000 processes
//! come and go, pids reused). Measured and reported, not asserted.

use std::{
    fs,
    io::{BufRead, BufReader, Read, Seek, SeekFrom},
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::Env;

/// nvprobe's resident memory (VmRSS, KiB).
fn rss_kib(pid: u32) -> Option<u64> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Start `nvprobe watch --json -o OUT ARGS` and wait for its start record.
fn start(env: &Env, out: &Path, args: &[&str]) -> anyhow::Result<Child> {
    let _ = fs::remove_file(out);
    let mut child = Command::new(&env.nvprobe)
        .args(["watch", "--json", "-o"])
        .arg(out)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting nvprobe")?;
    let t0 = Instant::now();
    loop {
        if fs::read(out).is_ok_and(|t| t.starts_with(b"{") && contains(&t, b"\"type\":\"start\"")) {
            return Ok(child);
        }
        if let Ok(Some(st)) = child.try_wait() {
            bail!("nvprobe exited ({st}) before it attached");
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            bail!("nvprobe did not start within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Wait at most `limit` for `c` to exit; the time it took (None: killed).
fn exit_within(c: &mut Child, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if let Ok(Some(_)) = c.try_wait() {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = c.kill();
    let _ = c.wait();
    None
}

fn sigint(c: &Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(c.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    );
}

/// `lost` records in the file between `from` and its length now (it
/// grows while it is read), and where the next look starts.
fn count_lost(out: &Path, from: &mut u64) -> u64 {
    let Ok(mut f) = fs::File::open(out) else {
        return 0;
    };
    let end = f.metadata().map_or(0, |m| m.len());
    if f.seek(SeekFrom::Start(*from)).is_err() {
        return 0;
    }
    let mut n = 0;
    let mut r = BufReader::new((&mut f).take(end.saturating_sub(*from)));
    let mut line = Vec::new();
    while let Ok(k) = r.read_until(b'\n', &mut line) {
        if k == 0 || line.last() != Some(&b'\n') {
            break;
        }
        *from += k as u64;
        n += u64::from(contains(&line, b"\"type\":\"lost\""));
        line.clear();
    }
    n
}

/// `procs` processes issuing ioctls on /dev/null (declared ctl) as fast as
/// they can, until killed.
fn flood(nvbench: &Path, procs: u32) -> anyhow::Result<Vec<Child>> {
    (0..procs)
        .map(|_| {
            Command::new(nvbench)
                .args(["--iters", "1000000000000", "--batches", "1"])
                .args(["ioctl", "--path", "/dev/null", "--cmd", "c020462a"])
                .stdout(Stdio::null())
                .spawn()
                .context("starting a flood process")
        })
        .collect()
}

/// Under a flood from `procs` processes into a 1 MiB ring buffer: lost
/// records written in the 3 s after the first second; SIGINT to exit; and
/// how long `--duration 5` runs (start-up included).
pub fn flood_run(env: &Env, nvbench: &Path, procs: u32) -> anyhow::Result<Value> {
    let out = env.tmp.join("flood.ndjson");
    let args = ["--device", "/dev/null=ctl", "--ringbuf-size", "1048576"];
    let mut nv = start(env, &out, &args)?;
    let mut fl = flood(nvbench, procs)?;
    std::thread::sleep(Duration::from_secs(1));
    let mut at = 0;
    count_lost(&out, &mut at);
    std::thread::sleep(Duration::from_secs(3));
    let lost_in_3s = count_lost(&out, &mut at);
    sigint(&nv);
    let stop = exit_within(&mut nv, Duration::from_secs(120));
    let t0 = Instant::now();
    let mut d = Command::new(&env.nvprobe)
        .args(["watch", "--json", "--duration", "5", "-o"])
        .arg(env.tmp.join("flood-duration.ndjson"))
        .args(&args[..2])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let duration_run = exit_within(&mut d, Duration::from_secs(120)).map(|_| t0.elapsed());
    for c in &mut fl {
        let _ = c.kill();
        let _ = c.wait();
    }
    let summary = last_summary(&out);
    let _ = fs::remove_file(&out);
    let _ = fs::remove_file(env.tmp.join("flood-duration.ndjson"));
    Ok(json!({
        "flood_processes": procs,
        "lost_records_in_3s": lost_in_3s,
        "sigint_to_exit_s": stop.map(|d| d.as_secs_f64()),
        "duration_5_ran_s": duration_run.map(|d| d.as_secs_f64()),
        "events": summary.as_ref().map(|s| s["events"]["ioctl"].clone()),
        "lost": summary.as_ref().map(|s| s["lost"]["total"].clone()),
    }))
}

/// The last line of a file, if it is a summary record.
fn last_summary(out: &Path) -> Option<Value> {
    let mut f = fs::File::open(out).ok()?;
    let len = f.metadata().ok()?.len();
    // A summary line is small (bounded table): the last 4 MiB hold it.
    let from = len.saturating_sub(4 << 20);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut tail = String::new();
    f.read_to_string(&mut tail).ok()?;
    let line = tail.lines().last()?;
    let v: Value = serde_json::from_str(line).ok()?;
    (v["type"] == "summary").then_some(v)
}

/// `forks` short processes (each one ioctl on /dev/null declared ctl,
/// then exit) from 2 forking threads under nvprobe: its resident memory
/// every second, the summary line's size and what it lists.
pub fn soak_run(env: &Env, nvbench: &Path, forks: u64) -> anyhow::Result<Value> {
    let out = env.tmp.join("soak.ndjson");
    // --summary-only: the soak measures the tracer, not the disk.
    let mut nv = start(env, &out, &["--device", "/dev/null=ctl", "--summary-only"])?;
    let pid = nv.id();
    let threads = 2u64;
    let mut w = Command::new(nvbench)
        .args([
            "--iters",
            &(forks / threads).to_string(),
            "--threads",
            &threads.to_string(),
        ])
        .args(["forks", "--path", "/dev/null"])
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the forks")?;
    let t0 = Instant::now();
    let mut rss = vec![(0.0, rss_kib(pid).unwrap_or(0))];
    let mut last = Instant::now();
    while w.try_wait()?.is_none() {
        std::thread::sleep(Duration::from_millis(100));
        if last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            rss.push((t0.elapsed().as_secs_f64(), rss_kib(pid).unwrap_or(0)));
        }
    }
    let loop_s = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(1));
    rss.push((t0.elapsed().as_secs_f64(), rss_kib(pid).unwrap_or(0)));
    sigint(&nv);
    exit_within(&mut nv, Duration::from_secs(120));
    let text = fs::read_to_string(&out)?;
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains("\"type\":\"summary\""))
        .context("no summary")?;
    let s: Value = serde_json::from_str(line)?;
    let _ = fs::remove_file(&out);
    let max = rss.iter().map(|r| r.1).max().unwrap_or(0);
    Ok(json!({
        "forks": forks,
        "loop_seconds": loop_s,
        "rss_kib": rss.iter().map(|(t, k)| json!([t, k])).collect::<Vec<_>>(),
        "rss_max_kib": max,
        "summary_line_bytes": line.len(),
        "processes_listed": s["processes"].as_array().map_or(0, Vec::len),
        "processes_omitted": s["processes_omitted"],
        "ioctl_events": s["events"]["ioctl"],
        "lost": s["lost"]["total"],
    }))
}

pub fn print(flood: &Value, soak: &Value) {
    println!(
        "| flood processes | lost records in 3 s of flood | SIGINT → exit (s) | `--duration 5` ran (s) |\n|---|---|---|---|"
    );
    println!(
        "| {} | {} | {} | {} |",
        flood["flood_processes"],
        flood["lost_records_in_3s"],
        flood["sigint_to_exit_s"],
        flood["duration_5_ran_s"]
    );
    let rss: Vec<String> = soak["rss_kib"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{:.0}s {} MiB",
                r[0].as_f64().unwrap_or(0.0),
                r[1].as_u64().unwrap_or(0) / 1024
            )
        })
        .collect();
    println!(
        "\n| forks | loop s | RSS max (KiB) | summary line (bytes) | listed | omitted | ioctl events | lost |\n|---|---|---|---|---|---|---|---|"
    );
    println!(
        "| {} | {:.1} | {} | {} | {} | {} | {} | {} |",
        soak["forks"],
        soak["loop_seconds"].as_f64().unwrap_or(0.0),
        soak["rss_max_kib"],
        soak["summary_line_bytes"],
        soak["processes_listed"],
        soak["processes_omitted"],
        soak["ioctl_events"],
        soak["lost"]
    );
    println!("\nRSS over the soak: {}", rss.join(", "));
}
