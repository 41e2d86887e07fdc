//! Tier 2: the real BPF programs on this machine's kernel, as root.
//!
//! A FUSE stand-in serves the NVIDIA device files (tests/src/fakedrv.rs)
//! and `nvfixture` makes driver-style calls on it; `nvprobe watch --json`
//! runs as a separate process, exactly as a user runs it. Without root the
//! tests say `skipping` and pass, since loading BPF needs root. What the
//! root tests share is in tests/src/scenario.rs.
//!
//! This file: user errors (not root, bad devices, bad options, bad recordings):
//! clear messages and the documented exit codes.

use std::{os::unix::process::CommandExt, process::Command};

use nvprobe_tests::{
    harness::bin,
    need_root,
    scenario::{lock, tmpdir},
};

#[test]
#[ignore = "needs root"]
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
        err.contains("/nonexistent/nvidiactl: no such file. --device names a file that exists"),
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

/// nvprobe with `args` in a pid namespace (and /proc) of its own, as in
/// a container without the host's; None where unshare is missing and the
/// test may be skipped (as root it fails with what to install).
fn in_own_pid_namespace(args: &[&str]) -> Option<std::process::Output> {
    if !nvprobe_tests::harness::require_tool("unshare", "--version", "apt-get install util-linux") {
        return None;
    }
    Some(
        Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", "--"])
            .arg(bin("nvprobe"))
            .args(args)
            .output()
            .expect("unshare"),
    )
}

/// Issue 38: in a pid namespace of its own, `process::id()` is not the
/// kernel's number for nvprobe, so it traced its own start-up (its reads
/// of driver files, its children). The programs' own-process filter now
/// takes the number the kernel gives (a test run of a BPF program), and
/// the start says once that this /proc is not the host's.
#[test]
#[ignore = "needs root"]
fn in_its_own_pid_namespace_watch_traces_none_of_its_own_calls() {
    need_root!();
    let _g = lock();
    let Some(o) = in_own_pid_namespace(&["watch", "--json", "--duration", "2"]) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let records: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect();
    assert!(
        records
            .iter()
            .any(|r| r["type"] == "warning" && r["id"] == "pid_namespace"),
        "{records:?}"
    );
    let own: Vec<&serde_json::Value> = records.iter().filter(|r| r["comm"] == "nvprobe").collect();
    assert!(own.is_empty(), "nvprobe traced itself: {own:?}");
}

/// Issue 27, item 3: nvprobe in a pid namespace of its own (a container
/// without the host's): the pids its /proc shows are not the kernel's, on
/// which --pid is filtered. Refused (exit 2) with what to do; without
/// --pid it still starts.
#[test]
#[ignore = "needs root"]
fn pids_from_another_pid_namespace_are_refused() {
    need_root!();
    let _g = lock();
    let Some(o) = in_own_pid_namespace(&["watch", "--pid", "1", "--duration", "1"]) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "nvprobe: error: --pid 1: nvprobe runs in a pid namespace other than the host's"
        ),
        "{err}"
    );
    assert!(
        err.contains("docker run --pid=host, hostPID: true in Kubernetes")
            && err.contains("--comm NAME"),
        "{err}"
    );
}
