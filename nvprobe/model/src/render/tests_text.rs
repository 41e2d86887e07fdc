//! The text output's lines for a loader's search: a failed lookup is one
//! line, not the path call and then the same call again as a failed call
//! of the start-up, and the loader's stat of the directory it failed in
//! is part of the search (records of a live run on the no-GPU VM:
//! python's `ctypes.CDLL("libcuda.so.1")` without a driver).

use super::{Clock, Format, Renderer};
use crate::decode::Event;

const OPEN: &str = r#"{"v":1,"time":"2026-12-06T07:42:06.479864Z","mono_ns":29553989592902,"severity":"warn","severity_number":13,"type":"open","pid":28295,"tid":28295,"comm":"python3","uid":0,"syscall":"openat","path":"/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v4/libcuda.so.1","flags":"O_RDONLY|O_CLOEXEC","start_ns":29553989589459,"duration_ns":2960,"ret":-2,"errno":"ENOENT","ok":false}"#;
const SAME_FAILED: &str = r#"{"v":1,"time":"2026-12-06T07:42:06.479864Z","mono_ns":29553989593415,"severity":"warn","severity_number":13,"type":"proc","pid":28295,"tid":28295,"comm":"python3","uid":0,"op":"call_failed","target_pid":28295,"call":"openat","errno":"ENOENT","path":"/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v4/libcuda.so.1","seq":2,"args":[4294967196,140723982238176],"time_ns":29553989593415}"#;
const DIR_FAILED: &str = r#"{"v":1,"time":"2026-12-06T07:42:06.479866Z","mono_ns":29553989594937,"severity":"warn","severity_number":13,"type":"proc","pid":28295,"tid":28295,"comm":"python3","uid":0,"op":"call_failed","target_pid":28295,"call":"newfstatat","errno":"ENOENT","path":"/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v4","seq":3,"args":[4294967196,140723982238176],"time_ns":29553989594937}"#;

fn text(lines: &[&str]) -> String {
    let mut r = Renderer::new(Format::Text, Clock::now());
    let mut buf = bytes::BytesMut::new();
    for l in lines {
        let ev: Event = serde_json::from_str(l).expect("an event");
        r.event(&mut buf, 0, &ev).expect("rendered");
    }
    r.flush(&mut buf);
    String::from_utf8(buf.to_vec()).expect("utf8")
}

#[test]
fn a_failed_lookup_is_one_line() {
    let t = text(&[OPEN, SAME_FAILED, DIR_FAILED]);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 1, "{t}");
    assert!(
        lines[0].contains("openat(\"/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v4/libcuda.so.1\""),
        "{t}"
    );
    // The next place of the search joins it: one line for both.
    let next = OPEN
        .replace("x86-64-v4/libcuda.so.1", "x86-64-v3/libcuda.so.1")
        .replace("\"duration_ns\":2960", "\"duration_ns\":1040");
    let t = text(&[OPEN, SAME_FAILED, DIR_FAILED, &next]);
    assert!(
        t.ends_with(" python3[28295] openat libcuda.so.1 in 2 places = -1 ENOENT: /lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v4, /lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3 <4.0µs>\n"),
        "{t}"
    );
}

#[test]
fn a_failed_call_alone_or_of_another_path_is_shown() {
    // Without the path call before it.
    assert_eq!(text(&[SAME_FAILED]).lines().count(), 1);
    // Of another thread.
    let other = SAME_FAILED.replace(r#""tid":28295"#, r#""tid":28296"#);
    assert_eq!(text(&[OPEN, &other]).lines().count(), 2);
    // Not right after it (another file's lookup between).
    let another = OPEN.replace("libcuda.so.1", "libnvidia-ml.so.1");
    assert_eq!(text(&[OPEN, &another, SAME_FAILED]).lines().count(), 3);
    // Another system call on the same path.
    let stat = SAME_FAILED.replace(r#""call":"openat""#, r#""call":"newfstatat""#);
    assert_eq!(text(&[OPEN, &stat]).lines().count(), 2);
    // A directory's stat with no search before it is a line of its own.
    assert_eq!(text(&[DIR_FAILED]).lines().count(), 1);
}

#[test]
fn json_keeps_both_records() {
    let mut r = Renderer::new(Format::Json, Clock::now());
    let mut buf = bytes::BytesMut::new();
    for l in [OPEN, SAME_FAILED] {
        let ev: Event = serde_json::from_str(l).expect("an event");
        r.event(&mut buf, 0, &ev).expect("rendered");
    }
    assert_eq!(String::from_utf8_lossy(&buf).lines().count(), 2);
}

/// A loader's search for another library (no path call of nvprobe's, only
/// the start-up's failed calls, glibc 2.39's directory stats with their
/// trailing slash): one line, without a time it does not have.
#[test]
fn a_search_seen_as_failed_calls_alone_is_one_line() {
    let dirs = [
        "/opt/v/lib/glibc-hwcaps/x86-64-v4",
        "/opt/v/lib/glibc-hwcaps/x86-64-v3",
        "/opt/v/lib",
    ];
    let mut lines = Vec::new();
    for d in dirs {
        lines.push(
            SAME_FAILED
                .replace("/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v4", d)
                .replace("libcuda.so.1", "libstdc++.so.6"),
        );
        lines.push(DIR_FAILED.replace(
            "\"/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v4\"",
            &format!("\"{d}/\""),
        ));
    }
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let t = text(&refs);
    assert!(
        t.ends_with(" python3[28295] openat libstdc++.so.6 in 3 places = -1 ENOENT: /opt/v/lib/glibc-hwcaps/x86-64-v4, /opt/v/lib/glibc-hwcaps/x86-64-v3, /opt/v/lib\n"),
        "{t}"
    );
    assert_eq!(t.lines().count(), 1, "{t}");
}
