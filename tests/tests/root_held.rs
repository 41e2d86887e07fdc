//! Tier 2: processes that held an NVIDIA descriptor when nvprobe started,
//! at the `--events` levels, on the real BPF programs, as root: quiet from
//! the start (their successes counted in the kernel), their failures and
//! the call after one sent, with either ioctl exit; followed call by call
//! once they start CUDA, whose start-up is judged from its own first step.

use std::io::{BufRead, Write};
use std::process::Command;

use nvprobe_tests::{
    harness::bin,
    need_root,
    scenario::{FakeDrv, check_schema, lock, spawn_ready, stub_libcuda, tmpdir, watch_adjusted},
};
use serde_json::Value;

/// The successful calls before and after the failure (as `root_levels`'s
/// steady loop).
const STEADY: u64 = 400;

/// A process that already held an NVIDIA descriptor when nvprobe started
/// (its start-up unseen) is quiet at `--events verdicts` from the start:
/// its successful calls are counted, its failure and the call after it
/// are sent. When it then starts CUDA (cuInit through the stand-in
/// libcuda, loaded before nvprobe started) its start-up is followed call
/// by call again, and its verdict is the one `--events all` gives.
#[test]
#[ignore = "needs root"]
fn a_process_that_held_a_descriptor_at_the_start_is_quiet_until_it_starts_cuda() {
    need_root!();
    let (all, a, _) = held_run("all", &[], &[]);
    let (quiet, q, _) = held_run("verdicts", &[], &[]);
    for x in [&a, &q] {
        assert_eq!(
            (&x["ok_calls"], &x["failed_calls"], &x["inited"]),
            (
                &Value::from(2 * STEADY + 1),
                &Value::from(1),
                &Value::from(0)
            ),
            "{x}"
        );
    }
    // At `all`, every call of the loop is written, before cuInit's.
    let cuinit = all
        .iter()
        .find(|r| r["type"] == "cuda" && r["pid"] == a["pid"] && r["func"] == "cuInit")
        .and_then(|r| r["start_ns"].as_u64())
        .expect("cuInit's record");
    let looped = all
        .iter()
        .filter(|r| r["type"] == "ioctl" && r["pid"] == a["pid"])
        .filter(|r| r["start_ns"].as_u64().is_some_and(|t| t < cuinit))
        .count() as u64;
    assert_eq!(looped, 2 * STEADY + 2);
    // At `verdicts`, the failure alone is written.
    assert_eq!(written(&quiet, &q["pid"]), [&Value::from("0xdea")]);
    let row = |recs: &[Value], x: &Value| -> Value {
        summary(recs)["processes"]
            .as_array()
            .and_then(|p| p.iter().find(|r| r["pid"] == x["pid"]).cloned())
            .expect("row")
    };
    // Every call accounted for. Counted in the kernel: the loop's, but for
    // the call after the failure; the start-up's milestones were sent
    // again once cuInit began (the loop reached nvprobe whole at `all`).
    let (ra, rq) = (row(&all, &a), row(&quiet, &q));
    assert_eq!(ra["ioctls"], rq["ioctls"], "{ra}\n{rq}");
    assert_eq!(rq["unsent"], 2 * STEADY, "{rq}");
    // The start-up's verdict, the same at both levels (the evidence of
    // an inherited descriptor names the first call that reached nvprobe,
    // which differs).
    let verdict = |recs: &[Value], x: &Value| -> Value {
        let v = recs
            .iter()
            .find(|r| r["type"] == "cuinit" && r["pid"] == x["pid"])
            .unwrap_or_else(|| panic!("no verdict for {}", x["pid"]));
        let names = |k: &str, f: &str| -> Vec<Value> {
            v[k].as_array()
                .expect(k)
                .iter()
                .map(|s| s[f].clone())
                .collect()
        };
        // Its times (the first context "at 19.6 ms") differ run to run.
        let text: String = v["text"]
            .as_str()
            .expect("text")
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .collect();
        serde_json::json!({
            "result": v["result"], "class": v["class"], "text": text,
            "diagnoses": names("diagnoses", "id"), "stages": names("stages", "name"),
        })
    };
    let (va, vq) = (verdict(&all, &a), verdict(&quiet, &q));
    assert_eq!(va["result"], "ok", "{va}");
    assert_eq!(va, vq, "the two levels' verdicts differ");
    // Without the libcuda layer, its open of the node (the stand-in
    // libcuda's own, as a real one's) ends the quiet: the start-up's
    // allocation after it is sent, a milestone of the verdict.
    let (bare, b, _) = held_run("verdicts", &["--layers", "syscall,process"], &[]);
    assert_eq!(row(&bare, &b)["unsent"], 2 * STEADY);
    let vb = verdict(&bare, &b);
    assert!(
        vb["stages"]
            .as_array()
            .is_some_and(|s| s.contains(&Value::from("rm_client"))),
        "{vb}"
    );
}

/// The simpler ioctl exit (kernels before 6.12, and the driver layer's
/// ioctl records everywhere; `NVPROBE_IOCTL_EXIT=simple` picks it here)
/// treats a process that held its descriptor when nvprobe started as the
/// counting exit does at `--events verdicts`: its successes counted, its
/// failure sent, and the call after the failure sent too (the retry that
/// tells a recovered failure).
#[test]
#[ignore = "needs root"]
fn the_simpler_exit_sends_the_call_after_a_held_process_s_failure() {
    need_root!();
    let (recs, x, stderr) = held_run(
        "verdicts",
        &["--layers", "syscall,process"],
        &[("NVPROBE_IOCTL_EXIT", "simple")],
    );
    assert_eq!(
        (&x["ok_calls"], &x["failed_calls"]),
        (&Value::from(2 * STEADY + 1), &Value::from(1)),
        "{x}"
    );
    assert!(
        stderr.contains("NVPROBE_IOCTL_EXIT=simple in nvprobe's environment"),
        "the start does not say which exit runs: {stderr}"
    );
    // Counted in the kernel (the simpler exit counts in `quieted` alone):
    // the loop's successes but the call after the failure, which reached
    // the collector (the level writes only the failure of it).
    let s = summary(&recs);
    assert_eq!(s["quieted"], 2 * STEADY, "{s}");
    assert_eq!(written(&recs, &x["pid"]), [&Value::from("0xdea")]);
    // The start-up it then began (its own open of the node) is judged on
    // what it did from there: the failure on the descriptor it held
    // before is not the start-up's, and the stages come in their order.
    let v = recs
        .iter()
        .find(|r| r["type"] == "cuinit" && r["pid"] == x["pid"])
        .expect("a verdict");
    let stages: Vec<&Value> = v["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|s| &s["name"])
        .collect();
    assert_eq!(
        stages,
        ["ctl_opened", "rm_client", "version_handshake"],
        "{v}"
    );
    assert!(v.get("failed_call").is_none(), "{v}");
    assert_ne!(v["result"], "failed", "{v}");
}

/// A value of `NVPROBE_IOCTL_EXIT` nvprobe does not understand is said
/// once as a warning (not as a refused probe) and ignored: the counting
/// exit this kernel takes is attached, and the trace runs.
#[test]
#[ignore = "needs root"]
fn a_bad_ioctl_exit_choice_is_said_and_ignored() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("exit-env");
    let drv = FakeDrv::start(&tmp);
    let t = watch_adjusted(&tmp, &drv, &["--events", "verdicts"], |c| {
        c.env("NVPROBE_IOCTL_EXIT", "compat");
    });
    let f = t.stop();
    check_schema(&f);
    let said: Vec<&Value> = f
        .records
        .iter()
        .filter(|r| r["type"] == "warning" && r["id"] == "environment")
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0]["message"]
            .as_str()
            .is_some_and(|m| m
                .starts_with("NVPROBE_IOCTL_EXIT=\"compat\" in nvprobe's environment is neither")),
        "{}",
        said[0]
    );
    assert!(
        !f.stderr.contains("probe ioctl_exit not attached"),
        "{}",
        f.stderr
    );
}

/// nvfixture's `held` scenario, its descriptor opened before nvprobe
/// starts at `level` (with `env` in nvprobe's environment): the validated
/// records, its answer and what nvprobe said on stderr.
fn held_run(level: &str, extra: &[&str], env: &[(&str, &str)]) -> (Vec<Value>, Value, String) {
    let _g = lock();
    let tmp = tmpdir(&format!("held-{level}"));
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let lib_arg = lib.to_string_lossy().into_owned();
    let count = STEADY.to_string();
    let mut args = vec!["--events", level];
    args.extend_from_slice(extra);
    let (answer, t) = run_held(
        &tmp,
        &drv,
        &["held", "--count", &count, "--lib", &lib_arg],
        &args,
        env,
    );
    let f = t.stop();
    check_schema(&f);
    let gate = &summary(&f.records)["descriptor_gate"];
    assert_eq!(gate["open"], true, "{gate}");
    let opened = gate["opened_mono_ns"].as_u64().expect("opened_mono_ns");
    assert!(
        opened < answer["loop_ns"].as_u64().expect("loop_ns"),
        "the scan ended after the loop began: {gate}"
    );
    (f.records, answer, f.stderr)
}

/// A process busy with NVIDIA calls on a descriptor it opened before
/// nvprobe started is seen first at one of them, before the start's scan
/// of /proc reaches it: the kernel side follows it from that call as the
/// scan would (its start-up was not seen), so at `--events verdicts` its
/// successes are counted from the next call on, its failure is written,
/// and its verdict is how it ended, not a failed start-up.
#[test]
#[ignore = "needs root"]
fn a_busy_process_first_seen_at_a_call_is_followed_as_one_that_held_its_descriptor() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("held-busy");
    let drv = FakeDrv::start(&tmp);
    let (answer, t) = run_held(&tmp, &drv, &["held-busy"], &["--events", "verdicts"], &[]);
    let pid = answer["pid"].clone();
    assert_eq!(answer["failed_calls"], 1, "{answer}");
    let f = t.stop();
    check_schema(&f);
    assert_eq!(written(&f.records, &pid), [&Value::from("0xdea")]);
    let row = f.process_row(pid.as_u64().expect("pid"));
    // Arrived: the call it was first seen at, and the failure; the rest
    // were counted in the kernel.
    let (all, unsent) = (
        row["ioctls"].as_u64().expect("ioctls"),
        row["unsent"].as_u64().expect("unsent"),
    );
    assert_eq!(all - unsent, 2, "{row}");
    assert!(unsent > 100, "{row}");
    let v = f
        .records
        .iter()
        .find(|r| r["type"] == "cuinit" && r["pid"] == pid)
        .expect("a verdict");
    assert_eq!(
        (&v["result"], &v["process"]["held_at_start"]),
        (&Value::from("ok"), &Value::from(true)),
        "{v}"
    );
    assert!(
        v["text"].as_str().is_some_and(|t| t.starts_with(
            "exited with status 0; it held an NVIDIA descriptor when nvprobe started"
        )),
        "{v}"
    );
}

/// nvfixture's `scenario` (its name and arguments), its descriptor opened
/// before nvprobe starts with `args` and `env`; "go" once the start's scan
/// of /proc has had time to end (its end is in the summary, which callers
/// check); its answer, once it has exited, and the trace still running.
fn run_held(
    tmp: &std::path::Path,
    drv: &FakeDrv,
    scenario: &[&str],
    args: &[&str],
    env: &[(&str, &str)],
) -> (Value, nvprobe_tests::harness::Trace) {
    let (mut c, mut out) = spawn_ready(
        Command::new(bin("nvfixture"))
            .arg("run")
            .args(scenario)
            .arg("--dir")
            .arg(&drv.dir),
    );
    let mut line = String::new();
    let t = watch_adjusted(tmp, drv, args, |c| {
        c.envs(env.iter().copied());
    });
    std::thread::sleep(std::time::Duration::from_millis(1500));
    c.stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    line.clear();
    out.read_line(&mut line).expect("answer");
    let answer: Value = serde_json::from_str(&line).expect("json answer");
    assert!(c.wait().expect("wait").success());
    (answer, t)
}

/// The last summary record.
fn summary(recs: &[Value]) -> &Value {
    recs.iter()
        .rev()
        .find(|r| r["type"] == "summary")
        .expect("summary")
}

/// The controls of `pid`'s ioctl records written (failures, at
/// `--events verdicts`).
fn written<'a>(recs: &'a [Value], pid: &Value) -> Vec<&'a Value> {
    recs.iter()
        .filter(|r| r["type"] == "ioctl" && r["pid"] == *pid)
        .map(|r| &r["args"]["control"])
        .collect()
}
