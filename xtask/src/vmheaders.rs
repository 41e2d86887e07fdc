//! A Debian kernel's headers, for building modules against it (the
//! stand-ins of tests/kmod, NVIDIA's open module), unpacked into the cache
//! from the packages apt would install (`linux-headers-RELEASE`, its
//! `-common` part, `linux-kbuild-*`) and never installed: the machine's
//! /usr/src and /lib/modules stay as they were, and no kernel comes with
//! them (Debian's 6.12 headers depend on the kernel image, which `apt-get
//! install` puts in /boot and /lib/modules, initramfs and all).
//!
//! `/var/cache/nvprobe-vm/headers/RELEASE/` holds the packages' tree
//! (`usr/src/linux-headers-*`, `usr/lib/linux-kbuild-*`), written whole or
//! not at all; the only file changed is the release's Makefile, whose
//! `include` of the common part points into the cache instead of /usr/src.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, bail};

use crate::{apt, output};

/// Where kbuild finds the kernel: `make -C BUILD M=…`, and for NVIDIA's
/// Makefile `SYSSRC=SOURCE SYSOUT=BUILD` (what /lib/modules/REL/source and
/// /lib/modules/REL/build are on a machine with the package installed).
pub struct Headers {
    pub build: PathBuf,
    pub source: PathBuf,
}

/// The headers of Debian kernel `rel`, from the cache or fetched into it.
pub fn prepare(rel: &str) -> anyhow::Result<Headers> {
    let root = Path::new(apt::CACHE).join("headers").join(rel);
    if let Some(h) = complete(rel, &root) {
        build_tools(&h)?;
        return Ok(h);
    }
    let pkg = format!("linux-headers-{rel}");
    let mut depends = apt::field(&pkg, "Depends").unwrap_or_default();
    if depends.is_empty() {
        apt::update()?;
        depends = apt::field(&pkg, "Depends")?;
    }
    if depends.is_empty() {
        bail!("apt (the kernel tier's own sources) has no {pkg}");
    }
    let names = apt::dep_names(&depends);
    // One source package makes them all, at the headers' version (apt's
    // own candidate for linux-kbuild-6.1 can be an older point release's).
    let version = apt::field(&pkg, "Version")?;
    let mut parts = vec![pkg.clone()];
    parts.extend(
        names
            .iter()
            .filter(|n| n.starts_with("linux-headers-") || n.starts_with("linux-kbuild-"))
            .cloned(),
    );
    let parts: Vec<String> = parts
        .into_iter()
        .map(|p| format!("{p}={version}"))
        .collect();
    compiler(&names)?;
    let partial = Path::new(apt::CACHE)
        .join("headers")
        .join(format!("{rel}.partial"));
    let _ = fs::remove_dir_all(&partial);
    let debs = partial.join("debs");
    fs::create_dir_all(&debs)?;
    eprintln!(
        "xtask: vm-test: headers of {rel} into {} ({})",
        root.display(),
        parts.join(", ")
    );
    apt::download(&debs, &parts)?;
    let tree = partial.join("tree");
    for p in &parts {
        let name = p.split('=').next().unwrap_or(p);
        apt::unpack(&apt::deb(&debs, &format!("{name}_"))?, &tree)?;
    }
    fs::write(tree.join(STAMP), parts.join("\n") + "\n")?;
    // The release's Makefile is one line, `include /usr/src/…-common/Makefile`:
    // the same file, in the cache.
    let makefile = tree.join(format!("usr/src/{pkg}/Makefile"));
    let text = fs::read_to_string(&makefile).with_context(|| makefile.display().to_string())?;
    let common = text
        .lines()
        .find_map(|l| l.strip_prefix("include /usr/src/"))
        .and_then(|l| l.strip_suffix("/Makefile"))
        .with_context(|| format!("{}: no include of the common headers", makefile.display()))?
        .to_owned();
    fs::write(
        &makefile,
        text.replace(
            &format!("include /usr/src/{common}/Makefile"),
            &format!("include {}/usr/src/{common}/Makefile", root.display()),
        ),
    )?;
    let _ = fs::remove_dir_all(&root);
    fs::rename(&tree, &root)
        .with_context(|| format!("moving the headers to {}", root.display()))?;
    let _ = fs::remove_dir_all(&partial);
    let h = complete(rel, &root)
        .with_context(|| format!("{}: incomplete after unpacking", root.display()))?;
    build_tools(&h)?;
    Ok(h)
}

/// What kbuild runs beyond the compiler, installed on the machine when
/// missing, whether the headers were cached or just unpacked: pahole, to
/// make each module's BTF when the kernel was configured with
/// CONFIG_DEBUG_INFO_BTF_MODULES (Debian's 6.12 is; without it the
/// modules' final link fails with "pahole: not found").
fn build_tools(h: &Headers) -> anyhow::Result<()> {
    let config = fs::read_to_string(h.build.join(".config")).unwrap_or_default();
    let btf = config
        .lines()
        .any(|l| l.trim() == "CONFIG_DEBUG_INFO_BTF_MODULES=y");
    if btf && output(std::process::Command::new("pahole").arg("--version")).is_none() {
        apt::host_install(&["dwarves"])
            .context("installing dwarves (pahole makes the modules' BTF)")?;
    }
    Ok(())
}

/// The packages (`name=version`) a cached tree was unpacked from, written
/// last.
const STAMP: &str = "nvprobe-packages.txt";

/// The cached headers, if whole: unpacked to the end, the release's
/// Makefile includes a common part that is there, and kbuild's own tools
/// came with them.
fn complete(rel: &str, root: &Path) -> Option<Headers> {
    let build = root.join(format!("usr/src/linux-headers-{rel}"));
    if !root.join(STAMP).is_file() {
        return None;
    }
    let text = fs::read_to_string(build.join("Makefile")).ok()?;
    let source = text
        .lines()
        .find_map(|l| l.strip_prefix("include "))
        .and_then(|l| l.strip_suffix("/Makefile"))
        .map(PathBuf::from)?;
    (source.starts_with(root)
        && source.join("Makefile").is_file()
        && build.join("scripts/basic/fixdep").is_file()
        && build.join("Module.symvers").is_file())
    .then_some(Headers { build, source })
}

/// The compiler the kernel was built with (`gcc-12`: the headers depend on
/// it, or on `linux-compiler-gcc-12-x86` that does), installed on the
/// machine if missing: kbuild refuses another.
fn compiler(names: &[String]) -> anyhow::Result<()> {
    let gcc = names.iter().find_map(|n| {
        let v = n
            .strip_prefix("linux-compiler-gcc-")
            .and_then(|r| r.strip_suffix("-x86"))
            .or_else(|| n.strip_prefix("gcc-"))?;
        v.chars()
            .all(|c| c.is_ascii_digit())
            .then(|| format!("gcc-{v}"))
    });
    let Some(gcc) = gcc else {
        return Ok(());
    };
    if output(std::process::Command::new(&gcc).arg("--version")).is_none() {
        apt::host_install(&[&gcc]).with_context(|| format!("installing {gcc}"))?;
    }
    Ok(())
}
