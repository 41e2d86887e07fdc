//! Tier 2 (root): run-time faults with the default `--libcuda-hooks
//! faults`. The stand-in libcuda (tests/cuda-stub/libcuda.c) fails
//! cuCtxSynchronize with a sticky CUresult and every call after it, or
//! waits in it for ever; nvprobe sends only the failures of those calls
//! and ends the process in a `fault` verdict. A line written to
//! /dev/kmsg from user space is never taken for the driver's.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout};

use nvprobe_tests::{
    need_root,
    scenario::{FakeDrv, check_schema, lock, stub_libcuda, tmpdir, watch},
};
use serde_json::Value;

/// nvfixture's `runtime` scenario under the stand-in with `fault` as
/// NVPROBE_STUB_FAULT; it waits for a line on stdin.
fn spawn(drv: &FakeDrv, lib: &std::path::Path, fault: &str) -> (Child, BufReader<ChildStdout>) {
    spawn_more(drv, lib, fault, 0)
}

/// [`spawn`], with `more` synchronisations after the scenario's own.
fn spawn_more(
    drv: &FakeDrv,
    lib: &std::path::Path,
    fault: &str,
    more: u32,
) -> (Child, BufReader<ChildStdout>) {
    let env = [
        ("NVPROBE_STUB_FAULT", fault.to_owned()),
        ("NVFIXTURE_MORE_SYNCS", more.to_string()),
    ];
    nvprobe_tests::scenario::spawn_env(drv, lib, "runtime", "ok", None, &env)
}

fn go(c: &mut Child) {
    c.stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
}

fn faults_of(f: &nvprobe_tests::harness::Finished, pid: u32) -> Vec<&Value> {
    f.of_type("fault")
        .filter(|r| r["pid"] == u64::from(pid))
        .collect()
}

#[test]
#[ignore = "needs root"]
fn a_sticky_error_at_run_time_ends_in_a_fault_verdict() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("faults-sticky");
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    // The stand-in is in no standard folder: it is hooked once the
    // process maps it, before `go`.
    let (mut ok, _o1) = spawn(&drv, &lib, "");
    // Ten more synchronisations after the four calls: 14 failures, of
    // which the kernel sends 8 and counts 6.
    let (mut bad, mut out) = spawn_more(&drv, &lib, "700", 10);
    let (ok_pid, bad_pid) = (ok.id(), bad.id());
    // (Both map the one file: the note names whichever was read first.)
    t.wait_for("the stand-in hooked", |r| {
        r["type"] == "warning" && r["id"] == "libcuda_late"
    });
    go(&mut ok);
    go(&mut bad);
    let mut line = String::new();
    out.read_line(&mut line).expect("result");
    assert!(line.contains(r#""cuCtxSynchronize":[700,700]"#), "{line}");
    assert!(line.contains(r#""more_failed":10"#), "{line}");
    assert!(ok.wait().expect("wait").success());
    assert_eq!(bad.wait().expect("wait").code(), Some(1));
    let f = t.stop();
    check_schema(&f);
    let start = f.of_type("start").next().expect("start");
    assert_eq!(start["libcuda_hooks"], "faults", "{start}");
    // Fault-only calls: their failures are sent, their entries and their
    // successes are not.
    let cuda = |pid: u32| -> Vec<(String, String, i64)> {
        f.for_pid(pid)
            .into_iter()
            .filter(|r| r["type"] == "cuda")
            .filter(|r| {
                ["cuCtxSynchronize", "cuMemcpyDtoH_v2", "cuMemFree_v2"]
                    .contains(&r["func"].as_str().unwrap_or(""))
            })
            .map(|r| {
                (
                    r["func"].as_str().unwrap_or("").to_owned(),
                    r["phase"].as_str().unwrap_or("").to_owned(),
                    r["result"].as_i64().unwrap_or(-1),
                )
            })
            .collect()
    };
    assert_eq!(
        cuda(ok_pid),
        vec![],
        "a program whose calls succeed sends none of them"
    );
    let got = cuda(bad_pid);
    let mut want: Vec<(String, String, i64)> = [
        ("cuCtxSynchronize", 700),
        ("cuCtxSynchronize", 700),
        ("cuMemcpyDtoH_v2", 700),
        ("cuMemFree_v2", 700),
    ]
    .map(|(f, r)| (f.to_owned(), "return".to_owned(), r))
    .into();
    want.extend((0..4).map(|_| ("cuCtxSynchronize".to_owned(), "return".to_owned(), 700)));
    assert_eq!(got, want, "the first 8 failures are sent");
    // The 6 past the cap are counted in the summary.
    let summary = f.of_type("summary").next().expect("summary");
    let row = summary
        .as_object()
        .into_iter()
        .flat_map(|o| o.values())
        .filter_map(|v| v.as_array())
        .flatten()
        .find(|r| {
            r.to_string()
                .contains("libcuda failures past 8 per process")
        })
        .unwrap_or_else(|| panic!("no capped row in {summary}"));
    assert_eq!(row["unsent"], 6, "{row}");
    assert!(faults_of(&f, ok_pid).is_empty());
    let v = faults_of(&f, bad_pid);
    assert_eq!(v.len(), 1, "{v:?}");
    let v = v[0];
    assert_eq!(v["call"]["func"], "cuCtxSynchronize", "{v}");
    assert_eq!(
        v["call"]["result_name"], "CUDA_ERROR_ILLEGAL_ADDRESS",
        "{v}"
    );
    assert_eq!(v["later_failures"], 7, "the later ones sent: {v}");
    assert_eq!(v["class"], "program", "{v}");
    assert_eq!(v["drain"], false, "{v}");
    assert_eq!(v["ended"], "exited with status 1", "{v}");
    let text = v["text"].as_str().unwrap_or("");
    assert!(
        text.starts_with("cuCtxSynchronize returned 700 CUDA_ERROR_ILLEGAL_ADDRESS (and 7 later calls); the driver logged no Xid; exited with status 1"),
        "{text}"
    );
    assert!(
        v["hint"].as_str().unwrap_or("").contains("fix the kernel"),
        "{v}"
    );
}

#[test]
#[ignore = "needs root"]
fn a_process_killed_while_it_waits_for_the_gpu_is_told_apart() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("faults-wait");
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    let (mut c, _out) = spawn(&drv, &lib, "wait");
    let pid = c.id();
    nvprobe_tests::scenario::wait_hooked(&t, pid);
    go(&mut c);
    std::thread::sleep(std::time::Duration::from_millis(700));
    c.kill().expect("SIGKILL");
    let _ = c.wait();
    let f = t.stop();
    check_schema(&f);
    let un: Vec<&Value> = f
        .for_pid(pid)
        .into_iter()
        .filter(|r| r["type"] == "cuda" && r["phase"] == "unfinished")
        .collect();
    assert_eq!(un.len(), 1, "{un:?}");
    assert_eq!(un[0]["func"], "cuCtxSynchronize");
    assert!(
        un[0]["duration_ns"].as_u64().unwrap_or(0) >= 500_000_000,
        "{}",
        un[0]
    );
    let v = faults_of(&f, pid);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0]["class"], "unfinished", "{}", v[0]);
    assert_eq!(v[0]["ended"], "killed by SIGKILL", "{}", v[0]);
    assert!(v[0].get("call").is_none(), "{}", v[0]);
    assert!(
        v[0]["hint"]
            .as_str()
            .unwrap_or("")
            .contains("the driver reported no error"),
        "{}",
        v[0]
    );
}

#[test]
#[ignore = "needs root"]
fn a_line_user_space_writes_to_the_kernel_log_is_not_the_drivers() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("faults-kmsg");
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &[]);
    t.wait_for("the start record", |r| r["type"] == "start");
    // Root may write to /dev/kmsg; the kernel gives it the user facility
    // whatever prefix it claims.
    let fake = "NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=init, GPU has fallen off the bus.";
    let mut k = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .expect("/dev/kmsg");
    k.write_all(format!("<0>{fake}\n").as_bytes())
        .expect("write /dev/kmsg");
    std::thread::sleep(std::time::Duration::from_millis(400));
    let f = t.stop();
    check_schema(&f);
    assert!(
        f.records
            .iter()
            .all(|r| r["id"] != "kernel_log_unavailable"),
        "root reads /dev/kmsg here"
    );
    assert_eq!(
        f.of_type("kernel_log").count(),
        0,
        "{:?}",
        f.of_type("kernel_log").collect::<Vec<_>>()
    );
}
