//! `cargo xtask vm-test`: the kernel tier. Boots Debian kernels that have
//! kprobes under qemu (TCG), with the stand-in modules of tests/kmod built
//! for each, and runs `nvvmtest` inside; reads back its result line.
//!
//! Kernels: the newest 6.1 and the newest 6.12 that bookworm's apt
//! sources carry (6.12 comes through bookworm-security as
//! `linux-image-6.12.N+deb12-amd64-unsigned`), resolved at run time
//! (Debian replaces ABI numbers as it updates them) from the tier's own
//! apt sources (apt.rs). Their images are unpacked under
//! `target/vm/RELEASE/` and their headers into the cache (vmheaders.rs):
//! neither is installed. Needs root (qemu and the build tools are
//! installed with apt, the cache is /var/cache/nvprobe-vm).

use std::{
    fs,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};

use crate::{
    apt, root_dir, sh,
    summary::{Row, vm_checks},
    vmheaders::{self, Headers},
};

pub struct Kernel {
    /// Shown in reports: "6.1 (bookworm)".
    pub label: &'static str,
    /// apt-cache search pattern for the image package.
    pub pattern: &'static str,
    /// What follows the release in the image package's name.
    pub image_suffix: &'static str,
    /// Also boot Debian's real NVIDIA open module on it (vmreal.rs).
    pub real: bool,
}

pub const MATRIX: &[Kernel] = &[
    Kernel {
        label: "6.1",
        pattern: r"^linux-image-6\.1\.0-[0-9]+-amd64$",
        image_suffix: "",
        real: true,
    },
    Kernel {
        label: "6.12",
        pattern: r"^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$",
        image_suffix: "-unsigned",
        real: false,
    },
];

/// The newest kernel release matching the pattern ("6.1.0-47-amd64"),
/// refreshing the tier's apt lists once when they have none (never
/// fetched, or older than any kernel they list).
fn resolve(k: &Kernel) -> anyhow::Result<String> {
    resolve_listed(k).or_else(|_| {
        apt::update()?;
        resolve_listed(k)
    })
}

fn resolve_listed(k: &Kernel) -> anyhow::Result<String> {
    let out = crate::output(apt::cmd("apt-cache")?.args(["search", "--names-only", k.pattern]))
        .unwrap_or_default();
    let mut rels: Vec<String> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|p| p.strip_prefix("linux-image-"))
        .filter_map(|p| p.strip_suffix(k.image_suffix))
        .map(str::to_owned)
        .collect();
    rels.sort_by_key(|r| version_key(r));
    rels.pop().with_context(|| {
        format!(
            "no kernel package matches {} in the tier's apt lists (/var/cache/nvprobe-vm/apt)",
            k.pattern
        )
    })
}

fn version_key(s: &str) -> Vec<u64> {
    s.split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn ldd_libs(bin: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let out = crate::output(Command::new("ldd").arg(bin))
        .with_context(|| format!("ldd {}", bin.display()))?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let p = l
                .split("=>")
                .nth(1)
                .unwrap_or(l)
                .split_whitespace()
                .next()?;
            p.starts_with('/').then(|| PathBuf::from(p))
        })
        .collect())
}

fn copy_into(root: &Path, src: &Path) -> anyhow::Result<()> {
    let dst = root.join(src.strip_prefix("/").unwrap_or(src));
    fs::create_dir_all(dst.parent().expect("parent"))?;
    fs::copy(src, &dst).with_context(|| format!("copying {}", src.display()))?;
    Ok(())
}

const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
echo "NVVM: kernel $(uname -r)"
if [ -d /kmod-real ]; then /bin/nvvmtest real /kmod-real; else /bin/nvvmtest run /kmod; fi
echo "NVVM: done"
poweroff -f
"#;

/// How long one boot may take, to its result line.
const BOOT_LIMIT: Duration = Duration::from_secs(1200);

/// What one boot gave: nvvmtest's PASS or not, the console's lines, and
/// where they were saved.
type Ran = (bool, String, PathBuf);

/// Build the stand-ins, the initramfs, boot, and return what it gave.
fn one(k: &Kernel, bins: &Path, bench: bool) -> anyhow::Result<Ran> {
    let rel = resolve(k)?;
    eprintln!("xtask: vm-test {}: kernel {rel}", k.label);
    let work = crate::target_dir().join("vm").join(&rel);
    fs::create_dir_all(&work)?;
    let (vmlinuz, headers) = install_kernel(k, &rel, &work)?;
    let kmod = build_kmod(&headers, &work)?;
    let initrd = build_initramfs(&work, bins, &kmod, None)?;
    let mut q = boot(
        &vmlinuz,
        &initrd,
        if bench { "nvvm.bench=1" } else { "" },
        1024,
    )?;
    let (passed, log) = read_console(&mut q, &work)?;
    let _ = q.kill();
    let _ = q.wait();
    fs::write(work.join("console.log"), &log)?;
    if bench {
        let md = bench_table(&rel, &log);
        fs::write(work.join("bench.md"), &md)?;
        println!("{md}");
    }
    match passed {
        Some(p) => Ok((p, log, work.join("console.log"))),
        None => bail!(
            "the VM with {rel} gave no result line within {} s (console: {})",
            BOOT_LIMIT.as_secs(),
            work.join("console.log").display()
        ),
    }
}

/// The kernel's headers (in the cache); its image downloaded and unpacked
/// under `work/img` (once). Returns the vmlinuz and the headers.
fn install_kernel(k: &Kernel, rel: &str, work: &Path) -> anyhow::Result<(PathBuf, Headers)> {
    let headers = vmheaders::prepare(rel)?;
    let vmlinuz = work.join(format!("img/boot/vmlinuz-{rel}"));
    if !vmlinuz.exists() {
        let image = vec![format!("linux-image-{rel}{}", k.image_suffix)];
        // Lists older than the archive name a package it no longer has.
        apt::download(work, &image).or_else(|_| {
            apt::update()?;
            apt::download(work, &image)
        })?;
        let deb = fs::read_dir(work)?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .context("the downloaded kernel package")?;
        sh(Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(work.join("img")))?;
    }
    Ok((vmlinuz, headers))
}

/// The real NVIDIA open module on this kernel: build (or take from the
/// cache) and boot.
fn one_real(k: &Kernel, bins: &Path) -> anyhow::Result<Ran> {
    let rel = resolve(k)?;
    let work = crate::target_dir().join("vm").join(&rel);
    fs::create_dir_all(&work)?;
    let (vmlinuz, headers) = install_kernel(k, &rel, &work)?;
    let real = crate::vmreal::prepare(&crate::vmreal::KTree::debian(&rel, &headers))?;
    eprintln!(
        "xtask: vm-test {} real driver: nvidia {} (zero-GPU patch), libcuda {}{}",
        k.label,
        real.version,
        real.version,
        real.other.as_ref().map_or_else(String::new, |o| format!(
            " and {}",
            o.file_name().unwrap_or_default().to_string_lossy()
        ))
    );
    let rwork = work.join("real");
    fs::create_dir_all(&rwork)?;
    let initrd = build_initramfs(&rwork, bins, &real.kmod, Some(&real))?;
    run_real_vm(&vmlinuz, &initrd, "", &rwork, "the real driver")
}

/// Boot a real-driver initramfs (the real nvidia.ko and libcuda live in
/// it: more memory), keep the console in `work`.
fn run_real_vm(
    vmlinuz: &Path,
    initrd: &Path,
    append: &str,
    work: &Path,
    what: &str,
) -> anyhow::Result<Ran> {
    let mut q = boot(vmlinuz, initrd, append, 3072)?;
    let (passed, log) = read_console(&mut q, work)?;
    let _ = q.kill();
    let _ = q.wait();
    fs::write(work.join("console.log"), &log)?;
    match passed {
        Some(p) => Ok((p, log, work.join("console.log"))),
        None => bail!(
            "the VM with {what} gave no result line within {} s (console: {})",
            BOOT_LIMIT.as_secs(),
            work.join("console.log").display()
        ),
    }
}

/// The stage's name in reports and `--only`.
pub const HMM_LABEL: &str = "6.1-hmm";

/// The HMM kernel (vmkernel.rs) with the real modules: build (or take
/// from the cache) and boot; nvvmtest runs the HMM scenarios
/// (`nvvm.stage=hmm`).
fn one_hmm(bins: &Path) -> anyhow::Result<Ran> {
    let k = crate::vmkernel::prepare()?;
    eprintln!(
        "xtask: vm-test {HMM_LABEL}: kernel {}, nvidia {} (zero-GPU patch)",
        k.rel, k.real.version
    );
    let work = crate::target_dir().join("vm").join(&k.rel);
    fs::create_dir_all(&work)?;
    let initrd = build_initramfs(&work, bins, &k.real.kmod, Some(&k.real))?;
    run_real_vm(
        &k.bzimage,
        &initrd,
        "nvvm.stage=hmm",
        &work,
        "the HMM kernel",
    )
}

/// The stand-ins, built against this kernel's headers in `work/kmod`.
fn build_kmod(headers: &Headers, work: &Path) -> anyhow::Result<PathBuf> {
    let kmod = work.join("kmod");
    let _ = fs::remove_dir_all(&kmod);
    fs::create_dir_all(&kmod)?;
    for f in ["nvidia.c", "nvidia-uvm.c", "Kbuild"] {
        fs::copy(root_dir().join("tests/kmod").join(f), kmod.join(f))?;
    }
    sh(Command::new("make")
        .arg("-C")
        .arg(&headers.build)
        .arg(format!("M={}", kmod.display()))
        .arg("modules")
        .stdout(Stdio::null()))?;
    Ok(kmod)
}

/// The initramfs: busybox, nvprobe, nvvmtest, their libraries, the .ko.
/// Returns `work/initrd.gz`.
fn build_initramfs(
    work: &Path,
    bins: &Path,
    kmod: &Path,
    real: Option<&crate::vmreal::RealParts>,
) -> anyhow::Result<PathBuf> {
    let root = work.join("initramfs");
    let _ = fs::remove_dir_all(&root);
    for d in [
        "bin",
        "proc",
        "sys",
        "dev",
        "tmp",
        "kmod",
        "sys/kernel/tracing",
    ] {
        fs::create_dir_all(root.join(d))?;
    }
    fs::copy("/bin/busybox", root.join("bin/busybox")).context("busybox-static")?;
    for b in ["nvprobe", "nvvmtest"] {
        let src = bins.join(b);
        fs::copy(&src, root.join("bin").join(b))?;
        for lib in ldd_libs(&src)? {
            copy_into(&root, &lib)?;
        }
    }
    let kdir = if real.is_some() { "kmod-real" } else { "kmod" };
    fs::create_dir_all(root.join(kdir))?;
    for m in ["nvidia.ko", "nvidia-uvm.ko"] {
        fs::copy(kmod.join(m), root.join(kdir).join(m))?;
    }
    if let Some(r) = real {
        // The kernel modules nvidia.ko needs (drm), from the kernel's own
        // package, in the order to load them. A kernel built here (the HMM
        // kernel, no DRM) has no package: nvidia.ko needs none there.
        let rel_dir = fs::read_dir(work.join("../img/lib/modules"))
            .ok()
            .and_then(|d| d.flatten().map(|e| e.path()).next())
            .unwrap_or_else(|| PathBuf::from("(no kernel package: a kernel built here)"));
        let mut order = Vec::new();
        module_deps(&kmod.join("nvidia.ko"), &rel_dir, &mut order)?;
        for m in &order {
            fs::copy(m, root.join(kdir).join(m.file_name().context("name")?))?;
        }
        let names: Vec<String> = order
            .iter()
            .filter_map(|m| m.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        fs::write(root.join(kdir).join("load-order"), names.join("\n"))?;
        // libcuda where the loader and nvprobe look for it, its libraries,
        // nvidia-modprobe, and the other version's libcuda aside.
        let lib = root.join("usr/lib/x86_64-linux-gnu");
        fs::create_dir_all(&lib)?;
        let name = r.libcuda.file_name().context("libcuda name")?;
        fs::copy(&r.libcuda, lib.join(name))?;
        std::os::unix::fs::symlink(name, lib.join("libcuda.so.1"))?;
        for l in ldd_libs(&r.libcuda)? {
            copy_into(&root, &l)?;
        }
        fs::create_dir_all(root.join("usr/bin"))?;
        fs::copy(&r.modprobe, root.join("usr/bin/nvidia-modprobe"))?;
        fs::create_dir_all(root.join("opt/other"))?;
        if let Some(o) = &r.other {
            fs::copy(
                o,
                root.join("opt/other").join(o.file_name().context("name")?),
            )?;
        }
    }
    fs::write(root.join("init"), INIT)?;
    sh(Command::new("chmod").arg("+x").arg(root.join("init")))?;
    let initrd = work.join("initrd.gz");
    sh(Command::new("sh").current_dir(&root).arg("-c").arg(format!(
        "find . | cpio -o -H newc --quiet | gzip -1 > {}",
        initrd.display()
    )))?;
    Ok(initrd)
}

/// The modules `ko` depends on (modinfo), found in the kernel's tree,
/// dependencies first.
fn module_deps(ko: &Path, tree: &Path, order: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    // Without modinfo the list would be silently empty, and insmod of
    // nvidia.ko fails later with "Unknown symbol" for what drm exports.
    let deps = crate::output(Command::new("modinfo").args(["-F", "depends"]).arg(ko))
        .with_context(|| format!("modinfo -F depends {} (package kmod)", ko.display()))?;
    for d in deps.trim().split(',').filter(|d| !d.is_empty()) {
        let file = crate::output(Command::new("find").arg(tree).args([
            "-name",
            &format!("{d}.ko*"),
            "-o",
            "-name",
            &format!("{}.ko*", d.replace('_', "-")),
        ]))
        .unwrap_or_default();
        let Some(f) = file.lines().next().map(PathBuf::from) else {
            bail!(
                "{}: needs module {d}, not in {}",
                ko.display(),
                tree.display()
            );
        };
        if !order.contains(&f) {
            module_deps(&f, tree, order)?;
            order.push(f);
        }
    }
    Ok(())
}

/// Start qemu on the kernel and initramfs. TCG: slow but needs no /dev/kvm
/// (which does not work here).
/// `append`: more of the kernel's command line (nvvmtest reads its
/// `nvvm.*` words).
fn boot(vmlinuz: &Path, initrd: &Path, append: &str, mem_mb: u32) -> anyhow::Result<Child> {
    Command::new("qemu-system-x86_64")
        .args([
            "-accel",
            "tcg",
            "-cpu",
            "max",
            "-m",
            &mem_mb.to_string(),
            "-smp",
            "1",
            "-nographic",
            "-no-reboot",
        ])
        .arg("-kernel")
        .arg(vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .arg("-append")
        .arg(format!("console=ttyS0 panic=-1 quiet loglevel=3 {append}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting qemu-system-x86_64")
}

/// The console until qemu exits or BOOT_LIMIT passes: the result line
/// (PASS or not; None if none came) and the log. Recordings sent as
/// `NVVM-FILE:` lines are saved in `work`, not logged.
fn read_console(q: &mut Child, work: &Path) -> anyhow::Result<(Option<bool>, String)> {
    let stdout = q.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let t0 = Instant::now();
    let mut log = String::new();
    let mut passed = None;
    while t0.elapsed() < BOOT_LIMIT {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(l) => {
                // A recording sent out as hex: saved beside the console log
                // (and not shown: it is the whole recording).
                if let Some(f) = l.trim().strip_prefix("NVVM-FILE: ")
                    && let Some((name, hex)) = f.split_once(' ')
                    && !name.contains('/')
                {
                    let bytes: Vec<u8> = (0..hex.len() / 2)
                        .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
                        .collect();
                    fs::write(work.join(name), &bytes)?;
                    eprintln!(
                        "  NVVM-FILE: {name} ({} bytes) saved in {}",
                        bytes.len(),
                        work.display()
                    );
                    continue;
                }
                if l.starts_with("NVVM") {
                    eprintln!("  {l}");
                }
                if let Some(r) = l.trim().strip_prefix("NVVM-RESULT: ") {
                    passed = Some(r == "PASS");
                }
                log.push_str(&l);
                log.push('\n');
                // nvvmtest's last word: the VM powers off next (a kernel
                // that cannot would only halt).
                if l.trim() == "NVVM: done" {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if q.try_wait()?.is_some() {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    Ok((passed, log))
}

/// The VM's NVVM-BENCH lines as markdown tables.
fn bench_table(rel: &str, log: &str) -> String {
    use std::fmt::Write as _;
    let mut md = format!(
        "### {rel} (qemu TCG, 1 vCPU; medians of 3 interleaved rounds of 7 batches; indicative only)\n\n| layers | getppid ns (×) | other ioctl ns (×) | NVIDIA ioctl ns (×) |\n|---|---|---|---|\n"
    );
    for l in log
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NVVM-BENCH: "))
    {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else {
            continue;
        };
        let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
        let _ = writeln!(
            md,
            "| {} | {:.0} ({:.2}) | {:.0} ({:.2}) | {:.0} ({:.2}) |",
            v["config"].as_str().unwrap_or("?"),
            f("getppid_ns"),
            f("getppid_ratio"),
            f("other_ioctl_ns"),
            f("other_ioctl_ratio"),
            f("nvidia_ioctl_ns"),
            f("nvidia_ioctl_ratio")
        );
    }
    md.push_str("\n| run with layers : BPF program | runs | ns per run |\n|---|---|---|\n");
    for l in log
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NVVM-BENCH-PROG: "))
    {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else {
            continue;
        };
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} |",
            v["program"].as_str().unwrap_or("?"),
            v["run_count"].as_u64().unwrap_or(0),
            v["ns_per_run"].as_f64().unwrap_or(0.0)
        );
    }
    md
}

/// `cargo xtask vm-test`: the tier, its stages' summary, and an error if
/// one failed.
pub fn vm_test(only: Option<String>, bench: bool) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let rows = kernel_tier(only, bench)?;
    let mut s = crate::summary::Summary::default();
    s.tiers.push(crate::summary::Tier {
        name: "kernel tier".into(),
        rows,
        took: Some(t0.elapsed()),
        notes: Vec::new(),
    });
    print!("{}", s.render("cargo xtask vm-test", t0.elapsed()));
    let failed: Vec<String> = s.tiers[0]
        .rows
        .iter()
        .filter(|r| !r.failed.is_empty())
        .map(|r| r.name.clone())
        .collect();
    if !failed.is_empty() {
        bail!("vm-test failed on {}", failed.join(", "));
    }
    Ok(())
}

/// A stage's row: nvvmtest's checks in its console (each `ok` passed, each
/// `FAIL` failed, each `skip` skipped), or why it could not run.
fn stage_row(name: String, t0: Instant, r: anyhow::Result<Ran>) -> Row {
    let took = Some(t0.elapsed());
    match r {
        Ok((passed, log, console)) => {
            let (ok, mut failed, skipped) = vm_checks(&log);
            if !passed && failed.is_empty() {
                failed.push("nvvmtest said FAIL without a failed check".into());
            }
            eprintln!(
                "xtask: vm-test {name}: {}",
                if failed.is_empty() { "PASS" } else { "FAIL" }
            );
            if !passed {
                eprintln!("{log}");
            }
            Row {
                name,
                passed: if ok == 0 && failed.is_empty() { 1 } else { ok },
                note: (!failed.is_empty()).then(|| format!("console: {}", console.display())),
                failed,
                skipped,
                took,
            }
        }
        Err(e) => {
            eprintln!("xtask: vm-test {name}: could not run: {e:#}");
            Row::failed(&name, took, format!("could not run: {e:#}"))
        }
    }
}

/// Every program the kernel tier's stages run beyond the base system, and
/// the Debian package that has it, installed where missing before the
/// first stage. `every_program_the_stages_run_is_installed_first` checks
/// the list against the programs the stages' sources name.
pub(crate) const HOST_TOOLS: &[(&str, &str)] = &[
    ("qemu-system-x86_64", "qemu-system-x86"),
    ("busybox", "busybox-static"),
    ("cpio", "cpio"),
    ("make", "make"),
    ("patch", "patch"),
    ("xz", "xz-utils"),
    // modinfo: which kernel modules nvidia.ko needs first (drm).
    ("modinfo", "kmod"),
    // Packages are unpacked, never installed.
    ("dpkg-deb", "dpkg"),
    // The modules' BTF (Debian's 6.12 headers; the HMM kernel's vmlinux).
    ("pahole", "dwarves"),
    ("strip", "binutils"),
    // The HMM kernel's build (vmkernel.rs).
    ("flex", "flex"),
    ("bison", "bison"),
    ("bc", "bc"),
];

/// Programs every Debian system has (essential and required packages).
#[cfg(test)]
const BASE_TOOLS: &[&str] = &[
    "sh",
    "tar",
    "find",
    "chmod",
    "ldd",
    "gzip",
    "apt-get",
    "apt-cache",
];

/// The kernel tier's stages, one row each; an error when it cannot start
/// at all (not root, qemu cannot be installed, no release build).
pub fn kernel_tier(only: Option<String>, bench: bool) -> anyhow::Result<Vec<Row>> {
    if !crate::is_root() {
        bail!(
            "vm-test installs qemu and build tools with apt and keeps a cache in /var/cache/nvprobe-vm: run it as root"
        );
    }
    // Every tool any stage runs, before the first: a stage never finds one
    // missing half-way (Debian's 6.12 headers need pahole for the modules'
    // BTF; the 6.1 stage before it does not).
    let missing: Vec<&str> = HOST_TOOLS
        .iter()
        .filter(|(bin, _)| {
            crate::output(Command::new("sh").args(["-c", &format!("command -v {bin}")])).is_none()
        })
        .map(|(_, pkg)| *pkg)
        .collect();
    if !missing.is_empty() {
        apt::host_install(&missing).context("installing the kernel tier's tools")?;
    }
    if bench && only.as_deref() == Some(HMM_LABEL) {
        bail!(
            "--bench measures the stand-ins, which {HMM_LABEL} does not boot: use --only 6.1 or 6.12"
        );
    }
    if let Some(o) = &only
        && !MATRIX.iter().any(|k| k.label == o)
        && o != HMM_LABEL
    {
        bail!(
            "--only {o}: no such kernel in the matrix ({}, {HMM_LABEL})",
            MATRIX
                .iter()
                .map(|k| k.label)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    // One vm-test at a time per machine: they share the cache.
    let lock_path = Path::new(apt::CACHE).join(".lock");
    fs::create_dir_all(apt::CACHE)?;
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| lock_path.display().to_string())?;
    if lock.try_lock().is_err() {
        eprintln!(
            "xtask: vm-test: another vm-test holds {}; waiting for it",
            lock_path.display()
        );
        lock.lock()
            .with_context(|| format!("locking {}", lock_path.display()))?;
    }
    // Release binaries: debug ones are too slow under TCG (a debug nvprobe
    // reading a 28 MB libcuda took over a minute to start).
    let bins = crate::build_release()?;
    let mut rows = Vec::new();
    for k in MATRIX
        .iter()
        .filter(|k| only.as_deref().is_none_or(|o| k.label == o))
    {
        let t0 = Instant::now();
        let r = one(k, &bins, bench);
        rows.push(stage_row(format!("kernel {}", k.label), t0, r));
        if k.real && !bench {
            let t0 = Instant::now();
            let r = one_real(k, &bins);
            rows.push(stage_row(format!("kernel {} real driver", k.label), t0, r));
        }
    }
    // The HMM kernel: real modules only (the stand-ins prove nothing more
    // there); not in --bench, which measures the stand-ins.
    if !bench && only.as_deref().is_none_or(|o| o == HMM_LABEL) {
        let t0 = Instant::now();
        let r = one_hmm(&bins);
        rows.push(stage_row(format!("kernel {HMM_LABEL} real driver"), t0, r));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::{BASE_TOOLS, HOST_TOOLS};

    /// The programs the kernel tier's sources run (`Command::new("…")`,
    /// `cmd("…")`, and those of its shell pipelines and `command -v`
    /// checks) are all installed before the first stage, or the base
    /// system's.
    #[test]
    fn every_program_the_stages_run_is_installed_first() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut named = std::collections::BTreeSet::new();
        for f in [
            "vm.rs",
            "vmheaders.rs",
            "vmkernel.rs",
            "vmreal.rs",
            "apt.rs",
        ] {
            let text = std::fs::read_to_string(dir.join(f)).expect("read a source");
            for pat in ["Command::new(\"", "cmd(\"", "command -v "] {
                for (i, _) in text.match_indices(pat) {
                    let rest = &text[i + pat.len()..];
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
                        .unwrap_or(rest.len());
                    if end > 0 {
                        named.insert(rest[..end].to_owned());
                    }
                }
            }
            // The initramfs pipeline.
            for bin in ["cpio", "gzip"] {
                if text.contains(&format!("| {bin} ")) {
                    named.insert(bin.to_owned());
                }
            }
        }
        assert!(
            named.contains("qemu-system-x86_64") && named.contains("pahole"),
            "{named:?}"
        );
        let known = |b: &str| HOST_TOOLS.iter().any(|(t, _)| *t == b) || BASE_TOOLS.contains(&b);
        let missing: Vec<&String> = named.iter().filter(|b| !known(b)).collect();
        assert!(
            missing.is_empty(),
            "run but not installed first: {missing:?}"
        );
    }
}
