//! Tier 1, through the binary: a real H200 recording
//! (tests/scripts/record-text-and-peers.sh) of a shell that only looked at
//! /dev/nvidia0 and then ran 200 commands, beside two cuInits, made while a
//! second nvprobe ran. Text leaves the shell's and its commands' fork,
//! exec, exit and signal lines out and counts them; `--all-processes`
//! shows them; the other nvprobe's reads are nowhere in the recording.

use std::process::Command;

use nvprobe_tests::harness::{bin, fixture, is_lifecycle_line};
use serde_json::Value;

const REC: &str = "h200-580.159.04-busy-shell.ndjson";

fn text(extra: &[&str]) -> String {
    let o = Command::new(bin("nvprobe"))
        .arg("decode")
        .arg(fixture(REC))
        .args(extra)
        .output()
        .expect("decode");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn exits_of_true(t: &str) -> usize {
    t.lines()
        .filter(|l| l.contains(" true[") && l.ends_with("] exited with status 0"))
        .count()
}

#[test]
fn the_busy_shell_is_counted_not_shown() {
    let out = text(&[]);
    assert!(
        out.contains(
            "\n1006 fork, exec, exit, signal and failed-call lines of 202 processes that made no NVIDIA call were left out (--all-processes shows them)\n"
        ),
        "{out}"
    );
    assert_eq!(exits_of_true(&out), 0, "{out}");
    assert!(!out.contains(" forks pid "), "{out}");
    // The CUDA processes' own ends are shown, and their verdicts.
    assert!(
        out.contains(" cuda00001400006[820/821] exited with status 0\n"),
        "{out}"
    );
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("== python3[") && l.contains("] cuInit ok: "))
            .count(),
        2,
        "{out}"
    );
    let all = text(&["--all-processes"]);
    assert_eq!(exits_of_true(&all), 200, "{all}");
    assert!(!all.contains("left out (--all-processes"), "{all}");
    // The lines text leaves out are the JSON's proc records it does not show.
    let shown = |t: &str| t.lines().filter(|l| is_lifecycle_line(l)).count();
    assert_eq!(shown(&all) - shown(&out), 1006);
}

#[test]
fn the_other_nvprobe_is_named_once_and_never_traced() {
    let recs: Vec<Value> = std::fs::read_to_string(fixture(REC))
        .expect("read")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let peers: Vec<u64> = recs
        .iter()
        .filter(|r| r["type"] == "warning" && r["id"] == "another_nvprobe")
        .filter_map(|r| {
            r["message"]
                .as_str()?
                .strip_prefix("pid ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(peers, [520]);
    assert!(!recs.iter().any(|r| r["pid"] == 520));
    assert!(!recs.iter().any(|r| {
        r["path"]
            .as_str()
            .is_some_and(|p| p.contains("/root/proc/"))
    }));
}
