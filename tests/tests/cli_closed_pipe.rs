//! Tier 1, through the binary (issue 27, item 1): every subcommand whose
//! standard output is a pipe nobody reads any more (`nvprobe schema | head
//! -1` once head has gone) ends quietly: exit 0 (README, `--help`'s exit
//! codes), nothing on stderr, no panic (`println!` panicked with "failed
//! printing to stdout: Broken pipe", exit 101). No root needed; `watch`
//! and `top` are in root_cli_closed_pipe.rs.
//!
//! The read end is closed before nvprobe starts, so its first write fails:
//! no timing, whatever the output's size. With stderr on the same pipe
//! (`2>&1 | head`), a message that cannot be written ends nvprobe the same
//! way, except that a usage error keeps its code.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use nvprobe_tests::harness::{TestDir, bin, fixture};

const REC: &str = "h200-580.159.04-uvm-masked.ndjson";

/// `nvprobe ARGS` with stdout and stderr a pipe whose read end is closed:
/// its exit code.
fn closed_both(args: &[&str]) -> Option<i32> {
    // Close-on-exec: no child (of another test) holds the read end.
    let (r, w) = std::io::pipe().expect("pipe");
    drop(r);
    let w2 = w.try_clone().expect("dup");
    Command::new(bin("nvprobe"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(w))
        .stderr(Stdio::from(w2))
        .status()
        .expect("run nvprobe")
        .code()
}

/// `nvprobe ARGS` with stdout a pipe whose read end is closed: its exit
/// code and stderr.
fn closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    // Close-on-exec: no child (of another test) holds the read end.
    let (r, w) = std::io::pipe().expect("pipe");
    drop(r);
    let o = Command::new(bin("nvprobe"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(w))
        .stderr(Stdio::piped())
        .output()
        .expect("run nvprobe");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn tmp(tag: &str) -> TestDir {
    TestDir::new(&format!("closed-{tag}"))
}

/// A `--btf-dir` of this test's own (BTF that parses: a header and an
/// empty string section), so that `hooks` does not depend on the host's.
fn btf_dir(d: &Path) -> PathBuf {
    let mut b = Vec::new();
    b.extend_from_slice(&0xEB9F_u16.to_le_bytes());
    b.extend_from_slice(&[1, 0]);
    for v in [24_u32, 0, 0, 0, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.push(0);
    let dir = d.join("btf");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("vmlinux"), &b).expect("vmlinux");
    dir
}

#[test]
fn every_subcommand_ends_quietly_on_a_closed_stdout() {
    let d = tmp("all");
    let rec = fixture(REC);
    let rec = rec.to_str().expect("utf8");
    let btf = btf_dir(&d);
    let btf = btf.to_str().expect("utf8");
    let tree = fixture("hosts/healthy");
    let tree = tree.to_str().expect("utf8");
    let cases: Vec<Vec<&str>> = vec![
        vec!["schema"],
        vec!["hooks", "--btf-dir", btf],
        vec!["hooks", "--btf-dir", btf, "--json"],
        // A tree: the same checks wherever the test runs. (Its verdict's
        // exit 1 is never reached: the reader had gone.)
        vec!["doctor", "--root", tree],
        vec!["doctor", "--root", tree, "--json"],
        vec!["decode", rec],
        vec!["decode", "--json", rec],
        vec!["decode", "--format", "otlp-json", rec],
        vec!["diff", rec, rec],
        vec!["diff", "--json", rec, rec],
        vec!["export", "--perfetto", "-o", "-", rec],
        vec!["--help"],
        vec!["watch", "--help"],
        vec!["--version"],
    ];
    for args in cases {
        let (code, err) = closed_stdout(&args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?} wrote to stderr: {err}");
    }
}

/// `export -o -` writes the trace to standard output (it made a file
/// named "-"), and refuses a terminal.
#[test]
fn export_writes_to_standard_output() {
    let d = tmp("export");
    let o = Command::new(bin("nvprobe"))
        .args(["export", "--perfetto", "-o", "-"])
        .arg(fixture(REC))
        .current_dir(&d)
        .stdin(Stdio::null())
        .output()
        .expect("run nvprobe");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("nvprobe: standard output: 1 processes, 1 threads"),
        "{err}"
    );
    // A protobuf Trace: its first field is a TracePacket (field 1, bytes).
    assert_eq!(o.stdout.first(), Some(&0x0a), "{:?}", &o.stdout[..8]);
    assert!(!d.join("-").exists(), "no file named -");
}

/// `nvprobe … 2>&1 | head`: stderr is the closed pipe too. Messages that
/// cannot be written (a recording's bad lines, named one by one) end
/// nvprobe with 0, as a closed stdout does (they panicked: exit 101); an
/// error keeps its code, said to nobody.
#[test]
fn a_closed_stderr_ends_quietly_too() {
    let d = tmp("both");
    let mut text = b"junk\n".repeat(50);
    text.extend(std::fs::read(fixture(REC)).expect("fixture"));
    let joined = d.join("joined.ndjson");
    std::fs::write(&joined, &text).expect("write");
    let j = joined.to_str().expect("utf8");
    let btf = btf_dir(&d);
    let btf = btf.to_str().expect("utf8");
    for args in [
        vec!["decode", j],
        vec!["decode", "--summary-only", j],
        vec!["diff", j, j],
        vec!["hooks", "--btf-dir", btf],
        vec!["schema"],
    ] {
        assert_eq!(closed_both(&args), Some(0), "{args:?}");
    }
    assert_eq!(closed_both(&["decode", "/nonexistent.ndjson"]), Some(2));
    assert_eq!(closed_both(&["watch", "--no-such-flag"]), Some(2));
}
