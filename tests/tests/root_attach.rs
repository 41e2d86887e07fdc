//! Tier 2: the real BPF programs on this machine's kernel, as root.
//!
//! A FUSE stand-in serves the NVIDIA device files (tests/src/fakedrv.rs)
//! and `nvfixture` makes driver-style calls on it; `nvprobe watch --json`
//! runs as a separate process, exactly as a user runs it. Without root the
//! tests say `skipping` and pass, since loading BPF needs root. What the
//! root tests share is in tests/src/scenario.rs.
//!
//! This file: attaching and detaching: tracefs mounted when missing (in a
//! mount namespace of the test's own), every program this nvprobe loaded
//! gone after SIGTERM, and the driver layer said unavailable once on a
//! kernel without kprobes.

use std::{path::Path, time::Duration};

use nvprobe_tests::{
    harness::{
        Trace, chroot_not_a_mount_point, mount_namespace, private_mount_namespace, still_loaded,
    },
    need_root,
    scenario::{check_schema, ioctls_of, lock, tmpdir, trace_scenario},
};
use serde_json::Value;

/// nvprobe runs in a mount namespace of its own with tracefs detached
/// there, so that the mount it makes is its own and the host's tracefs
/// (which another tracer may be using) is left alone; after SIGTERM, every
/// BPF program this nvprobe process held is unloaded, whatever other
/// programs (another nvprobe's) are loaded on the host.
#[test]
#[ignore = "needs root"]
fn tracefs_is_mounted_when_missing_and_sigterm_detaches() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("tracefs");
    let t = Trace::start_with(&tmp, &["--driver-version", "580.159.04"], |c| {
        private_mount_namespace(c, &["/sys/kernel/tracing"]);
    });
    let pid = t.pid();
    assert_ne!(
        mount_namespace(pid),
        mount_namespace(std::process::id()),
        "nvprobe runs in a mount namespace of its own"
    );
    let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).expect("mountinfo");
    // The programs this nvprobe holds (its fds), while it runs.
    let progs = t.prog_ids();
    assert!(!progs.is_empty(), "nvprobe holds its BPF programs");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    std::thread::sleep(Duration::from_millis(50));
    let f = t.stop();
    check_schema(&f);
    let start = f.of_type("start").next().expect("start");
    if !Path::new("/sys/kernel/debug/tracing/events").exists() {
        assert_eq!(start["tracefs_mounted_by_nvprobe"], true);
        assert!(f.stderr.contains("mounted tracefs"), "{}", f.stderr);
        assert!(
            mountinfo
                .lines()
                .any(|l| l.split(' ').nth(4) == Some("/sys/kernel/tracing")
                    && l.contains(" - tracefs ")),
            "nvprobe's tracefs mount, in its namespace: {mountinfo}"
        );
    } else {
        eprintln!("note: debugfs offers tracefs here; checked the mounted path only");
    }
    assert_eq!(start["tracefs"], "/sys/kernel/tracing");
    assert!(f.summary()["duration_s"].as_f64().is_some());
    // Detached: none of this nvprobe's programs is left loaded. The kernel
    // frees programs asynchronously after their last reference, so give it
    // a moment.
    let left = still_loaded(&progs, Duration::from_secs(5));
    assert!(
        left.is_empty(),
        "programs of this nvprobe still loaded after exit: {left:?} (of {progs:?})"
    );
}

/// Under a chroot whose root is not a mount point (an unpacked root, as
/// in the package tier), `/` cannot be made a slave (EINVAL): nvprobe makes
/// each mount it sees one instead and mounts tracefs in its own namespace
/// (it used to stop, saying it could not make the namespace).
#[test]
#[ignore = "needs root"]
fn tracefs_is_mounted_under_a_chroot_whose_root_is_not_a_mount_point() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("chroot");
    let root = tmp.join("root");
    std::fs::create_dir(&root).expect("mkdir root");
    let t = Trace::start_with(&tmp, &["--driver-version", "580.159.04"], |c| {
        chroot_not_a_mount_point(c, &root);
    });
    let f = t.stop();
    check_schema(&f);
    let start = f.of_type("start").next().expect("start");
    assert_eq!(start["tracefs"], "/sys/kernel/tracing");
    if !Path::new("/sys/kernel/debug/tracing/events").exists() {
        assert_eq!(start["tracefs_mounted_by_nvprobe"], true, "{}", f.stderr);
        assert!(f.stderr.contains("mounted tracefs"), "{}", f.stderr);
    }
    assert!(
        !f.stderr.contains("mount namespace it was started in"),
        "{}",
        f.stderr
    );
}

/// This kernel has no kprobes (and refuses fentry): the driver layer is
/// reported unavailable once, with the reason, in the text and in the
/// NDJSON (a warning and the start record), and the syscall layer still
/// decodes the scenario's calls.
#[test]
#[ignore = "needs root"]
fn driver_layer_unavailable_is_said_once_and_tracing_goes_on() {
    need_root!();
    if std::path::Path::new("/sys/bus/event_source/devices/kprobe/type").exists() {
        nvprobe_tests::harness::skip("this kernel has kprobes");
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
