//! Tier 2 (root): starting and stopping leaves the host as it was.
//! Ten `watch` runs back to back, each with stand-in libcuda copies hooked
//! and a traced start-up, each followed by another tracer attaching a
//! uprobe; a SIGKILLed nvprobe; 32 copies at once. Each run's programs must
//! be gone from the kernel afterwards (the links are pinned in a private
//! bpffs that dies with nvprobe, and a kernel worker removes them), and the
//! kernel must not log a leaked uprobe. Times are printed, never asserted.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nvprobe_tests::{
    harness::{Trace, bin, still_loaded},
    need_root,
    scenario::{
        FakeDrv, check_schema, go, lock, spawn_cuinit, stub_libcuda, tmpdir, wait_hooked, watch,
    },
};
use serde_json::Value;

/// How many times the kernel has logged a leaked uprobe since boot (None:
/// the kernel log cannot be read here).
fn leaked_uprobes() -> Option<usize> {
    let out = Command::new("dmesg").output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("leaking uprobe"))
            .count()
    })
}

/// The kernel logged no leaked uprobe since `before` was counted.
fn assert_no_new_leaks(before: Option<usize>) {
    match (before, leaked_uprobes()) {
        (Some(a), Some(b)) => assert_eq!(a, b, "the kernel logged {} leaked uprobes", b - a),
        // Root reads the kernel log: a check that cannot be made fails.
        _ => panic!("the kernel log cannot be read (dmesg): leaked uprobes cannot be checked"),
    }
}

/// End the processes that held stand-in copies mapped.
fn end_holders<T>(held: Vec<(std::process::Child, T)>) {
    for (mut c, _) in held {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Does this kernel have uprobe_multi links (6.6 and later)?
fn kernel_has_uprobe_multi() -> bool {
    let rel = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut it = rel.split(['.', '-']).filter_map(|p| p.parse::<u32>().ok());
    matches!((it.next(), it.next()), (Some(a), Some(b)) if (a, b) >= (6, 6))
}

/// Another tracer: a perf-event uprobe on libc, attached and detached
/// (it needs the kernel's tracing lock). Returns its attach time.
fn other_tracer_attaches() -> f64 {
    let out = Command::new(bin("nvbench"))
        .arg("tracer-attach")
        .output()
        .expect("run nvbench tracer-attach");
    assert!(
        out.status.success(),
        "another tracer could not attach a uprobe: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    v["attach_s"].as_f64().expect("attach_s")
}

/// `n` copies of the stand-in libcuda, each its own file.
fn copies(tmp: &Path, lib: &Path, n: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let d = tmp.join(format!("copy{i}"));
            std::fs::create_dir_all(&d).expect("mkdir");
            let p = d.join("libcuda.so.1");
            std::fs::copy(lib, &p).expect("copy the stand-in");
            p
        })
        .collect()
}

fn hooked(start: &Value) -> Vec<(String, String)> {
    start["libcuda"]
        .as_array()
        .expect("libcuda list")
        .iter()
        .map(|l| {
            (
                l["path"].as_str().unwrap_or_default().to_owned(),
                l["via"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs root"]
fn ten_runs_back_to_back_leave_nothing_behind() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("restart");
    let lib = stub_libcuda(&tmp);
    let libs = copies(&tmp, &lib, 3);
    let drv = FakeDrv::start(&tmp);
    // Two copies mapped before any nvprobe starts (hooked at start), the
    // third loaded by each round's start-up (hooked when loaded).
    let held: Vec<_> = libs[..2]
        .iter()
        .map(|l| spawn_cuinit(&drv, l, "ok"))
        .collect();
    let leaks_before = leaked_uprobes();
    for round in 0..10 {
        let t0 = Instant::now();
        let t = watch(&tmp, &drv, &[]);
        let started = t0.elapsed();
        let progs = t.prog_ids();
        let start = t.records_now().into_iter().next().expect("start record");
        let files = hooked(&start);
        for l in &libs[..2] {
            assert!(
                files
                    .iter()
                    .any(|(p, _)| p.ends_with(&*l.to_string_lossy())),
                "round {round}: {} not hooked at start: {files:?}",
                l.display()
            );
        }
        if kernel_has_uprobe_multi() {
            assert_eq!(start["libcuda_attach"], "uprobe_multi", "{start}");
            assert!(
                files.iter().all(|(_, via)| via == "uprobe_multi"),
                "{files:?}"
            );
        }
        assert!(
            start["probe_removal"]
                .as_str()
                .is_some_and(|r| r.starts_with("kernel: ")),
            "round {round}: the probes are not left to the kernel: {start}"
        );
        let (mut c, mut out) = spawn_cuinit(&drv, &libs[2], "ok");
        let pid = c.id();
        // Hooked by the hooking thread once the loader has opened it.
        wait_hooked(&t, pid);
        go(&mut c, &mut out);
        let v = t.wait_for("the start-up's verdict", |r| {
            r["type"] == "cuinit" && r["pid"] == pid
        });
        assert_eq!(
            (v["result"].as_str(), v["curesult"].as_str()),
            (Some("ok"), Some("CUDA_SUCCESS (0)")),
            "round {round}: {v}"
        );
        let t1 = Instant::now();
        let f = t.stop();
        let stopped = t1.elapsed();
        check_schema(&f);
        // The kernel removes every probe of the run: its programs go once
        // their links are released.
        let left = still_loaded(&progs, Duration::from_secs(20));
        assert!(
            left.is_empty(),
            "round {round}: programs {left:?} still loaded 20 s after nvprobe exited"
        );
        let released = t1.elapsed();
        let other = other_tracer_attaches();
        eprintln!(
            "round {round}: start {:.3} s, stop {:.3} s (incl. the harness's 0.3 s), probes gone {:.3} s after SIGINT, another tracer attached in {other:.3} s",
            started.as_secs_f64(),
            stopped.as_secs_f64(),
            released.as_secs_f64()
        );
    }
    end_holders(held);
    assert_no_new_leaks(leaks_before);
}

/// SIGKILL while the hooks are in place and their library is mapped: the
/// kernel still removes every probe (from its own worker), and none leaks.
/// (A removal made by a task with SIGKILL pending fails, and the kernel
/// then leaves its breakpoint in place for good.)
#[test]
#[ignore = "needs root"]
fn a_sigkilled_nvprobe_leaks_no_uprobe() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("restart-kill");
    let lib = stub_libcuda(&tmp);
    let libs = copies(&tmp, &lib, 2);
    let drv = FakeDrv::start(&tmp);
    let held: Vec<_> = libs.iter().map(|l| spawn_cuinit(&drv, l, "ok")).collect();
    let leaks_before = leaked_uprobes();
    for _ in 0..3 {
        let mut t = Trace::start(&tmp, &["--layers", "syscall,process,cuda"]);
        let progs = t.prog_ids();
        let start = t.records_now().into_iter().next().expect("start record");
        let mine = hooked(&start)
            .into_iter()
            .filter(|(p, _)| p.contains(&*tmp.to_string_lossy()))
            .count();
        assert_eq!(mine, 2, "{start}");
        t.kill();
        let left = still_loaded(&progs, Duration::from_secs(20));
        assert!(
            left.is_empty(),
            "programs {left:?} still loaded 20 s after SIGKILL"
        );
        other_tracer_attaches();
    }
    end_holders(held);
    assert_no_new_leaks(leaks_before);
}

/// At the cap of 32 hooked copies, the stop still releases the kernel at
/// once: another tracer can attach, and every program goes.
#[test]
#[ignore = "needs root"]
fn thirty_two_copies_are_released_at_the_stop() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("restart-32");
    let lib = stub_libcuda(&tmp);
    let libs = copies(&tmp, &lib, 32);
    // This test process maps all 32: nvprobe finds them in its maps.
    let handles: Vec<_> = libs
        .iter()
        .map(|l| {
            let c = std::ffi::CString::new(l.as_os_str().as_encoded_bytes()).expect("path");
            // SAFETY: dlopen of the stand-in (tests/cuda-stub/libcuda.c).
            let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            assert!(!h.is_null(), "dlopen {}", l.display());
            h
        })
        .collect();
    let t = Trace::start(&tmp, &["--layers", "syscall,process,cuda"]);
    let progs = t.prog_ids();
    let start = t.records_now().into_iter().next().expect("start record");
    let mine = hooked(&start)
        .into_iter()
        .filter(|(p, _)| p.contains(&*tmp.to_string_lossy()))
        .count();
    assert_eq!(mine, 32, "{start}");
    let f = t.stop();
    check_schema(&f);
    let t0 = Instant::now();
    let other = other_tracer_attaches();
    let left = still_loaded(&progs, Duration::from_secs(20));
    assert!(left.is_empty(), "programs {left:?} still loaded");
    eprintln!(
        "32 copies: right after nvprobe's exit another tracer attached a uprobe in {other:.3} s; every probe gone {:.3} s after the exit",
        t0.elapsed().as_secs_f64()
    );
    for h in handles {
        // SAFETY: each handle came from dlopen above.
        unsafe { libc::dlclose(h) };
    }
}
