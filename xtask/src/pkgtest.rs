//! The package tier of `cargo xtask test` (root): `cargo xtask dist`
//! builds the .deb and the tarball, lintian judges the package, its
//! Depends is compared with dpkg-shlibdeps's, and the package is installed
//! with dpkg into a clean Debian root (mmdebstrap's minbase with man-db,
//! bash-completion, systemd and procps; made once and cached, unpacked
//! anew for each run). There, from the root's PATH: `nvprobe --version`,
//! `nvprobe doctor`, `man nvprobe-watch` and the whatis entries, the bash
//! completion through bash-completion's own loader, `systemd-analyze
//! verify` of the installed unit (and that nothing enabled it), and a
//! short `watch` of the FUSE stand-in (tests/src/fakedrv.rs, served from
//! the host by the build tier's nvfixture); then a purge, and the tarball
//! unpacked into the root's /usr/local. Each command runs in a mount
//! namespace of its own (the root's /proc, /sys and /dev are bind mounts
//! there), so nothing stays mounted on the host; the root is removed.

use std::{
    fs,
    io::Read as _,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

mod inroot;

use inroot::{completion, doctor, install, man, purge, tarball, verify, version, watch};

use crate::{
    apt, dist, is_root, output,
    summary::{Row, Tier},
    target_dir,
};

/// The packages of the clean root beyond minbase: what the checks run
/// (man, bash's completion loader, systemd-analyze) and what the unit
/// runs besides nvprobe (/bin/kill, procps: a Suggests of the package).
const ROOT_PACKAGES: &str = "man-db,bash-completion,systemd,procps";

/// The root's PATH and locale for every command run in it.
const ROOT_ENV: &[(&str, &str)] = &[
    (
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    ),
    ("HOME", "/root"),
    ("LANG", "C.UTF-8"),
    ("TERM", "dumb"),
    ("MANPAGER", "cat"),
    ("MANWIDTH", "100"),
];

/// The longest any one step may take before it counts as hung (the build
/// has its own: cargo's).
const PATIENCE: Duration = Duration::from_secs(120);

pub fn tier() -> Tier {
    let t0 = Instant::now();
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    if !is_root() {
        rows.push(Row::skipped(
            "package",
            "not root: it installs lintian and mmdebstrap with apt and installs the package into a root it makes",
        ));
    } else {
        run_all(&mut rows, &mut notes);
    }
    Tier {
        name: "package".into(),
        rows,
        took: Some(t0.elapsed()),
        notes,
    }
}

/// `cargo xtask package-test`: the tier alone, with the stand-in's
/// server (nvfixture, a debug build as the build tier makes it), ending in
/// its summary; exit 1 when a step failed.
pub fn alone() -> anyhow::Result<()> {
    let t0 = Instant::now();
    crate::sh(crate::cargo().args(["build", "-p", "nvprobe-tests", "--bin", "nvfixture"]))?;
    let mut s = crate::summary::Summary::default();
    s.tiers.push(tier());
    print!("\n{}", s.render("cargo xtask package-test", t0.elapsed()));
    if s.totals().1 > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// One step: its row, and whether the steps after it can go on.
fn step(rows: &mut Vec<Row>, name: &str, f: impl FnOnce() -> anyhow::Result<String>) -> bool {
    let t = Instant::now();
    eprintln!("xtask: package tier: {name}");
    match f() {
        Ok(note) => {
            rows.push(Row::passed(
                name,
                t.elapsed(),
                (!note.is_empty()).then_some(note),
            ));
            true
        }
        Err(e) => {
            eprintln!("xtask: package tier: {name} failed: {e:#}");
            rows.push(Row::failed(name, Some(t.elapsed()), format!("{e:#}")));
            false
        }
    }
}

fn skip_rest(rows: &mut Vec<Row>, names: &[&str], why: &str) {
    for n in names {
        rows.push(Row::skipped(n, why));
    }
}

fn run_all(rows: &mut Vec<Row>, notes: &mut Vec<String>) {
    const AFTER_DIST: &[&str] = &["lintian", "Depends against dpkg-shlibdeps", "clean root"];
    const IN_ROOT: &[&str] = &[
        "dpkg -i",
        "nvprobe --version",
        "nvprobe doctor",
        "man nvprobe-watch",
        "bash completion",
        "systemd-analyze verify",
        "watch on the stand-in",
        "dpkg --purge",
        "tarball in /usr/local",
    ];
    if !step(rows, "tools", tools) {
        skip_rest(rows, &["dist"], "the tools could not be installed");
        skip_rest(rows, AFTER_DIST, "the tools could not be installed");
        skip_rest(rows, IN_ROOT, "the tools could not be installed");
        return;
    }
    let mut built = None;
    let out = target_dir().join("xtask-test/dist");
    step(rows, "dist", || {
        let b = dist::run(Some(out.clone()), None)?;
        let size = |p: &Path| fs::metadata(p).map_or(0, |m| m.len()) as f64 / 1e6;
        let note = format!(
            "{} {:.1} MB, {} {:.1} MB; Depends: {}",
            file_name(&b.deb),
            size(&b.deb),
            file_name(&b.tarball),
            size(&b.tarball),
            b.depends
        );
        built = Some(b);
        Ok(note)
    });
    let Some(b) = built else {
        skip_rest(rows, AFTER_DIST, "dist failed");
        skip_rest(rows, IN_ROOT, "dist failed");
        return;
    };
    step(rows, "lintian", || lintian(&b.deb));
    step(rows, "Depends against dpkg-shlibdeps", || shlibdeps(&b));
    let mut root = None;
    step(rows, "clean root", || {
        let (r, note) = clean_root()?;
        root = Some(r);
        Ok(note)
    });
    let Some(root) = root else {
        skip_rest(rows, IN_ROOT, "no clean root");
        return;
    };
    if step(rows, "dpkg -i", || install(&root, &b)) {
        step(rows, "nvprobe --version", || version(&root, &b));
        step(rows, "nvprobe doctor", || doctor(&root));
        step(rows, "man nvprobe-watch", || {
            man(&root, &b, "/usr/share/man")
        });
        step(rows, "bash completion", || {
            completion(&root, "/usr/share/bash-completion/completions/nvprobe")
        });
        step(rows, "systemd-analyze verify", || {
            verify(&root, "/usr/lib/systemd/system/nvprobe.service")
        });
        step(rows, "watch on the stand-in", || watch(&root));
        step(rows, "dpkg --purge", || purge(&root));
    } else {
        skip_rest(rows, &IN_ROOT[1..IN_ROOT.len() - 1], "dpkg -i failed");
    }
    step(rows, "tarball in /usr/local", || tarball(&root, &b));
    match remove_root(&root) {
        Ok(()) => {}
        Err(e) => notes.push(format!("{e:#}")),
    }
    let _ = fs::remove_dir_all(&out);
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// lintian, mmdebstrap and dpkg-shlibdeps (dpkg-dev), from the machine's
/// apt when missing.
fn tools() -> anyhow::Result<String> {
    let mut missing = Vec::new();
    for (tool, arg, package) in [
        ("lintian", "--version", "lintian"),
        ("mmdebstrap", "--version", "mmdebstrap"),
        ("dpkg-shlibdeps", "--version", "dpkg-dev"),
    ] {
        if output(Command::new(tool).arg(arg)).is_none() {
            missing.push(package);
        }
    }
    if missing.is_empty() {
        return Ok(String::new());
    }
    apt::host_install(&missing)?;
    Ok(format!("installed {}", missing.join(", ")))
}

/// Run `cmd`, its output collected, killed when it runs past `limit`.
fn run_for(cmd: &mut Command, limit: Duration) -> anyhow::Result<Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().with_context(|| format!("running {cmd:?}"))?;
    let collect = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let out = collect(child.stdout.take().map(|s| Box::new(s) as _));
    let err = collect(child.stderr.take().map(|s| Box::new(s) as _));
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{cmd:?} was still running after {} s: killed",
                limit.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// lintian on the package: no error and no warning (info and pedantic
/// tags are listed in the note).
fn lintian(deb: &Path) -> anyhow::Result<String> {
    let o = run_for(
        Command::new("lintian")
            .args([
                "--fail-on",
                "error,warning",
                "--display-info",
                "--tag-display-limit",
                "0",
            ])
            .arg(deb),
        PATIENCE,
    )?;
    let t = text(&o);
    if !o.status.success() {
        bail!("lintian ({}):\n{}", o.status, t.trim());
    }
    // "I: nvprobe: TAG [where]": the tags left, by name.
    let mut tags: Vec<&str> = t
        .lines()
        .filter_map(|l| l.strip_prefix("I: nvprobe: "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    tags.dedup();
    if tags.is_empty() {
        Ok("no tags".into())
    } else {
        Ok(format!("no error or warning; info: {}", tags.join(", ")))
    }
}

/// The package's Depends is what dpkg-shlibdeps reads off the packaged
/// binary with this machine's symbols files.
fn shlibdeps(b: &dist::Built) -> anyhow::Result<String> {
    let tmp = nix::unistd::mkdtemp(&std::env::temp_dir().join("nvprobe-shlibdeps-XXXXXX"))?;
    let r = (|| {
        crate::sh(
            Command::new("dpkg-deb")
                .arg("-x")
                .arg(&b.deb)
                .arg(tmp.join("pkg")),
        )?;
        fs::create_dir_all(tmp.join("debian"))?;
        fs::write(
            tmp.join("debian/control"),
            "Source: nvprobe\n\nPackage: nvprobe\nArchitecture: any\n",
        )?;
        let o = run_for(
            Command::new("dpkg-shlibdeps")
                .current_dir(&tmp)
                .args(["-O", "pkg/usr/bin/nvprobe"]),
            PATIENCE,
        )?;
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        let theirs = t
            .lines()
            .find_map(|l| l.strip_prefix("shlibs:Depends="))
            .with_context(|| format!("dpkg-shlibdeps said no shlibs:Depends: {}", text(&o)))?;
        if theirs != b.depends {
            bail!(
                "the package says Depends: {}; dpkg-shlibdeps says {theirs}",
                b.depends
            );
        }
        Ok(format!("both: {theirs}"))
    })();
    let _ = fs::remove_dir_all(&tmp);
    r
}

/// The Debian suite of the clean root: this machine's (a package built
/// here needs this machine's glibc), bookworm when that cannot be told.
fn suite() -> String {
    fs::read_to_string("/etc/os-release")
        .ok()
        .filter(|t| t.lines().any(|l| l == "ID=debian"))
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
                .map(|s| s.trim_matches('"').to_owned())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "bookworm".into())
}

/// A fresh root: the cached minbase tree (made with mmdebstrap the first
/// time) unpacked into a new folder.
fn clean_root() -> anyhow::Result<(PathBuf, String)> {
    let suite = suite();
    let cache = Path::new(apt::CACHE).join("pkgtest");
    fs::create_dir_all(&cache)?;
    let tar = cache.join(format!("{suite}-minbase+{ROOT_PACKAGES}.tar"));
    let mut note = String::new();
    if !tar.exists() {
        let t = Instant::now();
        let partial = tar.with_extension("tar.partial");
        let _ = fs::remove_file(&partial);
        let o = run_for(
            Command::new("mmdebstrap")
                .args([
                    "--quiet",
                    "--variant=minbase",
                    &format!("--include={ROOT_PACKAGES}"),
                    "--format=tar",
                    &suite,
                ])
                .arg(&partial)
                .arg("http://deb.debian.org/debian"),
            Duration::from_secs(900),
        )?;
        if !o.status.success() {
            let _ = fs::remove_file(&partial);
            bail!("mmdebstrap ({}):\n{}", o.status, text(&o).trim());
        }
        fs::rename(&partial, &tar)?;
        note = format!(
            "made {} with mmdebstrap in {:.0} s, ",
            tar.display(),
            t.elapsed().as_secs_f64()
        );
    }
    let root = nix::unistd::mkdtemp(&std::env::temp_dir().join("nvprobe-pkgtest-root-XXXXXX"))?;
    crate::sh(
        Command::new("tar")
            .args([
                "--extract",
                "--same-owner",
                "--preserve-permissions",
                "--file",
            ])
            .arg(&tar)
            .arg("--directory")
            .arg(&root),
    )?;
    let size = fs::metadata(&tar).map_or(0, |m| m.len()) as f64 / 1e6;
    note.push_str(&format!(
        "{suite} minbase + {ROOT_PACKAGES} ({size:.0} MB) in {}",
        root.display()
    ));
    Ok((root, note))
}

/// Remove the root, unless something is still mounted under it (then
/// say so and keep it: removing would reach into the mount).
fn remove_root(root: &Path) -> anyhow::Result<()> {
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let prefix = root.display().to_string();
    if let Some(m) = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .find(|p| p.starts_with(&prefix))
    {
        bail!(
            "kept the package tier's root {prefix}: {m} is still mounted (umount it, then rm -rf it)"
        );
    }
    fs::remove_dir_all(root).with_context(|| format!("removing {prefix}"))
}
