//! Tier 2: the real BPF programs on this machine's kernel, as root.
//!
//! This file: start-ups a seccomp filter ends, run on the stand-in: a
//! filter's kill action at a call it does not list (the signal names the
//! call), and its kill-thread action, which ends the thread in cuInit
//! alone (the kernel's thread_exit record, and its audit line where it
//! prints one). What the root tests share is in tests/src/scenario.rs.

use nvprobe_tests::{
    need_root,
    scenario::{
        FakeDrv, check_schema, lock, spawn_limited, stub_libcuda, tmpdir, wait_hooked, watch,
    },
};
use std::io::Write as _;

/// The stand-in's cuInit in `mode`, traced from before it starts to its
/// verdict: the recording, the pid and how the process ended.
fn stub_mode_run(
    name: &str,
    mode: &str,
) -> (
    nvprobe_tests::harness::Finished,
    u64,
    std::process::ExitStatus,
) {
    let tmp = tmpdir(name);
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    let (mut c, _out) = spawn_limited(&drv, &lib, "cuinit", mode, None);
    let pid = c.id();
    wait_hooked(&t, pid);
    c.stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    let status = c.wait().expect("wait");
    let pid = u64::from(pid);
    t.wait_for("the verdict", |r| r["type"] == "cuinit" && r["pid"] == pid);
    let f = t.stop();
    check_schema(&f);
    (f, pid, status)
}

/// A seccomp filter that kills at a call it does not list (a systemd
/// unit's SystemCallFilter=): the stand-in's cuInit installs one killing
/// at uname(2), then calls it. The signal record names the call the
/// kernel said the filter refused, and the verdict names the filter and
/// the call, with no harness or driver remedy.
#[test]
#[ignore = "needs root"]
fn a_seccomp_kill_names_the_call_the_filter_refused() {
    need_root!();
    let _g = lock();
    let (f, pid, status) = stub_mode_run("seccompkill", "seccomp");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGSYS), "{status:?}");
    let sig = f
        .of_type("proc")
        .find(|r| r["target_pid"] == pid && r["op"] == "signal" && r["sig"] == libc::SIGSYS)
        .unwrap_or_else(|| panic!("no SIGSYS record of pid {pid}"));
    assert_eq!(
        (sig["code"].as_i64(), sig["call"].as_str()),
        (Some(1), Some("uname")),
        "{sig}"
    );
    let v = f
        .of_type("cuinit")
        .find(|v| v["pid"] == pid)
        .expect("verdict");
    assert_eq!(v["result"], "killed", "{v}");
    let d = v["diagnoses"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["id"] == "killed_by_signal"))
        .unwrap_or_else(|| panic!("no killed_by_signal: {v}"));
    let evidence = d["evidence"].as_str().expect("evidence");
    assert!(
        evidence.starts_with("SIGSYS from a seccomp filter (its kill or trap action, at uname())"),
        "{evidence}"
    );
    let hint = d["hint"].as_str().expect("hint");
    assert!(
        hint.contains("seccomp") && !hint.contains("harness"),
        "{hint}"
    );
}

/// A seccomp filter's kill-thread action ends the thread in cuInit alone
/// (no signal is generated: the kernel calls do_exit(SIGSYS)); the process
/// lives on and exits 600 ms later. The kernel's thread_exit record says
/// so, and the verdict puts the start-up's end there, not at the exit.
#[test]
#[ignore = "needs root"]
fn a_thread_ended_alone_in_cuinit_is_the_start_ups_end() {
    need_root!();
    let _g = lock();
    let (f, pid, status) = stub_mode_run("killthread", "killthread");
    assert_eq!(status.code(), Some(7), "{status:?}");
    let end = f
        .of_type("proc")
        .find(|r| r["target_pid"] == pid && r["op"] == "thread_exit")
        .unwrap_or_else(|| panic!("no thread_exit record of pid {pid}"));
    assert_eq!(
        (end["target_tid"].as_u64(), end["exit_code"].as_i64()),
        (Some(pid), Some(i64::from(libc::SIGSYS))),
        "{end}"
    );
    let v = f
        .of_type("cuinit")
        .find(|v| v["pid"] == pid)
        .expect("verdict");
    // The start-up failed: its thread was ended in cuInit.
    assert_eq!(v["result"], "failed", "{v}");
    let d = &v["diagnoses"][0];
    assert_eq!(d["id"], "cuinit_thread_ended", "{v}");
    // The kernel's audit line names the call, where it prints one (no
    // audit daemon took it, and /dev/kmsg could be read): the filter's
    // kill-thread action at uname(2).
    let audit = f
        .of_type("kernel_log")
        .find(|r| r["kind"] == "seccomp" && r["pid"] == pid);
    let how = match audit {
        Some(a) => {
            assert_eq!(
                (
                    a["seccomp"]["call"].as_str(),
                    a["seccomp"]["action"].as_str()
                ),
                (Some("uname"), Some("kill_thread")),
                "{a}"
            );
            "(killed alone by SIGSYS: a seccomp filter's kill-thread action at uname() (the kernel's audit line names it)); cuInit never returned"
        }
        None => {
            eprintln!(
                "no seccomp audit line of pid {pid} in the kernel log: the call is not named"
            );
            "(killed alone by SIGSYS: a seccomp filter's kill-thread action); cuInit never returned"
        }
    };
    let evidence = d["evidence"].as_str().expect("evidence");
    assert!(
        evidence.starts_with(&format!("its thread in cuInit (tid {pid}) ended at "))
            && evidence.contains(how)
            && evidence.ends_with("until it exited with status 7"),
        "{evidence}"
    );
    let text = v["text"].as_str().expect("text");
    assert!(
        text.ends_with(evidence) && text.matches("its thread in cuInit").count() == 1,
        "{text}"
    );
    assert!(
        !v["diagnoses"]
            .as_array()
            .expect("diagnoses")
            .iter()
            .any(|d| d["id"] == "killed_by_signal"),
        "{v}"
    );
}
