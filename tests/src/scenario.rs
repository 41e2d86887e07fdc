//! Tier 2 support: the real BPF programs on this machine's kernel, as root.
//!
//! A FUSE stand-in serves the NVIDIA device files ([`crate::fakedrv`])
//! and `nvfixture` makes driver-style calls on it; `nvprobe watch --json`
//! runs as a separate process, exactly as a user runs it. Without root the
//! tests say `skipping` and pass, since loading BPF needs root.
//!
//! The root tests are tests/tests/root_*.rs, one file per feature; this
//! module is what they share: the stand-in, the scenarios, the trace.

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
    sync::Mutex,
};

use nvprobe::render::schema;
use serde_json::Value;

use crate::harness::{Finished, TestDir, Trace, bin};

/// The tests share tracefs and the BPF subsystem: one at a time. Each
/// tests/tests file is its own test binary with its own lock; cargo runs
/// the binaries one after another.
static SERIAL: Mutex<()> = Mutex::new(());

/// The first line of a root test, which is also `#[ignore = "needs
/// root"]`: a plain `cargo test` lists it as ignored, `cargo xtask test`
/// as root runs it (`--include-ignored`), and one asked for without root
/// fails saying so, never passes without running.
#[macro_export]
macro_rules! need_root {
    () => {
        assert!(
            $crate::harness::is_root(),
            "this test loads BPF programs: run it as root (`cargo xtask test`, or `sudo -E cargo test -- --include-ignored`)"
        );
    };
}

pub fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The test's own folder (mode 0755: the stand-in's users and other
/// users' processes reach into it), gone when the test ends
/// ([`TestDir`]).
pub fn tmpdir(tag: &str) -> TestDir {
    TestDir::shared(tag)
}

/// The FUSE stand-in, mounted for the life of the value.
pub struct FakeDrv {
    child: Child,
    pub dir: PathBuf,
}

impl FakeDrv {
    pub fn start(tmp: &Path) -> FakeDrv {
        Self::start_at(&tmp.join("dev"))
    }
    pub fn start_at(dir: &Path) -> FakeDrv {
        Self::start_with(dir, None)
    }
    /// A stand-in whose hanging control (`HANG_CONTROL`) hangs `hang_ms`.
    pub fn start_hanging(tmp: &Path, hang_ms: u64) -> FakeDrv {
        Self::start_with(&tmp.join("dev"), Some(hang_ms))
    }
    fn start_with(dir: &Path, hang_ms: Option<u64>) -> FakeDrv {
        let dir = dir.to_path_buf();
        let mut cmd = Command::new(bin("nvfixture"));
        if let Some(ms) = hang_ms {
            cmd.env("NVFIXTURE_HANG_MS", ms.to_string());
        }
        let mut child = cmd
            .arg("serve")
            .arg(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start nvfixture serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read ready");
        assert_eq!(line.trim(), "ready", "the FUSE stand-in did not mount");
        FakeDrv { child, dir }
    }
    pub fn ctl(&self) -> String {
        self.dir.join("nvidiactl").display().to_string()
    }
    pub fn device_args(&self) -> Vec<String> {
        vec![
            "--device".into(),
            format!("{}=ctl", self.ctl()),
            "--device".into(),
            format!("{}=gpu", self.dir.join("nvidia0").display()),
        ]
    }
}

impl Drop for FakeDrv {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
        let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// Run an nvfixture scenario; return what it printed (its last JSON line).
pub fn scenario(drv: &FakeDrv, name: &str, extra: &[&str]) -> Value {
    let out = Command::new(bin("nvfixture"))
        .args(["run", name, "--dir"])
        .arg(&drv.dir)
        .args(extra)
        .output()
        .expect("run nvfixture");
    assert!(
        out.status.success(),
        "nvfixture {name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().expect("output")).expect("JSON")
}

pub fn watch(tmp: &Path, drv: &FakeDrv, extra: &[&str]) -> Trace {
    watch_adjusted(tmp, drv, extra, |_| {})
}

/// [`watch`], with nvprobe's command adjusted first (its environment).
pub fn watch_adjusted(
    tmp: &Path,
    drv: &FakeDrv,
    extra: &[&str],
    adjust: impl FnOnce(&mut std::process::Command),
) -> Trace {
    let mut args: Vec<String> = drv.device_args();
    args.extend(["--driver-version".to_owned(), "580.159.04".to_owned()]);
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    Trace::start_with(tmp, &refs, adjust)
}

pub fn check_schema(f: &Finished) {
    for r in &f.records {
        schema::validate(r).unwrap_or_else(|e| panic!("{e}\n{r}"));
    }
    assert!(
        f.status.success(),
        "nvprobe exit: {} ({})",
        f.status,
        f.stderr
    );
}

/// Trace one nvfixture scenario from start to end: its JSON answer and the
/// validated trace.
pub fn trace_scenario(name: &str, extra: &[&str]) -> (Value, Finished) {
    let _g = lock();
    let tmp = tmpdir(name);
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    let run = scenario(&drv, name, extra);
    let f = t.stop();
    check_schema(&f);
    (run, f)
}

pub fn ioctls_of(f: &Finished, pid: u64) -> Vec<&Value> {
    f.records
        .iter()
        .filter(|r| r["type"] == "ioctl" && r["pid"] == pid)
        .collect()
}

pub fn control_named<'a>(v: &'a [&'a Value], control: &str) -> &'a Value {
    v.iter()
        .find(|r| r["args"]["control_name"] == control)
        .unwrap_or_else(|| panic!("no {control} in {v:#?}"))
}

/// Start `nvfixture run cuinit` with the stand-in libcuda loaded; it waits
/// for a line on stdin before calling cuInit.
pub fn spawn_cuinit(
    drv: &FakeDrv,
    lib: &Path,
    mode: &str,
) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    spawn_with_lib(drv, lib, "cuinit", mode)
}

/// An nvfixture scenario that dlopens `lib` and says "ready" before it
/// waits for a line on stdin (cuinit, forkchild).
pub fn spawn_with_lib(
    drv: &FakeDrv,
    lib: &Path,
    scenario: &str,
    mode: &str,
) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    spawn_limited(drv, lib, scenario, mode, None)
}

/// [`spawn_with_lib`] under a resource limit (soft and hard, e.g. RLIMIT_AS in bytes).
pub fn spawn_limited(
    drv: &FakeDrv,
    lib: &Path,
    scenario: &str,
    mode: &str,
    limit: Option<(nix::sys::resource::Resource, u64)>,
) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    spawn_env(drv, lib, scenario, mode, limit, &[])
}

/// [`spawn_limited`] with more variables in the scenario's environment.
pub fn spawn_env(
    drv: &FakeDrv,
    lib: &Path,
    scenario: &str,
    mode: &str,
    limit: Option<(nix::sys::resource::Resource, u64)>,
    env: &[(&str, String)],
) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(bin("nvfixture"));
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    if let Some((resource, bytes)) = limit {
        // SAFETY: setrlimit is async-signal-safe; nothing else runs here.
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::resource::setrlimit(resource, bytes, bytes).map_err(std::io::Error::from)
            });
        }
    }
    cmd.args(["run", scenario, "--dir"])
        .arg(&drv.dir)
        .arg("--lib")
        .arg(lib)
        .env("NVPROBE_STUB_MODE", mode);
    spawn_ready(&mut cmd)
}

/// Start `cmd` (an nvfixture scenario, a rank) with its stdin and stdout
/// piped, and wait for its first line, `ready` or `{"ready":true,...}`:
/// its descriptors are open and it waits for "go" on stdin.
pub fn spawn_ready(cmd: &mut Command) -> (Child, BufReader<ChildStdout>) {
    let mut c = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {:?}: {e}", cmd.get_program()));
    let mut out = BufReader::new(c.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("the ready line");
    let ready = line.trim_end() == "ready"
        || serde_json::from_str::<Value>(&line).is_ok_and(|v| v["ready"] == true);
    assert!(ready, "{:?} did not say ready: {line:?}", cmd.get_program());
    (c, out)
}

/// Build the stand-in libcuda (tests/cuda-stub/libcuda.c) with cc. The
/// root tests that call it need it: a missing compiler or a build that
/// fails stops the test with the compiler's words, never a silent skip.
pub fn stub_libcuda(tmp: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda-stub/libcuda.c");
    let out = tmp.join("stublib/libcuda.so.1");
    std::fs::create_dir_all(out.parent().expect("dir")).expect("mkdir");
    let o = Command::new("cc")
        .args(["-shared", "-fPIC", "-pthread", "-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| {
            panic!("running cc to build the stand-in libcuda: {e} (the C compiler Rust links with: Debian's gcc package)")
        });
    assert!(
        o.status.success(),
        "cc could not build the stand-in libcuda from {}: {}",
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Build a test fixture from C with cc into `out` (`args` before the
/// output's name): a missing compiler or a failed build stops the test
/// with the compiler's words.
fn build_c(src: &str, out: &Path, args: &[&str], what: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
    std::fs::create_dir_all(out.parent().expect("dir")).expect("mkdir");
    let o = Command::new("cc")
        .args(args)
        .arg("-o")
        .arg(out)
        .arg(&src)
        .arg("-ldl")
        .output()
        .unwrap_or_else(|e| {
            panic!("running cc to build {what}: {e} (the C compiler Rust links with: Debian's gcc package)")
        });
    assert!(
        o.status.success(),
        "cc could not build {what} from {}: {}",
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The stand-in libnccl (tests/nccl-stub/libnccl.c) and the program that
/// is one rank of a job through it (tests/nccl-stub/rank.c).
pub fn stub_nccl(tmp: &Path) -> (PathBuf, PathBuf) {
    let lib = tmp.join("stubnccl/libnccl.so.2");
    build_c(
        "nccl-stub/libnccl.c",
        &lib,
        &["-shared", "-fPIC", "-O1"],
        "the stand-in libnccl",
    );
    let rank = tmp.join("stubnccl/rank");
    build_c(
        "nccl-stub/rank.c",
        &rank,
        &["-O1"],
        "the stand-in NCCL rank",
    );
    (lib, rank)
}

/// nvprobe's note that it hooked the libcuda copy `pid` loaded after
/// tracing started (the hooking thread does it once the loader opened it,
/// and says how many ms after that open).
pub fn wait_hooked(t: &Trace, pid: u32) -> Value {
    let after = format!("after pid {pid}'s loader opened it");
    late_note(t, "the libcuda hooked at load", |m| m.contains(&after))
}

/// nvprobe's note that it hooked the libcuda copy of `pid`, however it
/// found it: at its loader's open, or in its maps when the process was
/// first seen (the hooking thread may get the process before the open
/// when copies come one after another).
pub fn wait_hooked_any(t: &Trace, pid: u32) -> Value {
    let at = format!("hooked libcuda at /proc/{pid}/root/");
    late_note(t, "the libcuda hooked", |m| m.starts_with(&at))
}

/// The first `libcuda_late` warning whose message `is` (waiting for it).
fn late_note(t: &Trace, what: &str, is: impl Fn(&str) -> bool) -> Value {
    t.wait_for(what, |r| {
        r["type"] == "warning"
            && r["id"] == "libcuda_late"
            && r["message"].as_str().is_some_and(&is)
    })
}

/// Tell a scenario spawned by [`spawn_with_lib`] to go, read its result
/// line, and wait for it to exit successfully.
pub fn go(c: &mut Child, out: &mut BufReader<ChildStdout>) -> String {
    c.stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    let mut line = String::new();
    out.read_line(&mut line).expect("result");
    assert!(c.wait().expect("wait").success());
    line
}

/// strace (`strace -f -qq -o /dev/null ARGS… -p PID`) attached to `pid`,
/// returned once the kernel shows it as the process's tracer.
pub fn attach_strace(pid: u32, args: &[&std::ffi::OsStr]) -> Child {
    let strace = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null"])
        .args(args)
        .args(["-p", &pid.to_string()])
        .spawn()
        .expect("strace");
    let tracer = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("TracerPid:"))
                    .and_then(|v| v.trim().parse::<u32>().ok())
            })
            .unwrap_or(0)
    };
    let t0 = std::time::Instant::now();
    while tracer() != strace.id() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "strace did not attach to {pid}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    strace
}
