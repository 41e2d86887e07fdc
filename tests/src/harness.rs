//! Run the real nvprobe binary and read back its NDJSON; find the fixtures;
//! see what one nvprobe process held (its BPF programs) and run it in a
//! mount namespace of its own, so that a test checks what its own nvprobe
//! did and not the state of the whole host. Also what every test shares:
//! its temporary folder ([`TestDir`], gone when the test ends) and the
//! way a test that cannot run here says so ([`skip`]).

use std::{
    collections::BTreeSet,
    ffi::OsStr,
    fmt::Display,
    fs,
    io::Write as _,
    ops::Deref,
    os::unix::{fs::PermissionsExt as _, process::CommandExt},
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

/// Whether `cmd` runs here (`cmd ARG`). A test that needs it and finds
/// it missing fails as root, saying what to install (`cargo xtask test`
/// installs it: a missing tool there is a broken set-up, not a reason to
/// pass), and is skipped otherwise.
pub fn require_tool(cmd: &str, arg: &str, install: &str) -> bool {
    let found = std::process::Command::new(cmd)
        .arg(arg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok();
    if !found {
        assert!(
            !is_root(),
            "this test needs {cmd}, which is not installed: {install}"
        );
        skip(format_args!("{cmd} is not installed ({install})"));
    }
    found
}

/// The variable `cargo xtask test` sets to a file where each skipped test
/// leaves a line, so that its summary counts skips and gives their reasons.
pub const SKIPS_ENV: &str = "NVPROBE_TEST_SKIPS";

/// Say that the running test cannot run here and why: `skipping: REASON`
/// on stderr (the test then returns and passes), and, under `cargo xtask
/// test`, a line `BINARY<TAB>TEST<TAB>REASON` appended to the file
/// [`SKIPS_ENV`] names. BINARY is the test executable's file name (as
/// cargo's `Running … (PATH)` line names it), TEST the libtest thread's
/// name, which is the test's.
pub fn skip(reason: impl Display) {
    let reason = reason.to_string();
    eprintln!("skipping: {reason}");
    let Some(file) = std::env::var_os(SKIPS_ENV) else {
        return;
    };
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "?".into());
    let test = std::thread::current().name().unwrap_or("?").to_owned();
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    let line = format!("{}\t{}\t{}\n", clean(&exe), clean(&test), clean(&reason));
    // One write of one line in append mode: lines of tests that run at
    // once do not interleave.
    let written = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!(
            "{SKIPS_ENV}={}: cannot record this skip: {e}",
            Path::new(&file).display()
        );
    }
}

/// A test's own temporary folder, `nvprobe-test-TAG-XXXXXX` (mkdtemp) in
/// the temporary directory (`TMPDIR`; `cargo xtask test` gives the tests
/// one of their own). Removed when the value goes out of scope, so at the
/// end of the test whether it passed or not, except for a test that is
/// failing (the value dropped while the test panics): that folder is kept
/// for a look at what nvprobe wrote, and its path is printed with the
/// failure. Mounts a test left inside are detached first; a folder with a
/// mount that cannot be detached is kept, and said.
pub struct TestDir(PathBuf);

impl TestDir {
    /// Mode 0700.
    pub fn new(tag: &str) -> TestDir {
        let t = std::env::temp_dir().join(format!("nvprobe-test-{tag}-XXXXXX"));
        let path =
            nix::unistd::mkdtemp(&t).unwrap_or_else(|e| panic!("mkdtemp {}: {e}", t.display()));
        TestDir(path)
    }

    /// Mode 0755: processes of other users the test starts can reach
    /// what it puts inside.
    pub fn shared(tag: &str) -> TestDir {
        let d = TestDir::new(tag);
        fs::set_permissions(&d.0, fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("chmod {}: {e}", d.0.display()));
        d
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Deref for TestDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TestDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<OsStr> for TestDir {
    fn as_ref(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        remove_test_dir(&self.0);
    }
}

/// What [`TestDir`] does when it goes: keep the folder of a failing test
/// (and print where), detach mounts left inside, remove the rest.
pub fn remove_test_dir(dir: &Path) {
    if std::thread::panicking() {
        eprintln!(
            "nvprobe-tests: kept {} for the failing test (remove it when done)",
            dir.display()
        );
        return;
    }
    // remove_dir_all would walk into a mount (a FUSE stand-in, a tracefs)
    // and try to delete what is in it: detach them first, deepest first.
    let mut inside = mounts_under(dir);
    inside.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    for m in &inside {
        let _ = nix::mount::umount2(m, nix::mount::MntFlags::MNT_DETACH);
    }
    let left = mounts_under(dir);
    if !left.is_empty() {
        eprintln!(
            "nvprobe-tests: kept {}: {} mounted inside could not be detached",
            dir.display(),
            left.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return;
    }
    if let Err(e) = fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        eprintln!("nvprobe-tests: could not remove {}: {e}", dir.display());
    }
}

/// Mount points at or beneath `dir` in this process's mount namespace.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(unescape_mountinfo(m)))
        .filter(|m| m.starts_with(dir))
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` (octal).
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let digit = |k: usize| u32::from(b[i + k] - b'0');
            out.push((digit(1) * 64 + digit(2) * 8 + digit(3)) as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
    /// The summary's row of process `pid` (its first, for a reused pid).
    pub fn process_row(&self, pid: u64) -> &Value {
        self.summary()["processes"]
            .as_array()
            .and_then(|p| p.iter().find(|r| r["pid"] == pid))
            .unwrap_or_else(|| panic!("no summary row of {pid}: {}", self.summary()))
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
    own_mount_namespace(cmd, unmount, false);
}

/// Run the command in a mount namespace of its own (as
/// [`private_mount_namespace`]) where a tracefs of the test's own is
/// mounted at /sys/kernel/tracing, whatever the host has there: for an
/// nvprobe started without CAP_SYS_ADMIN, which cannot mount one itself
/// (on a real host, systemd's `sys-kernel-tracing.mount` or the operator
/// did). Register it before a `pre_exec` that drops capabilities: the
/// mount needs CAP_SYS_ADMIN. Needs root.
pub fn private_mount_namespace_with_tracefs(cmd: &mut Command) {
    own_mount_namespace(cmd, &["/sys/kernel/tracing"], true);
}

fn own_mount_namespace(cmd: &mut Command, unmount: &'static [&'static str], tracefs: bool) {
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
            if tracefs {
                mount(
                    Some("tracefs"),
                    "/sys/kernel/tracing",
                    Some("tracefs"),
                    MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                    None::<&str>,
                )?;
            }
            Ok(())
        });
    }
}

/// Run the command chrooted into `root`, a plain directory (not a mount
/// point, as a `chroot` into an unpacked root usually is), in a mount
/// namespace of its own without tracefs: each of the host's top-level
/// directories is bound at its own name under `root` (symbolic links are
/// copied as links), so the same paths work inside. Needs root.
pub fn chroot_not_a_mount_point(cmd: &mut Command, root: &Path) {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt as _;

    use nix::mount::{MntFlags, MsFlags, mount, umount2};
    let mut binds = Vec::new();
    for e in fs::read_dir("/").expect("read /").map_while(Result::ok) {
        let (from, to) = (e.path(), root.join(e.file_name()));
        let meta = fs::symlink_metadata(&from).expect("stat a top-level entry");
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&from).expect("readlink");
            std::os::unix::fs::symlink(target, &to).expect("copy a top-level link");
        } else if meta.is_dir() {
            fs::create_dir_all(&to).expect("mkdir under the chroot");
            let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).expect("a path without NUL");
            binds.push((c(&from), c(&to)));
        }
    }
    let root = CString::new(root.as_os_str().as_bytes()).expect("a path without NUL");
    // SAFETY: runs in the forked child before exec: only system calls on
    // strings made before the fork, no allocation, no locks.
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
            for _ in 0..8 {
                match umount2("/sys/kernel/tracing", MntFlags::MNT_DETACH) {
                    Ok(()) => {}
                    Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOENT) => break,
                    Err(e) => return Err(e.into()),
                }
            }
            for (from, to) in &binds {
                mount(
                    Some(from.as_c_str()),
                    to.as_c_str(),
                    None::<&str>,
                    MsFlags::MS_BIND | MsFlags::MS_REC,
                    None::<&str>,
                )?;
            }
            nix::unistd::chroot(root.as_c_str())?;
            nix::unistd::chdir("/")?;
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

/// Whether a line of nvprobe's text is a fork, exec, exit or signal line
/// (not a verdict's `==` line, not the summary's count of those left out).
pub fn is_lifecycle_line(l: &str) -> bool {
    [
        " forks pid ",
        " exec",
        " exited",
        " killed by",
        " receives ",
        " sends ",
    ]
    .iter()
    .any(|w| l.contains(w))
        && !l.starts_with("==")
        && !l.contains("left out (--all-processes")
}

/// Wait for `c` at most `limit` (a patience that only ends a broken run);
/// kill it when it is still running then.
pub fn wait_at_most(c: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if let Ok(Some(st)) = c.try_wait() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let _ = c.wait();
    None
}
