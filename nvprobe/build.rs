//! Builds the eBPF objects (nvprobe-ebpf's binaries: the tracer and the
//! doctor's self-test) for the bpf target, so that `include_bytes_aligned!`
//! embeds them. This is what aya-build does, but quiet: the sub-build's
//! progress lines are shown only when it fails (aya-build forwards every
//! line as a cargo warning, which made every build print ~40 of them).
use std::{
    env,
    path::PathBuf,
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};

/// bpf-linker 0.10.3 links with the LLVM of the nightly toolchain it was
/// built against; a nightly with another LLVM major produces objects it
/// cannot read. Fail early with a message instead of a linker crash.
const EXPECTED_LLVM_MAJOR: &str = "22";

fn check_nightly() -> anyhow::Result<()> {
    let out = Command::new("rustup")
        .args(["run", "nightly", "rustc", "-vV"])
        .output()
        .context("running `rustup run nightly rustc -vV`: is rustup installed?")?;
    if !out.status.success() {
        bail!(
            "the nightly toolchain is missing: run `rustup toolchain install nightly --component rust-src` \
             (or `cargo xtask setup`)"
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let llvm = text
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .unwrap_or("unknown");
    if llvm.split('.').next() != Some(EXPECTED_LLVM_MAJOR) {
        bail!(
            "nightly rustc uses LLVM {llvm}, but bpf-linker 0.10.3 needs LLVM {EXPECTED_LLVM_MAJOR}: \
             use a nightly whose `rustc -vV` says LLVM {EXPECTED_LLVM_MAJOR}.x"
        );
    }
    Ok(())
}

/// What `nvprobe --version` says besides the crate's version: the git
/// commit the source is at (12 digits, "-modified" when tracked files
/// differ from it; "unknown" outside a git checkout, e.g. a source
/// tarball) and the build date (UTC; SOURCE_DATE_EPOCH when set, for
/// reproducible builds). The build script runs again when the commit
/// changes.
fn version_line(date: &str) -> String {
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let modified = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if modified { format!("{c}-modified") } else { c }
        }
        _ => "unknown".to_owned(),
    };
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        let head = PathBuf::from(repo).join(head);
        println!("cargo:rerun-if-changed={}", head.display());
        if let Ok(h) = std::fs::read_to_string(&head)
            && let Some(r) = h.trim().strip_prefix("ref: ")
            && let Some(p) = git(&["rev-parse", "--git-path", r])
        {
            println!(
                "cargo:rerun-if-changed={}",
                PathBuf::from(repo).join(p).display()
            );
        }
    }
    format!(
        "{} (commit {commit}, built {date})",
        env!("CARGO_PKG_VERSION")
    )
}

/// The build date, YYYY-MM-DD (UTC): SOURCE_DATE_EPOCH's when set, else
/// today's. `--version` says it, and the manual pages are dated by it.
fn build_date() -> String {
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let secs = env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        });
    let (y, m, d) = civil_date(secs.div_euclid(86_400));
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's days-to-civil).
fn civil_date(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn main() -> anyhow::Result<()> {
    let date = build_date();
    println!(
        "cargo:rustc-env=NVPROBE_VERSION_LINE={}",
        version_line(&date)
    );
    println!("cargo:rustc-env=NVPROBE_BUILD_DATE={date}");
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../nvprobe-ebpf");
    println!("cargo:rerun-if-env-changed=AYA_BUILD_SKIP");
    println!("cargo:rerun-if-changed={root}");
    println!(
        "cargo:rerun-if-changed={}/../nvprobe-common/src",
        env!("CARGO_MANIFEST_DIR")
    );
    if env::var_os("AYA_BUILD_SKIP").is_some() {
        return Ok(());
    }
    check_nightly()?;
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").context("OUT_DIR not set")?);
    let target = match env::var("CARGO_CFG_TARGET_ENDIAN").as_deref() {
        Ok("big") => "bpfeb-unknown-none",
        _ => "bpfel-unknown-none",
    };
    let arch = env::var("CARGO_CFG_TARGET_ARCH").context("CARGO_CFG_TARGET_ARCH not set")?;
    let target_dir = out_dir.join("ebpf-target");
    let flags = [
        format!("--cfg=bpf_target_arch=\"{arch}\""),
        "-Cdebuginfo=2".to_owned(),
        "-Clink-arg=--btf".to_owned(),
    ]
    .join("\x1f");
    let mut cmd = Command::new("rustup");
    cmd.args(["run", "nightly", "cargo", "build", "--quiet"])
        .args(["--package", "nvprobe-ebpf", "--bins", "--release"])
        .args(["--target", target, "-Z", "build-std=core"])
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(root)
        .env("CARGO_ENCODED_RUSTFLAGS", flags)
        .env_remove("RUSTC")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTFLAGS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "building the eBPF programs failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for bin in ["nvprobe-bpf", "nvprobe-selftest"] {
        let built = target_dir.join(target).join("release").join(bin);
        if built.exists() {
            std::fs::copy(&built, out_dir.join(bin))
                .with_context(|| format!("copying {}", built.display()))?;
        }
    }
    Ok(())
}
