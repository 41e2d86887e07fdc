//! Tier 1, through the binary: `watch` flags that parse but cannot be
//! meant (issue 11) are refused when parsed, with the reason and exit 2,
//! before anything is attached. Each run carries `--duration 1`, so that an
//! nvprobe that took the flag (as root) stops by itself.

use std::process::Command;

use nvprobe_tests::harness::{TestDir, bin};

fn watch(args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(bin("nvprobe"))
        .arg("watch")
        .args(args)
        .output()
        .expect("run nvprobe");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Durations that overflowed a timer once attached (exit 101): at most a
/// year, said so.
#[test]
fn durations_past_a_year_are_refused() {
    for args in [
        ["--duration", "1e308"],
        ["--duration", "1e19"],
        ["--stall-after", "1e308"],
        ["--stall-after", "9999999999m"],
    ] {
        let mut a = args.to_vec();
        if args[0] != "--duration" {
            a.extend(["--duration", "1"]);
        }
        let (code, err) = watch(&a);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("at most 31536000 seconds"), "{args:?}: {err}");
    }
}

/// A pid no process can have, an empty name: refused with the reason.
#[test]
fn impossible_pids_and_empty_names_are_refused() {
    for (args, why) in [
        (["--pid", "0"], "pids start at 1"),
        (["--pid", "99999999"], "pid_max"),
        (["--comm", ""], "matches no process"),
    ] {
        let mut a = args.to_vec();
        a.extend(["--duration", "1"]);
        let (code, err) = watch(&a);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
}

/// `--perfetto FILE` at a symbolic link: refused before anything is
/// attached (as `-o` refuses one), exit 2, the link's target not created.
#[test]
fn a_perfetto_file_at_a_link_is_refused() {
    let d = nvprobe_tests::harness::TestDir::new("perfetto-link");
    let (link, target) = (d.join("run.pftrace"), d.join("elsewhere"));
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let (code, err) = watch(&[
        "--perfetto",
        link.to_str().expect("utf8"),
        "--duration",
        "1",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "refusing to write to {}: it is a symbolic link",
            link.display()
        )),
        "{err}"
    );
    assert!(!target.exists(), "nothing written through the link");
}

/// Issue 27, item 3: `--pid` of no running process traced nothing, and
/// said nothing. Refused now (exit 2), with why (a free pid goes to
/// whichever process comes next) and what to do; a thread's id names its
/// process. The pid of a child that has exited and been reaped is free
/// until pids wrap around.
#[test]
fn a_pid_of_no_running_process_is_refused() {
    let mut c = std::process::Command::new("true").spawn().expect("spawn");
    let gone = c.id();
    c.wait().expect("wait");
    let (code, err) = watch(&["--pid", &gone.to_string(), "--duration", "1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "nvprobe: error: --pid: no process {gone} is running (no /proc/{gone}). --pid follows processes that run when nvprobe starts: a pid that is free now goes to whichever process the kernel makes next"
        )),
        "{err}"
    );
    assert!(
        err.contains("or follow a program by name from its start with --comm NAME"),
        "{err}"
    );
    // `top` takes watch's options, checked the same way.
    let o = Command::new(bin("nvprobe"))
        .args(["top", "--pid", &gone.to_string(), "--duration", "1"])
        .output()
        .expect("run nvprobe top");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("no process {gone} is running")));
    // A thread of this test: its process is named.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        tid_tx.send(nix::unistd::gettid().as_raw()).expect("tid");
        let _ = rx.recv();
    });
    let tid = tid_rx.recv().expect("tid");
    let (code, err) = watch(&["--pid", &tid.to_string(), "--duration", "1"]);
    drop(tx);
    t.join().expect("thread");
    assert_eq!(code, Some(2), "{err}");
    let me = std::process::id();
    assert!(
        err.contains(&format!("--pid: {tid} is a thread of process {me} ("))
            && err.contains(&format!("here --pid {me}")),
        "{err}"
    );
}

/// Issue 27, item 4: `--device` of a missing file said "cannot stat it
/// (… is the FUSE/test server running?)" with a kind, and with none that
/// it could not tell the kind. Every form says which file, why, and what
/// to do; no test-harness words.
#[test]
fn device_files_are_checked_when_parsed() {
    let d = TestDir::new("devarg");
    let gone = d.join("nvidiactl");
    let g = gone.to_str().expect("utf8");
    for arg in [
        g.to_owned(),
        format!("{g}=ctl"),
        d.join("stand-in").display().to_string(),
    ] {
        let (code, err) = watch(&["--device", &arg, "--duration", "1"]);
        assert_eq!(code, Some(2), "{arg}: {err}");
        let path = arg.trim_end_matches("=ctl");
        assert!(
            err.contains(&format!("for '--device <PATH[=KIND]>': {path}: no such file. --device names a file that exists when nvprobe starts, one the traced programs open as an NVIDIA device")),
            "{arg}: {err}"
        );
        assert!(err.contains("check the path"), "{err}");
        assert!(
            !err.contains("FUSE") && !err.contains("test server"),
            "{err}"
        );
    }
    let other = d.join("stand-in");
    std::fs::write(&other, "").expect("file");
    let o = other.to_str().expect("utf8");
    let (code, err) = watch(&["--device", o, "--duration", "1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("{o}: which NVIDIA device it stands for cannot be told from its name (nvidiactl, nvidiaN and nvidia-uvm can): add =ctl, =gpu or =uvm, e.g. --device {o}=ctl")),
        "{err}"
    );
    let (code, err) = watch(&["--device", &format!("{o}=modeset"), "--duration", "1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("\"modeset\" is not a kind of NVIDIA device: the kinds are ctl (nvidiactl), gpu (nvidiaN) and uvm (nvidia-uvm): write {o}=ctl, {o}=gpu or {o}=uvm")),
        "{err}"
    );
    let (code, err) = watch(&["--device", d.to_str().expect("utf8"), "--duration", "1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("is a directory: --device names the file"),
        "{err}"
    );
}

/// `--health` and `--metrics` on one address: a usage error that names
/// both, before anything is bound or attached.
#[test]
fn health_and_metrics_on_one_address_are_refused() {
    let (code, err) = watch(&[
        "--metrics",
        "127.0.0.1:9",
        "--health",
        "127.0.0.1:9",
        "--duration",
        "1",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("nvprobe: error: --health and --metrics name the same address: give --health one of its own (--metrics serves /healthz too)"),
        "{err}"
    );
    // Every address and one of them: the same port.
    let (code, err) = watch(&[
        "--metrics",
        "127.0.0.1:9",
        "--health",
        "0.0.0.0:9",
        "--duration",
        "1",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--health and --metrics name the same address"),
        "{err}"
    );
}
