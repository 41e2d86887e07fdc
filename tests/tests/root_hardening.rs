//! Tier 2: the real BPF programs on this machine's kernel, as root.
//!
//! A FUSE stand-in serves the NVIDIA device files (tests/src/fakedrv.rs)
//! and `nvfixture` makes driver-style calls on it; `nvprobe watch` runs as
//! a separate process, exactly as a user runs it. Without root the tests
//! say `skipping` and pass. What the root tests share is in
//! tests/src/scenario.rs.
//!
//! This file: `watch` on a shared host, left running (issue 11): its output
//! file (created only once start-up succeeded, never through a link, 0600),
//! write errors (a closed pipe ends it with 0, any other with 1), a flood
//! that never ends (SIGINT, --duration and lost reports still on time),
//! the tracefs it mounted unmounted again, --comm past 15 bytes.

use std::{
    fs,
    io::{BufRead, BufReader, Write},
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use nvprobe_tests::{
    harness::{Trace, bin, bpf_prog_ids, private_mount_namespace, still_loaded, wait_at_most},
    need_root,
    scenario::{FakeDrv, check_schema, lock, scenario, spawn_ready, tmpdir, watch},
};

/// `nvprobe ARGS` with stdout and stdin closed, its exit code and stderr,
/// killed after 30 s (an nvprobe that does not stop fails the test, it
/// does not hang it).
fn nvprobe(args: &[&str], adjust: impl FnOnce(&mut Command)) -> (Option<i32>, String) {
    let mut c = Command::new(bin("nvprobe"));
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    adjust(&mut c);
    let mut child = c.spawn().expect("spawn nvprobe");
    let mut err = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let st = wait_at_most(&mut child, Duration::from_secs(30));
    let stderr = reader.join().unwrap_or_default();
    (st.and_then(|s| s.code()), stderr)
}

fn has_kprobes() -> bool {
    Path::new("/sys/bus/event_source/devices/kprobe/type").exists()
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).expect("metadata").permissions().mode() & 0o7777
}

/// `-o FILE`: an existing file is refused without --force (and the refusal
/// comes before anything is attached); with --force it is still not
/// truncated when start-up fails; a new file is 0600 whatever the umask
/// (or --output-mode); a symbolic link is never followed.
#[test]
#[ignore = "needs root"]
fn output_file_is_made_only_after_startup_never_through_a_link() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("outfile");
    let keep = tmp.join("keep.txt");
    fs::write(&keep, "precious\n").expect("write");
    let k = keep.to_str().expect("utf8");
    let (code, err) = nvprobe(&["watch", "--duration", "1", "-o", k], |_| {});
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("exists") && err.contains("--force"), "{err}");
    assert_eq!(fs::read_to_string(&keep).expect("read"), "precious\n");
    if !has_kprobes() {
        // --layers driver cannot start on this kernel (exit 3): the file
        // given with --force must still be as it was.
        let (code, err) = nvprobe(
            &[
                "watch",
                "--layers",
                "driver",
                "--duration",
                "1",
                "--force",
                "-o",
                k,
            ],
            |_| {},
        );
        assert_eq!(code, Some(3), "{err}");
        assert_eq!(fs::read_to_string(&keep).expect("read"), "precious\n");
    }
    // A new file: 0600 with umask 0, or what --output-mode says.
    let umask0 = |c: &mut Command| {
        // SAFETY: umask(2) in the child before exec.
        unsafe {
            c.pre_exec(|| {
                libc::umask(0);
                Ok(())
            });
        }
    };
    let fresh = tmp.join("fresh.ndjson");
    let f = fresh.to_str().expect("utf8");
    let (code, err) = nvprobe(&["watch", "--json", "--duration", "1", "-o", f], umask0);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(mode(&fresh), 0o600);
    assert!(
        fs::read_to_string(&fresh)
            .expect("read")
            .contains("\"type\":\"summary\"")
    );
    let (code, err) = nvprobe(
        &[
            "watch",
            "--duration",
            "1",
            "--force",
            "--output-mode",
            "640",
            "-o",
            f,
        ],
        umask0,
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(mode(&fresh), 0o640);
    // A link, to a file or to where a file would be made: refused.
    let link = tmp.join("link.txt");
    std::os::unix::fs::symlink(&keep, &link).expect("symlink");
    let dangling = tmp.join("dangling.txt");
    std::os::unix::fs::symlink(tmp.join("made-through-a-link"), &dangling).expect("symlink");
    for l in [&link, &dangling] {
        let (code, err) = nvprobe(
            &[
                "watch",
                "--duration",
                "1",
                "--force",
                "-o",
                l.to_str().expect("utf8"),
            ],
            |_| {},
        );
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("symbolic link"), "{err}");
    }
    assert_eq!(fs::read_to_string(&keep).expect("read"), "precious\n");
    assert!(!tmp.join("made-through-a-link").exists());
}

/// `nvprobe watch --json | head -1`: once the reader is gone nvprobe stops
/// at once with exit 0 and detaches; `-o /dev/full` stops with the error
/// and exit 1.
#[test]
#[ignore = "needs root"]
fn write_errors_end_watch() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("writeerr");
    let drv = FakeDrv::start(&tmp);
    let mut args = vec!["watch".to_owned(), "--json".to_owned()];
    args.extend(drv.device_args());
    let mut child = Command::new(bin("nvprobe"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("first line");
    assert!(first.contains("\"type\":\"start\""), "{first}");
    let progs = bpf_prog_ids(child.id());
    assert!(!progs.is_empty());
    // `head -1` exits: the read end closes.
    drop(out);
    let t0 = Instant::now();
    // Something to write (an idle nvprobe must notice as well).
    scenario(&drv, "basic", &[]);
    let st = wait_at_most(&mut child, Duration::from_secs(10));
    assert!(
        st.is_some(),
        "nvprobe still running 10 s after its reader went away"
    );
    assert_eq!(st.and_then(|s| s.code()), Some(0));
    eprintln!("stopped {:?} after the pipe closed", t0.elapsed());
    let left = still_loaded(&progs, Duration::from_secs(5));
    assert!(left.is_empty(), "programs left loaded: {left:?}");
    // The reader gone and nothing to write: seen as well.
    let mut child = Command::new(bin("nvprobe"))
        .args(["watch", "--json", "--device", "/dev/null=ctl", "--pid", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("first line");
    drop(out);
    let st = wait_at_most(&mut child, Duration::from_secs(10));
    assert_eq!(
        st.and_then(|s| s.code()),
        Some(0),
        "idle nvprobe, reader gone"
    );
    // Any other write error: a message, exit 1.
    let (code, err) = nvprobe(&["watch", "--json", "-o", "/dev/full"], |_| {});
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("writing the output failed") && err.contains("No space left on device"),
        "{err}"
    );
}

/// Processes each flooding ioctls (on /dev/null declared a ctl node) as
/// fast as they can, for as long as the test lets them.
struct Flood(Vec<Child>);

impl Flood {
    fn start(n: usize) -> Flood {
        let mut v = Vec::new();
        for _ in 0..n {
            let (mut c, _) = spawn_ready(
                Command::new(bin("nvfixture"))
                    .args(["run", "flood", "--dir", "/dev/null", "--count", "0"])
                    .args(["--threads", "1"]),
            );
            c.stdin
                .take()
                .expect("stdin")
                .write_all(b"go\n")
                .expect("go");
            v.push(c);
        }
        Flood(v)
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Under a flood that does not end, SIGINT stops nvprobe (summary written)
/// and --duration ends it, both within a generous bound, and `lost`
/// records come while the flood goes on (every 200 ms), not after it.
#[test]
#[ignore = "needs root"]
fn sigint_duration_and_lost_reports_are_on_time_under_a_flood() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("flood");
    let t = Trace::start(
        &tmp,
        &["--device", "/dev/null=ctl", "--ringbuf-size", "262144"],
    );
    let mut flood = Flood::start(4);
    let out = t.out.clone();
    // The flood does not stop: a watchdog ends it after 40 s, so that an
    // nvprobe deaf to SIGINT fails the test instead of hanging it.
    let pids: Vec<i32> = flood.0.iter().map(|c| c.id() as i32).collect();
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if wait.recv_timeout(Duration::from_secs(40))
            == Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        {
            for p in pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    });
    let t0 = Instant::now();
    let mut lost_seen = None;
    let mut scanned = 0u64;
    while t0.elapsed() < Duration::from_secs(15) {
        if find_from(&out, &mut scanned, b"\"type\":\"lost\"") {
            lost_seen = Some(t0.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let lost_seen = lost_seen.expect("no lost record within 15 s of a flood into a 256 KiB ring");
    eprintln!("first lost record {lost_seen:?} into the flood");
    std::thread::sleep(Duration::from_secs(2));
    let pid = t.pid();
    let t1 = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    // Exited: a zombie until the trace reaps it.
    while t1.elapsed() < Duration::from_secs(30) && !exited(pid) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = t1.elapsed();
    // Every flooder still runs (the watchdog kills them at 40 s): nvprobe
    // stopped while the flood went on, not after it.
    let ended: Vec<_> = flood
        .0
        .iter_mut()
        .filter_map(|c| c.try_wait().ok().flatten())
        .collect();
    assert!(
        ended.is_empty() && t0.elapsed() < Duration::from_secs(40),
        "the flood had ended before nvprobe stopped ({} of 4 flooders exited: {ended:?})",
        ended.len()
    );
    eprintln!("SIGINT to exit under the flood: {took:?}");
    let f = t.stop();
    assert!(
        took < Duration::from_secs(10),
        "SIGINT took {took:?} under a flood: {}",
        f.stderr
    );
    check_schema(&f);
    let s = f.summary();
    assert!(s["lost"]["total"].as_u64().unwrap_or(0) > 0);
    let lost_records = f.of_type("lost").count();
    assert!(
        lost_records >= 2,
        "lost records during the flood: {lost_records}"
    );
    // --duration under the same flood.
    let t2 = Instant::now();
    let (code, err) = nvprobe(
        &[
            "watch",
            "--json",
            "--device",
            "/dev/null=ctl",
            "--duration",
            "2",
            "-o",
        ],
        |c| {
            c.arg(tmp.join("duration.ndjson"));
        },
    );
    let took = t2.elapsed();
    eprintln!("--duration 2 under the flood ran {took:?}");
    assert_eq!(code, Some(0), "{err}");
    assert!(took < Duration::from_secs(20), "--duration 2 ran {took:?}");
    drop(done);
    let _ = watchdog.join();
    drop(flood);
}

/// Whether process `pid` has exited (a zombie, or gone).
fn exited(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(") ")
                .is_none_or(|(_, rest)| rest.starts_with('Z'))
        })
        .unwrap_or(true)
}

/// Whether `needle` is in the file past `from` (read in pieces; `from`
/// moves on, keeping a needle's length back).
fn find_from(p: &Path, from: &mut u64, needle: &[u8]) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = fs::File::open(p) else {
        return false;
    };
    if f.seek(SeekFrom::Start(*from)).is_err() {
        return false;
    }
    let mut buf = vec![0u8; 1 << 20];
    // At most 64 MiB a look: a file growing as fast as it is read must not
    // keep this from returning.
    for _ in 0..64 {
        let n = f.read(&mut buf).unwrap_or(0);
        if n == 0 {
            return false;
        }
        if buf[..n].windows(needle.len()).any(|w| w == needle) {
            return true;
        }
        *from += n.saturating_sub(needle.len()) as u64;
        if f.seek(SeekFrom::Start(*from)).is_err() {
            return false;
        }
    }
    false
}

/// nvprobe, in a mount namespace of the test's own with tracefs detached,
/// mounts tracefs in a namespace of its own: nothing is left mounted after
/// a normal run or after a start-up that fails once tracefs is mounted
/// (exit 3).
#[test]
#[ignore = "needs root"]
fn tracefs_nvprobe_mounted_is_unmounted_at_exit() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("umount");
    let out = tmp.join("t.ndjson");
    let script = format!(
        "{nv} watch --json --duration 1 -o {out}; echo rc=$?; grep -c ' /sys/kernel/tracing ' /proc/self/mountinfo; \
         {nv} watch --layers driver --duration 1; echo rc=$?; grep -c ' /sys/kernel/tracing ' /proc/self/mountinfo; true",
        nv = bin("nvprobe").display(),
        out = out.display()
    );
    let mut c = Command::new("sh");
    c.args(["-c", &script]).stderr(Stdio::piped());
    private_mount_namespace(&mut c, &["/sys/kernel/tracing"]);
    let o = c.output().expect("run sh");
    let text = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first(), Some(&"rc=0"), "{text}\n{err}");
    assert!(err.contains("mounted tracefs"), "{err}");
    assert_eq!(
        lines.get(1),
        Some(&"0"),
        "tracefs still mounted after nvprobe exited: {text}"
    );
    if !has_kprobes() {
        assert_eq!(lines.get(2), Some(&"rc=3"), "{text}\n{err}");
    }
    assert_eq!(
        lines.get(3),
        Some(&"0"),
        "tracefs still mounted after a failed start-up: {text}"
    );
    let start = fs::read_to_string(&out).expect("trace");
    assert!(start.contains("\"tracefs_mounted_by_nvprobe\":true"));
}

/// Issue 23, item 3: one instance's tracefs is never another's to lose.
/// With tracefs unmounted (a mount namespace of the test's own), nvprobe A
/// mounts it where only A sees it (the namespace it started from has no
/// tracefs while A runs); B starts at once after A's SIGINT, while A
/// stops, and starts (before, A's MNT_DETACH took the tracefs B had found:
/// exit 3, "tracepoint … does not exist").
#[test]
#[ignore = "needs root"]
fn one_instances_tracefs_is_not_anothers() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("tracefs2");
    let (a, b) = (tmp.join("a.ndjson"), tmp.join("b.ndjson"));
    let script = format!(
        "{nv} watch --json -o {a} 2>{a}.err & pa=$!; \
         i=0; until grep -q '\"type\":\"start\"' {a} 2>/dev/null; do i=$((i+1)); [ $i -gt 3000 ] && break; sleep 0.02; done; \
         echo seen=$(grep -c ' /sys/kernel/tracing ' /proc/self/mountinfo); \
         kill -INT $pa; {nv} watch --json --duration 1 -o {b} 2>{b}.err; echo rcb=$?; wait $pa; echo rca=$?; \
         echo left=$(grep -c ' /sys/kernel/tracing ' /proc/self/mountinfo)",
        nv = bin("nvprobe").display(),
        a = a.display(),
        b = b.display()
    );
    let mut c = Command::new("sh");
    c.args(["-c", &script]).stderr(Stdio::piped());
    private_mount_namespace(
        &mut c,
        &["/sys/kernel/tracing", "/sys/kernel/debug/tracing"],
    );
    let o = c.output().expect("run sh");
    let text = String::from_utf8_lossy(&o.stdout);
    let errs = || {
        format!(
            "{}\nA: {}\nB: {}",
            String::from_utf8_lossy(&o.stderr),
            fs::read_to_string(format!("{}.err", a.display())).unwrap_or_default(),
            fs::read_to_string(format!("{}.err", b.display())).unwrap_or_default()
        )
    };
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        ["seen=0", "rcb=0", "rca=0", "left=0"],
        "{text}\n{}",
        errs()
    );
    for f in [&a, &b] {
        let start = fs::read_to_string(f).expect("trace");
        assert!(
            start.contains("\"tracefs_mounted_by_nvprobe\":true")
                && start.contains("\"tracefs\":\"/sys/kernel/tracing\""),
            "{}",
            start.lines().next().unwrap_or_default()
        );
    }
}

/// `--comm` with a name longer than the kernel keeps (15 bytes) matches
/// the process, and the start-up message says how names are matched.
#[test]
#[ignore = "needs root"]
fn comm_longer_than_the_kernels_15_bytes_matches() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("comm");
    let drv = FakeDrv::start(&tmp);
    let long = tmp.join("nvfixture-with-a-long-name");
    fs::copy(bin("nvfixture"), &long).expect("copy nvfixture");
    let t = watch(&tmp, &drv, &["--comm", "nvfixture-with-a-long-name"]);
    let o = Command::new(&long)
        .args(["run", "basic", "--dir"])
        .arg(&drv.dir)
        .output()
        .expect("run the long-named fixture");
    assert!(o.status.success());
    // And one that must not match (another name).
    scenario(&drv, "basic", &[]);
    let f = t.stop();
    check_schema(&f);
    let ioctls: Vec<_> = f.of_type("ioctl").collect();
    assert_eq!(ioctls.len(), 10, "the long-named process's calls only");
    assert!(ioctls.iter().all(|r| r["comm"] == "nvfixture-with-"));
    assert!(
        f.stderr
            .contains("--comm matches the kernel's process name")
            && f.stderr
                .contains("nvfixture-with- (from nvfixture-with-a-long-name)"),
        "{}",
        f.stderr
    );
}
