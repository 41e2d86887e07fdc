//! Tier 1, through the binary: `nvprobe doctor --root` on hostile trees
//! and archives (issue 11, "Hardening"): FIFOs where files should be,
//! links out of the tree, a config.gz bomb, a tar.gz bomb. No root needed.
//!
//! `NVPROBE_BIN` runs these against another nvprobe binary (to see an old
//! one fail them).

use std::{
    os::unix::fs::symlink,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use nvprobe_tests::{
    doctortest::{Tmp, nvprobe, plant_at_child_pid},
    harness::fixture,
};
use serde_json::Value;

fn copy_tree(from: &Path, to: &Path) {
    assert!(
        Command::new("cp")
            .arg("-r")
            .arg(from)
            .arg(to)
            .status()
            .expect("cp")
            .success()
    );
}

/// What a run gave: exit code, stdout, stderr, peak memory (KiB).
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    max_rss_kib: i64,
}

/// Run nvprobe with ARGS; None when it has not finished after SECS (it is
/// killed then). The child is reaped with wait4, which also gives its peak
/// memory (std's wait does not).
#[allow(clippy::zombie_processes)]
fn run_limited(args: &[&std::ffi::OsStr], secs: u64, tmp: &Path) -> Option<Ran> {
    let (out, err) = (tmp.join("stdout"), tmp.join("stderr"));
    let child = Command::new(nvprobe())
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout"))
        .stderr(std::fs::File::create(&err).expect("stderr"))
        .spawn()
        .expect("run nvprobe");
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut status = 0;
    // SAFETY: rusage is plain data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let mut finished = true;
    loop {
        // SAFETY: our own child; valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            break;
        }
        if Instant::now() > deadline {
            finished = false;
            // SAFETY: our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::wait4(pid, &mut status, 0, &mut ru);
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    finished.then(|| Ran {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
        max_rss_kib: ru.ru_maxrss,
    })
}

fn doctor_json(root: &Path, secs: u64, tmp: &Path) -> (Ran, Value) {
    let r = run_limited(
        &[
            "doctor".as_ref(),
            "--json".as_ref(),
            "--root".as_ref(),
            root.as_os_str(),
        ],
        secs,
        tmp,
    )
    .unwrap_or_else(|| {
        panic!(
            "nvprobe doctor --root {} did not finish in {secs} s",
            root.display()
        )
    });
    let doc = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} / {}", r.stdout, r.stderr));
    (r, doc)
}

fn evidence_of(doc: &Value, id: &str) -> Vec<String> {
    doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"] == id)
        .map(|c| c["evidence"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn all_evidence(doc: &Value) -> String {
    doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| c["evidence"].as_str().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Item 8 of issue 11: `doctor --root` hung forever on a FIFO at any file
/// it reads. Now each is refused at once and named in a `tree` check.
#[test]
fn fifos_in_a_tree_do_not_hang_doctor() {
    let t = Tmp::new("fifo");
    let root = t.0.join("tree");
    copy_tree(&fixture("hosts/healthy"), &root);
    let fifos = [
        "kmsg.txt",
        "proc/devices",
        "dev.manifest",
        "proc/kallsyms",
        "proc/config.gz",
        "proc/driver/nvidia/version",
        "sys/module/nvidia/version",
        "libs.manifest",
        "sys/bus/event_source/devices.list",
    ];
    for f in fifos {
        let p = root.join(f);
        let _ = std::fs::remove_file(&p);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o644)).expect("mkfifo");
    }
    let (_, doc) = doctor_json(&root, 30, &t.0);
    let files = evidence_of(&doc, "file");
    for f in fifos {
        let want = format!("{f} is a FIFO, not a regular file: not read");
        assert!(files.contains(&want), "{want} not in {files:#?}");
    }
    let d = evidence_of(&doc, "driver_loaded");
    assert_eq!(
        d,
        [
            "cannot tell whether the nvidia module is loaded: /proc/driver/nvidia/version is a FIFO, not a regular file: not read; /sys/module/nvidia/version is a FIFO, not a regular file: not read"
        ]
    );
}

/// Item 2: links out of the tree (absolute, or `..` above it) are not
/// followed, in a folder and in an archive (where the FIFO entry of a
/// `tar` made by hand is not unpacked either).
#[test]
fn links_out_of_a_tree_are_not_followed() {
    let t = Tmp::new("links");
    let root = t.0.join("tree");
    copy_tree(&fixture("hosts/healthy"), &root);
    let secret = t.0.join("secret");
    std::fs::write(
        &secret,
        "[ 9.0] NVRM: Xid (PCI:0000:00:06.0): 79, SECRET-OUTSIDE\n",
    )
    .expect("write");
    let _ = std::fs::remove_file(root.join("kmsg.txt"));
    symlink(&secret, root.join("kmsg.txt")).expect("ln");
    std::fs::remove_file(root.join("libs.manifest")).expect("rm");
    let lib = root.join("usr/lib/x86_64-linux-gnu");
    std::fs::create_dir_all(&lib).expect("mkdir");
    symlink("/etc/shadow", lib.join("libcuda.so.1")).expect("ln");
    let (_, doc) = doctor_json(&root, 30, &t.0);
    assert!(!all_evidence(&doc).contains("SECRET"), "{doc}");
    let files = evidence_of(&doc, "file");
    assert_eq!(
        files,
        [
            format!(
                "kmsg.txt is a link out of the tree (-> {}): not read",
                secret.display()
            ),
            "usr/lib/x86_64-linux-gnu/libcuda.so.1 is a link out of the tree (-> /etc/shadow): not read".to_owned(),
        ],
        "{doc}"
    );
    // The same tree as an archive, with a FIFO added.
    let _ = std::fs::remove_file(root.join("proc/modules"));
    nix::unistd::mkfifo(
        &root.join("proc/modules"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .expect("mkfifo");
    let archive = t.0.join("tree.tar");
    assert!(
        Command::new("tar")
            .arg("-C")
            .arg(&root)
            .arg("-cf")
            .arg(&archive)
            .arg(".")
            .status()
            .expect("tar")
            .success()
    );
    let (_, doc) = doctor_json(&archive, 30, &t.0);
    assert!(!all_evidence(&doc).contains("SECRET"), "{doc}");
    let files = evidence_of(&doc, "file");
    for want in [
        format!(
            "kmsg.txt is a link out of the tree (-> {}): not read",
            secret.display()
        ),
        "usr/lib/x86_64-linux-gnu/libcuda.so.1 is a link out of the tree (-> /etc/shadow): not read".to_owned(),
        "proc/modules is a FIFO, not a regular file: not read".to_owned(),
    ] {
        assert!(files.contains(&want), "{want} not in {files:#?}");
    }
}

/// `gzip -1` of LEN zero bytes (after HEAD), or None without gzip.
fn gzip_zeros(head: &[u8], len: u64, tail: &[u8], to: &Path) -> Option<()> {
    use std::io::Write as _;
    let mut c = Command::new("gzip")
        .arg("-1")
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(to).ok()?)
        .spawn()
        .ok()?;
    {
        let mut w = c.stdin.take()?;
        w.write_all(head).ok()?;
        let zeros = vec![0u8; 1 << 20];
        let mut left = len;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            w.write_all(&zeros[..n]).ok()?;
            left -= n as u64;
        }
        w.write_all(tail).ok()?;
    }
    c.wait().ok()?.success().then_some(())
}

/// Item 8: a 256 MiB config.gz bomb (256 KiB on disk). The old code
/// unpacked all of it into memory; now doctor reads 16 MiB of it and says
/// so.
#[test]
fn a_config_gz_bomb_is_read_up_to_its_cap() {
    let t = Tmp::new("gzbomb");
    let root = t.0.join("tree");
    copy_tree(&fixture("hosts/healthy"), &root);
    if !nvprobe_tests::harness::require_tool("gzip", "--version", "apt-get install gzip") {
        return;
    }
    gzip_zeros(b"", 256 << 20, b"", &root.join("proc/config.gz")).expect("gzip");
    let (r, doc) = doctor_json(&root, 60, &t.0);
    assert!(
        r.max_rss_kib < 128 << 10,
        "doctor took {} MiB",
        r.max_rss_kib >> 10
    );
    assert_eq!(
        evidence_of(&doc, "file"),
        ["proc/config.gz is larger than 16 MiB, what doctor reads of it: not read"]
    );
}

/// A ustar header for a regular file NAME of SIZE bytes.
fn ustar_header(name: &str, size: u64) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    h[136..148].copy_from_slice(b"00000000000\0");
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

/// Item 8: a tar.gz bomb (600 MiB of zeros in one file, 600 KiB on disk).
/// The old code wrote all of it to /tmp and went on; now the header's size
/// is over the 512 MiB cap and the archive is refused before its data is
/// read (exit 2), leaving nothing behind.
#[test]
fn a_tar_gz_bomb_is_refused() {
    let t = Tmp::new("tarbomb");
    let archive = t.0.join("bomb.tar.gz");
    let size = 600u64 << 20;
    if gzip_zeros(
        &ustar_header("kmsg.txt", size),
        size,
        &[0u8; 1024],
        &archive,
    )
    .is_none()
    {
        nvprobe_tests::harness::skip("no gzip");
        return;
    }
    let r = run_limited(
        &["doctor".as_ref(), "--root".as_ref(), archive.as_os_str()],
        60,
        &t.0,
    )
    .expect("finished");
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("the archive unpacks to more than 512 MiB"),
        "{}",
        r.stderr
    );
}

/// Item 1: `--root FILE.tar` unpacked into TMPDIR/nvprobe-root-PID after
/// removing whatever was there (a local user could plant a folder or a
/// link at that name). Now a new private folder (mkdtemp, 0700): what is at
/// the old name is left alone, and nothing is left behind.
#[test]
fn archives_unpack_into_a_new_private_folder() {
    let t = Tmp::new("unpackdir");
    let archive = t.0.join("tree.tar");
    assert!(
        Command::new("tar")
            .arg("-C")
            .arg(fixture("hosts/healthy"))
            .arg("-cf")
            .arg(&archive)
            .arg(".")
            .status()
            .expect("tar")
            .success()
    );
    let tmpdir = t.0.join("tmp");
    std::fs::create_dir(&tmpdir).expect("mkdir");
    let mut c = Command::new(nvprobe());
    c.args(["doctor", "--root"])
        .arg(&archive)
        .env("TMPDIR", &tmpdir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    plant_at_child_pid(&mut c, &tmpdir, "nvprobe-root-");
    let child = c.spawn().expect("run");
    let pid = child.id();
    let o = child.wait_with_output().expect("wait");
    assert!(o.status.code().is_some_and(|c| c == 0 || c == 5));
    let planted = tmpdir.join(format!("nvprobe-root-{pid}"));
    assert!(
        planted.join("keep.txt").exists(),
        "the folder at the old name was removed"
    );
    let left: Vec<_> = std::fs::read_dir(&tmpdir)
        .expect("tmp")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 1, "left behind: {left:?}");
}

/// Issue 23, item 8: `--root fifo.tar` said "no such folder". A path that
/// is neither a folder nor a regular file is named for what it is, with
/// what --root accepts, exit 2, at once (it is looked at, not opened: an
/// open of a FIFO without a writer would wait for one).
#[test]
fn a_root_that_is_neither_a_folder_nor_a_file_is_named_for_what_it_is() {
    let t = Tmp::new("rootkind");
    let fifo = t.0.join("fifo.tar");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).expect("mkfifo");
    let missing = t.0.join("missing.tar");
    let takes = "--root takes a host tree (a folder) or a snapshot archive (a .tar or .tar.gz file written by `nvprobe doctor --snapshot`)";
    for (root, what) in [
        (fifo.as_path(), "it is a FIFO (named pipe), not read"),
        (Path::new("/dev/null"), "it is a character device, not read"),
        (missing.as_path(), "no such folder or snapshot archive"),
    ] {
        let r = run_limited(
            &["doctor".as_ref(), "--root".as_ref(), root.as_os_str()],
            10,
            &t.0,
        )
        .unwrap_or_else(|| panic!("doctor --root {} blocked", root.display()));
        assert_eq!(r.code, Some(2), "{}", r.stderr);
        let want = format!("--root {}: {what}: {takes}", root.display());
        assert!(r.stderr.contains(&want), "{want:?} not in {}", r.stderr);
        assert!(r.stdout.is_empty(), "no checks run: {}", r.stdout);
    }
}
