//! `nvprobe diff` on real H200 recordings (tests/fixtures/README.md): the
//! healthy cuInit against the one with /dev/nvidia-uvm masked by another
//! device, against `CUDA_VISIBLE_DEVICES=` and against a harness timeout.

use std::process::Command;

use nvprobe_tests::harness::{bin, fixture};
use serde_json::Value;

fn diff(b: &str, extra: &[&str]) -> (i32, String, String) {
    let o = Command::new(bin("nvprobe"))
        .arg("diff")
        .arg(fixture("h200-580.159.04-cuinit-ctypes.ndjson"))
        .arg(fixture(b))
        .args(extra)
        .output()
        .expect("run nvprobe diff");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn the_masked_uvm_node_is_the_first_divergence() {
    let (rc, out, err) = diff("h200-580.159.04-uvm-masked.ndjson", &[]);
    // They differ: 1, as diff(1).
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains("the two start-ups differ"), "{err}");
    assert!(
        out.contains(
            "first divergence: stat /dev/nvidia-uvm: A (call #32) got ok, device uvm, B (call #32) got failed, device none"
        ),
        "{out}"
    );
    // Time per stage side by side, in the order the runs reached them
    // (the real driver makes its RM client before the version handshake):
    // B never registered the GPU.
    let rows: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("stages (ms since the first call):"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert_eq!(
        rows.get(..3),
        Some(&["ctl_opened", "rm_client", "version_handshake"][..]),
        "{out}"
    );
    let s7 = out
        .lines()
        .find(|l| l.trim_start().starts_with("uvm_gpu_registered"))
        .expect("uvm_gpu_registered row");
    assert!(s7.trim_end().ends_with('-'), "{s7}");
    assert!(
        out.contains("B verdict: failed: stopped after version_handshake: /dev/nvidia-uvm"),
        "{out}"
    );
    assert!(out.contains("A verdict: ok:"), "{out}");
    // The calls only the healthy side made include the GPU's
    // registration: every one of them with --all, the first 30 without.
    let (rc, all, _) = diff("h200-580.159.04-uvm-masked.ndjson", &["--all"]);
    assert_eq!(rc, 1);
    assert!(all.contains("  ioctl UVM_REGISTER_GPU: 1 0\n"), "{all}");
    assert!(!all.contains("more (--all lists them)"), "{all}");
    let listed = |t: &str| {
        t.lines()
            .skip_while(|l| !l.starts_with("calls one side made"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter(|l| !l.contains("more (--all lists them)"))
            .count()
    };
    let total = listed(&all);
    assert!(total > 30, "{all}");
    assert_eq!(listed(&out), 30, "{out}");
    assert!(
        out.contains(&format!("  … and {} more (--all lists them)", total - 30)),
        "{out}"
    );

    let (rc, json, _) = diff("h200-580.159.04-uvm-masked.ndjson", &["--json"]);
    assert_eq!(rc, 1);
    let v: Value = serde_json::from_str(&json).expect("one JSON document");
    assert_eq!(v["first_divergence"]["kind"], "result");
    assert_eq!(v["first_divergence"]["call"], "stat /dev/nvidia-uvm");
    assert_eq!(
        (v["a"]["pid"].as_u64(), v["b"]["pid"].as_u64()),
        (Some(447), Some(470))
    );
    let only_a: u64 = v["call_counts"]
        .as_array()
        .expect("counts")
        .iter()
        .filter_map(|c| c[1].as_u64())
        .sum();
    assert_eq!(
        only_a as usize + v["same_calls"].as_u64().expect("same") as usize + 3,
        158
    );
}

#[test]
fn no_visible_devices_and_a_timeout_part_at_uvm_registration() {
    let (rc, out, _) = diff("h200-580.159.04-novisible.ndjson", &[]);
    assert_eq!(rc, 1);
    assert!(
        out.contains("2 other CUDA start-up(s) in the recording (--pid to choose)"),
        "{out}"
    );
    assert!(
        out.contains(
            "first divergence: A call #154 ioctl UVM_REGISTER_GPU (GPU-f0568750-7765-f166-dd86-a87a8ebdc1bf) = NV_OK"
        ),
        "{out}"
    );
    let (rc, out, _) = diff("h200-580.159.04-timeout-kill.ndjson", &[]);
    assert_eq!(rc, 1);
    assert!(
        out.contains(
            "first divergence: ioctl UVM_REGISTER_GPU: A (call #154) got NV_OK, B (call #154) got NV_ERR_BUSY_RETRY"
        ),
        "{out}"
    );
}

#[test]
fn the_same_recording_has_no_divergence_and_bad_pids_are_usage_errors() {
    let (rc, out, _) = diff("h200-580.159.04-cuinit-ctypes.ndjson", &[]);
    assert_eq!(rc, 0);
    assert!(
        out.contains("same calls with the same results (158 calls)"),
        "{out}"
    );
    let (rc, _, err) = diff("h200-580.159.04-cuinit-ctypes.ndjson", &["--pid", "1"]);
    assert_eq!(rc, 2);
    assert!(err.contains("A: no process 1 in the recording"), "{err}");
    let (rc, _, err) = diff(
        "h200-580.159.04-cuinit-ctypes.ndjson",
        &["--pid", "1", "--pid", "2", "--pid", "3"],
    );
    assert_eq!(rc, 2, "{err}");
}

/// Two GPUs against one (`CUDA_VISIBLE_DEVICES=0`), one recording on a
/// two-GPU H200 host (tests/scripts/record-two-gpu-session.sh): the second
/// GPU's calls and its UVM registration are what only A has.
#[test]
fn one_gpu_against_two_names_the_second_gpu() {
    let f = fixture("h200x2-580.159.04-one-vs-two-gpus.ndjson");
    let run = |json: bool| {
        let mut c = Command::new(bin("nvprobe"));
        c.arg("diff")
            .arg(&f)
            .arg(&f)
            .args(["--pid", "620", "--pid", "631"]);
        if json {
            c.arg("--json");
        }
        let o = c.output().expect("run nvprobe diff");
        // One GPU against two: they differ.
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let out = run(false);
    assert!(
        out.contains("GPUs (driver calls on each GPU node: A B):"),
        "{out}"
    );
    assert!(out.contains("  /dev/nvidia0: 41 41\n"), "{out}");
    // With one GPU visible libcuda still opens the second and lets it go.
    assert!(out.contains("  /dev/nvidia1: 41 6\n"), "{out}");
    assert!(
        out.contains(
            "registered with UVM: A 2 (GPU-baf28b3f-9f7f-7fe2-340f-975163a9b560, GPU-35751cd4-1abd-dd07-c841-002347a8409b); B 1 (GPU-baf28b3f-9f7f-7fe2-340f-975163a9b560)"
        ),
        "{out}"
    );
    // Where they part: B lets the second GPU go (its watchdog released,
    // its memory unmapped and freed, DETACH_IDS) where A goes on with it.
    assert!(
        out.contains("first divergence: B call #271 ioctl NV_ESC_RM_CONTROL NV2080_CTRL_CMD_RC_RELEASE_WATCHDOG_REQUESTS = NV_OK"),
        "{out}"
    );
    assert!(
        out.contains("ioctl NV_ESC_RM_CONTROL NV0000_CTRL_CMD_GPU_DETACH_IDS: 0 1"),
        "{out}"
    );
    let v: Value = serde_json::from_str(&run(true)).expect("one JSON document");
    assert_eq!(v["a"]["registered_gpus"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["b"]["registered_gpus"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["b"]["gpu_calls"]["/dev/nvidia1"], 6);
    let only_a_register = v["differences"]
        .as_array()
        .expect("differences")
        .iter()
        .filter(|d| d["kind"] == "only_a" && d["step"]["call"] == "ioctl UVM_REGISTER_GPU")
        .map(|d| d["step"]["detail"].as_str().unwrap_or(""))
        .collect::<Vec<_>>();
    assert_eq!(
        only_a_register,
        ["GPU-35751cd4-1abd-dd07-c841-002347a8409b"]
    );
}

/// Issue 23, item 8: `diff` exited 0 on a recording with lines that could
/// not be decoded, where `decode` and `export` exit 2. Now it says the
/// count for each side and what to do, still writes the comparison of
/// what it could read, and exits 2.
#[test]
fn undecodable_lines_are_exit_2_as_in_decode() {
    let tmp = nvprobe_tests::harness::TestDir::new("diff-bad");
    let mut text = b"not a record\n{\"type\":7}\n".to_vec();
    text.extend(std::fs::read(fixture("h200-580.159.04-uvm-masked.ndjson")).expect("fixture"));
    let bad = tmp.join("bad.ndjson");
    std::fs::write(&bad, &text).expect("write");
    let (rc, out, err) = diff(bad.to_str().expect("utf8"), &[]);
    assert_eq!(rc, 2, "{err}");
    let want = format!(
        "2 line(s) of {} could not be decoded (named above) and were skipped",
        bad.display()
    );
    assert!(err.contains(&want), "{want:?} not in {err}");
    assert!(
        err.contains("recording written whole by `nvprobe watch --json --raw`"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}:1: not a JSON record", bad.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}:2: not an nvprobe record", bad.display())),
        "{err}"
    );
    // The comparison of the good lines is still written.
    assert!(
        out.contains("first divergence: stat /dev/nvidia-uvm"),
        "{out}"
    );
}
