//! Tier 2: the real BPF programs on this machine's kernel, as root.
//!
//! A FUSE stand-in serves the NVIDIA device files (tests/src/fakedrv.rs)
//! and `nvfixture` makes driver-style calls on it; `nvprobe watch --json`
//! runs as a separate process, exactly as a user runs it. Without root the
//! tests say `skipping` and pass, since loading BPF needs root. What the
//! root tests share is in tests/src/scenario.rs.
//!
//! This file: cuInit verdicts and their diagnoses from live traces: libcuda
//! uprobes (CUresult), inherited fds, exec, a failing nvidia-modprobe.

use nvprobe_tests::{
    need_root,
    scenario::{
        FakeDrv, check_schema, go, lock, scenario, spawn_cuinit, spawn_limited, stub_libcuda,
        tmpdir, trace_scenario, wait_hooked, watch,
    },
};
use serde_json::Value;
use std::io::{BufRead as _, Write as _};

#[test]
#[ignore = "needs root"]
fn libcuda_uprobes_give_the_curesult_verdict() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("uprobe");
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let (mut good, mut good_out) = spawn_cuinit(&drv, &lib, "ok");
    let (mut bad, mut bad_out) = spawn_cuinit(&drv, &lib, "fail");
    // nvprobe finds the library in the processes' maps at start.
    let t = watch(&tmp, &drv, &[]);
    for (c, out) in [(&mut good, &mut good_out), (&mut bad, &mut bad_out)] {
        go(c, out);
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
            "cuDeviceGet",
            "cuCtxCreate_v2",
            // Fault-only (the default `--libcuda-hooks faults`).
            "cuCtxSynchronize",
            "cuMemFree_v2",
            // In the start-up set; cuLaunchKernel, the stand-in's other
            // export, is not (`--libcuda-hooks all` only).
            "cuMemGetInfo_v2",
            "cuMemcpyDtoH_v2"
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
#[ignore = "needs root"]
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
#[ignore = "needs root"]
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
    // One verdict per program: before the exec, two opens and no call
    // (ended by the exec); after it, one call on the inherited fd, then the
    // exit.
    assert_eq!(v.len(), 2, "{v:#?}");
    assert_eq!(
        (v[0]["calls"].as_u64(), v[0]["exit"].as_str()),
        (Some(0), Some("exec'd a new program"))
    );
    assert_eq!(v[1]["calls"], 1);
    assert_eq!(v[1]["exit"], "exited with status 0");
    assert_eq!(
        v[1]["diagnoses"][0]["id"], "inherited_nvidia_fds",
        "the new program never opened the fd it used"
    );
}

/// libcuda with a missing node: stat() fails, the setuid nvidia-modprobe
/// runs and fails. The helper's fork, exec and exit status are captured and
/// explain the parent's verdict.
#[test]
#[ignore = "needs root"]
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

/// A verdict is in the stream when its process ends, not when nvprobe
/// stops: the record is read from the output file while nvprobe still runs
/// (issue 10: "verdicts held until Ctrl-C").
#[test]
#[ignore = "needs root"]
fn a_verdict_is_written_when_its_process_ends() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("timely");
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    let answer = scenario(&drv, "basic", &[]);
    let pid = answer["pid"].as_u64().expect("the scenario's pid");
    // Poll the live output; the bound is generous (no timing assertion: a
    // verdict held until the stop would never appear here at all).
    let mut found = None;
    for _ in 0..150 {
        let text = std::fs::read_to_string(&t.out).unwrap_or_default();
        found = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["type"] == "cuinit" && r["pid"].as_u64() == Some(pid));
        if found.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let f = t.stop();
    check_schema(&f);
    let v = found.expect("the verdict was written before nvprobe was stopped");
    assert!(
        v["exit"]
            .as_str()
            .is_some_and(|e| e.starts_with("exited with status")),
        "{v}"
    );
    assert!(
        f.of_type("process").any(|p| p["pid"].as_u64() == Some(pid)
            && p["exe"].as_str().is_some_and(|e| e.ends_with("/nvfixture"))),
        "the process record names the executable"
    );
}

/// A start-up refused by a limit and not by the driver: the stand-in
/// reserves 64 GiB of addresses as libcuda does, under a 2 GiB
/// RLIMIT_AS. No call on an NVIDIA file fails; the kernel side reports
/// the failed mmap of the process in start-up, and the verdict names it
/// and the limit.
#[test]
#[ignore = "needs root"]
fn a_reservation_refused_by_the_address_space_limit_is_the_verdict() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("aslimit");
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    let (mut c, mut out) = spawn_limited(
        &drv,
        &lib,
        "cuinit",
        "reserve",
        Some((nix::sys::resource::Resource::RLIMIT_AS, 2 << 30)),
    );
    let pid = c.id();
    wait_hooked(&t, pid);
    go(&mut c, &mut out);
    let pid = u64::from(pid);
    let f = t.stop();
    check_schema(&f);
    let failed = f
        .of_type("proc")
        .find(|r| r["pid"] == pid && r["op"] == "call_failed")
        .unwrap_or_else(|| panic!("no call_failed record of pid {pid}"));
    assert_eq!(
        (failed["call"].as_str(), failed["errno"].as_str()),
        (Some("mmap"), Some("ENOMEM"))
    );
    // All four arguments, as the stand-in passed them: 64 GiB, PROT_NONE,
    // MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE.
    assert_eq!(
        failed["args"],
        serde_json::json!([0, 64u64 << 30, 0, 0x4022]),
        "{failed}"
    );
    // The address space as the kernel held it at the failure: under the
    // limit (a process cannot pass it), with the interpreter's mappings.
    let mm = &failed["mm"];
    let vm = mm["vm_bytes"].as_u64().expect("vm_bytes");
    assert!(
        mm["map_count"].as_u64().is_some_and(|n| n > 5) && vm > 1 << 20 && vm <= 2 << 30,
        "{failed}"
    );
    assert!(
        mm["data_bytes"].as_u64().is_some_and(|d| d > 0 && d < vm),
        "{failed}"
    );
    let (_, evidence) = out_of_memory(&f, pid, "address_space_limit");
    assert!(
        evidence.contains("mmap() failed with ENOMEM (mapping memory): the address-space limit (RLIMIT_AS, ulimit -v) of 2 GiB (2147483648 bytes)"),
        "{evidence}"
    );
    assert!(
        evidence.contains(&format!(
            "its address space was {} when the call failed",
            mib_text(vm)
        )),
        "{evidence}"
    );
}

/// Bytes as the verdicts write them: "1.5 MiB (1572864 bytes)".
fn mib_text(v: u64) -> String {
    let (n, unit) = if v >= 1 << 30 {
        (v as f64 / (1u64 << 30) as f64, "GiB")
    } else {
        (v as f64 / (1u64 << 20) as f64, "MiB")
    };
    let t = if n.fract() == 0.0 {
        format!("{n:.0}")
    } else {
        format!("{n:.1}")
    };
    format!("{t} {unit} ({v} bytes)")
}

/// The verdict of `pid`, a cuInit that returned CUDA_ERROR_OUT_OF_MEMORY,
/// whose first diagnosis is `id`: the verdict and that diagnosis's
/// evidence.
fn out_of_memory(f: &nvprobe_tests::harness::Finished, pid: u64, id: &str) -> (Value, String) {
    let v = f
        .of_type("cuinit")
        .find(|v| v["pid"] == pid)
        .expect("verdict")
        .clone();
    assert_eq!(
        (v["result"].as_str(), v["curesult"].as_str()),
        (Some("failed"), Some("CUDA_ERROR_OUT_OF_MEMORY (2)"))
    );
    assert_eq!(v["diagnoses"][0]["id"], id, "{v}");
    let evidence = v["diagnoses"][0]["evidence"]
        .as_str()
        .expect("evidence")
        .to_owned();
    (v, evidence)
}

/// The data-size limit, not the address space: the stand-in maps 1 GiB of
/// private writable memory under a 256 MiB RLIMIT_DATA (the address space
/// unlimited). The verdict names RLIMIT_DATA with what the call asked
/// for, and its hint offers no address-space remedy.
#[test]
#[ignore = "needs root"]
fn private_memory_refused_by_the_data_size_limit_is_the_verdict() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("datalimit");
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    // It lives on after its start-up failed, as a program printing the
    // error does, until its verdict is out: it is read again at the
    // failure (its map count with it).
    let (mut c, mut out) = nvprobe_tests::scenario::spawn_env(
        &drv,
        &lib,
        "cuinit",
        "heap",
        Some((nix::sys::resource::Resource::RLIMIT_DATA, 256 << 20)),
        &[("NVFIXTURE_HOLD", "1".to_owned())],
    );
    let pid = c.id();
    wait_hooked(&t, pid);
    let mut stdin = c.stdin.take().expect("stdin");
    stdin.write_all(b"go\n").expect("go");
    let mut line = String::new();
    out.read_line(&mut line).expect("result");
    t.wait_for("the verdict", |r| {
        r["type"] == "cuinit" && r["pid"] == u64::from(pid)
    });
    drop(stdin);
    assert!(c.wait().expect("wait").success(), "{line}");
    let pid = u64::from(pid);
    let f = t.stop();
    check_schema(&f);
    let (v, evidence) = out_of_memory(&f, pid, "data_size_limit");
    let d = &v["diagnoses"][0];
    assert!(
        evidence.contains(
            "mmap() failed with ENOMEM (mapping memory): the data-size limit (RLIMIT_DATA, ulimit -d) of 256 MiB \
(268435456 bytes): it counts private writable memory, this mapping is; the process had "
        ) && evidence.ends_with(
            "; the call asked for 1 GiB (1073741824 bytes) (PROT_READ|PROT_WRITE, \
MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE)"
        ),
        "{evidence}"
    );
    // Its private writable memory as the kernel counted it at the failure.
    assert!(
        evidence.contains("of it (VmData) when the call failed"),
        "{evidence}"
    );
    let hint = d["hint"].as_str().expect("hint");
    assert!(!hint.contains("ulimit -v unlimited"), "{hint}");
    // The limits the verdict rests on are in the process's record.
    let limits = &v["process"]["limits"];
    assert_eq!(
        limits["data"],
        serde_json::json!([256 << 20, 256 << 20]),
        "{limits}"
    );
    assert!(
        limits["vm_data"].as_u64().is_some_and(|n| n > 0),
        "{limits}"
    );
    assert_eq!(v["process"]["read_at"], "cuinit_failed", "{v}");
    assert!(
        limits["map_count"].as_u64().is_some_and(|n| n > 0),
        "{limits}"
    );
}

/// A start-up that fails for a reason no rule names: the stand-in looks
/// for a configuration file and a daemon's socket that are not there and
/// returns CUDA_ERROR_UNKNOWN. No call on an NVIDIA file fails; the
/// kernel side's raw sys_exit program sends both failed calls with their
/// paths, and the verdict shows them, the newest first.
#[test]
#[ignore = "needs root"]
fn a_failure_no_rule_names_shows_the_failed_system_calls_newest_first() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("failedcalls");
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    let (mut c, mut out) = spawn_cuinit(&drv, &lib, "config");
    let pid = c.id();
    wait_hooked(&t, pid);
    go(&mut c, &mut out);
    let pid = u64::from(pid);
    let f = t.stop();
    check_schema(&f);
    let failed: Vec<(&str, &str, &str)> = f
        .of_type("proc")
        .filter(|r| r["pid"] == pid && r["op"] == "call_failed")
        .map(|r| {
            (
                r["call"].as_str().unwrap_or(""),
                r["errno"].as_str().unwrap_or(""),
                r["path"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        failed.contains(&("openat", "ENOENT", "/nonexistent-nvprobe-stub/gpu.conf"))
            && failed.contains(&("connect", "ENOENT", "/nonexistent-nvprobe-stub/daemon.sock")),
        "{failed:?}"
    );
    let v = f
        .of_type("cuinit")
        .find(|v| v["pid"] == pid)
        .expect("verdict");
    assert_eq!(
        (v["result"].as_str(), v["curesult"].as_str()),
        (Some("failed"), Some("CUDA_ERROR_UNKNOWN (999)")),
        "{v}"
    );
    let newest: Vec<(&str, &str)> = v["failed_syscalls"]
        .as_array()
        .expect("failed_syscalls")
        .iter()
        .take(2)
        .map(|c| {
            (
                c["call"].as_str().unwrap_or(""),
                c["path"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        newest,
        [
            ("connect", "/nonexistent-nvprobe-stub/daemon.sock"),
            ("openat", "/nonexistent-nvprobe-stub/gpu.conf")
        ],
        "{v}"
    );
    let d = v["diagnoses"]
        .as_array()
        .expect("diagnoses")
        .iter()
        .find(|d| d["id"] == "failed_syscalls")
        .unwrap_or_else(|| panic!("no failed_syscalls diagnosis: {v}"));
    let evidence = d["evidence"].as_str().expect("evidence");
    assert!(
        evidence
            .contains("the newest first: connect /nonexistent-nvprobe-stub/daemon.sock ENOENT at ")
            && evidence.contains("; openat /nonexistent-nvprobe-stub/gpu.conf ENOENT at "),
        "{evidence}"
    );
}

/// The stand-in's start-up (held alive after its result) with strace
/// attached once it is hooked, injecting as `inject` says into the calls
/// that touch the stand-in's nvidiactl; its cuInit's result. Returns the
/// verdict, strace's pid and the result. (strace attaches after nvprobe's
/// first read of the process: the tracer is known from the read again at
/// cuInit's failure, which the held process lives through.)
fn under_strace(name: &str, trace: &str, inject: &str) -> (Value, u32, Value) {
    let tmp = tmpdir(name);
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    let (mut c, mut out) = nvprobe_tests::scenario::spawn_env(
        &drv,
        &lib,
        "cuinit",
        "ok",
        None,
        &[("NVFIXTURE_HOLD", "1".to_owned())],
    );
    let pid = c.id();
    wait_hooked(&t, pid);
    let ctl = drv.dir.join("nvidiactl");
    let mut strace = nvprobe_tests::scenario::attach_strace(
        pid,
        &[
            "-e".as_ref(),
            trace.as_ref(),
            "-P".as_ref(),
            ctl.as_os_str(),
            "-e".as_ref(),
            inject.as_ref(),
        ],
    );
    let mut stdin = c.stdin.take().expect("stdin");
    stdin.write_all(b"go\n").expect("go");
    let mut line = String::new();
    out.read_line(&mut line).expect("result");
    let result: Value = serde_json::from_str(&line).expect("the scenario's result");
    t.wait_for("the verdict", |r| {
        r["type"] == "cuinit" && r["pid"] == u64::from(pid)
    });
    drop(stdin);
    assert!(c.wait().expect("wait").success(), "{line}");
    assert!(strace.wait().expect("strace").success());
    let f = t.stop();
    check_schema(&f);
    let v = f
        .of_type("cuinit")
        .find(|v| v["pid"] == u64::from(pid))
        .expect("verdict")
        .clone();
    assert_eq!(
        v["process"]["tracer"],
        serde_json::json!({"pid": strace.id(), "comm": "strace"}),
        "{v}"
    );
    (v, strace.id(), result)
}

/// strace attached to a start-up and answering libcuda's calls itself
/// (`-e inject`): the kernel never runs them. Where it answered the open
/// of nvidiactl, no driver call reached the kernel; where it answered the
/// first escape, the kernel saw that call skipped (number -1, ENOSYS,
/// with the escape's arguments). Each verdict names the tracer as what
/// answered, with no node or driver remedy.
#[test]
#[ignore = "needs root"]
fn a_call_a_tracer_answered_is_named_as_the_tracers() {
    need_root!();
    if !nvprobe_tests::harness::require_tool("strace", "-V", "apt-get install strace") {
        return;
    }
    let _g = lock();
    let ids = |v: &Value| -> Vec<String> {
        v["diagnoses"]
            .as_array()
            .expect("diagnoses")
            .iter()
            .filter_map(|d| d["id"].as_str().map(str::to_owned))
            .collect()
    };
    let skip = "and the kernel saw 1 call of its start-up skipped (number -1 at the call's exit, which a ptrace \
tracer sets for a call it answers itself)";
    let tracer = |pid: u32| {
        format!(
            "; no driver call reached the kernel: the process is traced by strace[{pid}], which answered it itself, as strace's -e inject does"
        )
    };
    let (v, strace, result) =
        under_strace("tracer-open", "trace=openat", "inject=openat:error=EACCES");
    assert_eq!(
        result["cuInit"], 999,
        "the stand-in's open failed: {result}"
    );
    assert_eq!(
        (v["result"].as_str(), v["curesult"].as_str()),
        (Some("failed"), Some("CUDA_ERROR_UNKNOWN (999)")),
        "{v}"
    );
    assert_eq!(ids(&v), ["answered_by_tracer"], "{v}");
    assert_eq!(
        v["diagnoses"][0]["evidence"],
        format!(
            "cuInit returned CUDA_ERROR_UNKNOWN (999) {skip}{}",
            tracer(strace)
        ),
        "{v}"
    );
    // The first escape (NV_ESC_RM_ALLOC of the client) answered EIO.
    let (v, strace, result) = under_strace(
        "tracer-ioctl",
        "trace=ioctl",
        "inject=ioctl:error=EIO:when=1",
    );
    assert_eq!(
        result["cuInit"], 999,
        "the stand-in's escape failed: {result}"
    );
    assert_eq!(ids(&v), ["answered_by_tracer"], "{v}");
    let e = v["diagnoses"][0]["evidence"].as_str().expect("evidence");
    let head = format!(
        "cuInit returned CUDA_ERROR_UNKNOWN (999) {skip}, it with the arguments of NV_ESC_RM_ALLOC (descriptor "
    );
    // (The descriptor is whatever the stand-in's open got.)
    let fd = e
        .strip_prefix(&head)
        .and_then(|rest| rest.strip_suffix(&format!(", request 0xc020462b){}", tracer(strace))))
        .unwrap_or_else(|| panic!("{e}"));
    assert!(fd.parse::<u32>().is_ok(), "{e}");
}
