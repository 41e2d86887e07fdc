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

fn main() -> anyhow::Result<()> {
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
