//! The kernel tier's HMM kernel: nvidia_uvm compiles its HMM code only
//! when the kernel has CONFIG_HMM_MIRROR and CONFIG_DEVICE_PRIVATE, and
//! Debian's stock kernels lack the second. So one kernel of the tier is
//! built here from Debian's `linux-source-6.1`: `make tinyconfig` plus
//! `tests/kmod/real/hmm-kernel.config`, then the real NVIDIA modules
//! against it (vmreal.rs). The source package is downloaded into the
//! build's folder in the cache (apt.rs), not installed in /usr/src; the
//! build's tools (flex, bison, bc, libelf-dev, pahole) are installed on
//! the machine.
//!
//! Cached in `/var/cache/nvprobe-vm/kernel/RELEASE/` (bzImage, `pci.h`
//! for the module patches' choice; written whole or not at all); the
//! release carries the fragment's hash, so a changed fragment is a new
//! build. A run with the kernel and its modules cached needs no network
//! and no kernel tree.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context, bail};

use crate::{apt, output, root_dir, sh, vmreal};

const CACHE: &str = "/var/cache/nvprobe-vm/kernel";
const FRAGMENT: &str = "tests/kmod/real/hmm-kernel.config";
const SOURCE_PKG: &str = "linux-source-6.1";
/// The tarball inside the source package.
const TARBALL: &str = "usr/src/linux-source-6.1.tar.xz";

/// The built kernel and the real modules for it.
pub struct HmmKernel {
    pub rel: String,
    pub bzimage: PathBuf,
    pub real: vmreal::RealParts,
}

/// FNV-1a of the fragment: the release's suffix.
fn fragment_tag() -> anyhow::Result<(String, String)> {
    let text = fs::read_to_string(root_dir().join(FRAGMENT)).context(FRAGMENT)?;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    Ok((text, format!("{:08x}", h as u32)))
}

/// The cached kernels whose release ends in `-nvprobe-hmm-TAG` (whole).
fn cached_kernels(tag: &str) -> Vec<(String, PathBuf)> {
    let suffix = format!("-nvprobe-hmm-{tag}");
    let Ok(d) = fs::read_dir(CACHE) else {
        return Vec::new();
    };
    d.flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(&suffix))
                && p.join("bzImage").is_file()
                && p.join("include/linux/pci.h").is_file()
        })
        .filter_map(|p| Some((p.file_name()?.to_string_lossy().into_owned(), p)))
        .collect()
}

/// Build (or take from the cache) the HMM kernel and the real modules.
pub fn prepare() -> anyhow::Result<HmmKernel> {
    let (fragment, tag) = fragment_tag()?;
    // A cached kernel whose modules are cached too (a changed patch means
    // new modules, which need the kernel's tree: built again).
    for (rel, dir) in cached_kernels(&tag) {
        let k = vmreal::KTree {
            rel: rel.clone(),
            sources: vec![dir.clone()],
            make_args: Vec::new(),
        };
        if vmreal::cached(&k) {
            eprintln!("xtask: vm-test hmm: kernel {rel} from {}", dir.display());
            return Ok(HmmKernel {
                rel,
                bzimage: dir.join("bzImage"),
                real: vmreal::prepare(&k)?,
            });
        }
    }
    let work = Path::new(CACHE).join(format!("work-{tag}"));
    let built = build(&fragment, &tag, &work);
    // The tree (gigabytes) goes either way; a failed build's log stays.
    let _ = fs::remove_dir_all(&work);
    built
}

/// Extract, configure and build the kernel in `work`, then the modules
/// against it; keep the bzImage and pci.h (the caller drops the tree).
fn build(fragment: &str, tag: &str, work: &Path) -> anyhow::Result<HmmKernel> {
    let mut pkgs = vec!["flex", "bison", "bc", "libelf-dev", "xz-utils"];
    if output(Command::new("sh").args(["-c", "command -v pahole"])).is_none() {
        // pahole makes the BTF of vmlinux and of the modules.
        pkgs.push("dwarves");
    }
    apt::host_install(&pkgs).context("installing what the kernel build needs")?;
    let _ = fs::remove_dir_all(work);
    let pkg = work.join("pkg");
    fs::create_dir_all(&pkg)?;
    let t = Instant::now();
    // The newest (its security updates), not apt's candidate (bookworm's
    // point release).
    let fetch = || -> anyhow::Result<()> {
        let v = apt::newest(SOURCE_PKG)?;
        apt::download(&pkg, &[format!("{SOURCE_PKG}={v}")])
    };
    fetch()
        .or_else(|_| {
            apt::update()?;
            fetch()
        })
        .with_context(|| {
            format!(
                "{SOURCE_PKG} is Debian bookworm's: without it run `cargo xtask vm-test --only 6.1` and `--only 6.12` alone"
            )
        })?;
    apt::unpack(&apt::deb(&pkg, &format!("{SOURCE_PKG}_"))?, &pkg.join("x"))?;
    sh(Command::new("tar")
        .arg("-C")
        .arg(work)
        .arg("-xJf")
        .arg(pkg.join("x").join(TARBALL)))
    .context("unpacking linux-source-6.1")?;
    // The package's own copy of the tarball is not needed any more.
    let _ = fs::remove_dir_all(&pkg);
    let src = fs::read_dir(work)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("Makefile").is_file())
        .context("the kernel source tree in the tarball")?;
    let out = work.join("out");
    fs::create_dir_all(&out)?;
    let make = |args: &[&str]| {
        let mut c = Command::new("make");
        c.current_dir(&src)
            .arg(format!("O={}", out.display()))
            .args(args)
            .stdout(Stdio::null());
        c
    };
    sh(&mut make(&["tinyconfig"]))?;
    // The fragment, plus the release's suffix.
    let frag = work.join("fragment.config");
    fs::write(
        &frag,
        format!(
            "{fragment}\nCONFIG_LOCALVERSION=\"-nvprobe-hmm-{tag}\"\n# CONFIG_LOCALVERSION_AUTO is not set\n"
        ),
    )?;
    sh(Command::new(src.join("scripts/kconfig/merge_config.sh"))
        .current_dir(&src)
        .arg("-m")
        .arg("-O")
        .arg(&out)
        .arg(out.join(".config"))
        .arg(&frag)
        .stdout(Stdio::null()))?;
    sh(&mut make(&["olddefconfig"]))?;
    // Every option the fragment sets must have landed (a dependency
    // missing in the fragment drops one silently).
    let config = fs::read_to_string(out.join(".config"))?;
    let missing: Vec<&str> = fragment
        .lines()
        .filter(|l| l.starts_with("CONFIG_"))
        .filter(|l| !config.lines().any(|c| c == *l))
        .collect();
    if !missing.is_empty() {
        bail!(
            "{FRAGMENT}: not in the configured kernel: {} (a dependency is missing from the fragment)",
            missing.join(", ")
        );
    }
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    eprintln!(
        "xtask: vm-test hmm: building Linux from {SOURCE_PKG} with HMM ({jobs} jobs; cached after)"
    );
    // The kernel's own warnings go to a log, shown only if the build fails.
    let log_path = Path::new(CACHE).join(format!("kernel-build-{tag}.log"));
    let log = fs::File::create(&log_path)?;
    let built = sh(make(&[&format!("-j{jobs}"), "bzImage", "modules"])
        .stdout(log.try_clone()?)
        .stderr(log));
    if let Err(e) = built {
        let text = fs::read_to_string(&log_path).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        bail!(
            "building the HMM kernel: {e:#}; the log's end ({}):\n{}",
            log_path.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    let _ = fs::remove_file(&log_path);
    let rel = fs::read_to_string(out.join("include/config/kernel.release"))?
        .trim()
        .to_owned();
    eprintln!(
        "xtask: vm-test hmm: built kernel {rel} in {:.0} s",
        t.elapsed().as_secs_f64()
    );
    let k = vmreal::KTree {
        rel: rel.clone(),
        sources: vec![src.clone()],
        make_args: vec![
            format!("SYSSRC={}", src.display()),
            format!("SYSOUT={}", out.display()),
        ],
    };
    let real = vmreal::prepare(&k)?;
    // Written whole or not at all.
    let done = Path::new(CACHE).join(&rel);
    let tmp = Path::new(CACHE).join(format!("{rel}.partial"));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(tmp.join("include/linux"))?;
    fs::copy(out.join("arch/x86/boot/bzImage"), tmp.join("bzImage"))?;
    fs::copy(
        src.join("include/linux/pci.h"),
        tmp.join("include/linux/pci.h"),
    )?;
    let _ = fs::remove_dir_all(&done);
    fs::rename(&tmp, &done)?;
    // Kernels of earlier fragments or sources are not used again.
    for e in fs::read_dir(CACHE)?.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.contains("-nvprobe-hmm-") && n != rel {
            let _ = fs::remove_dir_all(e.path());
        }
    }
    Ok(HmmKernel {
        rel,
        bzimage: done.join("bzImage"),
        real,
    })
}
