//! Tier 2: the real BPF programs on this machine's kernel, as root.
//!
//! A FUSE stand-in serves the NVIDIA device files (tests/src/fakedrv.rs)
//! and `nvfixture` makes driver-style calls on it; `nvprobe watch --json`
//! runs as a separate process, exactly as a user runs it. Without root the
//! tests say `skipping` and pass, since loading BPF needs root. What the
//! root tests share is in tests/src/scenario.rs.
//!
//! This file: stall reports: a call that hangs in the driver, a stopped cuInit,
//! and a cuInit computing in user space.

use std::io::{BufRead, Write};

use nvprobe_tests::{
    need_root,
    scenario::{FakeDrv, check_schema, lock, scenario, spawn_cuinit, stub_libcuda, tmpdir, watch},
};
use serde_json::Value;

#[test]
#[ignore = "needs root"]
fn stalls_say_which_call_and_what_the_thread_is_doing() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("stall");
    let lib = stub_libcuda(&tmp);
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
    // Stopped once its cuInit has begun (the uprobe's entry record), and
    // let go once the stall report of the stopped thread is written: the
    // test waits for nvprobe, not for a window of time.
    let cpid = go_until_cuinit(&mut c, &t);
    let pid = nix::unistd::Pid::from_raw(c.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("SIGSTOP");
    t.wait_for("a stall report of the stopped cuInit", |r| {
        r["type"] == "stall" && r["pid"] == cpid && r["state"] == "T"
    });
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
    assert_eq!(io["stage"], "ctl_opened");
    assert!(
        text.starts_with("NV_ESC_RM_CONTROL (after ctl_opened) has run "),
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
    assert!(
        text.starts_with("cuInit (after version_handshake) has run "),
        "{text}"
    );

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

/// A cgroup of the test's own under this machine's freezer (v2's
/// `cgroup.freeze`, else v1's freezer controller), removed at the end.
struct Freezer {
    dir: std::path::PathBuf,
    file: &'static str,
    states: (&'static str, &'static str),
}

impl Freezer {
    fn new(tag: &str) -> Freezer {
        let name = format!("nvprobe-test-{tag}-{}", std::process::id());
        let v2 = std::path::Path::new("/sys/fs/cgroup");
        let f = if v2.join("cgroup.controllers").exists() {
            Freezer {
                dir: v2.join(name),
                file: "cgroup.freeze",
                states: ("1", "0"),
            }
        } else {
            let v1 = std::path::Path::new("/sys/fs/cgroup/freezer");
            assert!(
                v1.join("freezer.state").exists() || v1.join("tasks").exists(),
                "this test needs the cgroup freezer (cgroup v2, or v1's freezer controller mounted at {}): a \
kernel with CONFIG_CGROUP_FREEZER",
                v1.display()
            );
            Freezer {
                dir: v1.join(name),
                file: "freezer.state",
                states: ("FROZEN", "THAWED"),
            }
        };
        std::fs::create_dir_all(&f.dir).expect("a cgroup for the test");
        f
    }

    /// Moves process `pid` into the cgroup.
    fn enter(&self, pid: u32) {
        let procs = if self.file == "cgroup.freeze" {
            "cgroup.procs"
        } else {
            "tasks"
        };
        std::fs::write(self.dir.join(procs), pid.to_string())
            .expect("move the process into the cgroup");
    }

    fn freeze(&self, on: bool) {
        let state = if on { self.states.0 } else { self.states.1 };
        std::fs::write(self.dir.join(self.file), state).expect("freeze or thaw");
    }

    /// The cgroup's path as /proc/PID/cgroup says it.
    fn path(&self) -> String {
        format!(
            "/{}",
            self.dir.file_name().and_then(|n| n.to_str()).expect("name")
        )
    }
}

impl Drop for Freezer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A cuInit whose cgroup is frozen (docker pause): the stall report says
/// the freezer holds it, with the cgroup, not that it sleeps in the
/// kernel.
#[test]
#[ignore = "needs root"]
fn a_frozen_cuinit_is_reported_as_frozen_not_stuck() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("frozen");
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let cg = Freezer::new("frozen");
    let (mut c, mut out) = spawn_cuinit(&drv, &lib, "hang");
    let t = watch(&tmp, &drv, &["--stall-after", "1"]);
    cg.enter(c.id());
    let cpid = go_until_cuinit(&mut c, &t);
    cg.freeze(true);
    let stall = t.wait_for("a stall report of the frozen cuInit", |r| {
        r["type"] == "stall" && r["pid"] == cpid
    });
    cg.freeze(false);
    let mut line = String::new();
    out.read_line(&mut line).expect("result");
    assert!(c.wait().expect("wait").success());
    let f = t.stop();
    check_schema(&f);
    let name = cg.path();
    assert_eq!(stall["frozen_cgroup"], name, "{stall}");
    let text = stall["text"].as_str().expect("text");
    assert!(
        text.starts_with("cuInit (")
            && text.contains(&format!(
                "s: frozen with its cgroup ({name}: the cgroup freezer"
            )),
        "{text}"
    );
}

/// A cuInit frozen with its cgroup, then killed (SIGKILL, taken once the
/// cgroup is thawed): the live verdict says what the stall check found,
/// and its hint is the freezer's, not more time.
#[test]
#[ignore = "needs root"]
fn a_kill_of_a_frozen_cuinit_says_it_was_frozen() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("frozenkill");
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let cg = Freezer::new("frozenkill");
    let (mut c, _out) = spawn_cuinit(&drv, &lib, "hang");
    let t = watch(&tmp, &drv, &["--stall-after", "1"]);
    cg.enter(c.id());
    let cpid = go_until_cuinit(&mut c, &t);
    cg.freeze(true);
    t.wait_for("a stall report of the frozen cuInit", |r| {
        r["type"] == "stall" && r["pid"] == cpid && r["frozen_cgroup"].is_string()
    });
    c.kill().expect("SIGKILL");
    // (cgroup v1's freezer keeps a frozen task, a fatal signal pending,
    // until it is thawed.)
    cg.freeze(false);
    let _ = c.wait();
    t.wait_for("the verdict", |r| r["type"] == "cuinit" && r["pid"] == cpid);
    let f = t.stop();
    check_schema(&f);
    let name = cg.path();
    let v = f
        .of_type("cuinit")
        .find(|v| v["pid"] == cpid)
        .expect("verdict");
    assert_eq!(v["result"], "killed", "{v}");
    let d = &v["diagnoses"][0];
    assert_eq!(d["id"], "killed_by_signal", "{v}");
    let seen = format!(", frozen with its cgroup ({name}: the cgroup freezer)");
    let e = d["evidence"].as_str().expect("evidence");
    assert!(
        e.starts_with("SIGKILL from ") && e.contains(&format!("[{}]", std::process::id())),
        "{e}"
    );
    assert!(
        e.contains("; when nvprobe's stall check looked, ")
            && e.contains(" s before the signal, cuInit had run ")
            && e.ends_with(&seen),
        "{e}"
    );
    assert!(
        v["text"].as_str().is_some_and(|t| t.ends_with(&seen)),
        "{v}"
    );
    assert!(
        d["hint"]
            .as_str()
            .is_some_and(|h| h.starts_with("its cgroup was frozen")),
        "{v}"
    );
}

/// A cuInit whose thread strace holds at an escape's entry for 3 s
/// (`-e inject=ioctl:delay_enter=…`): the stall report says a ptrace stop
/// by which tracer holds it, not the driver.
#[test]
#[ignore = "needs root"]
fn a_cuinit_held_by_its_tracer_is_reported_as_such() {
    need_root!();
    if !nvprobe_tests::harness::require_tool("strace", "-V", "apt-get install strace") {
        return;
    }
    let _g = lock();
    let tmp = tmpdir("ptracestop");
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let (mut c, mut out) = spawn_cuinit(&drv, &lib, "ok");
    let t = watch(&tmp, &drv, &["--stall-after", "1"]);
    let ctl = drv.dir.join("nvidiactl");
    let mut strace = nvprobe_tests::scenario::attach_strace(
        c.id(),
        &[
            "-e".as_ref(),
            "trace=ioctl".as_ref(),
            "-P".as_ref(),
            ctl.as_os_str(),
            "-e".as_ref(),
            "inject=ioctl:delay_enter=3000000:when=1".as_ref(),
        ],
    );
    let cpid = go_until_cuinit(&mut c, &t);
    let stall = t.wait_for("a stall report of the held cuInit", |r| {
        r["type"] == "stall" && r["pid"] == cpid
    });
    let mut line = String::new();
    out.read_line(&mut line).expect("result");
    assert!(c.wait().expect("wait").success());
    assert!(strace.wait().expect("strace").success());
    let f = t.stop();
    check_schema(&f);
    assert_eq!(stall["state"], "t", "{stall}");
    let text = stall["text"].as_str().expect("text");
    assert!(
        text.starts_with("cuInit (")
            && text.ends_with(&format!(
                "s: the thread is held in a ptrace stop (t) by its tracer strace[{}], not stuck in the driver",
                strace.id()
            )),
        "{text}"
    );
}

/// Lets the stand-in's cuInit start and waits for its entry record: the
/// process's pid.
fn go_until_cuinit(c: &mut std::process::Child, t: &nvprobe_tests::harness::Trace) -> u64 {
    c.stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    let cpid = u64::from(c.id());
    t.wait_for("cuInit's entry", |r| {
        r["type"] == "cuda" && r["pid"] == cpid && r["func"] == "cuInit" && r["phase"] == "enter"
    });
    cpid
}
