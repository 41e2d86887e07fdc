//! Tier 2: `--events` levels on the real BPF programs, as root.
//!
//! A process starts up through the stand-in libcuda (cuInit and a first
//! context; its verdict: ok),
//! then makes a steady loop of successful RM controls and three that fail
//! behind a return of 0. At `all` every call is written; at `verdicts`
//! only the failed calls, the verdict and the summary are, and the kernel
//! drops the successful calls made after the verdict (the summary counts
//! them as `quieted`); every call is accounted for either way.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use nvprobe_tests::{
    harness::bin,
    need_root,
    scenario::{FakeDrv, check_schema, lock, stub_libcuda, tmpdir, watch},
};
use serde_json::Value;

const STEADY: u64 = 400;

struct Run {
    pid: u64,
    records: Vec<Value>,
    answer: Value,
}

fn run_at(level: &str) -> Option<Run> {
    run_scenario("steady", level)
}

/// `scenario` (steady or steady-exec) traced at `level`; the answer is the
/// scenario's last line (after-exec's, for steady-exec).
fn run_scenario(scenario: &str, level: &str) -> Option<Run> {
    let _g = lock();
    let tmp = tmpdir(&format!("levels-{level}"));
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let mut c = Command::new(bin("nvfixture"))
        .args(["run", scenario, "--count", &STEADY.to_string(), "--dir"])
        .arg(&drv.dir)
        .arg("--lib")
        .arg(&lib)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn nvfixture");
    let pid = u64::from(c.id());
    let mut out = BufReader::new(c.stdout.take().expect("stdout"));
    let mut stdin = c.stdin.take().expect("stdin");
    let mut line = String::new();
    out.read_line(&mut line).expect("ready");
    assert!(line.contains("ready"), "{line}");
    // Only this process: another CUDA process on the host changes nothing.
    let t = watch(&tmp, &drv, &["--pid", &pid.to_string(), "--events", level]);
    stdin.write_all(b"go\n").expect("go");
    line.clear();
    out.read_line(&mut line).expect("inited");
    assert!(line.contains("\"inited\":0"), "{line}");
    // The kernel made the process quiet at its first context: nothing to
    // wait for.
    stdin.write_all(b"go\n").expect("go");
    let mut answer = Value::Null;
    loop {
        line.clear();
        if out.read_line(&mut line).expect("answer") == 0 {
            break;
        }
        answer = serde_json::from_str(&line).expect("json answer");
    }
    assert!(c.wait().expect("wait").success());
    let f = t.stop();
    check_schema(&f);
    Some(Run {
        pid,
        records: f.records,
        answer,
    })
}

fn summary_row(r: &Run) -> (&Value, &Value) {
    let s = r
        .records
        .iter()
        .rev()
        .find(|x| x["type"] == "summary")
        .expect("summary");
    let row = s["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .find(|p| p["pid"] == r.pid)
        .expect("the process's row");
    (s, row)
}

#[test]
fn verdicts_level_ships_failures_and_the_kernel_drops_quiet_successes() {
    need_root!();
    let Some(all) = run_at("all") else { return };
    let Some(quiet) = run_at("verdicts") else {
        return;
    };
    for r in [&all, &quiet] {
        assert_eq!(r.answer["ok_calls"], STEADY, "{}", r.answer);
        assert_eq!(r.answer["failed_calls"], 3, "{}", r.answer);
        // Every record carries its severity, in OpenTelemetry's numbers.
        for x in &r.records {
            let n = x["severity_number"].as_u64().expect("severity_number");
            let t = x["severity"].as_str().expect("severity");
            let want = match t {
                "debug" => 5,
                "info" => 9,
                "warn" => 13,
                "error" => 17,
                other => panic!("severity {other}"),
            };
            assert_eq!(n, want, "{x}");
        }
    }
    let ioctls = |r: &Run, ok: bool| {
        r.records
            .iter()
            .filter(|x| x["type"] == "ioctl" && x["pid"] == r.pid && x["ok"] == ok)
            .count() as u64
    };
    // all: every call written (cuInit's 2 RM calls, the loop, 3 failures).
    assert_eq!(ioctls(&all, true), 2 + STEADY);
    assert_eq!(ioctls(&all, false), 3);
    let (s, row) = summary_row(&all);
    assert!(s.get("quieted").is_none(), "{s}");
    assert_eq!(row["ioctls"], 2 + STEADY + 3);
    for t in ["stage", "process", "cuinit"] {
        assert!(all.records.iter().any(|x| x["type"] == t), "all has {t}");
    }

    // verdicts: the failed calls and the verdict, no successful call, no
    // milestone, no identity record.
    assert_eq!(ioctls(&quiet, true), 0);
    let failed: Vec<&Value> = quiet
        .records
        .iter()
        .filter(|x| x["type"] == "ioctl" && x["pid"] == quiet.pid)
        .collect();
    assert_eq!(failed.len(), 3);
    for x in &failed {
        assert_eq!(x["status"]["name"], "NV_ERR_INVALID_COMMAND", "{x}");
        assert_eq!(
            (x["severity"].as_str(), x["ok"].as_bool()),
            (Some("warn"), Some(false))
        );
    }
    for x in &quiet.records {
        let t = x["type"].as_str().expect("type");
        assert!(
            matches!(
                t,
                "start" | "warning" | "lost" | "stall" | "summary" | "cuinit" | "signal"
            ) || x["ok"] == false,
            "not a record of the verdicts level: {x}"
        );
    }
    let v = quiet
        .records
        .iter()
        .find(|x| x["type"] == "cuinit" && x["pid"] == quiet.pid)
        .expect("verdict");
    assert_eq!(
        (v["result"].as_str(), v["severity"].as_str()),
        (Some("ok"), Some("info"))
    );
    // Every call is accounted for: counted after reaching user space, or
    // dropped by the kernel as a quiet process's success.
    let (s, row) = summary_row(&quiet);
    let quieted = s["quieted"].as_u64().unwrap_or(0);
    let arrived = row["ioctls"].as_u64().expect("ioctls");
    eprintln!("verdicts level: {arrived} calls arrived, {quieted} dropped in the kernel");
    assert_eq!(arrived + quieted, 2 + STEADY + 3, "{s}");
    assert_eq!(
        quieted, STEADY,
        "the kernel keeps back every successful call after the first context: {s}"
    );
    assert!(
        s["quieted"].as_u64() == Some(quieted) && row["failed"] == 3,
        "{row}"
    );
}

/// An exec ends the quiet: the new program (no cuInit of its own) has its
/// successful call on the inherited fd counted as arrived, not quieted.
#[test]
fn an_exec_makes_a_quiet_process_followed_in_full_again() {
    need_root!();
    let Some(r) = run_scenario("steady-exec", "verdicts") else {
        return;
    };
    // after-exec's answer: the inherited fd's control succeeded, the
    // close-on-exec one was gone.
    assert_eq!(r.answer["rets"][0], 0, "{}", r.answer);
    let s = r
        .records
        .iter()
        .rev()
        .find(|x| x["type"] == "summary")
        .expect("summary");
    assert_eq!(s["quieted"].as_u64(), Some(STEADY), "{s}");
    let arrived: u64 = s["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter(|p| p["pid"] == r.pid)
        .filter_map(|p| p["ioctls"].as_u64())
        .sum();
    // cuInit's 2, the 3 failures, and the new program's 1.
    assert_eq!(arrived, 2 + 3 + 1, "{s}");
}
