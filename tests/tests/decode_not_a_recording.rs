//! Tier 1, through the binary (issue 27, item 6): `nvprobe decode` of a
//! file that is not a `watch --json` recording printed 100 lines of "not
//! a JSON record" and a summary. It says once what the file looks like
//! and what decode reads, writes nothing (no summary, no -o file), and
//! exits 2. Bad lines among records are still named with their numbers
//! and counted, in the summary too. No root needed.

use std::{
    fs,
    io::Write,
    process::{Command, Stdio},
};

use nvprobe_tests::harness::{TestDir, bin, fixture};
use serde_json::Value;

const HOW: &str = "decode reads what `nvprobe watch --json` writes (NDJSON, one record per line; with --raw its kernel records are decoded again): record with `sudo nvprobe watch --json --raw -o rec.ndjson`, then `nvprobe decode rec.ndjson`";

fn tmp(tag: &str) -> TestDir {
    TestDir::new(&format!("notrec-{tag}"))
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn decode(args: &[&str], stdin: Option<&[u8]>) -> Run {
    let mut c = Command::new(bin("nvprobe"))
        .arg("decode")
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nvprobe");
    if let Some(bytes) = stdin {
        let mut w = c.stdin.take().expect("stdin");
        // nvprobe stops reading once it has judged the head.
        let _ = w.write_all(bytes);
    }
    let o = c.wait_with_output().expect("wait");
    Run {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// One refusal: exit 2, one line on stderr, nothing on stdout.
fn refused(r: &Run, want: &str) {
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert_eq!(r.stdout, "", "nothing decoded, no summary");
    assert_eq!(r.stderr.lines().count(), 1, "said once:\n{}", r.stderr);
    assert!(
        r.stderr.starts_with(&format!("nvprobe: error: {want}")),
        "{want:?} not in\n{}",
        r.stderr
    );
}

#[test]
fn watchs_text_output_is_named_as_such() {
    let p = fixture("h200-580.159.04-cuinit-ctypes.txt");
    let ps = p.to_str().expect("utf8");
    let r = decode(&[ps], None);
    refused(
        &r,
        &format!(
            "{ps} is not an nvprobe recording: it is nvprobe's text output (`nvprobe watch` without --json; 182 lines), which is written for people and cannot be decoded again; {HOW}"
        ),
    );
    // From standard input, and with -o: no file is made.
    let d = tmp("text");
    let out = d.join("out.ndjson");
    let text = fs::read(&p).expect("fixture");
    let r = decode(
        &["-", "--json", "-o", out.to_str().expect("utf8")],
        Some(&text),
    );
    refused(
        &r,
        "standard input is not an nvprobe recording: it is nvprobe's text output",
    );
    assert!(
        !out.exists(),
        "no output made for a file that is not a recording"
    );
}

#[test]
fn an_otlp_export_is_named_as_such() {
    let p = fixture("h200-580.159.04-fleet-verdicts.otlp.json");
    let ps = p.to_str().expect("utf8");
    let r = decode(&[ps], None);
    refused(
        &r,
        &format!(
            "{ps} is not an nvprobe recording: it is an OTLP/JSON export (`--format otlp-json`; 59 lines of LogsData), which holds decoded records for a log pipeline, not the records decode reads; {HOW}"
        ),
    );
}

#[test]
fn other_outputs_of_nvprobe_are_named() {
    for (f, what) in [
        (
            "gpu-host/h200-580.159.04-doctor.txt",
            "it is the text output of `nvprobe doctor` (41 lines)",
        ),
        (
            "gpu-host/h200-580.159.04-doctor.json",
            "it is the output of `nvprobe doctor --json`",
        ),
        (
            "gpu-host/h200-580.159.04-hooks.txt",
            "it is the output of `nvprobe hooks` (29 lines)",
        ),
        (
            "h200-580.159.04-fleet-metrics.txt",
            "it is Prometheus metrics (`watch --metrics`' /metrics; 434 lines)",
        ),
    ] {
        let p = fixture(f);
        let ps = p.to_str().expect("utf8");
        let r = decode(&[ps], None);
        refused(
            &r,
            &format!("{ps} is not an nvprobe recording: {what}; {HOW}"),
        );
    }
}

#[test]
fn binary_compressed_and_empty_files_are_named() {
    let d = tmp("bin");
    let rec = fs::read(fixture("h200-580.159.04-uvm-masked.ndjson")).expect("fixture");
    // A gzip header (the magic is what is looked at) before a recording.
    let gz = d.join("rec.ndjson.gz");
    let mut bytes = vec![0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0, 3];
    bytes.extend_from_slice(&rec);
    fs::write(&gz, &bytes).expect("write");
    let g = gz.to_str().expect("utf8");
    refused(
        &decode(&[g], None),
        &format!(
            "{g} is not an nvprobe recording: it is gzip-compressed; decompress it as it is read: `zcat {g} | nvprobe decode -` (or `nvprobe decode <(zcat {g})`)"
        ),
    );
    let blob = d.join("blob");
    fs::write(&blob, b"ELF\n\x00\x01\x02\n").expect("write");
    let b = blob.to_str().expect("utf8");
    refused(
        &decode(&[b], None),
        &format!(
            "{b} is not an nvprobe recording: it is not text (binary data: a NUL byte at byte 4); {HOW}"
        ),
    );
    let empty = d.join("empty");
    fs::write(&empty, b"\n\n").expect("write");
    let e = empty.to_str().expect("utf8");
    refused(
        &decode(&[e], None),
        &format!("{e} is not an nvprobe recording: it is empty; {HOW}"),
    );
}

/// A recording behind a few lines of other text (stderr joined to it): the
/// bad lines are named with their numbers and counted (in the summary
/// too), the records all decoded, exit 2.
#[test]
fn a_few_bad_lines_among_records_are_named_and_counted() {
    let d = tmp("mixed");
    let rec = fixture("h200-580.159.04-uvm-masked.ndjson");
    let clean = decode(&["--json", rec.to_str().expect("utf8")], None);
    assert_eq!(clean.code, Some(0), "{}", clean.stderr);
    let mut text = b"nvprobe: warning: no NVIDIA driver version found\n\n".to_vec();
    text.extend(fs::read(&rec).expect("fixture"));
    text.extend_from_slice(b"nvprobe: stopped after 2.7 s\n");
    let p = d.join("joined.ndjson");
    fs::write(&p, &text).expect("write");
    let ps = p.to_str().expect("utf8");
    let r = decode(&["--json", ps], None);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    let lines = text.split(|&b| b == b'\n').count() - 1;
    for n in [1, lines] {
        let want = format!("nvprobe: {ps}:{n}: not a JSON record");
        assert!(r.stderr.contains(&want), "{want:?} not in\n{}", r.stderr);
    }
    assert!(
        r.stderr.contains(&format!(
            "2 line(s) of {ps} could not be decoded (named above)"
        )),
        "{}",
        r.stderr
    );
    let summary = |out: &str| -> Value {
        out.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["type"] == "summary")
            .expect("a summary")
    };
    let s = summary(&r.stdout);
    assert_eq!(s["decode_errors"], 2, "{s}");
    assert_eq!(
        s["events"],
        summary(&clean.stdout)["events"],
        "every record decoded"
    );
}
