//! Tier 1, through the binary: real recordings and host trees from the GPU
//! machine (NVIDIA H200, open kernel module 580.159.04) given to the
//! nvprobe binary, as a user would. No root needed. The replays that need
//! only the model are in nvprobe/model/tests/.
//!
//! This file: `nvprobe decode` of a recording (text and NDJSON).

use std::process::Command;

use nvprobe::render::schema;
use nvprobe_tests::harness::{TestDir, bin, fixture};
use serde_json::Value;

/// `nvprobe decode` keeps what only the live run knew: the stall reports
/// and the recording's duration and lost counts (here raised to 5 lost,
/// which must show; a decode must never claim that nothing was lost).
#[test]
fn decode_carries_stalls_and_the_recorded_losses() {
    let text =
        std::fs::read_to_string(fixture("h200-580.159.04-stall-sigstop.ndjson")).expect("fixture");
    let edited: String = text
        .lines()
        .map(|l| {
            if l.contains(r#""type":"summary""#) {
                let mut v: Value = serde_json::from_str(l).expect("json");
                v["lost"]["total"] = 5.into();
                v["lost"]["per_kind"] = serde_json::json!({"ioctl": 5});
                format!("{v}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let t = nvprobe_tests::harness::TestDir::new("lost");
    let path = t.join("lost.ndjson");
    std::fs::write(&path, edited).expect("write");
    let run = |json: bool| {
        let mut c = std::process::Command::new(bin("nvprobe"));
        c.arg("decode").arg("--summary-only").arg(&path);
        if json {
            c.arg("--json");
        }
        c.output().expect("run nvprobe decode")
    };
    let t = run(false);
    assert_eq!(t.status.code(), Some(0));
    let out = String::from_utf8_lossy(&t.stdout);
    assert!(
        out.contains(
            "--- nvprobe summary: 166 events in 3.7 s, 7 failed, 5 lost, 0 undecodable ---"
        ),
        "{out}"
    );
    assert_eq!(
        out.matches("!! stall: python3[603/603] cuInit (after S7 uvm_gpu_registered) has run ")
            .count(),
        2,
        "{out}"
    );
    let j = run(true);
    let recs: Vec<Value> = String::from_utf8_lossy(&j.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    for r in &recs {
        schema::validate(r).unwrap_or_else(|e| panic!("{e}\n{r}"));
    }
    let s = recs
        .iter()
        .find(|r| r["type"] == "summary")
        .expect("summary");
    assert_eq!(s["lost"]["total"], 5);
    assert_eq!(recs.iter().filter(|r| r["type"] == "stall").count(), 2);
}

/// `-o -` is stdout, as for export: nothing named "-" is created.
#[test]
fn output_dash_is_stdout() {
    let dir = TestDir::new("dash");
    let o = Command::new(bin("nvprobe"))
        .current_dir(&dir)
        .args(["decode", "--json", "-o", "-"])
        .arg(fixture("h200-580.159.04-cuinit-ctypes.ndjson"))
        .output()
        .expect("decode");
    let made = dir.join("-").exists();
    assert_eq!(o.status.code(), Some(0));
    assert!(!made, "a file named - was created");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.lines()
            .last()
            .is_some_and(|l| l.contains("\"type\":\"summary\"")),
        "{out}"
    );
}
