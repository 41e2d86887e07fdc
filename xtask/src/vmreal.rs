//! The kernel tier's real-driver stage: Debian's build of the NVIDIA open
//! kernel module (`nvidia-open-kernel-source`, contrib) with the zero-GPU
//! patch of tests/kmod/real/, the real `libcuda1` of the same version
//! (non-free), one of another version (the real version mismatch) and
//! `nvidia-modprobe`, downloaded with apt through sources of its own
//! (apt.rs: the machine's apt configuration is not read or touched, and
//! nothing is installed).
//!
//! The versions are pinned (what bookworm and trixie carried when this was
//! written); when apt no longer has them the candidate is used, and said.
//! The built modules are cached outside the repository, in
//! `/var/cache/nvprobe-vm/real/DRIVER-KERNEL-PATCHES/` (written whole or
//! not at all): a cached build needs no network, and only the first run on
//! a machine pays the build.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context, bail};

use crate::{
    apt::{self, CACHE},
    output, root_dir, sh,
};

/// nvidia-open-kernel-source (bookworm, contrib) and the libcuda1 of the
/// same version (non-free).
const PINNED: &str = "535.261.03-1";
/// A libcuda1 of another version (trixie, non-free): the real mismatch.
const PINNED_OTHER: &str = "550.163.01-2";

/// The patches, in order; `pci-resize.patch` only where the kernel's
/// pci_resize_resource takes Linux 6.18's exclude_bars.
const PATCHES: [&str; 3] = ["zero-gpu.patch", "no-ats.patch", "pci-resize.patch"];

/// The kernel the modules are built against: a Debian kernel's installed
/// headers, or a tree built here (vmkernel.rs).
pub struct KTree {
    /// Its release ("6.1.0-57-amd64"): part of the cache key.
    pub rel: String,
    /// Where its `include/linux/pci.h` may be, first found wins.
    pub sources: Vec<PathBuf>,
    /// How NVIDIA's Makefile finds it (KERNEL_UNAME= or SYSSRC= SYSOUT=).
    pub make_args: Vec<String>,
}

impl KTree {
    /// A Debian kernel, its headers in the cache (vmheaders.rs).
    pub fn debian(rel: &str, h: &crate::vmheaders::Headers) -> Self {
        Self {
            rel: rel.to_owned(),
            sources: vec![h.source.clone(), h.build.clone()],
            make_args: vec![
                format!("SYSSRC={}", h.source.display()),
                format!("SYSOUT={}", h.build.display()),
            ],
        }
    }
}

/// What the real-driver boot needs.
pub struct RealParts {
    /// nvidia.ko, nvidia-uvm.ko.
    pub kmod: PathBuf,
    /// libcuda.so.VERSION of the module's version.
    pub libcuda: PathBuf,
    /// libcuda of another version (the mismatch), when apt has one.
    pub other: Option<PathBuf>,
    pub modprobe: PathBuf,
    pub version: String,
}

/// The versions apt offers for a package, the candidate first.
fn versions(pkg: &str) -> anyhow::Result<Vec<String>> {
    let out = output(apt::cmd("apt-cache")?.args(["policy", pkg])).unwrap_or_default();
    let cand = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Candidate: "))
        .filter(|c| *c != "(none)")
        .with_context(|| format!("apt has no {pkg} (contrib/non-free)"))?
        .to_owned();
    let mut v = vec![cand.clone()];
    for l in out.lines() {
        let t = l.trim().trim_start_matches("*** ");
        if let Some(first) = t.split_whitespace().next()
            && first.chars().next().is_some_and(|c| c.is_ascii_digit())
            && first.contains('.')
            && t.split_whitespace().count() == 2
            && first != cand
            && !v.iter().any(|x| x == first)
        {
            v.push(first.to_owned());
        }
    }
    Ok(v)
}

/// The upstream version of a Debian version ("535.261.03-1" -> "535.261.03").
fn upstream(v: &str) -> &str {
    v.split('-').next().unwrap_or(v)
}

/// Find `name` under `root`.
fn find(root: &Path, name: &str) -> Option<PathBuf> {
    let out = output(Command::new("find").arg(root).args(["-name", name]))?;
    out.lines().next().map(PathBuf::from)
}

/// The patches that apply to kernel `rel`, and a short hash of them (the
/// cache key: a changed patch is a new build).
fn patches_for(k: &KTree) -> anyhow::Result<(Vec<PathBuf>, String)> {
    let pci = k
        .sources
        .iter()
        .find_map(|d| fs::read_to_string(d.join("include/linux/pci.h")).ok())
        .context("the kernel's pci.h (headers installed?)")?;
    let four_args = pci.contains("exclude_bars");
    let mut files = Vec::new();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in PATCHES {
        if p == "pci-resize.patch" && !four_args {
            continue;
        }
        let f = root_dir().join("tests/kmod/real").join(p);
        // FNV-1a over the patches' bytes.
        for b in fs::read(&f)? {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        files.push(f);
    }
    Ok((files, format!("{:08x}", h as u32)))
}

/// The cache's entry: complete, or not there.
fn complete(out: &Path, version: &str) -> bool {
    ["nvidia.ko", "nvidia-uvm.ko", "nvidia-modprobe"]
        .iter()
        .all(|f| out.join(f).is_file())
        && out.join(format!("libcuda.so.{version}")).is_file()
}

/// The cache's entry for driver `v` on kernel `rel` with patches `tag`.
fn entry(v: &str, rel: &str, tag: &str) -> PathBuf {
    Path::new(CACHE)
        .join("real")
        .join(format!("{v}-{rel}-{tag}"))
}

/// A complete cache entry for kernel `rel` with patches `tag`: the pinned
/// version's, else any other's (the candidate apt gave when it no longer
/// had the pinned one). Returns its Debian version.
fn cached_version(rel: &str, tag: &str) -> Option<String> {
    if complete(&entry(PINNED, rel, tag), upstream(PINNED)) {
        return Some(PINNED.to_owned());
    }
    let suffix = format!("-{rel}-{tag}");
    fs::read_dir(Path::new(CACHE).join("real"))
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(&suffix).map(str::to_owned)
        })
        .find(|v| complete(&entry(v, rel, tag), upstream(v)))
}

/// Whether the cache has modules for kernel `k` with today's patches, so
/// that its tree is not needed (`k.sources` need only hold `pci.h`).
pub fn cached(k: &KTree) -> bool {
    patches_for(k).is_ok_and(|(_, tag)| cached_version(&k.rel, &tag).is_some())
}

/// Fetch, patch and build (or take from the cache) the real modules for
/// kernel `k`, with their libcuda.
pub fn prepare(k: &KTree) -> anyhow::Result<RealParts> {
    let rel = k.rel.as_str();
    let (patches, tag) = patches_for(k)?;
    let entry = |v: &str| entry(v, rel, &tag);
    // A cached build needs no network.
    let cached = cached_version(rel, &tag);
    let mut src_v = cached.clone().unwrap_or_else(|| PINNED.to_owned());
    if cached.is_none() {
        apt::update()?;
        let offered = versions("nvidia-open-kernel-source")?;
        if !offered.iter().any(|v| v == PINNED) {
            src_v = offered[0].clone();
            eprintln!(
                "xtask: vm-test: apt no longer has nvidia-open-kernel-source {PINNED}; using {src_v}"
            );
        }
        let out = entry(&src_v);
        if !complete(&out, upstream(&src_v)) {
            build(k, &src_v, &patches, &out)?;
        }
    }
    let version = upstream(&src_v).to_owned();
    let out = entry(&src_v);
    eprintln!(
        "xtask: vm-test: real driver {version} for {rel} from {}",
        out.display()
    );
    let other = fs::read_dir(out.join("other"))
        .ok()
        .and_then(|d| d.flatten().map(|e| e.path()).next());
    Ok(RealParts {
        kmod: out.clone(),
        libcuda: out.join(format!("libcuda.so.{version}")),
        other,
        modprobe: out.join("nvidia-modprobe"),
        version,
    })
}

fn build(k: &KTree, src_v: &str, patches: &[PathBuf], out: &Path) -> anyhow::Result<()> {
    let rel = k.rel.as_str();
    let version = upstream(src_v);
    let work = Path::new(CACHE).join(format!("work-{version}-{rel}"));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work)?;
    let lib_vs = versions("libcuda1")?;
    let same = lib_vs
        .iter()
        .find(|v| upstream(v) == version)
        .with_context(|| format!("apt has no libcuda1 {version}"))?;
    let mut what = vec![
        format!("nvidia-open-kernel-source={src_v}"),
        format!("libcuda1={same}"),
        "nvidia-modprobe".to_owned(),
    ];
    apt::download(&work, &what)?;
    let other = lib_vs
        .iter()
        .find(|v| *v == PINNED_OTHER)
        .or_else(|| lib_vs.iter().find(|v| upstream(v) != version));
    if let Some(o) = other {
        let d = work.join("other");
        fs::create_dir_all(&d)?;
        what = vec![format!("libcuda1={o}")];
        apt::download(&d, &what)?;
    }
    apt::unpack(
        &apt::deb(&work, "nvidia-open-kernel-source_")?,
        &work.join("src"),
    )?;
    apt::unpack(&apt::deb(&work, "libcuda1_")?, &work.join("cuda"))?;
    apt::unpack(
        &apt::deb(&work, "nvidia-modprobe_")?,
        &work.join("modprobe"),
    )?;
    let tarball = find(&work.join("src"), "nvidia-open-kernel.tar.xz")
        .context("the module source tarball")?;
    sh(Command::new("tar")
        .arg("-C")
        .arg(&work)
        .arg("-xJf")
        .arg(&tarball))?;
    let tree = find(&work, "nv-kernel.o_binary")
        .and_then(|p| p.parent()?.parent().map(Path::to_path_buf))
        .context("the module source tree")?;
    for patch in patches {
        // no-ats.patch is written against 535's nv.c: other versions start
        // nv_ats_supported differently, and go without it (said).
        if patch.ends_with("no-ats.patch")
            && !fs::read_to_string(tree.join("nvidia/nv.c"))
                .is_ok_and(|c| c.contains("                          || NV_TRUE\n"))
        {
            eprintln!(
                "xtask: vm-test: no-ats.patch does not fit nvidia {version}'s nv.c: not applied (with zero GPUs UVM may then take the platform for ATS-capable, and HMM stays off)"
            );
            continue;
        }
        sh(Command::new("patch")
            .arg("-p1")
            .arg("-d")
            .arg(&tree)
            .arg("-i")
            .arg(patch)
            .stdout(Stdio::null()))
        .with_context(|| format!("applying {}", patch.display()))?;
    }
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    let t = Instant::now();
    eprintln!(
        "xtask: vm-test: building nvidia.ko and nvidia-uvm.ko {version} for {rel} ({jobs} jobs; cached after)"
    );
    sh(Command::new("make")
        .current_dir(&tree)
        .arg(format!("-j{jobs}"))
        .arg("modules")
        .args(&k.make_args)
        .arg("NV_KERNEL_MODULES=nvidia nvidia-uvm")
        .stdout(Stdio::null()))
    .context("building the NVIDIA open kernel modules")?;
    eprintln!(
        "xtask: vm-test: built the real modules in {:.0} s",
        t.elapsed().as_secs_f64()
    );
    // Written whole or not at all: a temporary folder, renamed at the end.
    let done = out;
    let tmp = PathBuf::from(format!("{}.partial", out.display()));
    let out = tmp.as_path();
    let _ = fs::remove_dir_all(out);
    fs::create_dir_all(out.join("other"))?;
    for k in ["nvidia.ko", "nvidia-uvm.ko"] {
        // Debug info off: the initramfs holds them in the VM's memory.
        sh(Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(out.join(k))
            .arg(tree.join(k)))?;
    }
    let lib = find(&work.join("cuda"), &format!("libcuda.so.{version}"))
        .context("libcuda in libcuda1")?;
    fs::copy(&lib, out.join(format!("libcuda.so.{version}")))?;
    if other.is_some()
        && let Some(o) = find(&work.join("other"), "libcuda1_*.deb")
    {
        apt::unpack(&o, &work.join("other/x"))?;
        if let Some(l) = find(&work.join("other/x"), "libcuda.so.[0-9]*.*") {
            let name = l.file_name().context("name")?.to_owned();
            fs::copy(&l, out.join("other").join(name))?;
        }
    }
    fs::copy(
        work.join("modprobe/usr/bin/nvidia-modprobe"),
        out.join("nvidia-modprobe"),
    )
    .context("nvidia-modprobe")?;
    let _ = fs::remove_dir_all(&work);
    if !complete(out, version) {
        bail!("the build left an incomplete {}", out.display());
    }
    let _ = fs::remove_dir_all(done);
    fs::rename(out, done)?;
    Ok(())
}
