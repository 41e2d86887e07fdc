//! Tier 1, through the binary: `nvprobe decode` given what is not a clean
//! recording (issue 11), and where it may write. No root needed.
//!
//! Malformed input is exit 2: every bad line is counted and named on
//! stderr with its number, and the rest is decoded. A directory or a
//! device is refused at once; a FIFO is read as a stream (like `-`). A line
//! longer than 1 MiB is a bad line, skipped without being held. The
//! output is never the input, never reached through a link, never an
//! existing file without --force, and is created 0600.

use std::{
    fs,
    io::{BufRead, BufReader, Read, Write},
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use nvprobe_tests::harness::{TestDir, bin, fixture};
use serde_json::Value;

const SMALL: &str = "h200-580.159.04-uvm-masked.ndjson";

/// The test's own folder, gone when it ends (kept if it fails).
fn tmp(tag: &str) -> TestDir {
    TestDir::new(&format!("decode-{tag}"))
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `nvprobe ARGS`, killed after `limit` (code None then).
fn run_for(args: &[&str], limit: Duration, adjust: impl FnOnce(&mut Command)) -> Run {
    let mut c = Command::new(bin("nvprobe"));
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    adjust(&mut c);
    let mut child = c.spawn().expect("spawn nvprobe");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let o = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let t0 = Instant::now();
    let code = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break st.code();
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Run {
        code,
        stdout: String::from_utf8_lossy(&o.join().unwrap_or_default()).into_owned(),
        stderr: String::from_utf8_lossy(&e.join().unwrap_or_default()).into_owned(),
    }
}

fn run(args: &[&str]) -> Run {
    run_for(args, Duration::from_secs(60), |_| {})
}

fn summary_events(stdout: &str) -> u64 {
    let s: Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .expect("a summary");
    s["events"]
        .as_object()
        .expect("events")
        .values()
        .filter_map(Value::as_u64)
        .sum()
}

/// A recording with bad lines among good ones: each bad line is counted
/// and named by its number, the good ones are all decoded, exit 2.
#[test]
fn bad_lines_are_counted_and_named_and_the_rest_decoded() {
    let d = tmp("badlines");
    let text = fs::read(fixture(SMALL)).expect("fixture");
    let clean = run(&["decode", "--json", fixture(SMALL).to_str().expect("utf8")]);
    assert_eq!(clean.code, Some(0), "{}", clean.stderr);
    let want = summary_events(&clean.stdout);
    let lines: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let mut bad = Vec::new();
    bad.extend_from_slice(lines[0]);
    bad.push(b'\n');
    // Line 2 on: the wrong shapes, then the rest of the recording.
    let shapes: [&[u8]; 10] = [
        b"[1,2,3]",
        b"{}",
        b"{\"type\":\"ioctl\",\"raw\":5}",
        b"{\"type\":\"bogus\",\"raw\":\"00\"}",
        b"{\"type\":7}",
        b"{\"type\":\"ioctl\",\"raw\":\"0\xff00\"}",
        b"\xff\xfe not text",
        b"{\"type\":\"ioctl\"}",
        b"{\"v\":1,\"type\":\"from_a_newer_nvprobe\"}",
        // An event recorded without --raw: read as recorded.
        br#"{"type":"open","pid":9,"tid":9,"comm":"a","uid":0,"syscall":"openat","path":"/dev/nvidiactl","flags":"O_RDWR","start_ns":1,"duration_ns":1,"ret":-2,"errno":"ENOENT","ok":false}"#,
    ];
    for s in shapes {
        bad.extend_from_slice(s);
        bad.push(b'\n');
    }
    // Line 12: 2 MiB without a newline's end in sight, then one.
    bad.extend(std::iter::repeat_n(b'x', 2 << 20));
    bad.push(b'\n');
    for l in &lines[1..] {
        bad.extend_from_slice(l);
        bad.push(b'\n');
    }
    let p = d.join("bad.ndjson");
    fs::write(&p, &bad).expect("write");
    let r = run(&["decode", "--json", p.to_str().expect("utf8")]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    for (n, what) in [
        (2, "not a record (a JSON object)"),
        (3, "not an nvprobe record: no \"type\""),
        (4, "raw field is not a hex string"),
        (5, "not an nvprobe record: unknown type \"bogus\""),
        (6, "not an nvprobe record: no \"type\""),
        (7, "not UTF-8 text"),
        (8, "not UTF-8 text"),
        (9, "bad recorded event: missing field `fd`"),
        (12, "a line of 2097152 bytes, longer than 1048576: skipped"),
    ] {
        let line = format!("{}:{n}: {what}", p.display());
        assert!(r.stderr.contains(&line), "no {line:?} in\n{}", r.stderr);
    }
    assert!(
        r.stderr.contains("1 event(s) had no raw record"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("1 record(s) of a type this nvprobe does not know"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains(":10:"), "{}", r.stderr);
    assert!(!r.stderr.contains(":11:"), "{}", r.stderr);
    assert!(r.stderr.contains("9 line(s) of"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("recording written whole by `nvprobe watch --json --raw`"),
        "what to do: {}",
        r.stderr
    );
    // The summary counts what stderr named (it said 0 once).
    let summary: Value = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .expect("a summary");
    assert_eq!(summary["decode_errors"], 9, "{summary}");
    assert_eq!(
        summary_events(&r.stdout),
        want + 1,
        "the good lines all decoded, and the recorded open read"
    );
    for l in r.stdout.lines() {
        serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"));
    }
}

/// Binary garbage is malformed input (exit 2, not 1), said once (issue 27,
/// item 6: it was a hundred lines of "not a JSON record", then a count).
#[test]
fn garbage_is_malformed_input() {
    let d = tmp("garbage");
    let p = d.join("garbage.bin");
    // Deterministic bytes, newlines among them.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let bytes: Vec<u8> = (0..(1 << 20))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    fs::write(&p, &bytes).expect("write");
    let r = run(&["decode", p.to_str().expect("utf8")]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "{} is not an nvprobe recording: it is not text (binary data: a NUL byte at byte ",
            p.display()
        )),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty(), "{}", r.stdout);
}

/// A directory or a device is not a recording: exit 2 at once, with the
/// reason (/dev/zero used to grow without bound). A FIFO is a stream.
#[test]
fn directories_and_devices_are_refused_fifos_are_streams() {
    let d = tmp("kinds");
    let r = run_for(
        &["decode", d.to_str().expect("utf8")],
        Duration::from_secs(10),
        |_| {},
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("is a directory, not a recording"),
        "{}",
        r.stderr
    );
    let r = run_for(&["decode", "/dev/zero"], Duration::from_secs(5), |_| {});
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("/dev/zero is a device"), "{}", r.stderr);
    // stdin from /dev/zero (one endless line): bounded memory, and not
    // text, said from the first bytes read (it read on until stopped).
    let r = run_for(&["decode", "-"], Duration::from_secs(60), |c| {
        c.stdin(fs::File::open("/dev/zero").expect("zero"));
    });
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "standard input is not an nvprobe recording: it is not text (binary data: a NUL byte at byte 0)"
        ),
        "{}",
        r.stderr
    );
    let fifo = d.join("rec.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let f2 = fifo.clone();
    let writer = std::thread::spawn(move || {
        let text = fs::read(fixture(SMALL)).expect("fixture");
        fs::OpenOptions::new()
            .write(true)
            .open(&f2)
            .expect("open fifo")
            .write_all(&text)
            .expect("write fifo");
    });
    let r = run(&["decode", "--json", fifo.to_str().expect("utf8")]);
    writer.join().expect("writer");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(summary_events(&r.stdout) > 0);
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).expect("metadata").permissions().mode() & 0o7777
}

/// `decode a.ndjson -o a.ndjson` destroyed the recording: the input is
/// never the output (same file by device and inode, whatever the name, and
/// with --force); an existing file needs --force; a link is refused; a new
/// file is 0600 whatever the umask.
#[test]
fn the_output_is_never_the_input_nor_a_link_nor_an_existing_file() {
    let d = tmp("out");
    let a = d.join("a.ndjson");
    fs::copy(fixture(SMALL), &a).expect("copy");
    let before = fs::read(&a).expect("read");
    let s = a.to_str().expect("utf8");
    let other_name = format!("{}/./a.ndjson", d.display());
    for args in [
        vec!["decode", s, "-o", s],
        vec!["decode", s, "-o", s, "--force"],
        vec!["decode", s, "-o", &other_name, "--force"],
    ] {
        let r = run(&args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("it is the input"), "{}", r.stderr);
    }
    // The input on stdin.
    let r = run_for(
        &["decode", "-", "-o", s, "--force"],
        Duration::from_secs(60),
        |c| {
            c.stdin(fs::File::open(&a).expect("a"));
        },
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("it is the input"), "{}", r.stderr);
    assert_eq!(
        fs::read(&a).expect("read"),
        before,
        "the recording is intact"
    );
    // An existing file: refused without --force, overwritten with it.
    let out = d.join("out.txt");
    fs::write(&out, "keep").expect("write");
    let o = out.to_str().expect("utf8");
    let r = run(&["decode", s, "-o", o]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("exists") && r.stderr.contains("--force"),
        "{}",
        r.stderr
    );
    assert_eq!(fs::read_to_string(&out).expect("read"), "keep");
    let r = run(&["decode", s, "-o", o, "--force"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        fs::read_to_string(&out)
            .expect("read")
            .contains("nvprobe summary")
    );
    // A link: refused, with or without --force.
    let link = d.join("link.txt");
    std::os::unix::fs::symlink(&out, &link).expect("symlink");
    let r = run(&["decode", s, "-o", link.to_str().expect("utf8"), "--force"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("symbolic link"), "{}", r.stderr);
    // Created 0600 with umask 0; --output-mode for more.
    let umask0 = |c: &mut Command| {
        // SAFETY: umask(2) in the child before exec.
        unsafe {
            c.pre_exec(|| {
                libc::umask(0);
                Ok(())
            });
        }
    };
    let fresh = d.join("fresh.txt");
    let f = fresh.to_str().expect("utf8");
    let r = run_for(&["decode", s, "-o", f], Duration::from_secs(60), umask0);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(mode(&fresh), 0o600);
    let shared = d.join("shared.txt");
    let r = run_for(
        &[
            "decode",
            s,
            "--output-mode",
            "0644",
            "-o",
            shared.to_str().expect("utf8"),
        ],
        Duration::from_secs(60),
        umask0,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(mode(&shared), 0o644);
    let r = run(&["decode", s, "--force"]);
    assert_eq!(r.code, Some(2), "--force needs -o: {}", r.stderr);
    let r = run(&["decode", s, "--output-mode", "999", "-o", "/tmp/x"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("not a file mode"), "{}", r.stderr);
}

/// `nvprobe decode --json rec | head -1`: the reader goes away, decode
/// stops with exit 0.
#[test]
fn a_closed_pipe_ends_decode_quietly() {
    let big = fixture("h200-580.159.04-concurrent16.ndjson");
    let mut c = Command::new(bin("nvprobe"))
        .args(["decode", "--json"])
        .arg(&big)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(c.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("line");
    drop(out);
    let o = c.wait_with_output().expect("wait");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
