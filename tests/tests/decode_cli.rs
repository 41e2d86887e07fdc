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
            "--- nvprobe summary: 166 events in 3.7 s, 0 failed (and 7 lookups of paths that do not exist), 5 lost, 0 undecodable ---"
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

/// `nvprobe decode REC -o PATH`, killed after 20 s: (exit code, stderr,
/// seconds it took). An open that blocks shows as a kill.
fn decode_to(path: &std::path::Path, force: bool) -> (Option<i32>, String, f64) {
    let mut c = Command::new(bin("nvprobe"));
    c.args(["decode"])
        .arg(fixture("h200-580.159.04-stall-sigstop.ndjson"))
        .arg("-o")
        .arg(path);
    if force {
        c.arg("--force");
    }
    let t0 = std::time::Instant::now();
    let mut child = c
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut waited = 0;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        waited += 1;
        if waited > 200 {
            let _ = child.kill();
            break child.wait().expect("wait");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let mut err = String::new();
    use std::io::Read as _;
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read");
    (status.code(), err, t0.elapsed().as_secs_f64())
}

/// A FIFO nobody reads is refused at once with what to do (an open of it
/// used to block past every signal), with --force or not; a block device
/// is never written, --force or not.
#[test]
fn a_fifo_without_a_reader_and_a_block_device_are_refused_not_waited_on() {
    let d = TestDir::new("outfifo");
    let fifo = d.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    for force in [false, true] {
        let (code, err, secs) = decode_to(&fifo, force);
        assert_eq!(code, Some(2), "force {force}: {err}");
        assert!(
            err.contains(
                "it is a FIFO and no process has it open for reading (start its reader first)"
            ),
            "{err}"
        );
        assert!(secs < 15.0, "{secs} s");
    }
    // With a reader, the records go through it.
    let reader = std::thread::spawn({
        let fifo = fifo.clone();
        move || std::fs::read_to_string(&fifo).expect("read the fifo")
    });
    // The reader opens first (its open waits for a writer): until it has,
    // the decode is refused as above.
    let (code, err) = (0..50)
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            let (code, err, _) = decode_to(&fifo, false);
            (code, err)
        })
        .find(|(_, err)| !err.contains("no process has it open"))
        .expect("the reader opened the FIFO");
    assert_eq!(code, Some(0), "{err}");
    let got = reader.join().expect("reader");
    assert!(got.contains("stall"), "{got}");

    // A block device node of the test's own (the loop device's numbers;
    // root can make one, as CI runs): refused, never opened.
    let blk = d.join("blk");
    match nix::sys::stat::mknod(
        &blk,
        nix::sys::stat::SFlag::S_IFBLK,
        nix::sys::stat::Mode::from_bits_truncate(0o600),
        nix::sys::stat::makedev(7, 0),
    ) {
        Ok(()) => {
            for force in [false, true] {
                let (code, err, _) = decode_to(&blk, force);
                assert_eq!(code, Some(2), "{err}");
                assert!(err.contains("it is a block device"), "{err}");
            }
        }
        // Not root: the FIFO half above still ran.
        Err(e) => assert_eq!(e, nix::errno::Errno::EPERM, "mknod"),
    }
}

/// `nvprobe decode --events LEVEL FIXTURE`'s text (it must succeed).
fn decode_text(rec: &str, level: &str) -> String {
    let o = Command::new(bin("nvprobe"))
        .args(["decode", "--events", level])
        .arg(fixture(rec))
        .output()
        .expect("decode");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Text at `--events verdicts`: a start-up's failed calls are its
/// verdict's evidence, not lines of their own; at `all` they are lines.
#[test]
fn verdicts_text_shows_failed_calls_in_the_verdict_only() {
    let text = |level: &str| decode_text("h200-580.159.04-start-calls.ndjson", level);
    let all = text("all");
    assert_eq!(all.matches("(a call of its start-up)").count(), 6, "{all}");
    let verdicts = text("verdicts");
    assert_eq!(
        verdicts.matches("(a call of its start-up)").count(),
        0,
        "{verdicts}"
    );
    assert!(
        verdicts.contains("! thread_limit: cuInit returned CUDA_ERROR_OPERATING_SYSTEM (304) and no call on an NVIDIA file failed: clone3() failed with EAGAIN"),
        "{verdicts}"
    );
}

/// Text at `--events verdicts`: the loader's search for a libcuda that is
/// not there is its verdict's evidence (`libcuda_not_found` lists the
/// paths), not 60 lines; at `all` the search is one line (the name, how
/// many places, the error, where it looked first and last), and a failed
/// dlopen of libcuda is a few lines in all.
#[test]
fn verdicts_text_folds_the_loaders_search_into_its_verdict() {
    let text = |level: &str| decode_text("h200-580.159.04-libcuda-follow.ndjson", level);
    let lookups = |t: &str| {
        t.lines()
            .filter(|l| l.contains("libcuda.so.1\", O_RDONLY|O_CLOEXEC) = -1 ENOENT"))
            .count()
    };
    let all = text("all");
    assert_eq!(lookups(&all), 0, "{all}");
    let torch: Vec<&str> = all
        .lines()
        .filter(|l| l.contains("python3[6256]"))
        .collect();
    assert_eq!(
        torch.len(),
        3,
        "the search, the exit and the verdict's first line: {torch:#?}"
    );
    assert!(
        torch[0].ends_with(" python3[6256] openat libcuda.so.1 in 41 places = -1 ENOENT: /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib, /usr/local/nvidia/lib64, … /usr/lib <178.7µs>"),
        "{}",
        torch[0]
    );
    let v = text("verdicts");
    assert_eq!(lookups(&v), 0, "{v}");
    // Folded or not, a lookup is no line of its own at verdicts.
    assert_eq!(
        v.lines()
            .filter(|l| l.contains(" place") && l.contains(" = -1 "))
            .count(),
        0,
        "{v}"
    );
    // At failures, the search comes before the verdict it ends in.
    let f = text("failures");
    let at = |needle: &str| {
        f.lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} in {f}"))
    };
    assert!(
        at("python3[6256] openat libcuda.so.1 in 41 places")
            < at("== python3[6256] CUDA start-up failed"),
        "{f}"
    );
    assert!(
        v.contains("! libcuda_not_found: the dynamic loader looked for libcuda.so.1 41 times and found none"),
        "{v}"
    );
}
