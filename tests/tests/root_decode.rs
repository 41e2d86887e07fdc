//! Tier 2: the real BPF programs on this machine's kernel, as root.
//!
//! A FUSE stand-in serves the NVIDIA device files (tests/src/fakedrv.rs)
//! and `nvfixture` makes driver-style calls on it; `nvprobe watch --json`
//! runs as a separate process, exactly as a user runs it. Without root the
//! tests say `skipping` and pass, since loading BPF needs root.

use std::{
    io::{BufRead, BufReader, Write},
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Mutex,
    time::Duration,
};

use nvprobe::render::schema;
use nvprobe_tests::harness::{Finished, Trace, bin, is_root};
use serde_json::Value;

/// The tests share tracefs and the BPF subsystem: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

macro_rules! need_root {
    () => {
        if !is_root() {
            eprintln!("skipping: loading BPF programs needs root");
            return;
        }
    };
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nvprobe-test-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

/// The FUSE stand-in, mounted for the life of the value.
struct FakeDrv {
    child: Child,
    dir: PathBuf,
}

impl FakeDrv {
    fn start(tmp: &Path) -> FakeDrv {
        Self::start_at(&tmp.join("dev"))
    }
    fn start_at(dir: &Path) -> FakeDrv {
        let dir = dir.to_path_buf();
        let mut child = Command::new(bin("nvfixture"))
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
    fn ctl(&self) -> String {
        self.dir.join("nvidiactl").display().to_string()
    }
    fn device_args(&self) -> Vec<String> {
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
fn scenario(drv: &FakeDrv, name: &str, extra: &[&str]) -> Value {
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

fn watch(tmp: &Path, drv: &FakeDrv, extra: &[&str]) -> Trace {
    let mut args: Vec<String> = drv.device_args();
    args.extend(["--driver-version".to_owned(), "580.159.04".to_owned()]);
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    Trace::start(tmp, &refs)
}

fn check_schema(f: &Finished) {
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
fn trace_scenario(name: &str, extra: &[&str]) -> (Value, Finished) {
    let _g = lock();
    let tmp = tmpdir(name);
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    let run = scenario(&drv, name, extra);
    let f = t.stop();
    check_schema(&f);
    (run, f)
}

fn ioctls_of(f: &Finished, pid: u64) -> Vec<&Value> {
    f.records
        .iter()
        .filter(|r| r["type"] == "ioctl" && r["pid"] == pid)
        .collect()
}

fn control_named<'a>(v: &'a [&'a Value], control: &str) -> &'a Value {
    v.iter()
        .find(|r| r["args"]["control_name"] == control)
        .unwrap_or_else(|| panic!("no {control} in {v:#?}"))
}

#[test]
fn driver_style_calls_decode_with_status_errno_and_duration() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("basic");
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    let ran = scenario(&drv, "basic", &[]);
    let f = t.stop();
    check_schema(&f);
    let pid = ran["pid"].as_u64().expect("pid");
    let fd = ran["fd"].as_i64().expect("fd");
    let io = ioctls_of(&f, pid);
    assert_eq!(io.len(), 10, "{io:#?}");
    for r in &io {
        assert_eq!(r["fd"], fd);
        assert_eq!(r["tid"], pid, "single-threaded fixture");
        assert_eq!(r["comm"], "nvfixture");
        assert_eq!(r["device"]["kind"], "ctl");
        assert_eq!(r["device"]["node"], drv.ctl());
        assert!(r["duration_ns"].as_u64().expect("duration") > 0);
    }
    let named = |n: &str| {
        io.iter()
            .find(|r| r["name"] == n)
            .unwrap_or_else(|| panic!("no {n}"))
    };
    // errno-only escape: EBUSY, and no status.
    let sys = named("NV_ESC_SYS_PARAMS");
    assert_eq!(
        (sys["ret"].as_i64(), sys["errno"].as_str()),
        (Some(-16), Some("EBUSY"))
    );
    assert!(sys.get("status").is_none());
    assert_eq!(sys["ok"], false);
    let card = named("NV_ESC_CARD_INFO");
    assert_eq!(card["args"]["pci_id0"], "10de:2335");
    assert_eq!(card["args"]["entries"], 2);
    // RM_ALLOC of a root client: hClass rewritten to 0x41, handle from "RM".
    let alloc = named("NV_ESC_RM_ALLOC");
    assert_eq!(alloc["args"]["hClass_name"], "NV01_ROOT_CLIENT");
    assert_eq!(
        alloc["args"]["hObjectNew"],
        format!("{:#x}", ran["hClient"].as_u64().expect("h"))
    );
    assert_eq!(alloc["status"]["name"], "NV_OK");
    assert_eq!(alloc["status"]["offset"], 28);
    // ret 0 with a failing status written back: the call failed.
    let attach = control_named(&io, "NV0000_CTRL_CMD_GPU_ATTACH_IDS");
    assert_eq!(attach["ret"], 0);
    assert_eq!(attach["status"]["name"], "NV_ERR_INVALID_DEVICE");
    assert_eq!(attach["status"]["layout"], "stable");
    assert_eq!(attach["ok"], false);
    // A probing control answered NOT_SUPPORTED is benign.
    let gid = control_named(&io, "NV2080_CTRL_CMD_GPU_GET_GID_INFO");
    assert_eq!(
        (gid["status"]["name"].as_str(), gid["ok"].as_bool()),
        (Some("NV_ERR_NOT_SUPPORTED"), Some(true))
    );
    // The stand-in answers this control after 20 ms: the duration shows it.
    let slow = control_named(&io, "NV2080_CTRL_CMD_GPU_GET_NAME_STRING");
    assert!(
        slow["duration_ns"].as_u64().expect("ns") >= 20_000_000,
        "{slow}"
    );
    // XFER unwrapped to the inner RM_CONTROL; status read at the inner pointer.
    let xfer = named("NV_ESC_IOCTL_XFER_CMD");
    assert_eq!(xfer["xfer"]["name"], "NV_ESC_RM_CONTROL");
    assert_eq!(
        xfer["args"]["control_name"],
        "NV0000_CTRL_CMD_GPU_GET_PROBED_IDS"
    );
    assert_eq!(xfer["status"]["name"], "NV_ERR_INSUFFICIENT_PERMISSIONS");
    // Unknown escape: raw number, errno.
    let unk = io
        .iter()
        .find(|r| r["request"] == "0xc00846ee")
        .expect("unknown escape");
    assert!(unk.get("name").is_none());
    assert_eq!(unk["errno"], "EINVAL");
    assert_eq!(named("NV_ESC_RM_FREE")["status"]["name"], "NV_OK");
    // Opens and stats: the stand-in's node, and the missing real nodes.
    let mine: Vec<&Value> = f.for_pid(pid as u32);
    let open = mine
        .iter()
        .find(|r| r["type"] == "open" && r["path"] == drv.ctl().as_str())
        .expect("open of the ctl stand-in");
    assert_eq!(
        (open["fd"].as_i64(), open["device"]["kind"].as_str()),
        (Some(fd), Some("ctl"))
    );
    let uvm = mine
        .iter()
        .find(|r| r["type"] == "open" && r["path"] == "/dev/nvidia-uvm")
        .expect("uvm open");
    assert_eq!(
        (uvm["errno"].as_str(), uvm["ok"].as_bool()),
        (Some("ENOENT"), Some(false))
    );
    let st = mine
        .iter()
        .find(|r| r["type"] == "stat" && r["path"] == "/dev/nvidia0")
        .expect("stat");
    assert_eq!(st["errno"], "ENOENT");
    let close = mine.iter().find(|r| r["type"] == "close").expect("close");
    assert_eq!(close["fd"], fd);
    // Summary counts what was seen.
    let proc_row = f.summary()["processes"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|p| p["pid"] == pid)
        .cloned()
        .expect("row");
    assert_eq!(proc_row["ioctls"], 10);
    assert_eq!(
        proc_row["failed"], 6,
        "EBUSY, INVALID_DEVICE, INSUFFICIENT_PERMISSIONS, EINVAL, 2 x ENOENT"
    );
}

#[test]
fn fds_are_attributed_however_they_arrived_and_never_after_close() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("fds");
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    let fork = scenario(&drv, "fork", &[]);
    let dup = scenario(&drv, "dup", &[]);
    let scm = scenario(&drv, "scm", &[]);
    let pidfd = scenario(&drv, "pidfd", &[]);
    let closed = scenario(&drv, "closed", &[]);
    let exec = scenario(&drv, "exec", &[]);
    let threads = scenario(&drv, "threads", &["--threads", "4"]);
    let f = t.stop();
    check_schema(&f);

    // Inherited across fork: the child's call, under the child's pid.
    let child = fork["child"].as_u64().expect("child");
    let c = ioctls_of(&f, child);
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0]["fd"].as_i64(), c[0]["device"]["kind"].as_str()),
        (fork["fd"].as_i64(), Some("ctl"))
    );
    assert!(
        ioctls_of(&f, fork["pid"].as_u64().expect("pid")).is_empty(),
        "the parent made none"
    );

    // dup, fcntl(F_DUPFD_CLOEXEC) and dup3 copies.
    let d = ioctls_of(&f, dup["pid"].as_u64().expect("pid"));
    let fds: Vec<i64> = d.iter().map(|r| r["fd"].as_i64().expect("fd")).collect();
    assert_eq!(fds, [4, 100, 200]);
    let dups: Vec<&Value> = f
        .for_pid(dup["pid"].as_u64().expect("pid") as u32)
        .into_iter()
        .filter(|r| r["type"] == "dup")
        .collect();
    let calls: Vec<&str> = dups
        .iter()
        .map(|r| r["syscall"].as_str().expect("syscall"))
        .collect();
    assert_eq!(calls, ["dup", "fcntl(F_DUPFD_CLOEXEC)", "dup3"]);

    // Received over a unix socket (SCM_RIGHTS).
    let s = ioctls_of(&f, scm["child"].as_u64().expect("child"));
    assert_eq!(s.len(), 1);
    assert_eq!(s[0]["device"]["node"], drv.ctl());

    // Taken with pidfd_getfd.
    let p = ioctls_of(&f, pidfd["pid"].as_u64().expect("pid"));
    assert_eq!(p.len(), 1);
    assert_eq!(p[0]["fd"], pidfd["fd"]);

    // After close: the ioctl got EBADF and is not attributed to the device.
    assert_eq!(closed["ret"], -9);
    assert!(ioctls_of(&f, closed["pid"].as_u64().expect("pid")).is_empty());

    // Across exec: the inherited fd is traced, the CLOEXEC one is gone.
    assert_eq!(exec["rets"], serde_json::json!([0, -9]));
    let e = ioctls_of(&f, exec["pid"].as_u64().expect("pid"));
    assert_eq!(e.len(), 1);
    assert_eq!(e[0]["fd"], exec["fds"][0]);

    // Helper threads: each tid, one pid.
    let tp = threads["pid"].as_u64().expect("pid");
    let t_io = ioctls_of(&f, tp);
    assert_eq!(t_io.len(), 20);
    let mut tids: Vec<u64> = t_io
        .iter()
        .map(|r| r["tid"].as_u64().expect("tid"))
        .collect();
    tids.sort_unstable();
    tids.dedup();
    let mut want: Vec<u64> = threads["tids"]
        .as_array()
        .expect("tids")
        .iter()
        .map(|v| v.as_u64().expect("tid"))
        .collect();
    want.sort_unstable();
    assert_eq!(tids, want);
}

#[test]
fn an_fd_opened_before_nvprobe_started_is_traced() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("pre");
    let drv = FakeDrv::start(&tmp);
    let mut child = Command::new(bin("nvfixture"))
        .args(["run", "preopen", "--dir"])
        .arg(&drv.dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready line");
    let ready: Value = serde_json::from_str(&line).expect("JSON");
    // nvprobe starts only now.
    let t = watch(&tmp, &drv, &[]);
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    line.clear();
    out.read_line(&mut line).expect("result");
    assert!(child.wait().expect("wait").success());
    let f = t.stop();
    check_schema(&f);
    let io = ioctls_of(&f, u64::from(child.id()));
    assert_eq!(io.len(), 1);
    assert_eq!(io[0]["fd"], ready["fd"]);
    assert_eq!(io[0]["status"]["name"], "NV_ERR_INVALID_DEVICE");
    assert!(
        !f.for_pid(child.id()).iter().any(|r| r["type"] == "open"),
        "the open happened before tracing"
    );
}

#[test]
fn lost_events_are_counted_exactly_and_reported() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("lost");
    // /dev/null declared a ctl node: ioctls fail fast (ENOTTY), so a tiny
    // ring buffer overflows.
    let mut child = Command::new(bin("nvfixture"))
        .args([
            "run",
            "flood",
            "--dir",
            "/dev/null",
            "--count",
            "20000",
            "--threads",
            "2",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready");
    let pid = child.id().to_string();
    let pid_num = u64::from(child.id());
    let t = Trace::start(
        &tmp,
        &[
            "--device",
            "/dev/null=ctl",
            "--pid",
            &pid,
            "--ringbuf-size",
            "4096",
        ],
    );
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    line.clear();
    out.read_line(&mut line).expect("result");
    assert!(child.wait().expect("wait").success());
    let f = t.stop();
    check_schema(&f);
    let issued = 40_000u64;
    let got = f.records.iter().filter(|r| r["type"] == "ioctl").count() as u64;
    let lost_records: u64 = f
        .of_type("lost")
        .filter(|r| r["kind"] == "ioctl")
        .map(|r| r["count"].as_u64().expect("count"))
        .sum();
    let s = f.summary();
    assert!(
        lost_records > 0,
        "a 4 KiB ring buffer must overflow under a flood"
    );
    assert_eq!(s["lost"]["per_kind"]["ioctl"].as_u64(), Some(lost_records));
    assert_eq!(
        got + lost_records,
        issued,
        "every ioctl is either delivered or counted as lost"
    );
    let per_cpu: u64 = s["lost"]["per_cpu"]
        .as_array()
        .expect("per cpu")
        .iter()
        .map(|v| v.as_u64().expect("n"))
        .sum();
    assert_eq!(per_cpu, s["lost"]["total"].as_u64().expect("total"));
    assert!(f.stderr.contains("events were lost"), "{}", f.stderr);
    // No driver here and no --driver-version: one warning, not one per event.
    assert_eq!(
        f.of_type("warning")
            .filter(|w| w["id"] == "driver_version")
            .count(),
        usize::from(!Path::new("/proc/driver/nvidia/version").exists())
    );
    // Only the filtered pid was traced (kernel-side --pid).
    assert!(
        f.records
            .iter()
            .filter(|r| r.get("pid").is_some())
            .all(|r| r["pid"] == pid_num)
    );
}

#[test]
fn a_dev_nvidia_name_on_the_wrong_device_is_flagged() {
    need_root!();
    let _g = lock();
    if Path::new("/dev/nvidia0").exists() {
        eprintln!("skipping: /dev/nvidia0 exists here; not replacing a real node");
        return;
    }
    let tmp = tmpdir("mismatch");
    struct Node;
    impl Drop for Node {
        fn drop(&mut self) {
            let _ = std::fs::remove_file("/dev/nvidia0");
        }
    }
    // /dev/nvidia0 that is really /dev/null (1:3).
    nix::sys::stat::mknod(
        "/dev/nvidia0",
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(1, 3),
    )
    .expect("mknod");
    let _node = Node;
    let t = Trace::start(&tmp, &["--driver-version", "580.159.04"]);
    let out = Command::new("sh")
        .args(["-c", "exec 3</dev/nvidia0"])
        .status()
        .expect("sh");
    assert!(out.success());
    let f = t.stop();
    check_schema(&f);
    let open = f
        .of_type("open")
        .find(|r| r["path"] == "/dev/nvidia0")
        .expect("open of /dev/nvidia0");
    assert_eq!(open["device"]["major"], 1);
    assert_eq!(open["device"]["minor"], 3);
    assert!(
        open["mismatch"]
            .as_str()
            .expect("flagged")
            .contains("not the NVIDIA gpu node")
    );
    assert_eq!(open["ok"], false);
}

#[test]
fn user_errors_give_clear_messages_and_exit_codes() {
    need_root!();
    let _g = lock();
    let run = |args: &[&str], uid: Option<u32>| {
        let mut c = Command::new(bin("nvprobe"));
        c.args(args);
        if let Some(u) = uid {
            c.uid(u).gid(u);
        }
        let o = c.output().expect("run nvprobe");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["watch"], Some(65534));
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.contains("must run as root") && err.contains("sudo"),
        "{err}"
    );
    let (code, err) = run(&["watch", "--device", "/nonexistent/nvidiactl"], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("/nonexistent/nvidiactl") && err.contains("cannot stat"),
        "{err}"
    );
    let (code, err) = run(&["watch", "--device", "/dev/null"], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("=ctl"), "{err}");
    let (code, err) = run(&["watch", "--ringbuf-size", "1000"], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("power of two"), "{err}");
    let (code, err) = run(&["watch", "--duration", "-1"], None);
    assert_eq!(code, Some(2), "{err}");
    let (code, err) = run(&["watch", "--driver-version", "five"], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not a driver version"), "{err}");
    let tmp = tmpdir("badinput");
    let out = tmp.join("nodir/x.ndjson");
    let (code, err) = run(&["watch", "-o", out.to_str().expect("utf8")], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot create output file"), "{err}");
    // A malformed recording: every bad line is named, valid ones decoded.
    let bad = tmp.join("bad.ndjson");
    std::fs::write(&bad, "not json\n{\"type\":\"ioctl\",\"pid\":1,\"raw\":\"zz\"}\n{\"type\":\"ioctl\",\"pid\":1,\"raw\":\"0100\"}\n").expect("write");
    let (code, err) = run(&["decode", bad.to_str().expect("utf8")], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(":1: not a JSON record"), "{err}");
    assert!(err.contains(":2: raw field is not hex"), "{err}");
    assert!(
        err.contains(":3: record of 2 bytes is shorter than a header"),
        "{err}"
    );
    let (code, err) = run(&["decode", "/nonexistent.ndjson"], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot open /nonexistent.ndjson"), "{err}");
}

#[test]
fn tracefs_is_mounted_when_missing_and_sigterm_detaches() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("tracefs");
    // Leave it unmounted if we can (nothing else of ours holds it now).
    let unmounted = nix::mount::umount2("/sys/kernel/tracing", nix::mount::MntFlags::empty())
        .is_ok()
        || !Path::new("/sys/kernel/tracing/events").exists();
    let t = Trace::start(&tmp, &["--driver-version", "580.159.04"]);
    let pid = t.pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    std::thread::sleep(Duration::from_millis(50));
    let f = t.stop();
    check_schema(&f);
    let start = f.of_type("start").next().expect("start");
    if unmounted && !Path::new("/sys/kernel/debug/tracing/events").exists() {
        assert_eq!(start["tracefs_mounted_by_nvprobe"], true);
        assert!(f.stderr.contains("mounted tracefs"), "{}", f.stderr);
    } else {
        eprintln!("note: tracefs could not be unmounted here; checked the mounted path only");
    }
    assert_eq!(start["tracefs"], "/sys/kernel/tracing");
    assert!(f.summary()["duration_s"].as_f64().is_some());
    // Detached: no nvprobe program is left loaded. The kernel frees
    // programs asynchronously after their last reference (this one's and the
    // previous tests' processes), so give it a moment.
    let loaded = || -> Vec<String> {
        aya::programs::loaded_programs()
            .filter_map(Result::ok)
            .filter_map(|p| p.name_as_str().map(str::to_owned))
            .filter(|n| n.starts_with("nvprobe_"))
            .collect()
    };
    let mut left = loaded();
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        left = loaded();
    }
    assert!(
        left.is_empty(),
        "programs still loaded after exit: {left:?}"
    );
}

#[test]
fn raw_recordings_decode_again_and_text_mode_reads_well() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("raw");
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &["--raw", "--comm", "nvfixture"]);
    scenario(&drv, "basic", &[]);
    let f = t.stop();
    check_schema(&f);
    assert!(
        f.records
            .iter()
            .filter(|r| r.get("pid").is_some())
            .all(|r| r["comm"] == "nvfixture"),
        "--comm filters"
    );
    let live: Vec<String> = f
        .of_type("ioctl")
        .map(|r| r["name"].as_str().unwrap_or("?").to_owned())
        .collect();
    let out = Command::new(bin("nvprobe"))
        .arg("decode")
        .arg(t_out(&f, &tmp))
        .arg("--json")
        .output()
        .expect("decode");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
        .filter(|r| r["type"] == "ioctl")
        .map(|r| r["name"].as_str().unwrap_or("?").to_owned())
        .collect();
    assert_eq!(live, again);
    let text = Command::new(bin("nvprobe"))
        .arg("decode")
        .arg(t_out(&f, &tmp))
        .output()
        .expect("decode");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("NV_ESC_RM_CONTROL{hClient=")
                && l.contains("control=NV0000_CTRL_CMD_GPU_ATTACH_IDS")
                && l.contains(") = 0 NV_ERR_INVALID_DEVICE <")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("NV_ESC_SYS_PARAMS{memblock_size=0x10000000}) = -1 EBUSY")),
        "{text}"
    );
    assert!(text.contains("--- nvprobe summary:"), "{text}");
}

/// The file a finished trace wrote (the harness names it).
fn t_out(f: &Finished, tmp: &Path) -> PathBuf {
    let p = tmp.join("recording.ndjson");
    let body: String = f.records.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&p, body).expect("write recording");
    p
}

#[test]
fn calls_from_a_pid_namespace_carry_both_pids() {
    need_root!();
    let _g = lock();
    if Command::new("unshare").arg("--version").output().is_err() {
        eprintln!("skipping: unshare(1) is not installed");
        return;
    }
    let tmp = tmpdir("pidns");
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--"])
        .arg(bin("nvfixture"))
        .args(["run", "fork", "--dir"])
        .arg(&drv.dir)
        .output()
        .expect("unshare");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ran: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).expect("JSON");
    let f = t.stop();
    check_schema(&f);
    // Inside the namespace the fixture is pid 1 and its child pid 2.
    assert_eq!(
        (ran["pid"].as_u64(), ran["child"].as_u64()),
        (Some(1), Some(2))
    );
    let io: Vec<&Value> = f.of_type("ioctl").filter(|r| r["ns_pid"] == 2).collect();
    assert_eq!(io.len(), 1, "the child's call, seen with its namespace pid");
    assert_eq!(io[0]["ns_tid"], 2);
    assert_ne!(io[0]["pid"], 2, "and with its host pid");
    assert_eq!(io[0]["device"]["kind"], "ctl");
}

#[test]
fn cuinit_verdicts_name_the_killer_and_the_stage() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("verdict");
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    // A harness `timeout` kills a process that waits after opening the ctl node.
    let mut killed = Command::new("timeout")
        .args(["-s", "TERM", "0.5"])
        .arg(bin("nvfixture"))
        .args(["run", "preopen", "--dir"])
        .arg(&drv.dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("timeout");
    let timeout_pid = u64::from(killed.id());
    // Keep its stdin open: it waits there until killed.
    let _stdin = killed.stdin.take();
    let st = killed.wait().expect("wait");
    assert_eq!(st.code(), Some(124));
    // Its own alarm(1) kills a process inside driver calls.
    let alarm = Command::new(bin("nvfixture"))
        .args(["run", "alarm", "--dir"])
        .arg(&drv.dir)
        .status()
        .expect("alarm");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&alarm),
        Some(14)
    );
    // A clean run that exits 0.
    let ok = scenario(&drv, "dup", &[]);
    let f = t.stop();
    check_schema(&f);
    let verdicts: Vec<&Value> = f.of_type("cuinit").collect();
    let of = |pid: u64| verdicts.iter().find(|v| v["pid"] == pid).copied();

    let sent = f
        .of_type("proc")
        .find(|r| r["op"] == "signal" && r["pid"] == timeout_pid)
        .expect("timeout's SIGTERM seen");
    let victim = sent["target_pid"].as_u64().expect("target");
    assert_eq!(
        (sent["signal"].as_str(), sent["code"].as_i64()),
        (Some("SIGTERM"), Some(0))
    );
    let v = of(victim).expect("verdict for the killed process");
    assert_eq!(v["result"], "killed");
    let text = v["text"].as_str().expect("text");
    assert!(
        text.starts_with(&format!(
            "killed by SIGTERM from timeout[{timeout_pid}] after "
        )),
        "{text}"
    );
    assert!(text.ends_with(", at S0 ctl_opened"), "{text}");
    assert_eq!(v["diagnoses"][0]["id"], "killed_by_signal");
    assert_eq!(v["exit"], "killed by SIGTERM");

    let alarm_v = verdicts
        .iter()
        .find(|v| v["signal"]["name"] == "SIGALRM")
        .expect("verdict for the alarm process");
    assert_eq!(alarm_v["result"], "killed");
    let text = alarm_v["text"].as_str().expect("text");
    assert!(
        text.contains("killed by SIGALRM from the kernel (alarm/itimer"),
        "{text}"
    );
    assert!(
        text.contains(
            "in NV_ESC_RM_CONTROL NV2080_CTRL_CMD_GPU_GET_NAME_STRING; the call was still running"
        ),
        "{text}"
    );

    // The signal record: the call SIGALRM landed in, at which stage, and
    // what became of it (the kill ended the call).
    let sig = f
        .of_type("signal")
        .find(|s| s["signal"] == "SIGALRM")
        .unwrap_or_else(|| panic!("a signal record for SIGALRM: {:#?}", f.records));
    assert_eq!(
        sig["in_flight"],
        "NV_ESC_RM_CONTROL NV2080_CTRL_CMD_GPU_GET_NAME_STRING"
    );
    assert_eq!(sig["stage"], "S0 ctl_opened");
    assert_eq!(sig["sender"], "the kernel (alarm/itimer or a fault)");
    assert!(
        matches!(sig["outcome"].as_str(), Some("died_in_call" | "completed")),
        "{sig}"
    );

    let ok_v = of(ok["pid"].as_u64().expect("pid")).expect("verdict for the clean run");
    assert_eq!(ok_v["exit"], "exited with status 0");
    assert_eq!(ok_v["stages"][0]["stage"], "S0");
    let exit = f
        .of_type("proc")
        .find(|r| r["op"] == "exit" && r["pid"] == ok["pid"])
        .expect("exit record");
    assert_eq!(exit["exit_code"], 0);
}

/// Start `nvfixture run cuinit` with the stand-in libcuda loaded; it waits
/// for a line on stdin before calling cuInit.
fn spawn_cuinit(
    drv: &FakeDrv,
    lib: &Path,
    mode: &str,
) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let mut c = Command::new(bin("nvfixture"))
        .args(["run", "cuinit", "--dir"])
        .arg(&drv.dir)
        .arg("--lib")
        .arg(lib)
        .env("NVPROBE_STUB_MODE", mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn nvfixture");
    let mut out = BufReader::new(c.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready");
    assert!(line.contains("ready"), "{line}");
    (c, out)
}

/// Build the stand-in libcuda (tests/cuda-stub/libcuda.c) with cc.
fn stub_libcuda(tmp: &Path) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda-stub/libcuda.c");
    let out = tmp.join("stublib/libcuda.so.1");
    std::fs::create_dir_all(out.parent().expect("dir")).expect("mkdir");
    let ok = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(out)
}

#[test]
fn libcuda_uprobes_give_the_curesult_verdict() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("uprobe");
    let Some(lib) = stub_libcuda(&tmp) else {
        eprintln!("skipping: no C compiler to build the stand-in libcuda");
        return;
    };
    let drv = FakeDrv::start(&tmp);
    let (mut good, mut good_out) = spawn_cuinit(&drv, &lib, "ok");
    let (mut bad, mut bad_out) = spawn_cuinit(&drv, &lib, "fail");
    // nvprobe finds the library in the processes' maps at start.
    let t = watch(&tmp, &drv, &[]);
    for (c, out) in [(&mut good, &mut good_out), (&mut bad, &mut bad_out)] {
        c.stdin
            .take()
            .expect("stdin")
            .write_all(b"go\n")
            .expect("go");
        let mut line = String::new();
        out.read_line(&mut line).expect("result");
        assert!(c.wait().expect("wait").success());
    }
    let f = t.stop();
    check_schema(&f);
    let start_rec = f.of_type("start").next().expect("start");
    let hooked = start_rec["libcuda"].as_array().expect("libcuda list");
    let stub = hooked
        .iter()
        .find(|a| {
            a["path"]
                .as_str()
                .is_some_and(|p| p.ends_with(lib.to_str().expect("utf8")))
        })
        .expect("the stand-in libcuda was hooked");
    assert_eq!(
        stub["functions"],
        serde_json::json!([
            "cuInit",
            "cuDriverGetVersion",
            "cuDeviceGetCount",
            "cuDeviceGet"
        ])
    );

    let gp = u64::from(good.id());
    let cuda: Vec<&Value> = f.of_type("cuda").filter(|r| r["pid"] == gp).collect();
    let init_ret = cuda
        .iter()
        .find(|r| r["func"] == "cuInit" && r["phase"] == "return")
        .expect("cuInit return");
    assert_eq!(
        (
            init_ret["result"].as_i64(),
            init_ret["result_name"].as_str()
        ),
        (Some(0), Some("CUDA_SUCCESS"))
    );
    assert!(init_ret["duration_ns"].as_u64().expect("ns") > 0);
    let enter = cuda
        .iter()
        .find(|r| r["func"] == "cuInit" && r["phase"] == "enter")
        .expect("cuInit entry");
    assert_eq!(enter["flags"], 0);
    let count = cuda
        .iter()
        .find(|r| r["func"] == "cuDeviceGetCount" && r["phase"] == "return")
        .expect("count");
    assert_eq!(count["value"], 1, "the count written through the pointer");

    let verdict = |pid: u64| {
        f.of_type("cuinit")
            .find(|v| v["pid"] == pid)
            .cloned()
            .expect("verdict")
    };
    let v = verdict(gp);
    assert_eq!(
        (v["result"].as_str(), v["curesult"].as_str()),
        (Some("ok"), Some("CUDA_SUCCESS (0)"))
    );
    assert_eq!(
        v["source"],
        "libcuda uprobe (cuInit's return) and driver calls"
    );
    let v = verdict(u64::from(bad.id()));
    assert_eq!(v["result"], "failed");
    assert_eq!(v["curesult"], "CUDA_ERROR_NOT_INITIALIZED (3)");
    let text = v["text"].as_str().expect("text");
    assert!(
        text.contains(
            "NV_ESC_RM_CONTROL NV0000_CTRL_CMD_GPU_ATTACH_IDS returned NV_ERR_INVALID_DEVICE"
        ),
        "{text}"
    );
}

#[test]
fn a_child_using_its_parents_nvidia_fds_is_diagnosed() {
    need_root!();
    let (ran, f) = trace_scenario("fork", &[]);
    let child = ran["child"].as_u64().expect("child");
    assert!(
        f.of_type("proc")
            .any(|r| r["op"] == "fork" && r["pid"] == ran["pid"] && r["target_pid"] == child),
        "the fork is recorded"
    );
    let v = f
        .of_type("cuinit")
        .find(|v| v["pid"] == child)
        .expect("child verdict");
    let d = v["diagnoses"].as_array().expect("diagnoses");
    let inh = d
        .iter()
        .find(|d| d["id"] == "inherited_nvidia_fds")
        .expect("rule fired");
    assert!(
        inh["evidence"]
            .as_str()
            .expect("evidence")
            .contains(&format!("fd {}", ran["fd"])),
        "{inh}"
    );
    assert!(
        inh["hint"].as_str().expect("hint").contains("fork"),
        "{inh}"
    );
    // The parent opened its own fd: no such diagnosis there.
    let parent = f.of_type("cuinit").find(|v| v["pid"] == ran["pid"]);
    assert!(parent.is_none_or(|p| {
        p["diagnoses"]
            .as_array()
            .is_some_and(|d| d.iter().all(|d| d["id"] != "inherited_nvidia_fds"))
    }));
}

#[test]
fn stalls_say_which_call_and_what_the_thread_is_doing() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("stall");
    let Some(lib) = stub_libcuda(&tmp) else {
        eprintln!("skipping: no C compiler to build the stand-in libcuda");
        return;
    };
    let drv = FakeDrv::start(&tmp);
    // A cuInit that will take 3 s, waiting to start.
    let (mut c, mut out) = spawn_cuinit(&drv, &lib, "hang");
    // A cuInit that computes for 2.5 s.
    let (mut spin, mut spin_out) = spawn_cuinit(&drv, &lib, "spin");
    let mut line = String::new();
    let t = watch(&tmp, &drv, &["--stall-after", "1"]);
    // 1. An ioctl that the stand-in answers after 2.5 s.
    let hang = scenario(&drv, "hang", &[]);
    assert_eq!(hang["ret"], 0);
    // 2. The 3 s cuInit, stopped by us half-way.
    c.stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    std::thread::sleep(Duration::from_millis(300));
    let pid = nix::unistd::Pid::from_raw(c.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("SIGSTOP");
    std::thread::sleep(Duration::from_millis(1800));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).expect("SIGCONT");
    line.clear();
    out.read_line(&mut line).expect("result");
    assert!(c.wait().expect("wait").success());
    // 3. The computing cuInit.
    spin.stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    line.clear();
    spin_out.read_line(&mut line).expect("result");
    assert!(spin.wait().expect("wait").success());
    let f = t.stop();
    check_schema(&f);
    let stalls: Vec<&Value> = f.of_type("stall").collect();

    let io = stalls
        .iter()
        .find(|s| s["pid"] == hang["pid"])
        .unwrap_or_else(|| panic!("a stall report for the hanging ioctl: {stalls:#?}"));
    assert_eq!(io["call"], "NV_ESC_RM_CONTROL");
    assert!(io["elapsed_s"].as_f64().expect("s") >= 1.0);
    let state = io["state"].as_str().expect("state");
    assert!(
        matches!(state, "S" | "D"),
        "waiting on the FUSE server: {state}"
    );
    let text = io["text"].as_str().expect("text");
    // The hanging call came after the control node was opened.
    assert_eq!(io["stage"], "S0 ctl_opened");
    assert!(
        text.starts_with("NV_ESC_RM_CONTROL (after S0 ctl_opened) has run "),
        "{text}"
    );
    assert!(
        text.contains(if state == "D" {
            "blocked in the kernel (D) in "
        } else {
            "sleeping (S) in "
        }),
        "{text}"
    );
    assert!(io["wchan"].as_str().is_some_and(|w| !w.is_empty()), "{io}");

    let ci = stalls
        .iter()
        .find(|s| s["pid"] == u64::from(c.id()) && s["state"] == "T")
        .unwrap_or_else(|| panic!("a stall report for the stopped cuInit: {stalls:#?}"));
    assert_eq!(ci["call"], "cuInit");
    let text = ci["text"].as_str().expect("text");
    assert!(
        text.contains("the process is stopped (T) by SIGSTOP from "),
        "{text}"
    );
    assert!(text.ends_with("not stuck in the driver"), "{text}");
    assert!(text.starts_with("cuInit (after S"), "{text}");

    let r = stalls
        .iter()
        .find(|s| s["pid"] == u64::from(spin.id()))
        .unwrap_or_else(|| panic!("a stall report for the computing cuInit: {stalls:#?}"));
    assert_eq!(r["call"], "cuInit");
    assert_eq!(r["state"], "R", "{r}");
    assert!(
        r["text"]
            .as_str()
            .is_some_and(|t| t.contains("running (R), in user space or in the kernel")),
        "{r}"
    );
    assert!(
        ci["stopped_by"]
            .as_str()
            .is_some_and(|s| s.contains(&format!("[{}]", std::process::id()))),
        "{ci}"
    );
}

#[test]
fn fifty_processes_with_helper_threads_keep_their_own_state() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("fifty");
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &["--summary-only"]);
    let children: Vec<std::process::Child> = (0..50)
        .map(|_| {
            Command::new(bin("nvfixture"))
                .args(["run", "threads", "--threads", "3", "--dir"])
                .arg(&drv.dir)
                .stdout(Stdio::null())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let pids: Vec<u64> = children.iter().map(|c| u64::from(c.id())).collect();
    for mut c in children {
        assert!(c.wait().expect("wait").success());
    }
    let f = t.stop();
    check_schema(&f);
    assert_eq!(
        f.of_type("ioctl").count(),
        0,
        "--summary-only prints no calls"
    );
    for pid in &pids {
        let v: Vec<&Value> = f.of_type("cuinit").filter(|v| v["pid"] == *pid).collect();
        assert_eq!(v.len(), 1, "one verdict for pid {pid}");
        // 3 helper threads x 5 calls each, all counted for the process.
        assert_eq!(v[0]["calls"], 15, "{}", v[0]);
        assert_eq!(v[0]["exit"], "exited with status 0");
    }
    let s = f.summary();
    assert_eq!(s["lost"]["total"], 0);
}

#[test]
fn an_exec_starts_a_new_state() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("exec");
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    let ran = scenario(&drv, "exec", &[]);
    let f = t.stop();
    check_schema(&f);
    let pid = ran["pid"].as_u64().expect("pid");
    let exec = f
        .of_type("proc")
        .find(|r| r["op"] == "exec" && r["pid"] == pid)
        .expect("exec record");
    assert_eq!(exec["target_pid"], pid);
    let v: Vec<&Value> = f.of_type("cuinit").filter(|v| v["pid"] == pid).collect();
    // Before the exec: two opens, no calls (no verdict); after: one call on
    // the inherited fd, then the exit.
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0]["calls"], 1);
    assert_eq!(v[0]["exit"], "exited with status 0");
    assert_eq!(
        v[0]["diagnoses"][0]["id"], "inherited_nvidia_fds",
        "the new program never opened the fd it used"
    );
}

/// libcuda with a missing node: stat() fails, the setuid nvidia-modprobe
/// runs and fails. The helper's fork, exec and exit status are captured and
/// explain the parent's verdict.
#[test]
fn a_failing_nvidia_modprobe_is_named() {
    need_root!();
    let (run, f) = trace_scenario("modprobe", &[]);
    assert_eq!(run["stat_errno"], 2, "{run}");
    assert_eq!(run["helper_status"], 1, "{run}");
    let pid = run["pid"].as_u64().expect("pid");
    let fork = f
        .of_type("proc")
        .find(|r| r["op"] == "fork" && r["pid"] == pid)
        .unwrap_or_else(|| panic!("the helper's fork: {:#?}", f.records));
    let child = fork["target_pid"].as_u64().expect("child");
    assert!(
        f.of_type("proc")
            .any(|r| r["op"] == "exec" && r["pid"] == child && r["comm"] == "nvidia-modprobe"),
        "the helper's exec"
    );
    let exit = f
        .of_type("proc")
        .find(|r| r["op"] == "exit" && r["pid"] == child)
        .expect("the helper's exit");
    assert_eq!(exit["exit"], "exited with status 1");
    let v = f
        .of_type("cuinit")
        .find(|v| v["pid"] == pid)
        .unwrap_or_else(|| panic!("a verdict for the parent: {:#?}", f.records));
    let ids: Vec<&str> = v["diagnoses"]
        .as_array()
        .expect("diagnoses")
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    assert_eq!(ids, ["node_missing", "nvidia_modprobe_failed"], "{v}");
    assert_eq!(
        v["diagnoses"][0]["evidence"],
        format!("{}: ENOENT", run["missing"].as_str().expect("path"))
    );
    assert_eq!(
        v["diagnoses"][1]["evidence"],
        format!("nvidia-modprobe (pid {child}) exited with status 1")
    );
    assert!(
        f.of_type("cuinit").all(|v| v["pid"] != child),
        "the helper gets no verdict of its own"
    );
}

/// A signal caught by an SA_RESTART handler during a blocking call: the
/// delivery says so, and the signal record names the call and its end.
#[test]
fn a_handled_signal_names_its_call_and_disposition() {
    need_root!();
    let (run, f) = trace_scenario("handled", &[]);
    assert_eq!(run["ret"], 0, "{run}");
    let pid = run["pid"].as_u64().expect("pid");
    let d = f
        .of_type("proc")
        .find(|r| r["op"] == "signal_delivered" && r["pid"] == pid)
        .unwrap_or_else(|| panic!("the delivery: {:#?}", f.records));
    assert_eq!(d["signal"], "SIGALRM");
    assert_eq!(d["action"], "handler");
    assert_eq!(d["sa_restart"], true);
    let s = f
        .of_type("signal")
        .find(|r| r["pid"] == pid)
        .unwrap_or_else(|| panic!("a signal record: {:#?}", f.records));
    assert_eq!(s["signal"], "SIGALRM");
    assert_eq!(s["sender"], "the kernel (alarm/itimer or a fault)");
    assert_eq!(
        s["in_flight"],
        "NV_ESC_RM_CONTROL NV2080_CTRL_CMD_GPU_GET_SHORT_NAME_STRING"
    );
    assert_eq!(s["stage"], "S0 ctl_opened");
    // The FUSE stand-in answers after 2.5 s whatever the signal (with its
    // status for an unknown control): the call completes, no EINTR.
    assert_eq!(s["outcome"], "completed", "{s}");
    assert!(
        s["text"]
            .as_str()
            .is_some_and(|t| t.ends_with("the call returned NV_ERR_INVALID_COMMAND, not EINTR")),
        "{s}"
    );
}

/// `zcat /proc/config.gz`: the kernel's own account of what it was built
/// with, independent of doctor's probes.
fn kernel_config() -> Option<String> {
    let o = Command::new("zcat").arg("/proc/config.gz").output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

fn doctor_json(args: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let o = Command::new(bin("nvprobe"))
        .arg("doctor")
        .arg("--json")
        .args(args)
        .output()
        .expect("run nvprobe doctor");
    let doc = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    (
        o.status.code(),
        doc,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn check_of<'a>(doc: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no {id} check: {doc}"))
}

/// The live kernel checks load real probes. What they find must agree with
/// /proc/config.gz and with the facts of this machine kind (ENVIRONMENT.md:
/// a 6.18 Firecracker guest whose security policy refuses TRACING programs
/// with EPERM, and which has no kprobes).
#[test]
fn doctor_asks_the_kernel_and_agrees_with_its_config() {
    need_root!();
    let _g = lock();
    let Some(cfg) = kernel_config() else {
        eprintln!("skipping: no /proc/config.gz to compare with");
        return;
    };
    let set = |k: &str| cfg.lines().any(|l| l == format!("{k}=y"));
    let (_, doc, _) = doctor_json(&[]);
    assert!(
        doc["scope"]
            .as_str()
            .is_some_and(|s| s.starts_with("this host: the kernel was asked")),
        "{doc}"
    );
    assert_eq!(
        check_of(&doc, "bpf")["verdict"],
        if set("CONFIG_BPF_SYSCALL") {
            "ok"
        } else {
            "fail"
        }
    );
    assert_eq!(
        check_of(&doc, "btf")["verdict"],
        if set("CONFIG_DEBUG_INFO_BTF") {
            "ok"
        } else {
            "fail"
        }
    );
    let tp = check_of(&doc, "tracepoint");
    assert_eq!(
        tp["verdict"],
        if set("CONFIG_FTRACE_SYSCALLS") {
            "ok"
        } else {
            "fail"
        },
        "{tp}"
    );
    if set("CONFIG_FTRACE_SYSCALLS") {
        let e = tp["evidence"].as_str().expect("evidence");
        assert!(
            e.starts_with("tracepoint syscalls/sys_enter_getppid: attached and fired ("),
            "{e}"
        );
    }
    let up = check_of(&doc, "uprobe");
    assert_eq!(
        up["verdict"],
        if set("CONFIG_UPROBE_EVENTS") {
            "ok"
        } else {
            "warn"
        },
        "{up}"
    );
    let kp = check_of(&doc, "kprobe");
    if set("CONFIG_KPROBES") {
        assert_eq!(kp["verdict"], "ok", "{kp}");
    } else {
        assert_eq!(kp["verdict"], "warn", "{kp}");
        assert!(
            kp["evidence"]
                .as_str()
                .is_some_and(|e| e
                    .starts_with("no kprobe PMU (/sys/bus/event_source/devices/kprobe is missing")),
            "{kp}"
        );
    }
    let layers = check_of(&doc, "layers")["evidence"]
        .as_str()
        .expect("layers")
        .to_owned();
    assert!(
        layers.ends_with(if set("CONFIG_KPROBES") {
            "driver layer (kprobes inside nvidia/nvidia_uvm): yes"
        } else {
            "driver layer (kprobes inside nvidia/nvidia_uvm): no"
        }),
        "{layers}"
    );
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    if release.contains("-fc-") {
        // This machine kind: fentry is refused by policy, with EPERM.
        let fe = check_of(&doc, "fentry");
        assert_eq!(fe["verdict"], "warn", "{fe}");
        assert!(
            fe["evidence"]
                .as_str()
                .is_some_and(|e| e.starts_with("the kernel refused it with EPERM")),
            "{fe}"
        );
        assert!(!set("CONFIG_KPROBES"), "this machine kind has no kprobes");
        assert!(layers.starts_with("syscall layer (ioctls, opens on /dev/nvidia*): yes; process layer (signals, exits, forks): yes; libcuda uprobes (cuInit's own result): yes;"), "{layers}");
    }
    // No probe is left behind.
    let left = Command::new("sh")
        .args(["-c", "cat /sys/kernel/tracing/uprobe_events 2>/dev/null"])
        .output()
        .expect("sh");
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains("getppid"),
        "the uprobe was detached"
    );
}

/// `--snapshot` captures what doctor reads; `--root` on the archive (and on
/// a folder) gives the same file-level verdicts elsewhere.
#[test]
fn doctor_snapshot_round_trip() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("snapshot");
    let tar = tmp.join("host.tar.gz");
    let o = Command::new(bin("nvprobe"))
        .args(["doctor", "--snapshot"])
        .arg(&tar)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("wrote a snapshot of this host to"), "{err}");
    let list = Command::new("tar")
        .arg("tzf")
        .arg(&tar)
        .output()
        .expect("tar");
    let names = String::from_utf8_lossy(&list.stdout);
    for f in [
        "dev.manifest",
        "libs.manifest",
        "kmsg.txt",
        "snapshot.json",
        "proc/devices",
        "sys/kernel/btf.list",
        "sys/bus/event_source/devices.list",
    ] {
        assert!(
            names.lines().any(|l| l.trim_start_matches("./") == f),
            "{f} missing from {names}"
        );
    }
    assert!(
        !names.contains("environ") || {
            // pid 1's environment is cut down to container= / KUBERNETES.
            let env = Command::new("tar")
                .arg("xzOf")
                .arg(&tar)
                .arg("proc/1/environ")
                .output()
                .expect("tar");
            env.stdout.split(|&b| b == 0).all(|e| {
                e.is_empty()
                    || e.starts_with(b"container=")
                    || e.starts_with(b"KUBERNETES_SERVICE_HOST=")
            })
        }
    );
    let (_, live, _) = doctor_json(&[]);
    let (code, snap, _) = doctor_json(&["--root", tar.to_str().expect("utf8")]);
    assert!(code.is_some_and(|c| c <= 1));
    assert!(
        snap["scope"]
            .as_str()
            .is_some_and(|s| s.ends_with("file evidence only (no probes loaded, no opens tried)"))
    );
    for id in ["driver_loaded", "uvm_loaded", "runtime", "btf"] {
        assert_eq!(
            check_of(&live, id)["verdict"],
            check_of(&snap, id)["verdict"],
            "{id}"
        );
    }
    assert_eq!(
        check_of(&live, "runtime")["evidence"],
        check_of(&snap, "runtime")["evidence"]
    );
    let kp_live = check_of(&live, "kprobe")["verdict"].clone();
    assert_eq!(
        check_of(&snap, "kprobe")["verdict"],
        kp_live,
        "the event-source listing says the same"
    );
    // A folder works too, and an existing non-empty one is refused.
    let dir = tmp.join("folder");
    let o = Command::new(bin("nvprobe"))
        .args(["doctor", "--snapshot"])
        .arg(&dir)
        .output()
        .expect("run");
    assert!(o.status.code().is_some_and(|c| c <= 1));
    assert!(dir.join("snapshot.json").is_file());
    let again = Command::new(bin("nvprobe"))
        .args(["doctor", "--snapshot"])
        .arg(&dir)
        .output()
        .expect("run");
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("the folder exists and is not empty"));
    let both = Command::new(bin("nvprobe"))
        .args(["doctor", "--snapshot", "/tmp/x.tar", "--root"])
        .arg(&dir)
        .output()
        .expect("run");
    assert_eq!(both.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&tmp);
}

/// This kernel has no kprobes (and refuses fentry): the driver layer is
/// reported unavailable once, with the reason, in the text and in the
/// NDJSON (a warning and the start record), and the syscall layer still
/// decodes the scenario's calls.
#[test]
fn driver_layer_unavailable_is_said_once_and_tracing_goes_on() {
    need_root!();
    if std::path::Path::new("/sys/bus/event_source/devices/kprobe/type").exists() {
        eprintln!("skipping: this kernel has kprobes");
        return;
    }
    let (run, f) = trace_scenario("basic", &[]);
    let lines: Vec<&str> = f
        .stderr
        .lines()
        .filter(|l| l.contains("driver layer not attached"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", f.stderr);
    assert!(
        lines[0].contains("this kernel has no kprobes (no /sys/bus/event_source/devices/kprobe: CONFIG_KPROBES is off)")
            && lines[0].ends_with("the syscall layer traces every call"),
        "{}",
        lines[0]
    );
    let warn: Vec<&Value> = f
        .records
        .iter()
        .filter(|r| r["type"] == "warning" && r["id"] == "driver_layer")
        .collect();
    assert_eq!(warn.len(), 1);
    let start = f
        .records
        .iter()
        .find(|r| r["type"] == "start")
        .expect("start");
    assert_eq!(start["driver_layer"]["attached"], false);
    assert!(
        start["driver_layer"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("this kernel has no kprobes")),
        "{start}"
    );
    let pid = run["pid"].as_u64().expect("pid");
    assert_eq!(
        ioctls_of(&f, pid).len(),
        10,
        "the syscall layer traced the scenario"
    );
}

/// With tracefs unmounted, doctor tests tracepoints in a private mount
/// namespace: the host is left as it was.
#[test]
fn doctor_tests_tracepoints_without_mounting_tracefs_on_the_host() {
    need_root!();
    let _g = lock();
    if nix::mount::umount2("/sys/kernel/tracing", nix::mount::MntFlags::empty()).is_err()
        || Path::new("/sys/kernel/debug/tracing/events").exists()
    {
        eprintln!("skipping: tracefs cannot be unmounted here");
        return;
    }
    let (_, doc, _) = doctor_json(&[]);
    let still_unmounted = !Path::new("/sys/kernel/tracing/events").exists();
    let _ = nix::mount::mount(
        Some("tracefs"),
        "/sys/kernel/tracing",
        Some("tracefs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    );
    assert!(still_unmounted, "doctor must not mount tracefs on the host");
    let t = check_of(&doc, "tracefs");
    assert_eq!(t["verdict"], "ok");
    assert!(
        t["evidence"]
            .as_str()
            .is_some_and(|e| e.contains("tested in a private mount namespace")),
        "{t}"
    );
    let tp = check_of(&doc, "tracepoint");
    assert!(
        tp["evidence"]
            .as_str()
            .is_some_and(|e| e.contains("attached and fired")),
        "{tp}"
    );
}

/// A read of /proc/driver/nvidia that never comes back (a stuck driver):
/// doctor reads it in a child, gives up after its timeout, says which file
/// and why, and finishes the other checks. Here a FUSE file whose read
/// hangs stands in for the driver's procfs file.
#[test]
fn doctor_does_not_hang_on_a_stuck_driver_file() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("stuck");
    let tree = tmp.join("tree");
    let _ = std::fs::remove_dir_all(&tree);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hosts/healthy");
    assert!(
        Command::new("cp")
            .arg("-r")
            .arg(&src)
            .arg(&tree)
            .status()
            .expect("cp")
            .success()
    );
    let gpu = tree.join("proc/driver/nvidia/gpus/0000:00:06.0");
    std::fs::remove_file(gpu.join("information")).expect("the tree has it");
    let drv = FakeDrv::start_at(&gpu);
    let (code, doc, _) = doctor_json(&["--root", tree.to_str().expect("utf8")]);
    drop(drv);
    assert_eq!(code, Some(1), "{doc}");
    let p = check_of(&doc, "proc_driver");
    assert_eq!(p["verdict"], "fail");
    assert_eq!(
        p["evidence"],
        "reading /proc/driver/nvidia/gpus/0000:00:06.0/information did not finish within 2 s: the driver is stuck in the kernel"
    );
    assert!(
        p["hint"]
            .as_str()
            .is_some_and(|h| h.contains("fuser -v /dev/nvidia*"))
    );
    // The rest ran: the driver version came from its own (readable) file,
    // and the GPU is reported as not answering, not as absent.
    assert_eq!(check_of(&doc, "driver_loaded")["verdict"], "ok");
    let g = check_of(&doc, "gpu");
    assert_eq!(g["verdict"], "fail");
    assert_eq!(
        g["evidence"],
        "0000:00:06.0: the driver did not answer for this GPU (its information file blocked)"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
