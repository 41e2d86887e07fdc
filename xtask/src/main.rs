//! Project tasks that cargo alone does not do: installing the eBPF
//! toolchain, running nvprobe as root, the test tiers, and benchmarks.
//!
//!   cargo xtask setup            install nightly + rust-src + bpf-linker 0.10.3
//!   cargo xtask run -- ARGS      setup, build nvprobe alone (release), run it with ARGS as root
//!   cargo xtask dist [--out DIR] the .deb and the tarball (docs/TESTING.md: the package tier)
//!   cargo xtask test             setup, fmt, clippy, build every binary, all tests, vm-test (root),
//!                                the package tier (root), then one summary (docs/TESTING.md)
//!   cargo xtask vm-test          the kernel tier under qemu (root)
//!   cargo xtask package-test     the package tier alone (root)
//!   cargo xtask bench [--gpu]    interleaved benchmarks (see docs/BENCHMARKS.md)
//!   cargo xtask gen-tables --src TAG=DIR...   RM control/class tables from NVIDIA's headers
//!   cargo xtask rm-coverage FILES...          RM controls in recordings vs those tables

mod apt;
mod bench;
mod cudaapi;
mod dist;
mod gentables;
mod pkgtest;
mod summary;
mod testrun;
mod vm;
mod vmheaders;
mod vmkernel;
mod vmreal;

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

const BPF_LINKER_VERSION: &str = "0.10.3";

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install what building the eBPF programs needs (idempotent).
    Setup {
        /// Also install the benchmark tools (strace).
        #[arg(long)]
        bench: bool,
    },
    /// Build nvprobe in release mode and run it as root with ARGS.
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build the Debian package and a tarball of the same files (release
    /// build of nvprobe alone, stripped; the unit, logrotate, manual pages,
    /// completions, docs).
    Dist {
        /// Where to write them (default: target/dist under the target
        /// folder); created when missing.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// The package's Maintainer, "Name <email>" (default: DEBFULLNAME
        /// and DEBEMAIL, else git's user.name and user.email, else the
        /// commit's author).
        #[arg(long, value_name = "NAME <EMAIL>")]
        maintainer: Option<String>,
    },
    /// Run every test tier this machine can run.
    Test {
        /// Skip cargo fmt/clippy (they run by default).
        #[arg(long)]
        no_lint: bool,
        /// Skip the kernel tier (vm-test), which runs by default as root.
        #[arg(long)]
        no_vm: bool,
        /// Skip the package tier (dist, lintian, the install into a clean
        /// root), which runs by default as root.
        #[arg(long)]
        no_package: bool,
    },
    /// The package tier alone (root): dist, lintian, the install into a
    /// clean Debian root and the checks there (docs/TESTING.md).
    PackageTest,
    /// The kernel tier: Debian kernels with kprobes under qemu, the
    /// stand-in modules of tests/kmod, the real NVIDIA open module (also
    /// on a kernel built here with HMM), nvvmtest inside (root).
    VmTest {
        /// Only this kernel: "6.1", "6.12" or "6.1-hmm".
        #[arg(long)]
        only: Option<String>,
        /// Also measure each layer's cost in the VM (docs/BENCHMARKS.md).
        #[arg(long)]
        bench: bool,
    },
    /// Benchmarks: nvprobe vs untraced vs strace, interleaved.
    Bench {
        /// GPU-machine workloads (real /dev/nvidiactl and libcuda).
        #[arg(long)]
        gpu: bool,
        #[arg(long, default_value_t = 7)]
        rounds: u32,
        /// Directory holding prebuilt nvprobe and nvbench (default: build
        /// them in release mode).
        #[arg(long)]
        bin_dir: Option<PathBuf>,
        /// strace to compare with (default: from PATH).
        #[arg(long)]
        strace: Option<PathBuf>,
        /// LD_LIBRARY_PATH for a carried strace.
        #[arg(long)]
        strace_libs: Option<String>,
        /// Python and the cudawork.py script (--gpu).
        #[arg(long, default_value = "python3")]
        python: String,
        #[arg(long, default_value = "tests/scripts/cudawork.py")]
        cudawork: PathBuf,
        /// Write the raw results as JSON here.
        #[arg(long)]
        json_out: Option<PathBuf>,
        /// Instead of the workloads: start and stop times against hooked
        /// libcuda copies and functions (stand-ins), and how soon another
        /// tracer can attach (docs/BENCHMARKS.md).
        #[arg(long)]
        restart: bool,
        /// With --restart: an older nvprobe binary to run side by side.
        #[arg(long)]
        baseline: Option<PathBuf>,
        /// With --restart: the numbers of libcuda copies to hook.
        #[arg(long, value_delimiter = ',', default_value = "1,3,8,32")]
        copies: Vec<usize>,
    },
    /// Write nvprobe/model/data/rm-controls.tsv and rm-classes.tsv from
    /// checkouts of NVIDIA/open-gpu-kernel-modules, one per release tag.
    GenTables {
        /// TAG=DIR: a release tag (535.261.03) and a checkout of it (at least
        /// src/common/sdk/nvidia/inc; src/nvidia/generated adds params
        /// structs and class aliases). Repeat, one tag per release branch.
        #[arg(long, required = true, value_name = "TAG=DIR")]
        src: Vec<String>,
        /// Directory of the tables (default: nvprobe/model/data).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Compare with the files there instead of writing them.
        #[arg(long)]
        check: bool,
        /// Also print the field offsets of this params struct, per tag.
        #[arg(long, value_name = "STRUCT")]
        layout: Vec<String>,
    },
    /// Number the CUDA driver API functions these libcuda files export in
    /// nvprobe-common/src/cuda_api.rs (append-only: known names keep their
    /// numbers).
    CudaApi {
        /// Compare with the table instead of writing it.
        #[arg(long)]
        check: bool,
        #[arg(required = true)]
        libs: Vec<PathBuf>,
    },
    /// List the RM controls of ndjson recordings and which the table names.
    RmCoverage {
        /// Default: nvprobe/model/data/rm-controls.tsv.
        #[arg(long)]
        table: Option<PathBuf>,
        /// The table's version label of the recordings' driver (580).
        #[arg(long)]
        version: String,
        /// Print the unnamed ones as a markdown table.
        #[arg(long)]
        markdown: bool,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

fn root_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Where cargo puts what it builds: `CARGO_TARGET_DIR` if set (relative
/// to where cargo was started), else the workspace's `target/`.
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from) {
        Some(p) if p.is_absolute() => p,
        Some(p) => std::env::current_dir().map_or(p.clone(), |d| d.join(&p)),
        None => root_dir().join("target"),
    }
}

fn sh(cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("xtask: {cmd:?}");
    let st = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !st.success() {
        bail!("{cmd:?} failed with {st}");
    }
    Ok(())
}

fn output(cmd: &mut Command) -> Option<String> {
    cmd.stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn setup(bench: bool) -> anyhow::Result<()> {
    let have_nightly = output(Command::new("rustup").args(["toolchain", "list"]))
        .is_some_and(|t| t.contains("nightly"));
    if !have_nightly {
        sh(Command::new("rustup").args([
            "toolchain",
            "install",
            "nightly",
            "--profile",
            "minimal",
            "--component",
            "rust-src",
        ]))?;
    }
    let has_src = output(Command::new("rustup").args([
        "component",
        "list",
        "--toolchain",
        "nightly",
        "--installed",
    ]))
    .is_some_and(|t| t.lines().any(|l| l.starts_with("rust-src")));
    if !has_src {
        sh(Command::new("rustup").args([
            "component",
            "add",
            "rust-src",
            "--toolchain",
            "nightly",
        ]))?;
    }
    let linker = output(Command::new("bpf-linker").arg("--version"));
    if !linker
        .as_deref()
        .is_some_and(|v| v.contains(BPF_LINKER_VERSION))
    {
        // bpf-linker's default feature links the nightly toolchain's own LLVM.
        sh(Command::new("cargo").args([
            "install",
            &format!("bpf-linker@{BPF_LINKER_VERSION}"),
            "--locked",
            "--force",
        ]))?;
    }
    if bench && output(Command::new("strace").arg("-V")).is_none() {
        if !is_root() {
            bail!("strace is missing and installing it needs root: sudo apt-get install strace");
        }
        sh(Command::new("apt-get").arg("update").stdout(Stdio::null()))?;
        sh(Command::new("apt-get")
            .args(["install", "-y", "strace"])
            .stdout(Stdio::null()))?;
    }
    Ok(())
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root_dir());
    c
}

fn build_release() -> anyhow::Result<PathBuf> {
    sh(cargo().args([
        "build",
        "--release",
        "-p",
        "nvprobe",
        "-p",
        "nvprobe-tests",
        "--bins",
    ]))?;
    Ok(target_dir().join("release"))
}

/// The release build of nvprobe alone (what `run` runs and `dist`
/// packages; the test tiers and the benches build the test binaries with
/// it, `build_release`). `dist` gives SOURCE_DATE_EPOCH, which dates
/// `--version` and the manual pages.
fn build_nvprobe(source_date_epoch: Option<i64>) -> anyhow::Result<PathBuf> {
    let dir = target_dir().join("release");
    if !dir.join("nvprobe").exists() {
        eprintln!(
            "xtask: building nvprobe (release, its eBPF programs included): the first build takes 10 to 11 minutes on 2 idle cores (18 to 21 minutes of CPU time, measured), later ones only what changed"
        );
    }
    let mut c = cargo();
    c.args(["build", "--release", "-p", "nvprobe", "--bin", "nvprobe"]);
    if let Some(t) = source_date_epoch {
        c.env("SOURCE_DATE_EPOCH", t.to_string());
    }
    sh(&mut c)?;
    Ok(dir)
}

fn run(args: Vec<String>) -> anyhow::Result<()> {
    setup(false)?;
    let dir = build_nvprobe(None)?;
    let bin = dir.join("nvprobe");
    let mut cmd = if is_root() {
        Command::new(&bin)
    } else {
        eprintln!("xtask: nvprobe needs root; running it with sudo");
        let mut c = Command::new("sudo");
        c.arg(&bin);
        c
    };
    let st = cmd.args(&args).status().context("running nvprobe")?;
    std::process::exit(st.code().unwrap_or(1));
}

/// The real components the test tiers check nvprobe against: Prometheus
/// (the metrics test), Python's venv (the OTLP and manifest validators,
/// whose packages come from PyPI), systemd-analyze (the unit), logrotate
/// (its configuration), tmux (a real terminal for `nvprobe top`), strace
/// (a tracer that answers a call itself, for the verdict that names it).
/// Prometheus, when the machine has none, is Debian's package unpacked
/// under `target/tools/` (never installed: installing it would start a
/// Prometheus server on a machine that runs systemd) and reaches the tests
/// through PATH; the others are installed with apt as root. Without root
/// the tests that need those say so.
fn test_tools() -> anyhow::Result<()> {
    let have = |c: &str, arg: &str| output(Command::new(c).arg(arg)).is_some();
    let mut errors = Vec::new();
    if (!have("prometheus", "--version") || !have("promtool", "--version"))
        && let Err(e) = tools_prometheus()
    {
        errors.push(format!("Prometheus for the metrics test: {e:#}"));
    }
    let mut missing = Vec::new();
    if output(Command::new("python3").args(["-m", "venv", "--help"])).is_none() {
        missing.push("python3-venv");
    }
    if !have("systemd-analyze", "--version") {
        missing.push("systemd");
    }
    if !have("logrotate", "--version") {
        missing.push("logrotate");
    }
    if !have("tmux", "-V") {
        missing.push("tmux");
    }
    if !have("strace", "-V") {
        missing.push("strace");
    }
    if !missing.is_empty() {
        if is_root() {
            if let Err(e) = apt::host_install(&missing) {
                errors.push(format!("{e:#}"));
            }
        } else {
            eprintln!(
                "xtask: not root: cannot install {} (sudo apt-get install {0}); the tests that need them will skip",
                missing.join(" ")
            );
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        bail!("{}", errors.join("; "))
    }
}

/// Where the unpacked tools' commands are (put first in the tests' PATH).
fn tools_bin() -> PathBuf {
    target_dir().join("tools/bin")
}

/// Debian's prometheus package (prometheus and promtool: Go programs that
/// need only libc), downloaded with an apt of its own and unpacked under
/// target/tools/, once.
fn tools_prometheus() -> anyhow::Result<()> {
    let bin = tools_bin();
    if ["prometheus", "promtool"]
        .iter()
        .all(|b| output(Command::new(bin.join(b)).arg("--version")).is_some())
    {
        return Ok(());
    }
    let apt = apt::Apt::tools();
    let debs = target_dir().join("tools/debs");
    let _ = std::fs::remove_dir_all(&debs);
    std::fs::create_dir_all(&debs)?;
    let what = ["prometheus".to_owned()];
    apt.download(&debs, &what).or_else(|_| {
        apt.update()?;
        apt.download(&debs, &what)
    })?;
    let tree = target_dir().join("tools/prometheus");
    let _ = std::fs::remove_dir_all(&tree);
    apt::unpack(&apt::deb(&debs, "prometheus_")?, &tree)?;
    std::fs::create_dir_all(&bin)?;
    for b in ["prometheus", "promtool"] {
        let _ = std::fs::remove_file(bin.join(b));
        std::os::unix::fs::symlink(tree.join("usr/bin").join(b), bin.join(b))
            .with_context(|| format!("linking {}", bin.join(b).display()))?;
    }
    let _ = std::fs::remove_dir_all(&debs);
    eprintln!(
        "xtask: Prometheus (Debian's package, unpacked, not installed) in {}",
        tree.display()
    );
    Ok(())
}

/// How many "leaking uprobe" lines the kernel has logged since boot (None:
/// the log cannot be read).
fn leaked_uprobes() -> Option<usize> {
    let out = Command::new("dmesg").output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| {
                l.contains("uprobe: ") && l.ends_with("failed to unregister, leaking uprobe")
            })
            .count()
    })
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Setup { bench } => setup(bench),
        Cmd::Run { args } => run(args),
        Cmd::Dist { out, maintainer } => dist::run(out, maintainer).map(|_| ()),
        Cmd::Test {
            no_lint,
            no_vm,
            no_package,
        } => testrun::test(no_lint, no_vm, no_package),
        Cmd::VmTest { only, bench } => vm::vm_test(only, bench),
        Cmd::PackageTest => pkgtest::alone(),
        Cmd::Bench {
            gpu,
            rounds,
            bin_dir,
            strace,
            strace_libs,
            python,
            cudawork,
            json_out,
            restart,
            baseline,
            copies,
        } => bench::suite::run(bench::suite::Args {
            restart,
            baseline,
            copies,
            gpu,
            rounds,
            bin_dir,
            strace,
            strace_libs,
            python,
            cudawork,
            json_out,
        }),
        Cmd::GenTables {
            src,
            out,
            check,
            layout,
        } => gentables::run(gentables::Args {
            src,
            out: out.unwrap_or_else(|| root_dir().join("nvprobe/model/data")),
            check,
            layout,
        }),
        Cmd::CudaApi { check, libs } => cudaapi::run(cudaapi::Args {
            libs,
            table: root_dir().join("nvprobe-common/src/cuda_api.rs"),
            check,
        }),
        Cmd::RmCoverage {
            table,
            version,
            markdown,
            files,
        } => gentables::coverage::run(gentables::coverage::Args {
            table: table.unwrap_or_else(|| root_dir().join("nvprobe/model/data/rm-controls.tsv")),
            version,
            files,
            markdown,
        }),
    }
}
