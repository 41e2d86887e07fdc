//! The suite that `cargo xtask bench` runs: its workloads (GPU or the FUSE
//! stand-in), the drain runs, and the tables and JSON it reports.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use anyhow::{Context, bail};
use serde_json::Value;

use super::{Env, Metric, Mode, Mode::*, Results, Workload};
use crate::{build_release, is_root, output, setup};

/// The `bench` subcommand.
pub struct Args {
    pub restart: bool,
    pub baseline: Option<PathBuf>,
    pub copies: Vec<usize>,
    pub gpu: bool,
    pub rounds: u32,
    pub bin_dir: Option<PathBuf>,
    pub strace: Option<PathBuf>,
    pub strace_libs: Option<String>,
    pub python: String,
    pub cudawork: PathBuf,
    pub json_out: Option<PathBuf>,
}

/// The FUSE stand-in for /dev/nvidiactl and where it is mounted.
type Fuse = (Child, PathBuf);

pub fn run(args: Args) -> anyhow::Result<()> {
    if !is_root() {
        bail!("benchmarks load BPF programs: run them as root");
    }
    let dir = match args.bin_dir {
        Some(d) => d,
        None => {
            setup(true)?;
            build_release()?
        }
    };
    if args.restart {
        let v = super::restart::run(super::restart::Args {
            nvprobe: dir.join("nvprobe"),
            nvbench: dir.join("nvbench"),
            baseline: args.baseline,
            copies: args.copies,
            rounds: args.rounds,
        })?;
        if let Some(p) = args.json_out {
            std::fs::write(&p, serde_json::to_string_pretty(&v)?)?;
        }
        return Ok(());
    }
    let tmp = std::env::temp_dir().join(format!("nvprobe-bench-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let env = Env {
        nvprobe: dir.join("nvprobe"),
        nvbench: dir.join("nvbench"),
        strace: args.strace.or_else(|| which("strace")),
        tmp: tmp.clone(),
        strace_env: args
            .strace_libs
            .map(|l| vec![("LD_LIBRARY_PATH".to_owned(), l)])
            .unwrap_or_default(),
    };
    let nvbench = dir.join("nvbench").display().to_string();
    // NVPROBE_BENCH_ONLY=stress: only the flood and the soak.
    if std::env::var("NVPROBE_BENCH_ONLY").is_ok_and(|v| v == "stress") {
        let (flood, soak) = stress_runs(&env, &nvbench)?;
        super::stress::print(&flood, &soak);
        if let Some(p) = args.json_out {
            let v = serde_json::json!({ "flood": flood, "soak": soak });
            std::fs::write(&p, serde_json::to_string_pretty(&v)?)?;
        }
        let _ = std::fs::remove_dir_all(&tmp);
        return Ok(());
    }
    let (mut workloads, fuse) = if args.gpu {
        (gpu_workloads(&nvbench, &args.python, &args.cudawork), None)
    } else {
        let (child, mnt) = start_fuse(&dir, &tmp)?;
        (fuse_workloads(&nvbench, &mnt), Some((child, mnt)))
    };
    workloads.extend(syscall_workloads(&nvbench));

    let results = super::run(&env, &workloads, args.rounds)?;
    let drains = drain_runs(&env, &nvbench)?;
    if let Some(fuse) = fuse {
        stop_fuse(fuse);
    }
    let (flood, soak) = stress_runs(&env, &nvbench)?;
    print_tables(&results, &drains);
    super::stress::print(&flood, &soak);
    if let Some(p) = args.json_out {
        let v = serde_json::json!({ "results": super::to_json(&results), "drain": drains, "flood": flood, "soak": soak, "rounds": args.rounds, "gpu": args.gpu });
        std::fs::write(&p, serde_json::to_string_pretty(&v)?)?;
    }
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(())
}

fn which(name: &str) -> Option<PathBuf> {
    output(Command::new("sh").args(["-c", &format!("command -v {name}")]))
        .map(|s| PathBuf::from(s.trim()))
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| (*x).to_owned()).collect()
}

/// An nvbench loop: 20000 iterations (2000 under strace), ns per op.
fn loop_w(nvbench: &str, name: &str, args: &[&str], modes: Vec<Mode>, nv: &[&str]) -> Workload {
    Workload {
        name: name.into(),
        argv: [
            vec![nvbench.to_owned(), "--iters".into(), "20000".into()],
            s(args),
        ]
        .concat(),
        argv_strace: Some(
            [
                vec![nvbench.to_owned(), "--iters".into(), "2000".into()],
                s(args),
            ]
            .concat(),
        ),
        metric: Metric::NsPerOp,
        modes,
        nvprobe_args: s(nv),
    }
}

/// The GPU machine's workloads: the real /dev/nvidiactl and libcuda.
fn gpu_workloads(nvbench: &str, python: &str, cudawork: &Path) -> Vec<Workload> {
    let cw = cudawork.display().to_string();
    let py = |name: &str, args: &[&str], metric: Metric| Workload {
        name: name.into(),
        argv: [vec![python.to_owned(), cw.clone()], s(args)].concat(),
        argv_strace: None,
        metric,
        modes: vec![Untraced, Nvprobe, NvprobeVerdicts, Strace],
        nvprobe_args: vec![],
    };
    vec![
        loop_w(
            nvbench,
            "RM_CONTROL (NULL control) on /dev/nvidiactl",
            &["rm-null-control"],
            vec![Untraced, Empty, Nvprobe, NvprobeVerdicts, Strace],
            &[],
        ),
        py("python + cuInit (process wall)", &["cuinit"], Metric::Wall),
        py(
            "20 x cuCtxCreate/Destroy (loop)",
            &["ctx", "20"],
            Metric::Seconds("seconds"),
        ),
        py(
            "2000 x cuMemAlloc/Free 64 MiB (loop)",
            &["mem", "2000"],
            Metric::Seconds("seconds"),
        ),
    ]
}

/// Start the FUSE stand-in for /dev/nvidiactl (tests/src/fakedrv.rs) and
/// wait for its first line (mounted).
fn start_fuse(dir: &Path, tmp: &Path) -> anyhow::Result<Fuse> {
    let mnt = tmp.join("fakedrv");
    let mut child = Command::new(dir.join("nvfixture"))
        .arg("serve")
        .arg(&mnt)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the FUSE stand-in")?;
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().context("stdout")?),
        &mut line,
    )?;
    Ok((child, mnt))
}

/// Close the stand-in's stdin (it exits), then detach its mount.
fn stop_fuse((mut child, mnt): Fuse) {
    drop(child.stdin.take());
    let _ = child.wait();
    let _ = nix::mount::umount2(&mnt, nix::mount::MntFlags::MNT_DETACH);
}

/// Without a GPU: RM_CONTROL on the FUSE stand-in mounted at `mnt`, and on
/// /dev/null declared a ctl node.
fn fuse_workloads(nvbench: &str, mnt: &Path) -> Vec<Workload> {
    let ctl = mnt.join("nvidiactl").display().to_string();
    vec![
        loop_w(
            nvbench,
            "RM_CONTROL on the FUSE stand-in",
            &["ioctl", "--path", &ctl, "--cmd", "c020462a"],
            vec![Untraced, Empty, Nvprobe, NvprobeVerdicts, Strace],
            &["--device", &format!("{ctl}=ctl")],
        ),
        loop_w(
            nvbench,
            "RM_CONTROL on /dev/null declared ctl (ENOTTY)",
            &["ioctl", "--path", "/dev/null", "--cmd", "c020462a"],
            vec![Untraced, Nvprobe, Strace],
            &["--device", "/dev/null=ctl"],
        ),
    ]
}

/// On every machine: syscalls nvprobe sees but does not record.
fn syscall_workloads(nvbench: &str) -> Vec<Workload> {
    vec![
        loop_w(
            nvbench,
            "non-NVIDIA ioctl (TCGETS on /dev/null)",
            &["tcgets"],
            vec![Untraced, Empty, Nvprobe, NvprobeVerdicts],
            &[],
        ),
        loop_w(
            nvbench,
            "getppid() (not traced)",
            &["getppid"],
            vec![Untraced, Empty, Nvprobe, NvprobeVerdicts],
            &[],
        ),
        loop_w(
            nvbench,
            "pipe2 and its two closes, a process past any start-up",
            &["start-call", "pipe2"],
            vec![Untraced, Empty, Nvprobe, NvprobeVerdicts],
            &[],
        ),
        loop_w(
            nvbench,
            "mmap + munmap 64 KiB anonymous, same",
            &["start-call", "mmap"],
            vec![Untraced, Empty, Nvprobe, NvprobeVerdicts],
            &[],
        ),
        loop_w(
            nvbench,
            "dup of /dev/null and its close, same",
            &["start-call", "dup"],
            vec![Untraced, Empty, Nvprobe, NvprobeVerdicts],
            &[],
        ),
        loop_w(
            nvbench,
            "mmap + munmap 64 KiB of a file, same",
            &["start-call", "filemap"],
            vec![Untraced, Empty, Nvprobe, NvprobeVerdicts],
            &[],
        ),
    ]
}

/// Paced runs at and above the 500k events/s target, then one burst as
/// fast as one thread can issue them; ~4 s each.
fn drain_runs(env: &Env, nvbench: &str) -> anyhow::Result<Vec<Value>> {
    let mut drains = Vec::new();
    for (rate, iters) in [
        (500_000u64, 2_000_000u64),
        (750_000, 3_000_000),
        (1_000_000, 4_000_000),
        (0, 4_000_000),
    ] {
        drains.push(super::drain(env, Path::new(nvbench), rate, iters)?);
    }
    Ok(drains)
}

/// The flood (8 processes) and the soak (100,000 short processes).
fn stress_runs(env: &Env, nvbench: &str) -> anyhow::Result<(Value, Value)> {
    let nvbench = Path::new(nvbench);
    Ok((
        super::stress::flood_run(env, nvbench, 8)?,
        super::stress::soak_run(env, nvbench, 100_000)?,
    ))
}

fn print_tables(results: &Results, drains: &[Value]) {
    println!("{}", super::table(results));
    println!("{}", super::tax_table(results));
    println!("{}", super::bpf_table(results));
    println!(
        "| target rate (events/s) | ioctls issued | events received | lost | loop s | events/s received |\n|---|---|---|---|---|---|"
    );
    for d in drains {
        println!(
            "| {} | {} | {} | {} | {:.3} | {:.0} |",
            match d["target_rate"].as_u64() {
                Some(0) | None => "unpaced (1 thread)".to_owned(),
                Some(r) => r.to_string(),
            },
            d["issued"],
            d["received_ioctl_events"],
            d["lost"],
            d["loop_seconds"].as_f64().unwrap_or(0.0),
            d["events_per_second"].as_f64().unwrap_or(0.0)
        );
    }
}
