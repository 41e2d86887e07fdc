//! Who a traced process is, read from /proc while it lives: executable,
//! command line, the environment variables that steer GPU selection, its
//! cgroup (and the container that implies), and the libcuda files it has
//! mapped, each with its version and whether it is the toolkit's stub.
//! Every read is bounded; a process that is gone gives a partial identity
//! that says so.

use std::{
    collections::HashMap,
    fs,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

use nvprobe_model::attribution::{
    Container, KubeNames, LibcudaMapped, ProcessInfo, STEERING_ENV, parse_cgroup,
};
use nvprobe_model::decode::escape_bytes;

use crate::kernel_checks::read_capped;

/// Caps on what is read of a process.
const CMDLINE_CAP: u64 = 16 << 10;
/// The environment is read as a stream, keeping the steering variables
/// alone: 4 MiB covers what execve takes under the default 8 MiB stack
/// limit (a quarter of it), a Kubernetes pod's thousands of service
/// variables included; past it, `env_cut` says the read stopped.
const ENVIRON_CAP: u64 = 4 << 20;
const SMALL_CAP: u64 = 64 << 10;
/// Containers whose Kubernetes names are cached.
const NAMES_KEPT: usize = 1024;

/// What a libcuda file is, cached by (device, inode): the version read
/// can cost a pass over a ~100 MB file, once per distinct file.
#[derive(Default)]
pub struct LibCache {
    seen: HashMap<(u64, u64), (Option<String>, bool)>,
    /// Kubernetes names per container id, from the runtime's record (at
    /// most [`NAMES_KEPT`]; a container's processes share them).
    names: HashMap<String, KubeNames>,
    /// The kernel module's version: a library that carries it needs no
    /// full scan.
    pub module: Option<String>,
    /// Preloaded files checked for cuInit, by (device, inode).
    preloads: HashMap<(u64, u64), bool>,
    /// Preloads that export cuInit, held open since the identity read
    /// (the process may be gone before they are hooked): (tgid, path as
    /// the process names it, the file).
    pub preload_files: Vec<(u32, String, fs::File)>,
}

impl LibCache {
    /// A cache that knows the kernel module's version.
    pub fn new(module: Option<String>) -> Self {
        Self {
            seen: HashMap::new(),
            names: HashMap::new(),
            module,
            preloads: HashMap::new(),
            preload_files: Vec::new(),
        }
    }

    /// The pod name, namespace and container name the container runtime
    /// keeps for `c` (containerd's and CRI-O's OCI bundle, docker's
    /// config), read once per container from the host's files: no socket,
    /// nothing that can block, links out of the root refused, 1 MiB at
    /// most.
    fn kube_names(&mut self, root: &Path, c: &Container) -> Option<KubeNames> {
        let id = c.id.as_deref()?;
        if let Some(n) = self.names.get(id) {
            return Some(n.clone());
        }
        let rel = nvprobe_model::attribution::runtime_record(&c.runtime, id)?;
        let bytes = crate::safefs::read_capped(root, &rel, 1 << 20).ok()?;
        let doc: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        let names = nvprobe_model::attribution::kube_names(&doc);
        if self.names.len() >= NAMES_KEPT {
            self.names.clear();
        }
        self.names.insert(id.to_owned(), names.clone());
        Some(names)
    }

    /// The libraries `pid` preloads that export cuInit (each file parsed
    /// once), kept open for the hooks.
    fn cuda_preloads(&mut self, pid: u32) -> Vec<String> {
        let root = format!("/proc/{pid}/root");
        let mut out = Vec::new();
        for p in crate::uprobes::preloads_of(pid).into_iter().take(16) {
            let Ok(f) = fs::File::open(&p) else { continue };
            let Ok(m) = f.metadata() else { continue };
            let key = (m.dev(), m.ino());
            let exports = match self.preloads.get(&key) {
                Some(&e) => e,
                None => {
                    let e = f.try_clone().ok().is_some_and(|c| {
                        crate::uprobes::exports(&p, c)
                            .is_ok_and(|v| v.iter().any(|(n, _)| n == "cuInit"))
                    });
                    if self.preloads.len() < 4096 {
                        self.preloads.insert(key, e);
                    }
                    e
                }
            };
            if !exports {
                continue;
            }
            let shown = p
                .to_string_lossy()
                .strip_prefix(&root)
                .map(str::to_owned)
                .unwrap_or_else(|| p.to_string_lossy().into_owned());
            if self.preload_files.len() < 64 {
                self.preload_files.push((pid, shown.clone(), f));
            }
            out.push(nvprobe_model::decode::escape_capped(
                shown.as_bytes(),
                nvprobe_model::decode::PATH_FIELD,
            ));
        }
        out
    }

    fn describe(&mut self, shown: &str, real: &Path) -> LibcudaMapped {
        let key = fs::metadata(real).map(|m| (m.dev(), m.ino())).ok();
        let cached = key.and_then(|k| self.seen.get(&k).cloned());
        let (version, stub) = cached.unwrap_or_else(|| {
            use crate::doctor::libs;
            // Opened once: the size and the contents are of one file, read
            // whole even if the process ends meanwhile (its /proc paths
            // then go).
            let file = fs::File::open(real).ok();
            let size = file
                .as_ref()
                .and_then(|f| f.metadata().ok())
                .map(|m| m.len());
            let name = Path::new(shown)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let carried = match (&self.module, &file) {
                (Some(v), Some(f)) => f
                    .try_clone()
                    .ok()
                    .and_then(|mut c| libs::carries_in(&mut c, v))
                    .filter(|&yes| yes)
                    .map(|_| v.clone()),
                _ => None,
            };
            let version = carried
                .or_else(|| libs::named_version(real, &name))
                .or_else(|| {
                    file.as_ref()?
                        .try_clone()
                        .ok()
                        .and_then(libs::version_of_file)
                });
            // The toolkit's stub: in a stubs folder, or small and carrying
            // no driver version (the real libcuda is tens of MB).
            // An unreadable file (the process is gone) is not called a stub.
            let stub = shown.contains("/stubs/")
                || (file.is_some()
                    && version.is_none()
                    && size.is_some_and(|n| n > 0 && n < (4 << 20)));
            if let Some(k) = key {
                if self.seen.len() >= 4096 {
                    self.seen.clear();
                }
                self.seen.insert(k, (version.clone(), stub));
            }
            (version, stub)
        });
        LibcudaMapped {
            path: nvprobe_model::decode::escape_capped(
                shown.as_bytes(),
                nvprobe_model::decode::PATH_FIELD,
            ),
            version,
            stub,
        }
    }
}

/// The files named PREFIX* that `pid` has mapped: (the path as the
/// process sees it, the same file through /proc/PID/root).
fn mapped(pid: u32, prefix: &str) -> Vec<(String, PathBuf)> {
    let Some(maps) = read_capped(Path::new(&format!("/proc/{pid}/maps")), 4 << 20) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    for line in String::from_utf8_lossy(&maps).lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        let name = Path::new(path).file_name().and_then(|n| n.to_str());
        if name.is_some_and(|n| n.starts_with(prefix)) && !out.iter().any(|(p, _)| p == path) {
            out.push((
                path.to_owned(),
                PathBuf::from(format!("/proc/{pid}/root{path}")),
            ));
        }
    }
    out
}

/// A libcuda the dynamic loader of `pid` opened at `shown` (as the process
/// named it), read through the process's root while it lives: its
/// version, and why the loader cannot load it when it cannot.
///
/// `same_view`: the process was seen to share nvprobe's root and mount
/// namespace (it exec'd since, which changes neither): when it is gone
/// before the file is read, as a process the loader kills or that gives up
/// within a millisecond is, the path is read from nvprobe's own root.
pub fn opened_libcuda(
    pid: u32,
    shown: &Path,
    libs: &mut LibCache,
    same_view: bool,
) -> Option<nvprobe_model::attribution::LibcudaOpened> {
    // Resolved inside the process's own root (its absolute links too), never
    // blocking (a FIFO by the name), and only a regular file is read.
    let rel = shown.strip_prefix("/").unwrap_or(shown);
    let root = match fs::File::open(format!("/proc/{pid}/root")) {
        Ok(r) => r,
        Err(_) if same_view && shown.is_absolute() => fs::File::open("/").ok()?,
        Err(_) => return None,
    };
    let file = open_in_root(&root, rel)?;
    // The file itself, by its descriptor, for the version read below.
    let real = PathBuf::from(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&file)
    ));
    let unloadable = crate::libcheck::unloadable(&file);
    let shown = shown.to_string_lossy();
    let (version, stub) = if unloadable.is_some() {
        // Not a library at all: neither a version nor the toolkit's stub.
        (None, false)
    } else {
        let d = libs.describe(&shown, &real);
        (d.version, d.stub)
    };
    Some(nvprobe_model::attribution::LibcudaOpened {
        path: nvprobe_model::decode::escape_capped(
            shown.as_bytes(),
            nvprobe_model::decode::PATH_FIELD,
        ),
        version,
        stub,
        unloadable,
    })
}

/// Open `rel` beneath `root` as the kernel resolves it for a process whose
/// root that is (`RESOLVE_IN_ROOT`: absolute links stay inside), without
/// blocking, and only when it is a regular file.
fn open_in_root(root: &fs::File, rel: &Path) -> Option<fs::File> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK | OFlag::O_NOCTTY)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd = openat2(root, rel, how).ok()?;
    let file = fs::File::from(fd);
    file.metadata().ok()?.file_type().is_file().then_some(file)
}

/// Whether `pid` sees the files as nvprobe does: the same root and the
/// same mount namespace. None when it cannot be read (gone).
pub fn same_view(pid: u32) -> Option<bool> {
    let id = |p: &str| fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let theirs = (
        id(&format!("/proc/{pid}/root"))?,
        id(&format!("/proc/{pid}/ns/mnt"))?,
    );
    let own_ns = OWN_VIEW
        .get()
        .copied()
        .flatten()
        .or_else(|| id("/proc/self/ns/mnt"))?;
    Some(theirs == (id("/")?, own_ns))
}

/// The mount namespace nvprobe started in, kept before it makes one of its
/// own for tracefs (a slave of that one: the same files, so a process in
/// it still shares nvprobe's view).
static OWN_VIEW: std::sync::OnceLock<Option<(u64, u64)>> = std::sync::OnceLock::new();

/// Keep the mount namespace nvprobe runs in now (see [`same_view`]).
pub fn remember_own_view() {
    let _ = OWN_VIEW.set(
        fs::metadata("/proc/self/ns/mnt")
            .ok()
            .map(|m| (m.dev(), m.ino())),
    );
}

/// Processes (at most this many) and descriptors per process the GPU
/// holder scan looks at: it runs once per failed first context.
const HOLDER_PROCS: usize = 8192;
const HOLDER_FDS: usize = 4096;
const HOLDERS_KEPT: usize = 64;

/// The processes other than `skip` that have a GPU node (char 195:N,
/// N up to 247) open, found through /proc/PID/fd: the
/// descriptor's own device number decides (a container names its node as
/// it likes), and no link is followed out of /proc.
pub fn gpu_holders(skip: u32) -> Vec<nvprobe_model::attribution::GpuHolder> {
    use std::os::unix::fs::FileTypeExt as _;
    let mut out = Vec::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return out;
    };
    for e in procs.flatten().take(HOLDER_PROCS) {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == skip || pid == std::process::id() {
            continue;
        }
        let fd_dir = e.path().join("fd");
        let Ok(fds) = fs::read_dir(&fd_dir) else {
            continue;
        };
        let mut minors: Vec<u32> = Vec::new();
        for fd in fds.flatten().take(HOLDER_FDS) {
            // The link's text first (cheap), then the open file's device.
            let Ok(target) = fs::read_link(fd.path()) else {
                continue;
            };
            if !target.to_string_lossy().contains("nvidia") {
                continue;
            }
            let Ok(m) = fs::metadata(fd.path()) else {
                continue;
            };
            let rdev = m.rdev();
            let (major, minor) = (libc::major(rdev), libc::minor(rdev));
            if m.file_type().is_char_device()
                && major == nvprobe_common::NVIDIA_MAJOR
                && minor <= nvprobe_common::NV_GPU_MINOR_MAX
                && !minors.contains(&minor)
            {
                minors.push(minor);
            }
        }
        if minors.is_empty() {
            continue;
        }
        minors.sort_unstable();
        let comm = fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        out.push(nvprobe_model::attribution::GpuHolder {
            pid,
            comm: nvprobe_model::decode::escape_bytes(comm.trim_end_matches('\n').as_bytes()),
            minors,
        });
        if out.len() >= HOLDERS_KEPT {
            break;
        }
    }
    out.sort_by_key(|h| h.pid);
    out
}

/// The ptrace tracer of the process at `base` (`TracerPid`, 0: none),
/// named by its task name.
pub(crate) fn tracer_of(base: &Path) -> Option<nvprobe_model::attribution::Tracer> {
    let status = read_capped(&base.join("status"), SMALL_CAP)?;
    let pid: u32 = String::from_utf8_lossy(&status)
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))?
        .trim()
        .parse()
        .ok()
        .filter(|&p| p != 0)?;
    let comm = base
        .parent()
        .and_then(|proc_dir| read_capped(&proc_dir.join(format!("{pid}/comm")), SMALL_CAP))
        .map(|c| {
            let c = c.strip_suffix(b"\n").unwrap_or(&c);
            nvprobe_model::decode::escape_capped(c, nvprobe_model::decode::VALUE_FIELD)
        })
        .unwrap_or_default();
    Some(nvprobe_model::attribution::Tracer { pid, comm })
}

/// The steering variables of an environment (NUL-separated `K=V`) read
/// from `r` up to `cap` bytes, one entry at a time; true when the read
/// stopped at the cap with more to come.
fn steering_env(
    r: impl std::io::Read,
    cap: u64,
    env: &mut std::collections::BTreeMap<String, String>,
) -> bool {
    use std::io::BufRead as _;
    let mut r = std::io::BufReader::new(r.take(cap));
    let mut kv = Vec::new();
    let mut read = 0u64;
    loop {
        kv.clear();
        match r.read_until(0, &mut kv) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n as u64,
        }
        // An entry the cap cut short is not kept (its value would be
        // wrong).
        let Some(entry) = kv.strip_suffix(&[0]) else {
            continue;
        };
        let Some(eq) = entry.iter().position(|&b| b == b'=') else {
            continue;
        };
        let (k, v) = (&entry[..eq], &entry[eq + 1..]);
        if let Some(k) = STEERING_ENV.iter().find(|s| s.as_bytes() == k) {
            env.insert(
                (*k).to_owned(),
                nvprobe_model::decode::escape_capped(v, nvprobe_model::decode::VALUE_FIELD),
            );
        }
    }
    // At the cap, what follows is unread (a last entry cut short is one
    // of them: it was not kept if it did not end).
    read >= cap
        && r.into_inner()
            .into_inner()
            .read(&mut [0u8])
            .is_ok_and(|n| n > 0)
}

/// The identity of `pid`; `cmdline` false leaves the command line out.
pub fn read(pid: u32, cmdline: bool, libs: &mut LibCache) -> ProcessInfo {
    let base = PathBuf::from(format!("/proc/{pid}"));
    let mut info = ProcessInfo {
        pid,
        ..ProcessInfo::default()
    };
    let Ok(exe) = fs::read_link(base.join("exe")) else {
        info.note =
            Some("the process had exited (or is a kernel thread) before nvprobe read /proc".into());
        return info;
    };
    // What the process controls (its path, arguments, environment) is
    // escaped as comm and paths are: nothing it wrote reaches a terminal or
    // a log line raw.
    use std::os::unix::ffi::OsStrExt as _;
    // Each field is capped too (decode::PATH_FIELD, VALUE_FIELD,
    // CMDLINE_FIELD), with a marker where it was cut.
    use nvprobe_model::decode::{CMDLINE_FIELD, PATH_FIELD, VALUE_FIELD, escape_capped};
    info.exe = Some(escape_capped(exe.as_os_str().as_bytes(), PATH_FIELD));
    if cmdline && let Some(c) = read_capped(&base.join("cmdline"), CMDLINE_CAP) {
        let mut args = Vec::new();
        let mut left = CMDLINE_FIELD;
        let all: Vec<&[u8]> = c.split(|&b| b == 0).filter(|a| !a.is_empty()).collect();
        for (i, a) in all.iter().enumerate() {
            if left == 0 {
                args.push(format!("…[cut: {} more arguments]", all.len() - i));
                break;
            }
            let e = escape_capped(a, VALUE_FIELD.min(left));
            left = left.saturating_sub(e.len());
            args.push(e);
        }
        info.cmdline = Some(args);
    }
    if let Ok(f) = fs::File::open(base.join("environ")) {
        info.env_cut = steering_env(f, ENVIRON_CAP, &mut info.env);
    }
    // The loader's file, read as the process sees it in its own root.
    if let Ok(b) = crate::safefs::read_seen_in(
        &base.join("root"),
        "etc/ld.so.preload",
        crate::libcheck::PRELOAD_CAP,
    ) {
        info.system_preloads = crate::libcheck::preload_names(&b)
            .into_iter()
            .take(8)
            .map(|n| escape_capped(n.as_bytes(), PATH_FIELD))
            .collect();
    }
    if info.env.contains_key("LD_PRELOAD") || info.env_cut || !info.system_preloads.is_empty() {
        info.cuda_preloads = libs.cuda_preloads(pid);
    }
    if let Some(stat) = read_capped(&base.join("stat"), SMALL_CAP) {
        // pid (comm) state ppid …: comm may hold spaces and parentheses.
        let s = String::from_utf8_lossy(&stat);
        info.ppid = s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok());
    }
    info.tracer = tracer_of(&base);
    // The cgroup path as the kernel wrote it, to read its files by.
    let mut cg_raw: Option<String> = None;
    if let Some(cg) = read_capped(&base.join("cgroup"), SMALL_CAP) {
        let text = String::from_utf8_lossy(&cg);
        // cgroup v2 ("0::/path"), else the v1 pids or devices hierarchy.
        let path = text
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .or_else(|| {
                text.lines().find_map(|l| {
                    let mut f = l.splitn(3, ':');
                    let (_, ctl, p) = (f.next()?, f.next()?, f.next()?);
                    ctl.split(',')
                        .any(|c| c == "pids" || c == "devices")
                        .then_some(p)
                })
            });
        if let Some(p) = path {
            info.container = parse_cgroup(p).map(|mut c| {
                // The host's files as pid 1 sees them: in a DaemonSet pod
                // (host pid namespace) that is the node's root.
                if let Some(n) = libs.kube_names(Path::new("/proc/1/root"), &c) {
                    c.pod_name = n.pod_name;
                    c.pod_namespace = n.pod_namespace;
                    c.container_name = n.container_name;
                }
                c
            });
            info.cgroup = Some(escape_capped(p.as_bytes(), VALUE_FIELD));
            cg_raw = Some(p.to_owned());
        }
    }
    // cgroup v1's devices controller has a hierarchy of its own (on a hybrid
    // host the path above is the v2 one).
    let devices_v1 = read_capped(&base.join("cgroup"), SMALL_CAP).and_then(|cg| {
        String::from_utf8_lossy(&cg).lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctl, p) = (f.next()?, f.next()?, f.next()?);
            ctl.split(',').any(|c| c == "devices").then(|| p.to_owned())
        })
    });
    info.limits = Some(crate::kernel_checks::limits_of(&base, cg_raw.as_deref()));
    info.access = Some(crate::kernel_checks::access_of(
        &base,
        cg_raw.as_deref(),
        devices_v1.as_deref(),
    ));
    info.libcuda = mapped(pid, "libcuda.so")
        .into_iter()
        .map(|(shown, real)| libs.describe(&shown, &real))
        .collect();
    info.libnvml = mapped(pid, "libnvidia-ml.so")
        .into_iter()
        .next()
        .map(|m| escape_bytes(m.0.as_bytes()));
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test process's own identity: its executable, its cgroup as the
    /// kernel gives it, the container that path implies (none on a host).
    #[test]
    fn own_identity_reads_from_proc() {
        let me = std::process::id();
        let info = read(me, true, &mut LibCache::default());
        let exe = std::env::current_exe().expect("exe");
        assert_eq!(info.exe.as_deref(), exe.to_str());
        assert!(info.cmdline.as_ref().is_some_and(|c| !c.is_empty()));
        assert_eq!(info.ppid, Some(nix::unistd::getppid().as_raw() as u32));
        let cg = fs::read_to_string("/proc/self/cgroup").expect("cgroup");
        if let Some(p) = cg.lines().find_map(|l| l.strip_prefix("0::")) {
            assert_eq!(info.cgroup.as_deref(), Some(p));
            assert_eq!(info.container, parse_cgroup(p));
        }
        assert!(info.libcuda.is_empty());
        let gone = read(u32::MAX - 1, true, &mut LibCache::default());
        assert!(gone.note.is_some() && gone.exe.is_none());
    }

    /// An environment longer than the cap: the steering variables before
    /// it are kept, one cut short at the cap is not (its value would be
    /// wrong), and the read says it stopped; a whole one does not.
    #[test]
    fn a_long_environment_says_where_it_stopped_and_keeps_no_cut_value() {
        let mut env = Vec::new();
        for i in 0..3000 {
            env.extend_from_slice(format!("SVC_{i}_SERVICE_HOST=10.0.0.1\0").as_bytes());
        }
        env.extend_from_slice(b"CUDA_VISIBLE_DEVICES=0,1\0");
        let whole = env.len() as u64;
        let mut got = std::collections::BTreeMap::new();
        assert!(!steering_env(&env[..], whole, &mut got));
        assert_eq!(
            got.get("CUDA_VISIBLE_DEVICES").map(String::as_str),
            Some("0,1")
        );
        // The cap falls inside the last entry ("…=0,"): not kept, and cut.
        let mut got = std::collections::BTreeMap::new();
        assert!(steering_env(&env[..], whole - 2, &mut got));
        assert!(got.is_empty(), "{got:?}");
        // Exactly at the end: whole.
        let mut got = std::collections::BTreeMap::new();
        assert!(!steering_env(&env[..], whole + 10, &mut got));
        assert_eq!(got.len(), 1);
    }

    /// Issue 23, item 7: a 120 KB LD_LIBRARY_PATH and a 100 KB argument
    /// are cut to their documented sizes, with a marker saying how long
    /// they were (one such process made a 281,405-byte OTLP line).
    #[test]
    fn what_a_process_controls_is_capped_with_a_marker() {
        use nvprobe_model::decode::{CMDLINE_FIELD, VALUE_FIELD};
        let long = "/opt/lib:".repeat(120_000 / 9);
        let arg = "x".repeat(100_000);
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30; :"])
            .arg(&arg)
            .env("LD_LIBRARY_PATH", &long)
            .spawn()
            .expect("spawn sleep");
        // Read once /proc shows the new program: its long argument (the
        // environment alone does not say so: cargo's own LD_LIBRARY_PATH
        // is there before the exec).
        let mut info = ProcessInfo::default();
        for _ in 0..500 {
            info = read(child.id(), true, &mut LibCache::default());
            let exec_done = info
                .cmdline
                .as_ref()
                .is_some_and(|c| c.iter().any(|a| a.starts_with("xxxx")));
            if exec_done && info.env.contains_key("LD_LIBRARY_PATH") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let _ = child.kill();
        let _ = child.wait();
        let env = info
            .env
            .get("LD_LIBRARY_PATH")
            .expect("read while it lived");
        assert!(
            env.len() <= VALUE_FIELD + 32
                && env.ends_with(&format!("…[cut: {} bytes]", long.len())),
            "{} bytes: …{}",
            env.len(),
            &env[env.len().saturating_sub(40)..]
        );
        let cmd = info.cmdline.expect("cmdline");
        let total: usize = cmd.iter().map(String::len).sum();
        assert!(total <= CMDLINE_FIELD + 64, "{total}");
        assert!(
            // nvprobe reads 16 KiB of a command line: the marker says how
            // much of the argument it saw.
            cmd.iter()
                .any(|a| a.starts_with("xxxx") && a.ends_with(" bytes]") && a.contains("…[cut: 1")),
            "{:?}",
            cmd.iter().map(|a| a.len()).collect::<Vec<_>>()
        );
    }
}

/// The GPUs the driver lists under ROOT (/proc/driver/nvidia/gpus/*/
/// information, read through the guarded reader: a GPU that does not
/// answer is left out, never waited on).
pub fn host_gpus(root: &Path) -> Vec<nvprobe_model::attribution::HostGpu> {
    let dir = root.join("proc/driver/nvidia/gpus");
    let Ok(rd) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let rel = format!(
            "proc/driver/nvidia/gpus/{}/information",
            e.file_name().to_string_lossy()
        );
        let Ok(text) = crate::host::read_driver_file(root, &rel) else {
            continue;
        };
        if let Some(g) = parse_gpu_information(&text) {
            out.push(g);
        }
    }
    out.sort_by(|a, b| a.pci.cmp(&b.pci).then(a.minor.cmp(&b.minor)));
    out
}

/// One GPU's information file ("Device Minor: 0", "GPU UUID: GPU-…").
pub fn parse_gpu_information(text: &str) -> Option<nvprobe_model::attribution::HostGpu> {
    let field = |k: &str| {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(k)
                    .map(|v| v.trim_start_matches(':').trim().to_owned())
            })
            .filter(|v| !v.is_empty())
    };
    Some(nvprobe_model::attribution::HostGpu {
        minor: field("Device Minor")?.parse().ok()?,
        uuid: field("GPU UUID"),
        pci: field("Bus Location"),
        model: field("Model"),
    })
}

#[cfg(test)]
mod gpu_tests {
    use super::*;

    /// The H200's own information file (tests/fixtures/hosts/h200-snapshot).
    #[test]
    fn the_h200_information_file_parses() {
        let root = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/hosts/h200-snapshot"
        ));
        let g = host_gpus(root);
        assert_eq!(g.len(), 1, "{g:?}");
        assert_eq!(g[0].minor, 0);
        assert_eq!(
            g[0].uuid.as_deref(),
            Some("GPU-36f62854-0cbb-4081-2735-4e936cae897d")
        );
        assert_eq!(g[0].pci.as_deref(), Some("0000:00:06.0"));
        assert_eq!(g[0].model.as_deref(), Some("NVIDIA H200"));
        assert_eq!(parse_gpu_information("Model: x\n"), None);
    }
}

#[cfg(test)]
mod runtime_tests {
    use super::*;

    /// containerd's record of a container under a host root: the names are
    /// read once (a second process of the container uses the cache); a
    /// record planted as a link out of the root is not followed.
    #[test]
    fn kubernetes_names_are_read_from_the_runtimes_record() {
        let (root, _fd) =
            crate::safefs::private_temp_dir(&std::env::temp_dir(), "nvprobe-kube").expect("tmp");
        let id = "beef".repeat(16);
        let rel = nvprobe_model::attribution::runtime_record("containerd", &id).expect("path");
        let file = root.join(&rel);
        fs::create_dir_all(file.parent().expect("dir")).expect("mkdir");
        fs::write(
            &file,
            r#"{"annotations":{"io.kubernetes.cri.sandbox-name":"trainer-0","io.kubernetes.cri.sandbox-namespace":"ml","io.kubernetes.cri.container-name":"pytorch"}}"#,
        )
        .expect("write");
        let c = Container {
            runtime: "containerd".into(),
            id: Some(id.clone()),
            ..Container::default()
        };
        let mut libs = LibCache::default();
        let n = libs.kube_names(&root, &c).expect("names");
        assert_eq!(
            (
                n.pod_namespace.as_deref(),
                n.pod_name.as_deref(),
                n.container_name.as_deref()
            ),
            (Some("ml"), Some("trainer-0"), Some("pytorch"))
        );
        fs::remove_file(&file).expect("rm");
        assert_eq!(libs.kube_names(&root, &c), Some(n), "cached");
        // Another container whose record is a link to a file outside.
        let other = "cafe".repeat(16);
        let rel2 = nvprobe_model::attribution::runtime_record("containerd", &other).expect("path");
        let link = root.join(&rel2);
        fs::create_dir_all(link.parent().expect("dir")).expect("mkdir");
        let outside =
            std::env::temp_dir().join(format!("nvprobe-kube-secret-{}", std::process::id()));
        fs::write(
            &outside,
            r#"{"annotations":{"io.kubernetes.pod.name":"leak"}}"#,
        )
        .expect("w");
        std::os::unix::fs::symlink(&outside, &link).expect("ln");
        let c2 = Container {
            runtime: "containerd".into(),
            id: Some(other),
            ..Container::default()
        };
        assert_eq!(libs.kube_names(&root, &c2), None);
        let _ = fs::remove_file(&outside);
        let _ = fs::remove_dir_all(&root);
    }
}
