//! `nvprobe doctor --snapshot OUT`: the files doctor reads, copied into a
//! tree that `nvprobe doctor --root` reads back on another machine. OUT is
//! a folder, or a `.tar` / `.tar.gz` file.
//!
//! What cannot travel as files is written as listings: `dev.manifest`
//! (nodes with major:minor, mode, owner), `libs.manifest` (each driver
//! library's path, version from its contents, size), `kmsg.txt` (the NVIDIA
//! lines of the kernel log), `sys/kernel/btf.list` and
//! `sys/bus/event_source/devices.list`. Nothing private is copied: pid 1's
//! environment is cut down to `container=` and whether
//! KUBERNETES_SERVICE_HOST is set, kallsyms to the driver-hook and HMM
//! symbols with their addresses zeroed.

use std::{
    fs,
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};

use super::{Check, kmsg, libs};

/// Files copied as they are, when readable.
const FILES: &[&str] = &[
    "proc/driver/nvidia/version",
    "proc/driver/nvidia/params",
    "proc/driver/nvidia/registry",
    "proc/devices",
    "proc/modules",
    "proc/cmdline",
    "proc/sys/kernel/osrelease",
    "proc/config.gz",
    "proc/1/cgroup",
    "proc/self/cgroup",
    "sys/kernel/security/lockdown",
    "sys/fs/cgroup/cgroup.controllers",
    "sys/fs/cgroup/devices.list",
    "sys/fs/cgroup/devices/devices.list",
    "etc/ld.so.conf",
    "etc/passwd",
    "etc/group",
    ".dockerenv",
    "run/.containerenv",
    "dev/.lxc-boot-id",
];

const MODULES: &[&str] = &["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm"];

/// kallsyms names worth keeping: the driver layer's hooks (with their
/// module), nvidia_uvm's HMM functions (whether HMM is compiled in), and
/// one symbol per NVIDIA module so that "module symbols are readable"
/// survives. Everything else of a 20,000-line listing is left out.
fn keep_symbol(line: &str, seen_module: &mut std::collections::HashSet<String>) -> bool {
    let mut f = line.split_whitespace();
    let (Some(_), Some(_), Some(name)) = (f.next(), f.next(), f.next()) else {
        return false;
    };
    let module = f.next().map(|m| m.trim_matches(|c| c == '[' || c == ']'));
    if crate::hooks::HOOKS.iter().any(|h| h.name == name) || name.starts_with("uvm_hmm_") {
        return true;
    }
    match module {
        Some(m) if m.starts_with("nvidia") => seen_module.insert(m.to_owned()),
        _ => false,
    }
}

struct Writer {
    dir: PathBuf,
    files: Vec<String>,
}

impl Writer {
    fn put(&mut self, rel: &str, data: &[u8]) -> anyhow::Result<()> {
        let p = self.dir.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::write(&p, data).with_context(|| format!("writing {}", p.display()))?;
        self.files.push(rel.to_owned());
        Ok(())
    }

    fn copy(&mut self, rel: &str) -> anyhow::Result<()> {
        if let Ok(d) = fs::read(Path::new("/").join(rel)) {
            self.put(rel, &d)?;
        }
        Ok(())
    }
}

fn listing(dir: &str) -> Option<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Some(names.join("\n") + "\n")
}

/// Every file and listing of the snapshot, then `snapshot.json`.
fn gather(w: &mut Writer, checks: &[Check]) -> anyhow::Result<()> {
    copy_files(w)?;
    copy_modules(w)?;
    put_kallsyms(w)?;
    put_environ(w)?;
    put_listings(w)?;
    copy_pci_devices(w)?;
    put_dev_manifest(w)?;
    put_libs_manifest(w)?;
    put_kmsg_and_processes(w)?;
    put_summary(w, checks)
}

/// The plain files: `FILES`, ld.so.conf.d's `.conf` files, and each GPU's
/// files under /proc/driver/nvidia/gpus.
fn copy_files(w: &mut Writer) -> anyhow::Result<()> {
    for f in FILES {
        w.copy(f)?;
    }
    for d in ["etc/ld.so.conf.d"] {
        if let Ok(rd) = fs::read_dir(Path::new("/").join(d)) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with(".conf") {
                    w.copy(&format!("{d}/{name}"))?;
                }
            }
        }
    }
    if let Ok(rd) = fs::read_dir("/proc/driver/nvidia/gpus") {
        for e in rd.flatten() {
            let bus = e.file_name().to_string_lossy().into_owned();
            for f in ["information", "power", "registry"] {
                w.copy(&format!("proc/driver/nvidia/gpus/{bus}/{f}"))?;
            }
        }
    }
    Ok(())
}

/// Each NVIDIA module's version, srcversion and parameters; `.loaded` for
/// a loaded module without parameters.
fn copy_modules(w: &mut Writer) -> anyhow::Result<()> {
    for m in MODULES {
        w.copy(&format!("sys/module/{m}/version"))?;
        w.copy(&format!("sys/module/{m}/srcversion"))?;
        if let Ok(rd) = fs::read_dir(format!("/sys/module/{m}/parameters")) {
            let mut any = false;
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                w.copy(&format!("sys/module/{m}/parameters/{name}"))?;
                any = true;
            }
            if !any {
                w.put(&format!("sys/module/{m}/.loaded"), b"")?;
            }
        } else if Path::new(&format!("/sys/module/{m}")).exists() {
            w.put(&format!("sys/module/{m}/.loaded"), b"")?;
        }
    }
    Ok(())
}

/// The kallsyms lines `keep_symbol` keeps, addresses zeroed.
fn put_kallsyms(w: &mut Writer) -> anyhow::Result<()> {
    if let Ok(text) = fs::read_to_string("/proc/kallsyms") {
        let mut seen = std::collections::HashSet::new();
        let kept: String = text
            .lines()
            .filter(|l| keep_symbol(l, &mut seen))
            .map(|l| {
                let rest = l.split_once(' ').map_or(l, |(_, r)| r);
                format!("0000000000000000 {rest}\n")
            })
            .collect();
        w.put("proc/kallsyms", kept.as_bytes())?;
    }
    Ok(())
}

/// Pid 1's environment cut down to `container=` and whether
/// KUBERNETES_SERVICE_HOST is set.
fn put_environ(w: &mut Writer) -> anyhow::Result<()> {
    if let Ok(env) = fs::read("/proc/1/environ") {
        let mut kept = Vec::new();
        for e in env.split(|&b| b == 0) {
            if e.starts_with(b"container=") {
                kept.extend_from_slice(e);
                kept.push(0);
            } else if e.starts_with(b"KUBERNETES_SERVICE_HOST=") {
                kept.extend_from_slice(b"KUBERNETES_SERVICE_HOST=set\0");
            }
        }
        w.put("proc/1/environ", &kept)?;
    }
    Ok(())
}

/// The BTF and event-source folders as listings of their names.
fn put_listings(w: &mut Writer) -> anyhow::Result<()> {
    for (dir, rel) in [
        ("/sys/kernel/btf", "sys/kernel/btf.list"),
        (
            "/sys/bus/event_source/devices",
            "sys/bus/event_source/devices.list",
        ),
    ] {
        if let Some(l) = listing(dir) {
            w.put(rel, l.as_bytes())?;
        }
    }
    Ok(())
}

/// Each NVIDIA PCI device's ids, and its driver's name as a file.
fn copy_pci_devices(w: &mut Writer) -> anyhow::Result<()> {
    let Ok(rd) = fs::read_dir("/sys/bus/pci/devices") else {
        return Ok(());
    };
    for e in rd.flatten() {
        let p = e.path();
        let vendor = fs::read_to_string(p.join("vendor")).unwrap_or_default();
        if vendor.trim() != "0x10de" {
            continue;
        }
        let bus = e.file_name().to_string_lossy().into_owned();
        for f in [
            "vendor",
            "device",
            "class",
            "subsystem_vendor",
            "subsystem_device",
        ] {
            w.copy(&format!("sys/bus/pci/devices/{bus}/{f}"))?;
        }
        let driver = fs::read_link(p.join("driver"))
            .ok()
            .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        w.put(
            &format!("sys/bus/pci/devices/{bus}/driver"),
            format!("{driver}\n").as_bytes(),
        )?;
    }
    Ok(())
}

/// `dev.manifest`: the NVIDIA nodes with numbers, mode and owner.
fn put_dev_manifest(w: &mut Writer) -> anyhow::Result<()> {
    let mut manifest =
        String::from("# PATH c MAJOR:MINOR MODE UID GID (nvprobe doctor --snapshot)\n");
    for n in crate::host::nvidia_char_nodes(Path::new("/")) {
        manifest += &format!(
            "{} c {}:{} {:04o} {} {}\n",
            n.path, n.major, n.minor, n.mode, n.uid, n.gid
        );
    }
    w.put("dev.manifest", manifest.as_bytes())
}

/// `libs.manifest`: each driver library with its version and size.
fn put_libs_manifest(w: &mut Writer) -> anyhow::Result<()> {
    let mut lm = String::from("# PATH VERSION SIZE (version read from the file's contents)\n");
    let expected = crate::host::driver_info(Path::new("/")).map(|d| d.version.to_string());
    for l in libs::find_for(Path::new("/"), true, expected.as_deref()) {
        lm += &format!(
            "{} {} {}\n",
            l.path,
            l.version.as_deref().unwrap_or("-"),
            l.size
        );
    }
    w.put("libs.manifest", lm.as_bytes())
}

/// `kmsg.txt` (the NVIDIA kernel-log lines) and `processes.list` (whether
/// nvidia-persistenced runs).
fn put_kmsg_and_processes(w: &mut Writer) -> anyhow::Result<()> {
    let log = kmsg::nvidia_lines(Path::new("/"), true, 400);
    w.put("kmsg.txt", (log.join("\n") + "\n").as_bytes())?;
    let persistenced = procfs::process::all_processes().ok().is_some_and(|ps| {
        ps.flatten()
            .any(|p| p.stat().is_ok_and(|s| s.comm == "nvidia-persistenced"))
    });
    w.put(
        "processes.list",
        if persistenced {
            b"nvidia-persistenced\n" as &[u8]
        } else {
            b""
        },
    )
}

/// `snapshot.json`: who made it, when, the host's own checks, the files.
fn put_summary(w: &mut Writer, checks: &[Check]) -> anyhow::Result<()> {
    let doc = serde_json::json!({
        "nvprobe": env!("CARGO_PKG_VERSION"),
        "created": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        "kernel": fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
        "checks_on_the_host": checks,
        "files": w.files,
    });
    let mut f = fs::File::create(w.dir.join("snapshot.json"))?;
    writeln!(f, "{}", serde_json::to_string_pretty(&doc)?)?;
    Ok(())
}

/// Write the snapshot to OUT (a folder, or a .tar/.tar.gz file). Returns
/// the number of files written.
pub fn write(out: &Path, checks: &[Check]) -> anyhow::Result<usize> {
    let name = out.to_string_lossy();
    let archive = name.ends_with(".tar") || name.ends_with(".tar.gz") || name.ends_with(".tgz");
    if !archive {
        if out.exists()
            && fs::read_dir(out)
                .map(|mut d| d.next().is_some())
                .unwrap_or(true)
        {
            bail!("the folder exists and is not empty; give a new folder or a .tar file");
        }
        fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let mut w = Writer {
            dir: out.to_path_buf(),
            files: Vec::new(),
        };
        gather(&mut w, checks)?;
        return Ok(w.files.len());
    }
    // The archive is created first: a path that cannot be written fails
    // before anything is gathered, and leaves nothing behind.
    let f = fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let dir = std::env::temp_dir().join(format!("nvprobe-snapshot-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let res = (|| -> anyhow::Result<usize> {
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut w = Writer {
            dir: dir.clone(),
            files: Vec::new(),
        };
        gather(&mut w, checks)?;
        if name.ends_with(".tar") {
            let mut b = tar::Builder::new(f);
            b.append_dir_all(".", &dir).and_then(|()| b.finish())
        } else {
            let gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
            let mut b = tar::Builder::new(gz);
            b.append_dir_all(".", &dir)
                .and_then(|()| b.into_inner())
                .and_then(|gz| gz.finish().map(|_| ()))
        }
        .with_context(|| format!("writing {}", out.display()))?;
        Ok(w.files.len())
    })();
    let _ = fs::remove_dir_all(&dir);
    if res.is_err() {
        let _ = fs::remove_file(out);
    }
    res
}

/// `--root FILE.tar[.gz]`: unpack into a temporary folder (the caller
/// removes it).
pub fn unpack(archive: &Path) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("nvprobe-root-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    let f = fs::File::open(archive).with_context(|| format!("--root {}", archive.display()))?;
    let name = archive.to_string_lossy();
    let res = if name.ends_with(".tar") {
        tar::Archive::new(f).unpack(&dir)
    } else {
        tar::Archive::new(flate2::read::GzDecoder::new(f)).unpack(&dir)
    };
    res.with_context(|| {
        format!(
            "--root {}: not a readable snapshot archive",
            archive.display()
        )
    })?;
    Ok(dir)
}
