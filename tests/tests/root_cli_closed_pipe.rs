//! Tier 2: the real BPF programs on this machine's kernel, as root.
//! Without root the tests say `skipping` and pass. What the root tests
//! share is in tests/src/scenario.rs.
//!
//! This file (issue 27, item 1): `watch` (text, --summary-only) and `top`
//! (plain tables, stdout not a terminal) whose reader goes away once they
//! have attached: the consumer is gone, so nvprobe stops tracing, removes
//! every probe it held and exits 0 with no error and no panic; the same
//! with stderr on that pipe (`2>&1 | head`), where the panic of a message
//! that could not be written ended it with 101. (`watch --json | head -1`
//! is root_hardening.rs's.)

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use nvprobe_tests::{
    harness::{bin, bpf_prog_ids, still_loaded, wait_at_most},
    need_root,
    scenario::lock,
};

/// `nvprobe ARGS` with stdout a pipe: once the banner says it is tracing,
/// the pipe's read end is closed. Its exit status and stderr.
fn reader_goes_away(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(bin("nvprobe"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nvprobe");
    let out = child.stdout.take().expect("stdout");
    let err = BufReader::new(child.stderr.take().expect("stderr"));
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for l in err.lines().map_while(Result::ok) {
            let _ = tx.send(l.clone());
            all.push_str(&l);
            all.push('\n');
        }
        all
    });
    // Attached: the banner is written once every probe is.
    loop {
        let l = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{args:?}: no banner within 60 s"));
        if l.contains("Ctrl-C to stop") {
            break;
        }
    }
    let progs = bpf_prog_ids(child.id());
    assert!(!progs.is_empty(), "{args:?}: no BPF program held");
    drop(out);
    let st = wait_at_most(&mut child, Duration::from_secs(60));
    let stderr = reader.join().expect("stderr reader");
    assert!(
        st.is_some(),
        "{args:?}: still running 60 s after its reader went away: {stderr}"
    );
    let left = still_loaded(&progs, Duration::from_secs(5));
    assert!(left.is_empty(), "{args:?}: programs left loaded: {left:?}");
    (st.and_then(|s| s.code()), stderr)
}

#[test]
#[ignore = "needs root"]
fn watch_and_top_stop_when_their_reader_goes_away() {
    need_root!();
    let _g = lock();
    for args in [
        &["watch"][..],
        &["watch", "--summary-only"],
        &["top", "--plain", "--interval", "0.05"],
    ] {
        let (code, err) = reader_goes_away(args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        for bad in ["panicked", "nvprobe: error", "Broken pipe"] {
            assert!(!err.contains(bad), "{args:?}: {bad:?} in {err}");
        }
    }
}

/// `nvprobe watch 2>&1 | head`: stdout and stderr on one pipe, closed once
/// the banner has been read.
#[test]
#[ignore = "needs root"]
fn watch_stops_when_the_reader_of_both_streams_goes_away() {
    need_root!();
    let _g = lock();
    for args in [&["watch"][..], &["watch", "--json"]] {
        // Close-on-exec: the child must not hold the read end itself.
        let (r, w) = std::io::pipe().expect("pipe");
        let w2 = w.try_clone().expect("dup");
        let mut child = Command::new(bin("nvprobe"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(w))
            .stderr(Stdio::from(w2))
            .spawn()
            .expect("spawn nvprobe");
        let mut lines = BufReader::new(r).lines();
        loop {
            let l = lines
                .next()
                .unwrap_or_else(|| panic!("{args:?}: ended before its banner"))
                .expect("read");
            if l.contains("Ctrl-C to stop") {
                break;
            }
        }
        let progs = bpf_prog_ids(child.id());
        assert!(!progs.is_empty(), "{args:?}: no BPF program held");
        drop(lines);
        let st = wait_at_most(&mut child, Duration::from_secs(60));
        assert!(
            st.is_some(),
            "{args:?}: still running 60 s after its reader went away"
        );
        assert_eq!(st.and_then(|s| s.code()), Some(0), "{args:?}");
        let left = still_loaded(&progs, Duration::from_secs(5));
        assert!(left.is_empty(), "{args:?}: programs left loaded: {left:?}");
    }
}

/// `sudo nvprobe watch -o rec.ndjson 2>&1 | head -3`: the reader of stderr
/// has gone when nvprobe stops and says how the run went. It ended with a
/// panic (exit 101); now with 0, its probes removed, its records written.
#[test]
#[ignore = "needs root"]
fn a_closed_stderr_at_the_stop_ends_watch_with_0() {
    need_root!();
    let _g = lock();
    let tmp = nvprobe_tests::scenario::tmpdir("closed-stderr");
    let rec = tmp.join("rec.ndjson");
    let (r, w) = std::io::pipe().expect("pipe");
    let mut child = Command::new(bin("nvprobe"))
        .args(["watch", "--json", "-o"])
        .arg(&rec)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(w))
        .spawn()
        .expect("spawn nvprobe");
    let mut lines = BufReader::new(r).lines();
    loop {
        let l = lines
            .next()
            .unwrap_or_else(|| panic!("ended before its banner"))
            .expect("read");
        if l.contains("Ctrl-C to stop") {
            break;
        }
    }
    let progs = bpf_prog_ids(child.id());
    assert!(!progs.is_empty(), "no BPF program held");
    drop(lines);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let st = wait_at_most(&mut child, Duration::from_secs(60));
    assert_eq!(st.and_then(|s| s.code()), Some(0), "{st:?}");
    let left = still_loaded(&progs, Duration::from_secs(5));
    assert!(left.is_empty(), "programs left loaded: {left:?}");
    let text = std::fs::read_to_string(&rec).expect("the recording");
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.contains("\"type\":\"start\"")),
        "{text}"
    );
    assert!(
        text.contains("\"type\":\"summary\""),
        "the run's summary written"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
