//! Run the real nvprobe binary and read back its NDJSON; find the fixtures;
//! see what one nvprobe process held (its BPF programs) and run it in a
//! mount namespace of its own, so that a test checks what its own nvprobe
//! did and not the state of the whole host.

use std::{
    collections::BTreeSet,
    fs,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use serde_json::Value;

/// target/<profile>/ of the running test binary (target/<profile>/deps/x).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().expect("deps dir");
    if dir.ends_with("deps") {
        dir.parent().expect("profile dir").to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} is not built: run the tests with `cargo xtask test` (it builds every binary first)",
        p.display()
    );
    p
}

/// A file or folder of tests/fixtures (recordings and host trees from the
/// GPU machine; tests/fixtures/README.md says where each came from).
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

pub struct Trace {
    child: Child,
    pub out: PathBuf,
    pub stderr: PathBuf,
}

pub struct Finished {
    pub status: ExitStatus,
    pub records: Vec<Value>,
    pub stderr: String,
}

impl Trace {
    /// Start `nvprobe watch --json -o FILE ARGS…` and wait until its start
    /// record is written (probes attached).
    pub fn start(tmp: &Path, args: &[&str]) -> Trace {
        Self::start_with(tmp, args, |_| {})
    }

    /// [`Trace::start`], with the command adjusted first (e.g. by
    /// [`private_mount_namespace`]).
    pub fn start_with(tmp: &Path, args: &[&str], adjust: impl FnOnce(&mut Command)) -> Trace {
        let out = tmp.join(format!("trace-{}.ndjson", unique()));
        let stderr = tmp.join(format!("trace-{}.stderr", unique()));
        let mut cmd = Command::new(bin("nvprobe"));
        cmd.args(["watch", "--json", "-o"])
            .arg(&out)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).expect("stderr file"));
        adjust(&mut cmd);
        let child = cmd.spawn().expect("spawn nvprobe");
        let mut t = Trace { child, out, stderr };
        let t0 = Instant::now();
        loop {
            if let Ok(text) = fs::read_to_string(&t.out)
                && text
                    .lines()
                    .next()
                    .is_some_and(|l| l.contains("\"type\":\"start\""))
            {
                break;
            }
            if let Ok(Some(st)) = t.child.try_wait() {
                panic!(
                    "nvprobe exited ({st}) before attaching: {}",
                    fs::read_to_string(&t.stderr).unwrap_or_default()
                );
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "nvprobe did not start within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        t
    }

    /// The records written so far (complete lines only).
    pub fn records_now(&self) -> Vec<Value> {
        fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Wait until a record written so far satisfies `pred` (nvprobe's
    /// progress, not a duration: the patience only ends a broken run).
    pub fn wait_for(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let t0 = Instant::now();
        loop {
            if let Some(r) = self.records_now().into_iter().find(|r| pred(r)) {
                return r;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "nvprobe wrote no {what} within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The BPF programs this nvprobe process holds now (see [`bpf_prog_ids`]).
    pub fn prog_ids(&self) -> BTreeSet<u32> {
        bpf_prog_ids(self.child.id())
    }

    /// SIGKILL, and wait for the end.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGINT, wait, parse.
    pub fn stop(mut self) -> Finished {
        // Let the last events reach the ring buffer's consumer.
        std::thread::sleep(Duration::from_millis(300));
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGINT).expect("SIGINT nvprobe");
        let status = self.child.wait().expect("wait nvprobe");
        let text = fs::read_to_string(&self.out).expect("read trace");
        let records = text
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l)
                    .unwrap_or_else(|e| panic!("invalid JSON line {l:?}: {e}"))
            })
            .collect();
        Finished {
            status,
            records,
            stderr: fs::read_to_string(&self.stderr).unwrap_or_default(),
        }
    }
}

impl Drop for Trace {
    /// A trace the test did not stop ends as a user ends it: SIGINT, and
    /// SIGKILL only if that did not end it within 10 s. (A SIGKILL that
    /// lands while nvprobe is placing uprobes makes the kernel leak them,
    /// and `cargo xtask test` fails on a leaked uprobe.)
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGINT);
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn unique() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

impl Finished {
    pub fn of_type<'a>(&'a self, t: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.records.iter().filter(move |r| r["type"] == t)
    }
    pub fn for_pid(&self, pid: u32) -> Vec<&Value> {
        self.records.iter().filter(|r| r["pid"] == pid).collect()
    }
    pub fn summary(&self) -> &Value {
        self.of_type("summary").last().expect("a summary record")
    }
}

/// The ids of the BPF programs a process holds: each of its fds that is a
/// BPF program or link says `prog_id:` in /proc/PID/fdinfo. Only this
/// process's programs, whatever else is loaded on the host.
pub fn bpf_prog_ids(pid: u32) -> BTreeSet<u32> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return BTreeSet::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| fs::read_to_string(e.path()).ok())
        .flat_map(|info| {
            info.lines()
                .filter_map(|l| l.strip_prefix("prog_id:"))
                .filter_map(|v| v.trim().parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Which of `ids` are still loaded in the kernel. The kernel frees a
/// program asynchronously after its last reference goes, so this waits up
/// to `patience` for them to go.
pub fn still_loaded(ids: &BTreeSet<u32>, patience: Duration) -> BTreeSet<u32> {
    let loaded = || -> BTreeSet<u32> {
        aya::programs::loaded_programs()
            .filter_map(Result::ok)
            .map(|p| p.id())
            .filter(|id| ids.contains(id))
            .collect()
    };
    let t0 = Instant::now();
    let mut left = loaded();
    while !left.is_empty() && t0.elapsed() < patience {
        std::thread::sleep(Duration::from_millis(100));
        left = loaded();
    }
    left
}

/// Run the command in a mount namespace of its own (mounts made private
/// first, so that nothing propagates back to the host), with `unmount`
/// detached there: what it mounts or finds missing is its own, and the
/// host's mounts are left alone. Needs root.
pub fn private_mount_namespace(cmd: &mut Command, unmount: &'static [&'static str]) {
    use nix::mount::{MntFlags, MsFlags, mount, umount2};
    // SAFETY: runs in the forked child before exec: only system calls
    // (unshare, mount, umount2), no allocation beyond nix's on-stack path
    // conversion, no locks.
    unsafe {
        cmd.pre_exec(move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)?;
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )?;
            for p in unmount {
                // Until EINVAL: not (or no longer) a mount point here. A
                // path can have more than one mount stacked on it.
                for _ in 0..8 {
                    match umount2(*p, MntFlags::MNT_DETACH) {
                        Ok(()) => {}
                        Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOENT) => break,
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            Ok(())
        });
    }
}

/// The mount namespace a process is in (the /proc/PID/ns/mnt link).
pub fn mount_namespace(pid: u32) -> String {
    fs::read_link(format!("/proc/{pid}/ns/mnt"))
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}
