//! Builds the eBPF object (nvprobe-ebpf) for the bpf target with aya-build,
//! so that `include_bytes_aligned!` in the collector embeds it.
use std::process::Command;

use anyhow::{Context as _, bail};

/// bpf-linker 0.10.3 links with the LLVM of the nightly toolchain it was
/// built against; a nightly with another LLVM major produces objects it
/// cannot read. Fail early with a message instead of a linker crash.
const EXPECTED_LLVM_MAJOR: &str = "22";

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=AYA_BUILD_SKIP");
    if std::env::var_os("AYA_BUILD_SKIP").is_none() {
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
    }
    let ebpf = aya_build::Package {
        name: "nvprobe-ebpf",
        root_dir: concat!(env!("CARGO_MANIFEST_DIR"), "/../nvprobe-ebpf"),
        ..Default::default()
    };
    aya_build::build_ebpf([ebpf], aya_build::Toolchain::default())
}
