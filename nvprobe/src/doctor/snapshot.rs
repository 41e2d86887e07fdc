//! `nvprobe doctor --snapshot OUT`: the files doctor reads, copied into a
//! tree that `nvprobe doctor --root` reads back on another machine. OUT is
//! a new folder, or a new `.tar` / `.tar.gz` file: doctor never writes over
//! anything that is there (a file, a folder, a link), never follows a
//! link, and makes files 0600 and folders 0700 whatever the umask (the
//! archive is written from memory: no temporary folder).
//!
//! What a snapshot contains (and nothing else):
//!
//! - copied as they are: /proc/driver/nvidia/{version,params,registry},
//!   /proc/driver/nvidia/gpus/*/{information,power,registry},
//!   /proc/devices, /proc/modules, /proc/sys/kernel/osrelease,
//!   /proc/config.gz, /proc/1/cgroup, /proc/self/cgroup,
//!   /sys/kernel/security/lockdown, /sys/fs/cgroup/cgroup.controllers,
//!   /sys/fs/cgroup/devices.list, /sys/fs/cgroup/devices/devices.list,
//!   /etc/ld.so.conf and /etc/ld.so.conf.d/*.conf, /.dockerenv,
//!   /run/.containerenv, /dev/.lxc-boot-id; for nvidia, nvidia_uvm,
//!   nvidia_modeset and nvidia_drm: /sys/module/M/{version,srcversion} and
//!   /sys/module/M/parameters/* (`.loaded` for a loaded module without
//!   parameters); for each NVIDIA PCI device:
//!   /sys/bus/pci/devices/BUS/{vendor,device,class,subsystem_vendor,
//!   subsystem_device};
//! - cut down: `proc/cmdline` keeps only the kernel parameters doctor reads
//!   or that concern the NVIDIA driver (see `KEPT_PARAMS`: lockdown=,
//!   nvidia*, nouveau*, rd.driver.*, modprobe.blacklist=,
//!   module_blacklist=, iommu*, intel_iommu=, amd_iommu*, vfio-pci.* /
//!   vfio_pci.*, pci=, pcie_aspm*); `init=`, `root=`, the console, and
//!   everything after `--` (init's own arguments) are left out.
//!   `etc/passwd` and `etc/group` keep only the users and groups that own
//!   the NVIDIA nodes and the user doctor checked (`--user`, else the one
//!   behind sudo), with that user's groups; a passwd line keeps name, uid
//!   and gid (`name:x:uid:gid:::`), a group line its name, gid and the
//!   kept users among its members. `proc/1/environ` keeps `container=` and
//!   whether KUBERNETES_SERVICE_HOST is set; `proc/kallsyms` keeps the
//!   driver-hook and uvm_hmm_* symbols and one symbol per NVIDIA module,
//!   addresses zeroed;
//! - written as listings: `dev.manifest` (the NVIDIA nodes: major:minor,
//!   mode, owner), `libs.manifest` (each libcuda / libnvidia-ml: path,
//!   version from its contents, size), `kmsg.txt` (the lines the NVIDIA
//!   modules wrote to the kernel log: `kmsg::nvidia_lines`), `processes.list` (whether nvidia-persistenced runs),
//!   `sys/kernel/btf.list`, `sys/bus/event_source/devices.list`, and each
//!   NVIDIA PCI device's bound driver as the file `.../BUS/driver`;
//! - `snapshot.json`: nvprobe's version, the time, the kernel release, the
//!   checks as they came out on the host, the list of files.

use std::{
    collections::BTreeSet,
    fs,
    io::Write as _,
    os::fd::{AsFd as _, OwnedFd},
    path::{Path, PathBuf},
};

use anyhow::Context as _;

use super::check::Check;
use super::{access, kmsg, libs};
use crate::{host::CharNode, safefs};

/// Files copied as they are, when readable.
const FILES: &[&str] = &[
    "proc/driver/nvidia/version",
    "proc/driver/nvidia/params",
    "proc/driver/nvidia/registry",
    "proc/devices",
    "proc/modules",
    "proc/sys/kernel/osrelease",
    "proc/config.gz",
    "proc/1/cgroup",
    "proc/self/cgroup",
    "sys/kernel/security/lockdown",
    "sys/fs/cgroup/cgroup.controllers",
    "sys/fs/cgroup/devices.list",
    "sys/fs/cgroup/devices/devices.list",
    "etc/ld.so.conf",
    ".dockerenv",
    "run/.containerenv",
    "dev/.lxc-boot-id",
];

/// The kernel parameters a snapshot keeps (a prefix each): `lockdown=`
/// (the lockdown check reads it) and those that concern the NVIDIA driver
/// and its devices (module options and blacklists, IOMMU and VFIO, PCI).
pub const KEPT_PARAMS: &[&str] = &[
    "lockdown=",
    "nvidia",
    "nouveau",
    "rd.driver.",
    "modprobe.blacklist=",
    "module_blacklist=",
    "iommu",
    "intel_iommu=",
    "amd_iommu",
    "vfio-pci.",
    "vfio_pci.",
    "pci=",
    "pcie_aspm",
];

/// The kernel command line cut down to `KEPT_PARAMS` (before `--`: what
/// follows is init's).
pub fn kept_cmdline(cmdline: &str) -> String {
    let kept: Vec<&str> = cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .filter(|w| KEPT_PARAMS.iter().any(|p| w.starts_with(p)))
        .collect();
    kept.join(" ") + "\n"
}

/// passwd and group cut down to the users UIDS (and the groups GIDS): name,
/// uid, gid; a group's members only among the kept users.
pub fn kept_accounts(
    passwd: &str,
    group: &str,
    uids: &BTreeSet<u32>,
    gids: &BTreeSet<u32>,
) -> (String, String) {
    let mut names = BTreeSet::new();
    let mut p = String::new();
    for f in passwd.lines().map(|l| l.split(':').collect::<Vec<_>>()) {
        if f.len() >= 4
            && let Ok(uid) = f[2].parse::<u32>()
            && uids.contains(&uid)
        {
            names.insert(f[0].to_owned());
            p += &format!("{}:x:{}:{}:::\n", f[0], f[2], f[3]);
        }
    }
    let mut g = String::new();
    for f in group.lines().map(|l| l.split(':').collect::<Vec<_>>()) {
        if f.len() >= 4
            && let Ok(gid) = f[2].parse::<u32>()
            && gids.contains(&gid)
        {
            let members: Vec<&str> = f[3].split(',').filter(|m| names.contains(*m)).collect();
            g += &format!("{}:x:{}:{}\n", f[0], f[2], members.join(","));
        }
    }
    (p, g)
}

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

/// Where the files go: a folder (its descriptor) or an archive.
enum Sink {
    Dir(OwnedFd),
    Tar(tar::Builder<fs::File>),
    Gz(tar::Builder<flate2::write::GzEncoder<fs::File>>),
}

struct Writer {
    sink: Sink,
    files: Vec<String>,
}

impl Writer {
    fn put(&mut self, rel: &str, data: &[u8]) -> anyhow::Result<()> {
        self.put_untracked(rel, data)?;
        self.files.push(rel.to_owned());
        Ok(())
    }

    /// A file that is not listed in `snapshot.json` (that file itself).
    fn put_untracked(&mut self, rel: &str, data: &[u8]) -> anyhow::Result<()> {
        let header = || {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Regular);
            h.set_size(data.len() as u64);
            h.set_mode(0o600);
            h.set_mtime(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
            );
            h
        };
        match &mut self.sink {
            Sink::Dir(fd) => safefs::create_file_at(fd.as_fd(), Path::new(rel))
                .and_then(|mut f| f.write_all(data))
                .with_context(|| format!("writing {rel}"))?,
            Sink::Tar(b) => b
                .append_data(&mut header(), rel, data)
                .with_context(|| format!("writing {rel}"))?,
            Sink::Gz(b) => b
                .append_data(&mut header(), rel, data)
                .with_context(|| format!("writing {rel}"))?,
        }
        Ok(())
    }

    /// A file of this host, when it is there and readable.
    fn copy(&mut self, rel: &str) -> anyhow::Result<()> {
        if let Ok(d) = safefs::read_capped(Path::new("/"), rel, safefs::CAP) {
            self.put(rel, &d)?;
        }
        Ok(())
    }
}

/// The names in a folder of this host, sorted, one a line.
fn listing(dir: &str) -> Option<String> {
    let mut names = names_in(dir)?;
    names.sort();
    Some(names.join("\n") + "\n")
}

/// The names in a folder of this host (REL from /).
fn names_in(rel: &str) -> Option<Vec<String>> {
    safefs::read_dir(Path::new("/"), rel).ok().map(|v| {
        v.into_iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect()
    })
}

/// Every file and listing of the snapshot, then `snapshot.json`.
fn gather(w: &mut Writer, checks: &[Check], user: Option<&access::User>) -> anyhow::Result<()> {
    let nodes = crate::host::nvidia_char_nodes(Path::new("/"));
    copy_files(w)?;
    put_cmdline(w)?;
    put_accounts(w, &nodes, user)?;
    copy_modules(w)?;
    put_kallsyms(w)?;
    put_environ(w)?;
    put_listings(w)?;
    copy_pci_devices(w)?;
    put_dev_manifest(w, &nodes)?;
    put_libs_manifest(w)?;
    put_kmsg_and_processes(w)?;
    put_summary(w, checks)
}

/// `proc/cmdline`, cut down to `KEPT_PARAMS`.
fn put_cmdline(w: &mut Writer) -> anyhow::Result<()> {
    if let Ok(d) = safefs::read_capped(Path::new("/"), "proc/cmdline", safefs::CAP) {
        w.put(
            "proc/cmdline",
            kept_cmdline(&String::from_utf8_lossy(&d)).as_bytes(),
        )?;
    }
    Ok(())
}

/// `etc/passwd` and `etc/group`, cut down to the nodes' owners and the
/// user the checks were for.
fn put_accounts(
    w: &mut Writer,
    nodes: &[CharNode],
    user: Option<&access::User>,
) -> anyhow::Result<()> {
    let read = |rel: &str| {
        safefs::read_capped(Path::new("/"), rel, safefs::CAP)
            .ok()
            .map(|d| String::from_utf8_lossy(&d).into_owned())
    };
    let (Some(passwd), group) = (read("etc/passwd"), read("etc/group").unwrap_or_default()) else {
        return Ok(());
    };
    let mut uids: BTreeSet<u32> = nodes.iter().map(|n| n.uid).collect();
    let mut gids: BTreeSet<u32> = nodes.iter().map(|n| n.gid).collect();
    if let Some(u) = user {
        uids.insert(u.uid);
        gids.insert(u.gid);
        gids.extend(u.groups.iter().copied());
    }
    let (p, g) = kept_accounts(&passwd, &group, &uids, &gids);
    w.put("etc/passwd", p.as_bytes())?;
    w.put("etc/group", g.as_bytes())
}

/// The plain files: `FILES`, ld.so.conf.d's `.conf` files, and each GPU's
/// files under /proc/driver/nvidia/gpus.
fn copy_files(w: &mut Writer) -> anyhow::Result<()> {
    for f in FILES {
        w.copy(f)?;
    }
    for d in ["etc/ld.so.conf.d"] {
        for name in names_in(d).unwrap_or_default() {
            if name.ends_with(".conf") {
                w.copy(&format!("{d}/{name}"))?;
            }
        }
    }
    if let Some(buses) = names_in("proc/driver/nvidia/gpus") {
        for bus in buses {
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
        if let Some(names) = names_in(&format!("sys/module/{m}/parameters")) {
            let mut any = false;
            for name in names {
                w.copy(&format!("sys/module/{m}/parameters/{name}"))?;
                any = true;
            }
            if !any {
                w.put(&format!("sys/module/{m}/.loaded"), b"")?;
            }
        } else if safefs::exists(Path::new("/"), format!("sys/module/{m}")) {
            w.put(&format!("sys/module/{m}/.loaded"), b"")?;
        }
    }
    Ok(())
}

/// The kallsyms lines `keep_symbol` keeps, addresses zeroed.
fn put_kallsyms(w: &mut Writer) -> anyhow::Result<()> {
    if let Some(text) = crate::host::kallsyms_text(Path::new("/")) {
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
    if let Ok(env) = safefs::read_capped(Path::new("/"), "proc/1/environ", safefs::CAP) {
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
        ("sys/kernel/btf", "sys/kernel/btf.list"),
        (
            "sys/bus/event_source/devices",
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
    let Some(buses) = names_in("sys/bus/pci/devices") else {
        return Ok(());
    };
    for bus in buses {
        let p = format!("sys/bus/pci/devices/{bus}");
        let vendor = safefs::read_capped(Path::new("/"), format!("{p}/vendor"), safefs::CAP)
            .unwrap_or_default();
        if String::from_utf8_lossy(&vendor).trim() != "0x10de" {
            continue;
        }
        for f in [
            "vendor",
            "device",
            "class",
            "subsystem_vendor",
            "subsystem_device",
        ] {
            w.copy(&format!("sys/bus/pci/devices/{bus}/{f}"))?;
        }
        let driver = safefs::read_link(Path::new("/"), format!("{p}/driver"))
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
fn put_dev_manifest(w: &mut Writer, nodes: &[CharNode]) -> anyhow::Result<()> {
    let mut manifest =
        String::from("# PATH c MAJOR:MINOR MODE UID GID (nvprobe doctor --snapshot)\n");
    for n in nodes {
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
        "kernel": safefs::read_text(Path::new("/"), "proc/sys/kernel/osrelease", safefs::CAP).unwrap_or_default().trim(),
        "checks_on_the_host": checks,
        "files": w.files,
    });
    let text = serde_json::to_string_pretty(&doc)? + "\n";
    w.put_untracked("snapshot.json", text.as_bytes())
}

/// Where a snapshot goes, created before anything is gathered: a path
/// that cannot be written (or is taken) fails first and leaves nothing.
pub struct Target {
    path: PathBuf,
    writer: Writer,
}

impl Target {
    /// A new folder OUT, or a new OUT.tar / OUT.tar.gz / OUT.tgz file:
    /// refused when anything is at OUT already (a link too: never followed).
    pub fn create(out: &Path) -> anyhow::Result<Target> {
        let name = out.to_string_lossy();
        let taken = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                let what = match fs::symlink_metadata(out) {
                    Ok(m) if m.is_symlink() => "a link",
                    Ok(m) if m.is_dir() => "a folder",
                    _ => "a file",
                };
                anyhow::anyhow!(
                    "{} exists ({what}): doctor never writes over anything; give a new folder or a new .tar / .tar.gz path",
                    out.display()
                )
            } else {
                anyhow::Error::new(e).context(format!("creating {}", out.display()))
            }
        };
        let sink = if name.ends_with(".tar") {
            Sink::Tar(tar::Builder::new(
                safefs::create_new_file(out).map_err(taken)?,
            ))
        } else if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
            let f = safefs::create_new_file(out).map_err(taken)?;
            Sink::Gz(tar::Builder::new(flate2::write::GzEncoder::new(
                f,
                flate2::Compression::default(),
            )))
        } else {
            Sink::Dir(safefs::create_new_dir(out).map_err(taken)?)
        };
        Ok(Target {
            path: out.to_path_buf(),
            writer: Writer {
                sink,
                files: Vec::new(),
            },
        })
    }

    /// Gather the snapshot into the target. USER: the `--user` the checks
    /// were made for (else the user behind sudo). Returns the number of
    /// files written; on failure what was created is removed.
    pub fn write(mut self, checks: &[Check], user: Option<&str>) -> anyhow::Result<usize> {
        let user = access::resolve(Path::new("/"), true, user).ok().flatten();
        let res = gather(&mut self.writer, checks, user.as_ref()).and_then(|()| {
            match self.writer.sink {
                Sink::Dir(_) => Ok(()),
                Sink::Tar(b) => b.into_inner().map(drop),
                Sink::Gz(b) => b.into_inner().and_then(|gz| gz.finish()).map(drop),
            }
            .with_context(|| format!("writing {}", self.path.display()))
        });
        match res {
            Ok(()) => Ok(self.writer.files.len()),
            Err(e) => {
                remove(&self.path);
                Err(e)
            }
        }
    }

    /// Remove what `create` made (the checks could not run).
    pub fn discard(self) {
        drop(self.writer);
        remove(&self.path);
    }
}

/// Remove a snapshot folder or archive that was not finished.
fn remove(path: &Path) {
    let _ = match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        _ => fs::remove_file(path),
    };
}

/// Write the snapshot to OUT (see [`Target`]). Returns the number of files
/// written.
pub fn write(out: &Path, checks: &[Check], user: Option<&str>) -> anyhow::Result<usize> {
    Target::create(out)?.write(checks, user)
}

/// `--root FILE.tar[.gz]`: unpack into a private temporary folder (the
/// caller removes it); see `super::unpack`.
pub fn unpack(archive: &Path) -> anyhow::Result<PathBuf> {
    super::unpack::unpack(archive)
}
