//! Tier 2: the real BPF programs on this machine's kernel, as root.
//!
//! A FUSE stand-in serves the NVIDIA device files (tests/src/fakedrv.rs)
//! and `nvfixture` makes driver-style calls on it; `nvprobe watch --json`
//! runs as a separate process, exactly as a user runs it. Without root the
//! tests say `skipping` and pass, since loading BPF needs root. What the
//! root tests share is in tests/src/scenario.rs.
//!
//! This file: a ring buffer too small for a flood: every event delivered or counted
//! as lost, and the kernel-side --pid filter.

use std::{
    io::{BufRead, Write},
    path::Path,
    process::Command,
};

use nvprobe_tests::{
    harness::{Trace, bin},
    need_root,
    scenario::{check_schema, lock, spawn_ready, tmpdir},
};

#[test]
#[ignore = "needs root"]
fn lost_events_are_counted_exactly_and_reported() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("lost");
    // /dev/null declared a ctl node: ioctls fail fast (ENOTTY), so a tiny
    // ring buffer overflows.
    let (mut child, mut out) = spawn_ready(Command::new(bin("nvfixture")).args([
        "run",
        "flood",
        "--dir",
        "/dev/null",
        "--count",
        "20000",
        "--threads",
        "2",
    ]));
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
    let mut line = String::new();
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
