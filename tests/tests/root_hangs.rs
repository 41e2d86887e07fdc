//! Tier 2 (root): run-time hangs and NCCL seen from outside (issue 39).
//! The stand-in libcuda (tests/cuda-stub/libcuda.c) holds
//! cuCtxSynchronize until a file appears, asleep or spinning; the
//! stand-in libnccl (tests/nccl-stub) takes a communicator from a unique
//! id passed by value, as the real one does, and returns at once from
//! each collective. nvprobe's real uprobes read their arguments.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command};

use nvprobe_tests::{
    harness::{TestDir, Trace},
    need_root,
    scenario::{
        FakeDrv, check_schema, lock, spawn_ready, stub_libcuda, stub_nccl, tmpdir, watch,
        watch_adjusted,
    },
};
use serde_json::Value;

fn go(c: &mut Child) {
    c.stdin
        .as_mut()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
}

fn read_line(out: &mut BufReader<ChildStdout>) -> String {
    let mut line = String::new();
    out.read_line(&mut line).expect("a line");
    line
}

/// The first `type` record of `pid` (waiting for it).
fn wait_record(t: &Trace, what: &str, ty: &str, pid: u32) -> Value {
    t.wait_for(what, |r| r["type"] == ty && r["pid"] == u64::from(pid))
}

/// A process that already held its NVIDIA descriptor when nvprobe
/// started is past a start-up nvprobe did not see: an RM control of it
/// that does not return within --hang-after is a run-time hang, reported
/// once, and ends when the call returns.
#[test]
#[ignore = "needs root"]
fn a_call_of_a_process_that_held_a_descriptor_at_the_start_is_watched_for_hangs() {
    need_root!();
    // At `verdicts` the process is quiet: its call is untimed, and timed
    // from when nvprobe first saw it in flight.
    for level in ["all", "verdicts"] {
        held_call_hangs(level);
    }
}

fn held_call_hangs(level: &str) {
    let _g = lock();
    let tmp = tmpdir(&format!("hang-held-{level}"));
    let drv = FakeDrv::start(&tmp);
    let (mut c, mut out) = spawn_ready(
        Command::new(nvprobe_tests::harness::bin("nvfixture"))
            .args(["run", "preopen-hang", "--dir"])
            .arg(&drv.dir),
    );
    let t = watch(&tmp, &drv, &["--hang-after", "1", "--events", level]);
    // The scan of /proc runs on its own thread: the call must come after
    // it (checked below against the summary).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let pid = c.id();
    go(&mut c);
    let hang = wait_record(&t, "the hang record", "hang", pid);
    let answer: Value = serde_json::from_str(&read_line(&mut out)).expect("answer");
    assert_eq!(answer["ret"], 0, "{answer}");
    assert!(c.wait().expect("wait").success());
    let end = wait_record(&t, "the hang's end", "hang_end", pid);
    let f = t.stop();
    check_schema(&f);
    assert_eq!(hang["call"], "NV_ESC_RM_CONTROL", "{hang}");
    assert_eq!(hang["layer"], "driver", "{hang}");
    assert_eq!(end["how"], "returned", "{end}");
    assert_eq!(
        f.of_type("hang")
            .filter(|r| r["pid"] == u64::from(pid))
            .count(),
        1
    );
    // Its verdict says how it ended, not that a start-up failed (the
    // stand-in answers the late control with NV_ERR_INVALID_COMMAND), and
    // its identity was read while it lived.
    let v = f
        .of_type("cuinit")
        .find(|r| r["pid"] == u64::from(pid))
        .expect("a verdict");
    assert_eq!(
        v["process"]["exe"]
            .as_str()
            .map(|e| e.ends_with("nvfixture")),
        Some(true),
        "{v}"
    );
    assert_eq!(
        (&v["result"], &v["text"], &v["process"]["held_at_start"]),
        (
            &Value::from("ok"),
            &Value::from(
                "exited with status 0; it held an NVIDIA descriptor when nvprobe started, so its start-up was not seen; last failed: NV_ESC_RM_CONTROL NV2080_CTRL_CMD_GPU_GET_SHORT_NAME_STRING returned NV_ERR_INVALID_COMMAND"
            ),
            &Value::from(true)
        ),
        "{v}"
    );
    let gate = &f.summary()["descriptor_gate"];
    assert_eq!(gate["open"], true, "{gate}");
    assert!(
        gate["opened_mono_ns"].as_u64() < hang["mono_ns"].as_u64(),
        "the scan ended after the hang: {gate}"
    );
}

/// A synchronisation held until `release` exists, asleep (`until`) or in
/// a busy loop (`spin`): one `hang` record past --hang-after with what the
/// thread does, then `hang_end` when it returns.
fn a_held_synchronisation(mode: &str) -> (Value, Value) {
    let _g = lock();
    let tmp = tmpdir(&format!("hang-{mode}"));
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &["--hang-after", "1"]);
    let release = tmp.join("release");
    let env = [(
        "NVPROBE_STUB_FAULT",
        format!("{mode}:{}", release.display()),
    )];
    let (mut c, mut out) =
        nvprobe_tests::scenario::spawn_env(&drv, &lib, "runtime", "ok", None, &env);
    let pid = c.id();
    nvprobe_tests::scenario::wait_hooked(&t, pid);
    go(&mut c);
    let hang = wait_record(&t, "the hang record", "hang", pid);
    std::fs::write(&release, b"").expect("release");
    let line = read_line(&mut out);
    assert!(line.contains(r#""cuCtxSynchronize":[0,0]"#), "{line}");
    assert!(c.wait().expect("wait").success());
    let end = wait_record(&t, "the hang's end", "hang_end", pid);
    let f = t.stop();
    check_schema(&f);
    // One of each, for the one call.
    assert_eq!(
        f.of_type("hang")
            .filter(|r| r["pid"] == u64::from(pid))
            .count(),
        1
    );
    (hang, end)
}

#[test]
#[ignore = "needs root"]
fn a_synchronisation_that_sleeps_past_hang_after_is_a_hang_until_it_returns() {
    need_root!();
    let (h, e) = a_held_synchronisation("until");
    assert_eq!(h["layer"], "libcuda", "{h}");
    assert_eq!(h["call"], "cuCtxSynchronize", "{h}");
    assert_eq!(h["waiting"], "sleeping", "{h}");
    assert_eq!(h["state"], "S", "{h}");
    let elapsed = h["elapsed_s"].as_f64().expect("elapsed");
    assert!((1.0..10.0).contains(&elapsed), "{h}");
    let text = h["text"].as_str().expect("text");
    assert!(
        text.starts_with("cuCtxSynchronize has not returned for ")
            && text.contains("(--hang-after 1 s): sleeping (S) in "),
        "{text}"
    );
    assert!(
        h["hint"]
            .as_str()
            .unwrap_or("")
            .starts_with("The work this call waits for has not finished on the GPU"),
        "{h}"
    );
    assert_eq!(h["launches_hooked"], false, "{h}");
    assert_eq!(e["how"], "returned", "{e}");
    assert!(
        e["text"]
            .as_str()
            .unwrap_or("")
            .starts_with("cuCtxSynchronize returned after "),
        "{e}"
    );
    assert!(e["lasted_s"].as_f64().unwrap_or(0.0) >= elapsed, "{e}");
}

#[test]
#[ignore = "needs root"]
fn a_synchronisation_that_spins_is_told_apart_from_one_that_sleeps() {
    need_root!();
    let (h, e) = a_held_synchronisation("spin");
    assert_eq!(h["state"], "R", "{h}");
    assert_eq!(h["waiting"], "spinning_user", "{h}");
    assert!(h["cpu_user_pct"].as_u64().unwrap_or(0) >= 50, "{h}");
    assert!(
        h["text"]
            .as_str()
            .unwrap_or("")
            .contains("spinning in user space"),
        "{h}"
    );
    assert_eq!(e["how"], "returned", "{e}");
}

/// A folder for `tag`, the stand-in libcuda, libnccl and rank program in
/// it, and the stand-in driver.
fn ranks(tag: &str) -> (TestDir, PathBuf, (PathBuf, PathBuf), FakeDrv) {
    let tmp = tmpdir(tag);
    let lib = stub_libcuda(&tmp);
    let nccl = stub_nccl(&tmp);
    let drv = FakeDrv::start(&tmp);
    (tmp, lib, nccl, drv)
}

/// One rank: `rank LIBCUDA LIBNCCL RANK 2 COLLECTIVES`, its
/// synchronisation held until `release` exists.
fn spawn_rank(
    drv: &FakeDrv,
    (lib, nccl, rank_bin): (&Path, &Path, &Path),
    rank: u32,
    collectives: u32,
    release: &Path,
) -> (Child, BufReader<ChildStdout>) {
    spawn_ready(
        Command::new(rank_bin)
            .arg(lib)
            .arg(nccl)
            .args([rank.to_string(), "2".into(), collectives.to_string()])
            .env("NVPROBE_FAKE_DIR", &drv.dir)
            .env("NVPROBE_STUB_FAULT", format!("until:{}", release.display())),
    )
}

/// Two ranks of one communicator on this node: rank 0 makes 5
/// all-reduces, rank 1 three, then each a grouped send and receive, then
/// each waits in a synchronisation. Every call is seen with its number
/// in the communicator, the communicator's hash is NCCL's hash of the
/// unique id (read from the stack, where the by-value struct is), and
/// rank 0's hang record names rank 1 as behind, at call 5 against 7.
#[test]
#[ignore = "needs root"]
fn the_rank_behind_in_its_communicator_is_named() {
    need_root!();
    let _g = lock();
    let (tmp, lib, (nccl, rank_bin), drv) = ranks("hang-nccl");
    let t = watch(&tmp, &drv, &["--hang-after", "1"]);
    let (rel0, rel1) = (tmp.join("release0"), tmp.join("release1"));
    let files = (lib.as_path(), nccl.as_path(), rank_bin.as_path());
    let (mut r0, mut o0) = spawn_rank(&drv, files, 0, 5, &rel0);
    let (mut r1, mut o1) = spawn_rank(&drv, files, 1, 3, &rel1);
    let (p0, p1) = (r0.id(), r1.id());
    for lib in ["libcuda", "libnccl"] {
        t.wait_for(lib, |r| {
            r["type"] == "warning"
                && r["id"] == "libcuda_late"
                && r["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(&format!("hooked {lib} at ")))
        });
    }
    go(&mut r0);
    go(&mut r1);
    assert_eq!(read_line(&mut o0), "collectives 0 0 0 0\n");
    assert_eq!(read_line(&mut o1), "collectives 0 0 0 0\n");
    let h0 = wait_record(&t, "rank 0's hang", "hang", p0);
    let h1 = wait_record(&t, "rank 1's hang", "hang", p1);
    std::fs::write(&rel0, b"").expect("release");
    std::fs::write(&rel1, b"").expect("release");
    assert_eq!(read_line(&mut o0), "done 0\n");
    assert_eq!(read_line(&mut o1), "done 0\n");
    assert!(r0.wait().expect("wait").success());
    assert!(r1.wait().expect("wait").success());
    let f = t.stop();
    check_schema(&f);

    let mut id = [0x5au8; 128];
    id[0] = 7;
    let hash = format!("{:016x}", nvprobe_common::nccl_hash(&id));
    // Each rank's calls, in order, numbered in the communicator.
    for (pid, rank, n) in [(p0, 0, 5u64), (p1, 1, 3)] {
        let calls: Vec<&Value> = f
            .for_pid(pid)
            .into_iter()
            .filter(|r| r["type"] == "nccl")
            .collect();
        let funcs: Vec<&str> = calls.iter().filter_map(|r| r["func"].as_str()).collect();
        let mut want = vec!["ncclCommInitRank"];
        want.extend(std::iter::repeat_n("ncclAllReduce", n as usize));
        want.extend([
            "ncclGroupStart",
            "ncclSend",
            "ncclRecv",
            "ncclGroupEnd",
            "ncclCommDestroy",
        ]);
        assert_eq!(funcs, want, "rank {rank}");
        let init = calls[0];
        assert_eq!(init["result"], 0, "{init}");
        assert_eq!(init["comm_hash"], hash.as_str(), "{init}");
        assert_eq!(
            (init["rank"].clone(), init["nranks"].clone()),
            (rank.into(), 2.into()),
            "{init}"
        );
        for (k, r) in calls[1..=n as usize].iter().enumerate() {
            assert_eq!(r["seq"], k as u64 + 1, "{r}");
            assert_eq!(r["count"], 1024 + k as u64, "{r}");
            assert_eq!(r["datatype_name"], "float32", "{r}");
            assert_eq!(r["op_name"], "sum", "{r}");
            assert_eq!(r["stream"], format!("{:016x}", 0x5000 + rank), "{r}");
            assert_eq!(r["communicator"], init["communicator"], "{r}");
            assert_eq!(r["comm_hash"], hash.as_str(), "{r}");
        }
        let send = calls[n as usize + 2];
        assert_eq!(send["peer"], (rank + 1) % 2, "{send}");
        assert_eq!(send["seq"], n + 1, "{send}");
        let end = calls.last().expect("destroy");
        assert_eq!(end["seq"], n + 2, "{end}");
    }
    // Rank 0's hang names rank 1: its communicator, both ranks' numbers.
    let v = &h0["nccl"];
    assert_eq!(v["comm_hash"], hash.as_str(), "{h0}");
    assert_eq!(
        (v["rank"].clone(), v["seq"].clone()),
        (0.into(), 7.into()),
        "{h0}"
    );
    assert_eq!(v["behind"], 1, "{h0}");
    let ranks: Vec<(u64, u64, u64)> = v["ranks"]
        .as_array()
        .expect("ranks")
        .iter()
        .map(|r| {
            (
                r["rank"].as_u64().unwrap_or(9),
                r["seq"].as_u64().unwrap_or(0),
                r["pid"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(ranks, [(0, 7, u64::from(p0)), (1, 5, u64::from(p1))]);
    let text = h0["text"].as_str().expect("text");
    assert!(
        text.ends_with(&format!(
            "; rank 1 of communicator {hash} (rank[{p1}]) is behind, at call 5 against 7"
        )),
        "{text}"
    );
    assert!(
        h0["hint"].as_str().unwrap_or("").starts_with(&format!(
            "The collective waits for rank 1 (rank[{p1}], in cuCtxSynchronize for "
        )),
        "{h0}"
    );
    // Rank 1 is behind itself: its record names no other.
    assert_eq!(h1["nccl"]["behind"], 1, "{h1}");
}

/// In the uretprobe system call's window (closed here by
/// `NVPROBE_URETPROBE_GATE=closed`, as on a 6.11 kernel): no return probe
/// anywhere, so libcuda is not hooked and a libnccl only at its
/// collectives' entries. Said once; the collectives are still numbered in
/// their communicator (from the first seen: its init, whose return says
/// the communicator made, is not hooked), and no libcuda call is seen.
#[test]
#[ignore = "needs root"]
fn in_the_uretprobe_window_only_nccl_entries_are_hooked() {
    need_root!();
    let _g = lock();
    let (tmp, lib, (nccl, rank_bin), drv) = ranks("hang-window");
    let t = watch_adjusted(&tmp, &drv, &[], |c| {
        c.env("NVPROBE_URETPROBE_GATE", "closed");
    });
    // Released from the start: no synchronisation is held.
    let rel = tmp.join("released");
    std::fs::write(&rel, b"").expect("release");
    let files = (lib.as_path(), nccl.as_path(), rank_bin.as_path());
    let (mut r0, mut o0) = spawn_rank(&drv, files, 0, 4, &rel);
    let p0 = r0.id();
    t.wait_for("libnccl hooked", |r| {
        r["id"] == "libcuda_late"
            && r["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("hooked libnccl at "))
    });
    go(&mut r0);
    assert_eq!(read_line(&mut o0), "collectives 0 0 0 0\n");
    assert_eq!(read_line(&mut o0), "done 0\n");
    assert!(r0.wait().expect("wait").success());
    let f = t.stop();
    check_schema(&f);

    let refused: Vec<&str> = f
        .of_type("warning")
        .filter(|w| w["id"] == "probe_refused")
        .filter_map(|w| w["message"].as_str())
        .collect();
    assert_eq!(refused.len(), 1, "{refused:#?}");
    for part in [
        "probe libcuda uprobes not attached: NVPROBE_URETPROBE_GATE=closed in nvprobe's environment: no return probe is attached",
        "so libcuda is not hooked and NCCL only at its collectives' entries (no ncclCommInitRank)",
        "unset it to have cuInit's own result; without them verdicts rest on driver calls alone",
    ] {
        assert!(refused[0].contains(part), "{part}: {}", refused[0]);
    }
    let hooked: Vec<&str> = f
        .of_type("warning")
        .filter(|w| w["id"] == "libcuda_late")
        .filter_map(|w| w["message"].as_str())
        .collect();
    assert!(
        hooked.iter().all(|m| !m.starts_with("hooked libcuda")),
        "{hooked:#?}"
    );
    let mine = f.for_pid(p0);
    assert!(
        !mine.iter().any(|r| r["type"] == "cuda"),
        "a libcuda call was seen: {mine:#?}"
    );
    let calls: Vec<&Value> = mine.into_iter().filter(|r| r["type"] == "nccl").collect();
    let funcs: Vec<&str> = calls.iter().filter_map(|r| r["func"].as_str()).collect();
    let mut want = vec!["ncclAllReduce"; 4];
    want.extend([
        "ncclGroupStart",
        "ncclSend",
        "ncclRecv",
        "ncclGroupEnd",
        "ncclCommDestroy",
    ]);
    assert_eq!(funcs, want);
    for (k, r) in calls[..4].iter().enumerate() {
        assert_eq!(r["seq"], k as u64 + 1, "{r}");
        assert_eq!(r["count"], 1024 + k as u64, "{r}");
        assert!(r.get("comm_hash").is_none_or(Value::is_null), "{r}");
    }
    // doctor says the same, and what to do about it.
    let o = Command::new(nvprobe_tests::harness::bin("nvprobe"))
        .args(["doctor", "--json"])
        .env("NVPROBE_URETPROBE_GATE", "closed")
        .output()
        .expect("run nvprobe doctor");
    let doc: Value = serde_json::from_slice(&o.stdout).expect("doctor --json");
    let check = doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == "uretprobe_seccomp")
        .expect("the uretprobe_seccomp check");
    assert_eq!(check["verdict"], "warn", "{check}");
    assert!(
        check["evidence"].as_str().is_some_and(
            |e| e.starts_with("NVPROBE_URETPROBE_GATE=closed in nvprobe's environment")
        ),
        "{check}"
    );
    assert!(
        check["hint"]
            .as_str()
            .is_some_and(|h| h.starts_with("unset NVPROBE_URETPROBE_GATE")),
        "{check}"
    );
}
