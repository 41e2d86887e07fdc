//! `cargo xtask vm-test`: the kernel tier. Boots Debian kernels that have
//! kprobes under qemu (TCG), with the stand-in modules of tests/kmod built
//! for each, and runs `nvvmtest` inside; reads back its result line.
//!
//! Kernels: the newest 6.1 and the newest 6.12 that bookworm's apt
//! sources carry (6.12 comes through bookworm-security as
//! `linux-image-6.12.N+deb12-amd64-unsigned`), resolved at run time
//! (Debian replaces ABI numbers as it updates them). Needs root (apt,
//! module headers).

use std::{
    fs,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};

use crate::{output, root_dir, sh};

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

fn apt(args: &[&str]) -> anyhow::Result<()> {
    sh(Command::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args(args)
        .stdout(Stdio::null()))
}

/// The newest kernel release matching the pattern ("6.1.0-47-amd64"),
/// refreshing apt's lists once when they have none (a machine whose lists
/// predate the kernel, or were never fetched).
fn resolve(k: &Kernel) -> anyhow::Result<String> {
    resolve_listed(k).or_else(|_| {
        apt(&["update", "-qq"])?;
        resolve_listed(k)
    })
}

fn resolve_listed(k: &Kernel) -> anyhow::Result<String> {
    let out = output(Command::new("apt-cache").args(["search", "--names-only", k.pattern]))
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
            "no kernel package matches {} in apt (run apt-get update?)",
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
    let out =
        output(Command::new("ldd").arg(bin)).with_context(|| format!("ldd {}", bin.display()))?;
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
const BOOT_LIMIT: Duration = Duration::from_secs(600);

/// Build the stand-ins, the initramfs, boot, and return (passed, log).
fn one(k: &Kernel, bins: &Path, bench: bool) -> anyhow::Result<(bool, String)> {
    let rel = resolve(k)?;
    eprintln!("xtask: vm-test {}: kernel {rel}", k.label);
    let work = root_dir().join("target/vm").join(&rel);
    fs::create_dir_all(&work)?;
    let vmlinuz = install_kernel(k, &rel, &work)?;
    let kmod = build_kmod(&rel, &work)?;
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
        Some(p) => Ok((p, log)),
        None => bail!(
            "the VM with {rel} gave no result line within {} s (console: {})",
            BOOT_LIMIT.as_secs(),
            work.join("console.log").display()
        ),
    }
}

/// Install the kernel's headers; download and unpack its image under
/// `work/img` (once). Returns the vmlinuz.
fn install_kernel(k: &Kernel, rel: &str, work: &Path) -> anyhow::Result<PathBuf> {
    let headers = format!("linux-headers-{rel}");
    apt(&["install", "-y", "-q", "--no-install-recommends", &headers])?;
    let vmlinuz = work.join(format!("img/boot/vmlinuz-{rel}"));
    if !vmlinuz.exists() {
        sh(Command::new("apt-get")
            .current_dir(work)
            .arg("download")
            .arg(format!("linux-image-{rel}{}", k.image_suffix))
            .stderr(Stdio::null()))?;
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
    Ok(vmlinuz)
}

/// The real NVIDIA open module on this kernel: build (or take from the
/// cache) and boot; returns (passed, log).
fn one_real(k: &Kernel, bins: &Path) -> anyhow::Result<(bool, String)> {
    let rel = resolve(k)?;
    let work = root_dir().join("target/vm").join(&rel);
    fs::create_dir_all(&work)?;
    let vmlinuz = install_kernel(k, &rel, &work)?;
    let real = crate::vmreal::prepare(&crate::vmreal::KTree::debian(&rel))?;
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
/// it: more memory), keep the console in `work`, and return (passed, log).
fn run_real_vm(
    vmlinuz: &Path,
    initrd: &Path,
    append: &str,
    work: &Path,
    what: &str,
) -> anyhow::Result<(bool, String)> {
    let mut q = boot(vmlinuz, initrd, append, 3072)?;
    let (passed, log) = read_console(&mut q, work)?;
    let _ = q.kill();
    let _ = q.wait();
    fs::write(work.join("console.log"), &log)?;
    match passed {
        Some(p) => Ok((p, log)),
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
/// (`nvvm.stage=hmm`). Returns (passed, log).
fn one_hmm(bins: &Path) -> anyhow::Result<(bool, String)> {
    let k = crate::vmkernel::prepare()?;
    eprintln!(
        "xtask: vm-test {HMM_LABEL}: kernel {}, nvidia {} (zero-GPU patch)",
        k.rel, k.real.version
    );
    let work = root_dir().join("target/vm").join(&k.rel);
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
fn build_kmod(rel: &str, work: &Path) -> anyhow::Result<PathBuf> {
    let kmod = work.join("kmod");
    let _ = fs::remove_dir_all(&kmod);
    fs::create_dir_all(&kmod)?;
    for f in ["nvidia.c", "nvidia-uvm.c", "Kbuild"] {
        fs::copy(root_dir().join("tests/kmod").join(f), kmod.join(f))?;
    }
    sh(Command::new("make")
        .arg("-C")
        .arg(format!("/lib/modules/{rel}/build"))
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
    let deps = output(Command::new("modinfo").args(["-F", "depends"]).arg(ko))
        .with_context(|| format!("modinfo -F depends {} (package kmod)", ko.display()))?;
    for d in deps.trim().split(',').filter(|d| !d.is_empty()) {
        let file = output(Command::new("find").arg(tree).args([
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
                if l.starts_with("NVVM") {
                    eprintln!("  {l}");
                }
                if let Some(r) = l.trim().strip_prefix("NVVM-RESULT: ") {
                    passed = Some(r == "PASS");
                }
                // A recording sent out as hex: saved beside the console log.
                if let Some(f) = l.trim().strip_prefix("NVVM-FILE: ")
                    && let Some((name, hex)) = f.split_once(' ')
                    && !name.contains('/')
                {
                    let bytes: Vec<u8> = (0..hex.len() / 2)
                        .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
                        .collect();
                    fs::write(work.join(name), bytes)?;
                    continue;
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

pub fn vm_test(only: Option<String>, bench: bool) -> anyhow::Result<()> {
    if !crate::is_root() {
        bail!("vm-test installs kernel headers and packages with apt: run it as root");
    }
    for (bin, pkg) in [
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("busybox", "busybox-static"),
        ("cpio", "cpio"),
        ("make", "make"),
        ("patch", "patch"),
        ("xz", "xz-utils"),
        // modinfo: which kernel modules nvidia.ko needs first (drm).
        ("modinfo", "kmod"),
    ] {
        if output(Command::new("sh").args(["-c", &format!("command -v {bin}")])).is_none() {
            apt(&["install", "-y", "-q", "--no-install-recommends", pkg])?;
        }
    }
    if bench && only.as_deref() == Some(HMM_LABEL) {
        bail!(
            "--bench measures the stand-ins, which {HMM_LABEL} does not boot: use --only 6.1 or 6.12"
        );
    }
    // One vm-test at a time per machine: they share the cache.
    fs::create_dir_all("/var/cache/nvprobe-vm")?;
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/var/cache/nvprobe-vm/.lock")
        .context("/var/cache/nvprobe-vm/.lock")?;
    if lock.try_lock().is_err() {
        eprintln!(
            "xtask: vm-test: another vm-test holds /var/cache/nvprobe-vm/.lock; waiting for it"
        );
        lock.lock().context("locking /var/cache/nvprobe-vm/.lock")?;
    }
    // Release binaries: debug ones are too slow under TCG (a debug nvprobe
    // reading a 28 MB libcuda took over a minute to start).
    let bins = crate::build_release()?;
    let mut failed = Vec::new();
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
    for k in MATRIX
        .iter()
        .filter(|k| only.as_deref().is_none_or(|o| k.label == o))
    {
        match one(k, &bins, bench) {
            Ok((true, _)) => eprintln!("xtask: vm-test {}: PASS", k.label),
            Ok((false, log)) => {
                eprintln!("xtask: vm-test {}: FAIL\n{log}", k.label);
                failed.push(k.label);
            }
            Err(e) => {
                eprintln!("xtask: vm-test {}: could not run: {e:#}", k.label);
                failed.push(k.label);
            }
        }
        if k.real && !bench {
            match one_real(k, &bins) {
                Ok((true, _)) => eprintln!("xtask: vm-test {} real driver: PASS", k.label),
                Ok((false, log)) => {
                    eprintln!("xtask: vm-test {} real driver: FAIL\n{log}", k.label);
                    failed.push(k.label);
                }
                Err(e) => {
                    eprintln!(
                        "xtask: vm-test {} real driver: could not run: {e:#}",
                        k.label
                    );
                    failed.push(k.label);
                }
            }
        }
    }
    // The HMM kernel: real modules only (the stand-ins prove nothing more
    // there); not in --bench, which measures the stand-ins.
    if !bench && only.as_deref().is_none_or(|o| o == HMM_LABEL) {
        match one_hmm(&bins) {
            Ok((true, _)) => eprintln!("xtask: vm-test {HMM_LABEL} real driver: PASS"),
            Ok((false, log)) => {
                eprintln!("xtask: vm-test {HMM_LABEL} real driver: FAIL\n{log}");
                failed.push(HMM_LABEL);
            }
            Err(e) => {
                eprintln!("xtask: vm-test {HMM_LABEL} real driver: could not run: {e:#}");
                failed.push(HMM_LABEL);
            }
        }
    }
    if !failed.is_empty() {
        bail!("vm-test failed on {}", failed.join(", "));
    }
    Ok(())
}
