//! Unpacking `--root` archives: the private folder, entries that would
//! reach outside it, the caps, and a fuzz run of random archives through
//! unpack and the checks.

use std::{
    io::Write as _,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    time::Duration,
};

use proptest::prelude::*;

use super::{Limits, unpack, unpack_with};
use crate::safefs::{self, SafeReadError};

/// A folder of the test's own, removed at the end.
struct Sandbox(PathBuf);

impl Sandbox {
    fn new(tag: &str) -> Self {
        let (p, _) = safefs::private_temp_dir(&std::env::temp_dir(), &format!("nvprobe-{tag}-"))
            .expect("mkdtemp");
        Self(p)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One tar entry as written, name and link name as raw bytes.
#[derive(Clone, Debug)]
struct Ent {
    kind: u8,
    name: Vec<u8>,
    link: Vec<u8>,
    data: Vec<u8>,
    /// A size in the header other than the data's.
    declared: Option<u64>,
    /// 0: plain header; 1: a GNU long name first; 2: a pax header first.
    long: u8,
}

fn ent(kind: u8, name: &str, link: &str, data: &[u8]) -> Ent {
    Ent {
        kind,
        name: name.as_bytes().to_vec(),
        link: link.as_bytes().to_vec(),
        data: data.to_vec(),
        declared: None,
        long: 0,
    }
}

fn pad(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(512) {
        out.push(0);
    }
}

fn raw_header(kind: u8, name: &[u8], link: &[u8], size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    {
        let old = h.as_old_mut();
        let n = name.len().min(100);
        old.name[..n].copy_from_slice(&name[..n]);
        let l = link.len().min(100);
        old.linkname[..l].copy_from_slice(&link[..l]);
        old.linkflag = [kind];
    }
    h.set_size(size);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_cksum();
    h
}

/// The archive bytes of ENTS (GNU headers), with the two zero blocks.
fn tar_bytes(ents: &[Ent]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in ents {
        match e.long {
            1 => {
                let mut n = e.name.clone();
                n.push(0);
                out.extend_from_slice(
                    raw_header(b'L', b"././@LongLink", b"", n.len() as u64).as_bytes(),
                );
                out.extend_from_slice(&n);
                pad(&mut out);
            }
            2 => {
                let mut rec = Vec::new();
                for (k, v) in [("path", &e.name), ("linkpath", &e.link)] {
                    let body = [k.as_bytes(), b"=", v, b"\n"].concat();
                    // LEN counts itself: try the lengths until one fits.
                    let len = (1..8)
                        .map(|d| body.len() + 1 + d)
                        .find(|l| l.to_string().len() + 1 + body.len() == *l)
                        .unwrap_or(0);
                    rec.extend_from_slice(format!("{len} ").as_bytes());
                    rec.extend_from_slice(&body);
                }
                out.extend_from_slice(
                    raw_header(b'x', b"PaxHeader", b"", rec.len() as u64).as_bytes(),
                );
                out.extend_from_slice(&rec);
                pad(&mut out);
            }
            _ => {}
        }
        let size = e.declared.unwrap_or(e.data.len() as u64);
        out.extend_from_slice(raw_header(e.kind, &e.name, &e.link, size).as_bytes());
        out.extend_from_slice(&e.data);
        pad(&mut out);
    }
    out.extend_from_slice(&[0u8; 1024]);
    out
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    g.write_all(data).expect("gz");
    g.finish().expect("gz")
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .expect("stat")
        .permissions()
        .mode()
        & 0o7777
}

/// Item 1 of issue 11: the old code used temp_dir/nvprobe-root-PID,
/// removed whatever was there and recreated it (a local user could plant a
/// link or a folder of their own at that name). Now: a new private folder
/// (mkdtemp, 0700); what is at the old name is left alone.
#[test]
fn unpacks_into_a_new_private_folder() {
    let sb = Sandbox::new("unpack-private");
    let planted = std::env::temp_dir().join(format!("nvprobe-root-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&planted);
    std::fs::create_dir_all(&planted).expect("plant");
    std::fs::write(planted.join("keep.txt"), "someone else's").expect("plant");
    let archive = sb.0.join("t.tar");
    std::fs::write(
        &archive,
        tar_bytes(&[ent(b'0', "kmsg.txt", "", b"NVRM: hi\n")]),
    )
    .expect("write");
    let dir = unpack(&archive).expect("unpacks");
    let planted_kept = planted.join("keep.txt").exists();
    let (name, m) = (
        dir.file_name().map(|n| n.to_string_lossy().into_owned()),
        mode(&dir),
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&planted);
    assert!(planted_kept, "the folder at the old name was removed");
    assert_ne!(dir, planted);
    assert!(
        name.as_deref()
            .is_some_and(|n| n.starts_with("nvprobe-root-") && n.len() == 19),
        "{name:?}"
    );
    assert_eq!(m, 0o700);
}

/// Item 1/2/8: entries that would reach outside the folder or block a
/// reader are not unpacked, and are noted for the checks to report.
#[test]
fn entries_that_reach_outside_are_not_unpacked() {
    let sb = Sandbox::new("unpack-escape");
    let (work, canary) = (sb.0.join("work"), sb.0.join("canary"));
    std::fs::create_dir_all(&work).expect("mkdir");
    std::fs::create_dir_all(&canary).expect("mkdir");
    let c = canary.display().to_string();
    let ents = [
        ent(b'0', "../escape", "", b"x"),
        ent(b'0', "../../canary/rel", "", b"x"),
        ent(b'0', &format!("{c}/abs"), "", b"x"),
        ent(b'2', "l", &c, b""),
        ent(b'0', "l/through", "", b"x"),
        ent(b'2', "kmsg.txt", "/root/secret", b""),
        ent(b'2', "up", "../..", b""),
        ent(b'2', "proc/devices", "../kmsg2.txt", b""),
        ent(b'0', "kmsg2.txt", "", b"NVRM: ok\n"),
        ent(b'1', "hard", "/etc/passwd", b""),
        ent(b'1', "hard2", "kmsg2.txt", b""),
        ent(b'6', "fifo", "", b""),
        ent(b'3', "dev/nvidia0", "", b""),
        ent(b'4', "dev/sda", "", b""),
        ent(b'0', "kmsg2.txt", "", b"second copy"),
        ent(b'5', "d", "", b""),
        ent(b'2', "in", "d", b""),
        ent(b'0', "in/x", "", b"x"),
    ];
    let archive = sb.0.join("t.tar");
    std::fs::write(&archive, tar_bytes(&ents)).expect("write");
    let dir = unpack_with(&archive, &work, Limits::default()).expect("unpacks");
    let notes = safefs::take_notes(&dir);
    let read = |r: &str| std::fs::read_to_string(dir.join(r)).ok();
    assert_eq!(
        read("kmsg2.txt").as_deref(),
        Some("NVRM: ok\n"),
        "first copy kept"
    );
    assert_eq!(read("hard2").as_deref(), Some("NVRM: ok\n"), "a copy");
    assert_eq!(
        read("proc/devices").as_deref(),
        Some("NVRM: ok\n"),
        "a link inside"
    );
    assert!(
        !std::fs::symlink_metadata(dir.join("l"))
            .expect("l/through made a folder l")
            .is_symlink()
    );
    for gone in ["kmsg.txt", "up", "hard", "fifo", "dev/nvidia0", "dev/sda"] {
        assert!(
            std::fs::symlink_metadata(dir.join(gone)).is_err(),
            "{gone} was unpacked"
        );
    }
    assert_eq!(std::fs::read_dir(&canary).expect("canary").count(), 0);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(std::fs::read_dir(&work).expect("work").count(), 0);
    let say: Vec<String> = notes.iter().map(|(r, e)| e.describe(r)).collect();
    for want in [
        "../escape: an archive entry with `..` in its path: not read",
        "kmsg.txt is a link out of the tree (-> /root/secret): not read",
        &format!("l is a link out of the tree (-> {c}): not read"),
        "up is a link out of the tree (-> ../..): not read",
        "fifo is a FIFO, not a regular file: not read",
        "dev/nvidia0 is a character device, not a regular file: not read",
        "dev/sda is a block device, not a regular file: not read",
        "hard is a link out of the tree (-> /etc/passwd): not read",
    ] {
        assert!(say.iter().any(|s| s == want), "{want} not in {say:#?}");
    }
    assert!(
        notes
            .iter()
            .any(|(r, e)| r == "in/x" && matches!(e, SafeReadError::Io(_))),
        "a path through a link (even one inside) is not written: {say:#?}"
    );
}

/// Item 8: the caps. A header that declares more than is left fails before
/// its data is read; so do too many entries, and a stream longer than its
/// cap (a gzip bomb of skipped data); nothing is left behind.
#[test]
fn caps_stop_bombs() {
    let sb = Sandbox::new("unpack-caps");
    let work = sb.0.join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let small = Limits {
        total: 64 << 10,
        files: 8,
        stream: 256 << 10,
    };
    let try_ = |name: &str, bytes: Vec<u8>, limits: Limits| {
        let p = sb.0.join(name);
        std::fs::write(&p, bytes).expect("write");
        let r = unpack_with(&p, &work, limits).map_err(|e| format!("{e:#}"));
        if let Ok(d) = &r {
            let _ = std::fs::remove_dir_all(d);
            let _ = safefs::take_notes(d);
        }
        assert_eq!(
            std::fs::read_dir(&work).expect("work").count(),
            0,
            "left behind"
        );
        r
    };
    // 600 MiB declared, 4 KiB there: refused at the header, default caps.
    let mut big = ent(b'0', "big", "", &[0u8; 4096]);
    big.declared = Some(600 << 20);
    let e = try_("big.tar", tar_bytes(&[big]), Limits::default()).expect_err("refused");
    assert!(e.contains("unpacks to more than 512 MiB"), "{e}");
    // Many files of 20 KiB: the total stops it.
    let many: Vec<Ent> = (0..5)
        .map(|i| ent(b'0', &format!("f{i}"), "", &[7u8; 20 << 10]))
        .collect();
    let e = try_("many.tar.gz", gz(&tar_bytes(&many)), small).expect_err("refused");
    assert!(
        e.contains("unpacks to more than 64 KiB") || e.contains("more than 65536"),
        "{e}"
    );
    // Too many entries.
    let lots: Vec<Ent> = (0..9)
        .map(|i| ent(b'5', &format!("d{i}"), "", b""))
        .collect();
    let e = try_("lots.tar", tar_bytes(&lots), small).expect_err("refused");
    assert!(e.contains("more than 8 entries"), "{e}");
    // A FIFO entry that declares 1 MiB of data: skipped, but its data is
    // read through, and the stream cap stops it.
    let mut fifo = ent(b'6', "fifo", "", &vec![0u8; 1 << 20]);
    fifo.declared = Some(1 << 20);
    let e = try_("fifo.tar.gz", gz(&tar_bytes(&[fifo])), small).expect_err("refused");
    assert!(e.contains("tar stream is longer than 262144 bytes"), "{e}");
    // A long name longer than any path.
    let mut long = ent(b'0', &"a/".repeat(3000), "", b"x");
    long.long = 1;
    let e = try_("long.tar", tar_bytes(&[long]), small).expect_err("refused");
    assert!(e.contains("a long name: larger than 4096 bytes"), "{e}");
    // Data cut short.
    let mut cut = tar_bytes(&[ent(b'0', "kmsg.txt", "", &[b'x'; 3000])]);
    cut.truncate(1500);
    let e = try_("cut.tar", cut, small).expect_err("refused");
    assert!(e.contains("not a readable snapshot archive"), "{e}");
    // Pax and GNU long names of sane length work.
    let mut p = ent(b'0', &format!("{}/kmsg.txt", "d".repeat(150)), "", b"log");
    p.long = 2;
    let mut l = ent(b'0', &format!("{}/x", "e".repeat(150)), "", b"x");
    l.long = 1;
    let d = unpack_with(
        &{
            let a = sb.0.join("ok.tar");
            std::fs::write(&a, tar_bytes(&[p, l])).expect("write");
            a
        },
        &work,
        small,
    )
    .expect("unpacks");
    let got = std::fs::read_to_string(d.join(format!("{}/kmsg.txt", "d".repeat(150))));
    let _ = std::fs::remove_dir_all(&d);
    assert_eq!(got.ok().as_deref(), Some("log"));
}

// ---- fuzz: random archives through unpack and the checks ----

/// Entry names: the files doctor reads, paths through links, escapes
/// (`{C}` is the canary folder outside the unpack folder).
const NAMES: &[&str] = &[
    "kmsg.txt",
    "proc/devices",
    "dev.manifest",
    "proc/kallsyms",
    "proc/config.gz",
    "etc/passwd",
    "etc/ld.so.conf",
    "libs.manifest",
    "proc/driver/nvidia/version",
    "proc/driver/nvidia/params",
    "proc/driver/nvidia/gpus/0000:00:06.0/information",
    "proc/driver/nvidia/gpus/0000:00:06.0",
    "sys/module/nvidia/version",
    "sys/module/nvidia_uvm",
    "sys/bus/pci/devices/0000:00:06.0/vendor",
    "sys/bus/pci/devices/0000:00:06.0",
    "sys/kernel/btf.list",
    "usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "usr/lib/x86_64-linux-gnu",
    "dev/nvidiactl",
    "l",
    "l/x",
    "l/../x",
    "loop",
    "d/",
    "d/e/f",
    "./proc/./devices",
    "../escape",
    "../../canary/rel",
    "a/../../b",
    "{C}/abs",
    "/etc/nvprobe-fuzz",
    "",
    ".",
    "//",
];

const TARGETS: &[&str] = &[
    "{C}",
    "{C}/secret",
    "../../canary",
    "../../canary/secret",
    "..",
    "../..",
    "proc",
    "kmsg.txt",
    "l",
    "loop",
    "/etc/passwd",
    "/etc",
    "proc/devices",
    "",
    "d/../..",
    ".",
    "usr/lib/x86_64-linux-gnu",
];

/// Contents that mean something to the checks.
fn contents(i: u8, random: &[u8]) -> Vec<u8> {
    match i % 8 {
        0 => random.to_vec(),
        1 => b"Character devices:\n195 nvidia\n238 nvidia-uvm\n\nBlock devices:\n".to_vec(),
        2 => {
            b"/dev/nvidiactl c 195:255 0666 0 0\n/dev/nvidia0 c 195:0 0600 0 0\nbad line\n".to_vec()
        }
        3 => gz(b"CONFIG_HMM_MIRROR=y\nCONFIG_KPROBES=y\n"),
        4 => b"[1.0] NVRM: Xid (PCI:0000:00:06.0): 79, GPU has fallen off the bus.\n".to_vec(),
        5 => {
            b"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n"
                .to_vec()
        }
        6 => b"0 t uvm_ioctl\t[nvidia_uvm]\n0 t rm_ioctl\t[nvidia]\n".to_vec(),
        _ => b"Model: \t NVIDIA H200\nDevice Minor: \t 0\n".to_vec(),
    }
}

fn ent_strategy() -> impl Strategy<Value = Ent> {
    (
        prop_oneof![
            Just(b'0'),
            Just(b'0'),
            Just(b'\0'),
            Just(b'5'),
            Just(b'2'),
            Just(b'2'),
            Just(b'1'),
            Just(b'3'),
            Just(b'4'),
            Just(b'6'),
            Just(b'7'),
            Just(b'S'),
            Just(b'g'),
            Just(b'Z'),
        ],
        0..NAMES.len(),
        0..TARGETS.len(),
        proptest::collection::vec(any::<u8>(), 0..48),
        any::<u8>(),
        prop_oneof![
            60 => Just(None),
            1 => Just(Some(1u64 << 40)),
            1 => Just(Some(u64::from(u32::MAX))),
            1 => (0u64..300_000).prop_map(Some),
        ],
        prop_oneof![4 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
    )
        .prop_map(|(kind, n, t, random, c, declared, long)| Ent {
            kind,
            name: NAMES[n].as_bytes().to_vec(),
            link: TARGETS[t].as_bytes().to_vec(),
            data: contents(c, &random),
            declared,
            long,
        })
}

#[derive(Clone, Debug)]
struct Case {
    ents: Vec<Ent>,
    gzip: bool,
    /// Cut the archive at this many bytes.
    cut: Option<usize>,
    /// Set one byte.
    flip: Option<(usize, u8)>,
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(ent_strategy(), 0..12),
        any::<bool>(),
        prop_oneof![6 => Just(None), 1 => (0usize..8192).prop_map(Some)],
        prop_oneof![6 => Just(None), 1 => (0usize..8192, any::<u8>()).prop_map(Some)],
    )
        .prop_map(|(ents, gzip, cut, flip)| Case {
            ents,
            gzip,
            cut,
            flip,
        })
}

fn vm_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// Everything under DIR, as paths (for "nothing appeared").
fn tree_of(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                out.push(e.path());
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    todo.push(e.path());
                }
            }
        }
    }
    out.sort();
    out
}

/// How many fuzz cases (NVPROBE_FUZZ_CASES, default 500).
fn fuzz_cases() -> u32 {
    std::env::var("NVPROBE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

/// One fuzz case: build the archive, unpack it and run the checks on a
/// thread of its own. SB holds `work` (where the private folder is made),
/// `canary` (the rest of the host) and `archives`.
fn fuzz_case(case: &Case, sb: &Path) -> Result<(), TestCaseError> {
    let (work, canary, archives) = (&sb.join("work"), &sb.join("canary"), &sb.join("archives"));
    let c = canary.display().to_string();
    let ents: Vec<Ent> = case
        .ents
        .iter()
        .map(|e| {
            let sub = |b: &[u8]| String::from_utf8_lossy(b).replace("{C}", &c).into_bytes();
            Ent {
                name: sub(&e.name),
                link: sub(&e.link),
                ..e.clone()
            }
        })
        .collect();
    let mut bytes = tar_bytes(&ents);
    if let Some((i, b)) = case.flip
        && !bytes.is_empty()
    {
        let i = i % bytes.len();
        bytes[i] = b;
    }
    if let Some(n) = case.cut {
        bytes.truncate(n);
    }
    if case.gzip {
        bytes = gz(&bytes);
    }
    let archive = archives.join(if case.gzip { "case.tar.gz" } else { "case.tar" });
    std::fs::write(&archive, &bytes).expect("write");
    let before = tree_of(canary);
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let rss = vm_kib("VmRSS:");
    let (tx, rx) = std::sync::mpsc::channel();
    let (a, w) = (archive.clone(), work.clone());
    std::thread::spawn(move || {
        let limits = Limits {
            total: 256 << 10,
            files: 32,
            stream: 1 << 20,
        };
        let r = unpack_with(&a, &w, limits);
        let checks = r.as_ref().ok().map(|d| crate::doctor::run(d));
        if let Ok(d) = &r {
            let _ = std::fs::remove_dir_all(d);
            let _ = safefs::take_notes(d);
        }
        let _ = tx.send((r.map_err(|e| format!("{e:#}")), checks));
    });
    let (r, checks) = rx
        .recv_timeout(Duration::from_secs(20))
        .map_err(|_| TestCaseError::fail("unpack + checks took over 20 s"))?;
    let grew = vm_kib("VmHWM:").saturating_sub(rss);
    prop_assert!(grew < 256 << 10, "memory grew by {} KiB", grew);
    prop_assert_eq!(tree_of(canary), before, "written outside");
    prop_assert_eq!(tree_of(work), Vec::<PathBuf>::new(), "left behind");
    if let Err(e) = &r {
        prop_assert!(e.contains("--root"), "{}", e);
    }
    for ch in checks.unwrap_or_default() {
        prop_assert!(
            !ch.evidence.contains("SECRET-CANARY"),
            "read outside: {:?}",
            ch
        );
    }
    Ok(())
}

/// Random small tar / tar.gz archives (every entry type, links in and out,
/// absolute and `..` paths, long names and pax headers, sizes declared far
/// beyond the data, cut or damaged streams) through unpack and all the
/// checks: never a panic, a hang (20 s), more than 256 MiB of memory, or a
/// file written (or read) outside the private folder.
#[test]
fn random_archives_unpack_and_check_safely() {
    let sb = Sandbox::new("fuzz");
    for d in ["work", "canary", "archives"] {
        std::fs::create_dir_all(sb.0.join(d)).expect("mkdir");
    }
    std::fs::write(
        sb.0.join("canary/secret"),
        "[1.0] NVRM: Xid SECRET-CANARY\n",
    )
    .expect("write");
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: fuzz_cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let res = runner.run(&case_strategy(), |case| fuzz_case(&case, &sb.0));
    if let Err(e) = res {
        panic!("{e}");
    }
}
