//! `cargo xtask bench --restart`: what starting and stopping nvprobe costs
//! the host, against the number of hooked libcuda copies (stand-ins built
//! from the real 580 libcuda's export list, mapped by one holder process)
//! and of hooked functions (`--libcuda-hooks startup|all`), side by side
//! with a baseline nvprobe binary (`--baseline`, e.g. an older build),
//! rounds interleaved. Per run: start (spawn → "tracing" on stderr), stop
//! (SIGINT → exit), another tracer's attach right after the exit (a
//! perf-event uprobe: `nvbench tracer-attach`), and released (SIGINT →
//! no nvprobe process left and every program it held gone from the
//! kernel). Also the kernel log's "leaking uprobe" lines before and after.

use std::{
    collections::BTreeSet,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::root_dir;

pub struct Args {
    pub nvprobe: PathBuf,
    pub nvbench: PathBuf,
    pub baseline: Option<PathBuf>,
    pub copies: Vec<usize>,
    pub rounds: u32,
}

const HOLDER: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
int main(int c, char **v) {
    for (int i = 1; i < c; i++)
        if (!dlopen(v[i], RTLD_NOW | RTLD_LOCAL)) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    puts("ready"); fflush(stdout);
    while (getchar() != EOF) {}
    return 0;
}
"#;

/// The stand-in: every function the real 580 libcuda exports, each
/// `return 0`.
fn build_stand_in(tmp: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let list = std::fs::read_to_string(
        root_dir().join("tests/fixtures/gpu-host/libcuda-580.159.04-exports.txt"),
    )?;
    let mut c = String::new();
    for name in list
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        c.push_str(&format!("int {name}(void) {{ return 0; }}\n"));
    }
    std::fs::write(tmp.join("stand-in.c"), c)?;
    std::fs::write(tmp.join("holder.c"), HOLDER)?;
    let lib = tmp.join("libcuda.so.1");
    let holder = tmp.join("holder");
    for (out, src, extra) in [
        (&lib, "stand-in.c", &["-shared", "-fPIC"][..]),
        (&holder, "holder.c", &["-ldl"][..]),
    ] {
        let st = Command::new("cc")
            .args(extra)
            .arg("-O1")
            .arg("-o")
            .arg(out)
            .arg(tmp.join(src))
            .status()
            .context("running cc (the benchmark builds its stand-in libcuda)")?;
        if !st.success() {
            bail!("cc failed on {src}");
        }
    }
    Ok((lib, holder))
}

fn leaked_uprobes() -> Option<usize> {
    let out = Command::new("dmesg").output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .matches("leaking uprobe")
            .count()
    })
}

fn prog_ids(pid: u32) -> BTreeSet<u32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return BTreeSet::new();
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|i| {
            i.lines()
                .find_map(|l| l.strip_prefix("prog_id:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .collect()
}

/// Is program `id` still loaded? (BPF_PROG_GET_FD_BY_ID: ENOENT once gone.)
fn loaded(id: u32) -> bool {
    let mut attr = [0u32; 4];
    attr[0] = id;
    // SAFETY: BPF_PROG_GET_FD_BY_ID (13) on a zeroed attribute block.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, 13, attr.as_mut_ptr(), 16) };
    if fd >= 0 {
        // SAFETY: the descriptor just returned.
        unsafe { libc::close(fd as i32) };
        true
    } else {
        std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOENT)
    }
}

fn nvprobe_running() -> bool {
    std::fs::read_dir("/proc").is_ok_and(|d| {
        d.flatten().any(|e| {
            std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "nvprobe")
        })
    })
}

struct Run {
    start: f64,
    stop: f64,
    other: f64,
    released: f64,
    functions: u64,
    via: String,
}

fn one_run(bin: &Path, nvbench: &Path, hooks: &str, tmp: &Path) -> anyhow::Result<Run> {
    let out = tmp.join("run.ndjson");
    let err = tmp.join("run.err");
    let t0 = Instant::now();
    let mut child: Child = Command::new(bin)
        .args(["watch", "--json", "--force", "--libcuda-hooks", hooks, "-o"])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err)?)
        .spawn()
        .context("starting nvprobe")?;
    loop {
        if std::fs::read_to_string(&err).is_ok_and(|e| e.contains("tracing NVIDIA")) {
            break;
        }
        if let Some(st) = child.try_wait()? {
            bail!("nvprobe ended ({st}): {}", std::fs::read_to_string(&err)?);
        }
        if t0.elapsed() > Duration::from_secs(600) {
            let _ = child.kill();
            bail!("nvprobe did not start within 600 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let start = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(300));
    let progs = prog_ids(child.id());
    let t1 = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )?;
    child.wait()?;
    let stop = t1.elapsed().as_secs_f64();
    let o = Command::new(nvbench).arg("tracer-attach").output()?;
    let other = serde_json::from_slice::<Value>(&o.stdout)
        .ok()
        .and_then(|v| v["attach_s"].as_f64())
        .context("nvbench tracer-attach")?;
    while (nvprobe_running() || progs.iter().any(|&id| loaded(id)))
        && t1.elapsed() < Duration::from_secs(900)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let released = t1.elapsed().as_secs_f64();
    let first = std::fs::read_to_string(&out)?
        .lines()
        .next()
        .map(serde_json::from_str::<Value>)
        .transpose()?
        .unwrap_or(Value::Null);
    let functions = first["libcuda"].as_array().map_or(0, |l| {
        l.iter()
            .filter(|f| {
                f["path"]
                    .as_str()
                    .is_some_and(|p| p.contains("nvprobe-restart"))
            })
            .map(|f| f["functions"].as_array().map_or(0, Vec::len) as u64)
            .sum()
    });
    let via = first["libcuda_attach"]
        .as_str()
        .unwrap_or("perf_event")
        .to_owned();
    Ok(Run {
        start,
        stop,
        other,
        released,
        functions,
        via,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

pub fn run(a: Args) -> anyhow::Result<Value> {
    let tmp = std::env::temp_dir().join(format!("nvprobe-restart-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let (lib, holder) = build_stand_in(&tmp)?;
    let max = a.copies.iter().copied().max().unwrap_or(1);
    let libs: Vec<PathBuf> = (0..max)
        .map(|i| {
            let d = tmp.join(format!("c{i}"));
            std::fs::create_dir_all(&d)?;
            let p = d.join("libcuda.so.1");
            std::fs::copy(&lib, &p)?;
            Ok(p)
        })
        .collect::<anyhow::Result<_>>()?;
    let leaks_before = leaked_uprobes();
    let mut bins = vec![("nvprobe", a.nvprobe.clone())];
    if let Some(b) = &a.baseline {
        bins.insert(0, ("baseline", b.clone()));
    }
    let mut rows = Vec::new();
    println!(
        "| copies | hooks | binary | attach | functions hooked | start (s) | stop (s) | another tracer's attach right after (s) | released (s) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &n in &a.copies {
        let mut h = Command::new(&holder)
            .args(&libs[..n])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(h.stdout.take().context("holder stdout")?),
            &mut line,
        )?;
        for hooks in ["startup", "all"] {
            let mut per: Vec<Vec<Run>> = bins.iter().map(|_| Vec::new()).collect();
            for round in 0..a.rounds {
                for k in 0..bins.len() {
                    // Rotate the order every round.
                    let i = (k + round as usize) % bins.len();
                    let r = one_run(&bins[i].1, &a.nvbench, hooks, &tmp)?;
                    eprintln!(
                        "copies {n} hooks {hooks} {} round {round}: start {:.3} stop {:.3} other {:.3} released {:.3}",
                        bins[i].0, r.start, r.stop, r.other, r.released
                    );
                    per[i].push(r);
                }
            }
            for (i, runs) in per.into_iter().enumerate() {
                let row = json!({
                    "copies": n, "hooks": hooks, "binary": bins[i].0,
                    "attach": runs.first().map(|r| r.via.clone()),
                    "functions": runs.first().map(|r| r.functions),
                    "start_s": median(runs.iter().map(|r| r.start).collect()),
                    "stop_s": median(runs.iter().map(|r| r.stop).collect()),
                    "other_tracer_attach_s": median(runs.iter().map(|r| r.other).collect()),
                    "released_s": median(runs.iter().map(|r| r.released).collect()),
                    "runs": runs.len(),
                });
                println!(
                    "| {n} | {hooks} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    bins[i].0,
                    row["attach"].as_str().unwrap_or("?"),
                    row["functions"],
                    row["start_s"].as_f64().unwrap_or(f64::NAN),
                    row["stop_s"].as_f64().unwrap_or(f64::NAN),
                    row["other_tracer_attach_s"].as_f64().unwrap_or(f64::NAN),
                    row["released_s"].as_f64().unwrap_or(f64::NAN),
                );
                rows.push(row);
            }
        }
        if let Some(mut s) = h.stdin.take() {
            let _ = s.flush();
        }
        let _ = h.kill();
        let _ = h.wait();
    }
    let leaks_after = leaked_uprobes();
    println!("kernel log, 'leaking uprobe' lines: before {leaks_before:?}, after {leaks_after:?}");
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(json!({ "rows": rows, "leaks_before": leaks_before, "leaks_after": leaks_after }))
}
