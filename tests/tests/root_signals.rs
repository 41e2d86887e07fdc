//! Tier 2: the real BPF programs on this machine's kernel, as root.
//!
//! A FUSE stand-in serves the NVIDIA device files (tests/src/fakedrv.rs)
//! and `nvfixture` makes driver-style calls on it; `nvprobe watch --json`
//! runs as a separate process, exactly as a user runs it. Without root the
//! tests say `skipping` and pass, since loading BPF needs root. What the
//! root tests share is in tests/src/scenario.rs.
//!
//! This file: signals during start-up: who killed a process and at which stage,
//! and a handled signal's call and disposition.

use std::process::{Command, Stdio};

use nvprobe_tests::{
    harness::bin,
    need_root,
    scenario::{FakeDrv, check_schema, lock, scenario, tmpdir, trace_scenario, watch},
};
use serde_json::Value;

#[test]
#[ignore = "needs root"]
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
    // The stand-in process loads no libcuda: a driver client, not a CUDA
    // start-up, still named with its killer and stage.
    assert!(
        text.ends_with(", at ctl_opened (a driver client: no CUDA call)"),
        "{text}"
    );
    assert_eq!(v["class"], "nvml");
    assert_eq!(v["diagnoses"][0]["id"], "killed_by_signal");
    assert_eq!(v["exit"], "killed by SIGTERM");

    let alarm_v = verdicts
        .iter()
        .find(|v| v["signal"]["name"] == "SIGALRM")
        .expect("verdict for the alarm process");
    assert_eq!(alarm_v["result"], "killed");
    let text = alarm_v["text"].as_str().expect("text");
    assert!(
        text.contains(
            "killed by SIGALRM from the kernel (a timer the process set: alarm, setitimer)"
        ),
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
    assert_eq!(sig["stage"], "ctl_opened");
    assert_eq!(
        sig["sender"],
        "the kernel (a timer the process set: alarm, setitimer)"
    );
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

/// A signal caught by an SA_RESTART handler during a blocking call: the
/// delivery says so, and the signal record names the call and its end.
#[test]
#[ignore = "needs root"]
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
    assert_eq!(
        s["sender"],
        "the kernel (a timer the process set: alarm, setitimer)"
    );
    assert_eq!(
        s["in_flight"],
        "NV_ESC_RM_CONTROL NV2080_CTRL_CMD_GPU_GET_SHORT_NAME_STRING"
    );
    assert_eq!(s["stage"], "ctl_opened");
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

/// The same at `--events verdicts`, where the kernel keeps only a tick
/// count for the start of a call of a process not yet quiet: the signal
/// record still names the call it came during.
#[test]
#[ignore = "needs root"]
fn a_handled_signal_names_its_call_at_the_verdicts_level() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("handled-verdicts");
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &["--events", "verdicts"]);
    let run = scenario(&drv, "handled", &[]);
    let f = t.stop();
    check_schema(&f);
    let s = f
        .of_type("signal")
        .find(|r| r["pid"] == run["pid"])
        .unwrap_or_else(|| panic!("a signal record: {:#?}", f.records));
    assert_eq!(
        (&s["signal"], &s["in_flight"], &s["outcome"]),
        (
            &Value::from("SIGALRM"),
            &Value::from("NV_ESC_RM_CONTROL NV2080_CTRL_CMD_GPU_GET_SHORT_NAME_STRING"),
            &Value::from("completed")
        ),
        "{s}"
    );
    // The call itself, sent (it failed), timed in ticks from before the
    // signal.
    let c = f
        .records
        .iter()
        .find(|r| r["type"] == "ioctl" && r["pid"] == run["pid"])
        .expect("the call");
    assert_eq!(c["coarse"], true, "{c}");
    assert!(c["start_ns"].as_u64() < s["mono_ns"].as_u64(), "{c}\n{s}");
}

/// A memory cgroup with a 64 MiB limit (v2's memory.max, else v1's), for
/// the life of the value.
struct MemoryCgroup(std::path::PathBuf);

impl MemoryCgroup {
    fn new() -> MemoryCgroup {
        let v2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let base = if v2 {
            "/sys/fs/cgroup"
        } else {
            "/sys/fs/cgroup/memory"
        };
        let dir = std::path::Path::new(base).join(format!("nvprobe-oom-{}", std::process::id()));
        std::fs::create_dir(&dir)
            .expect("make a memory cgroup (cgroup v2 with the memory controller, or v1's memory)");
        let limit = |f: &str| std::fs::write(dir.join(f), "67108864").is_ok();
        if v2 {
            assert!(limit("memory.max"), "memory.max");
            let _ = std::fs::write(dir.join("memory.swap.max"), "0");
        } else {
            assert!(limit("memory.limit_in_bytes"), "memory.limit_in_bytes");
            let _ = limit("memory.memsw.limit_in_bytes");
        }
        MemoryCgroup(dir)
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A process the kernel's OOM killer ends (its memory cgroup's limit): its
/// verdict names the OOM killer (oom/mark_victim after the kernel's
/// SIGKILL), not a harness timeout, and the proc record says it.
#[test]
#[ignore = "needs root"]
fn the_oom_killer_is_named_as_the_killer() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("oom");
    let drv = FakeDrv::start(&tmp);
    let cg = MemoryCgroup::new();
    let t = watch(&tmp, &drv, &[]);
    let st = Command::new("sh")
        .arg("-c")
        .arg(r#"echo $$ >"$0/cgroup.procs" && exec "$1" run oom --dir "$2""#)
        .arg(&cg.0)
        .arg(bin("nvfixture"))
        .arg(&drv.dir)
        .stdout(Stdio::null())
        .status()
        .expect("run nvfixture in the cgroup");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(9),
        "{st}"
    );
    let f = t.stop();
    check_schema(&f);
    let chosen = f
        .of_type("proc")
        .find(|r| r["op"] == "oom_victim")
        .unwrap_or_else(|| panic!("no oom_victim record: {}", f.stderr));
    let victim = chosen["target_pid"].as_u64().expect("target");
    let v = f
        .of_type("cuinit")
        .find(|v| v["pid"] == victim)
        .expect("the victim's verdict");
    assert_eq!(v["result"], "killed");
    let text = v["text"].as_str().expect("text");
    assert!(
        text.starts_with("killed by SIGKILL from the kernel's OOM killer after "),
        "{text}"
    );
    let d = &v["diagnoses"][0];
    assert_eq!(d["id"], "killed_by_signal", "{v}");
    let hint = d["hint"].as_str().expect("hint");
    assert!(
        hint.starts_with("the kernel's OOM killer ended it"),
        "{hint}"
    );
    assert!(!hint.contains("timeout"), "{hint}");
}
