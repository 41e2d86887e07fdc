//! What a built distribution must hold, checked on the artifacts
//! themselves (the .deb as `dpkg-deb` reads it, the tarball as tar reads
//! it): the files each install needs where they work, a manual page for
//! nvprobe and for every subcommand its `--help` lists (so a new
//! subcommand cannot be left without one), owners root:root, modes 0755 for
//! the binary and the folders and 0644 for the rest, the unit's ExecStart
//! pointing at the binary of that install, and the control fields. `cargo
//! xtask dist` runs these on what it wrote; the package tier of `cargo
//! xtask test` too.

use std::{
    collections::{BTreeMap, BTreeSet},
    io::Read as _,
    path::Path,
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};

use super::layout::{CONFFILES, UNIT_EXEC_COPIED, UNIT_EXEC_PACKAGED};

/// One entry of an archive's listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// Relative to the install's root (no `./`, no top folder, no
    /// trailing `/`).
    pub path: String,
    pub dir: bool,
    pub mode: u32,
    /// "root/root".
    pub owner: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// Paths of the installed system.
    Deb,
    /// Paths under a prefix (/usr/local).
    Tarball,
}

/// The files of an install of this kind, besides the manual pages and
/// the documentation.
fn required(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Deb => &[
            "usr/bin/nvprobe",
            "usr/lib/systemd/system/nvprobe.service",
            "etc/logrotate.d/nvprobe",
            "usr/share/bash-completion/completions/nvprobe",
            "usr/share/zsh/vendor-completions/_nvprobe",
            "usr/share/fish/vendor_completions.d/nvprobe.fish",
            "usr/share/doc/nvprobe/copyright",
            "usr/share/doc/nvprobe/changelog.Debian.gz",
            "usr/share/doc/nvprobe/THIRD-PARTY",
            "usr/share/doc/nvprobe/README.md.gz",
            "usr/share/lintian/overrides/nvprobe",
        ],
        Kind::Tarball => &[
            "bin/nvprobe",
            "lib/systemd/system/nvprobe.service",
            "etc/logrotate.d/nvprobe",
            "share/bash-completion/completions/nvprobe",
            "share/zsh/site-functions/_nvprobe",
            "share/fish/vendor_completions.d/nvprobe.fish",
            "share/doc/nvprobe/copyright",
            "share/doc/nvprobe/THIRD-PARTY",
            "share/doc/nvprobe/README.md",
        ],
    }
}

fn prefix(kind: Kind) -> &'static str {
    match kind {
        Kind::Deb => "usr/",
        Kind::Tarball => "",
    }
}

/// The subcommands `nvprobe --help` lists under "Commands:" (clap's
/// `help` aside): read from the help text, not from the code that writes
/// the pages.
pub fn subcommands_in_help(help: &str) -> anyhow::Result<Vec<String>> {
    let start = help
        .find("\nCommands:\n")
        .context("nvprobe --help has no Commands: block")?;
    let subs: Vec<String> = help[start + 1..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A name at the indent; a deeper line continues the one before.
        .filter(|l| !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_owned)
        .collect();
    if subs.is_empty() {
        bail!("nvprobe --help lists no subcommand");
    }
    Ok(subs)
}

/// Every problem with these files, as sentences (empty: none).
pub fn files(kind: Kind, listed: &[Listed], subcommands: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    let pre = prefix(kind);
    let files: BTreeMap<&str, &Listed> = listed
        .iter()
        .filter(|l| !l.dir)
        .map(|l| (l.path.as_str(), l))
        .collect();
    for r in required(kind) {
        if !files.contains_key(r) {
            problems.push(format!("{r} is missing"));
        }
    }
    let man = format!("{pre}share/man/man1/");
    let want: BTreeSet<String> = std::iter::once("nvprobe".to_owned())
        .chain(subcommands.iter().map(|s| format!("nvprobe-{s}")))
        .map(|p| format!("{man}{p}.1.gz"))
        .collect();
    let have: BTreeSet<String> = files
        .keys()
        .filter(|p| p.starts_with(&man))
        .map(|p| (*p).to_owned())
        .collect();
    for p in want.difference(&have) {
        problems.push(format!(
            "{p} is missing: every subcommand `nvprobe --help` lists has a page"
        ));
    }
    for p in have.difference(&want) {
        problems.push(format!(
            "{p}: a page for no subcommand that `nvprobe --help` lists"
        ));
    }
    let doc = format!("{pre}share/doc/nvprobe/");
    let binary = format!("{}bin/nvprobe", pre);
    for (p, l) in &files {
        let known = required(kind).contains(p) || have.contains(*p) || p.starts_with(&doc);
        if !known {
            problems.push(format!("{p}: a file no install of nvprobe has"));
        }
        let mode = if *p == binary { 0o755 } else { 0o644 };
        if l.mode != mode {
            problems.push(format!("{p} has mode {:04o}, not {mode:04o}", l.mode));
        }
    }
    for l in listed {
        if l.owner != "root/root" {
            problems.push(format!("{} is owned by {}, not root/root", l.path, l.owner));
        }
        if l.dir && l.mode != 0o755 {
            problems.push(format!(
                "folder {} has mode {:04o}, not 0755",
                l.path, l.mode
            ));
        }
    }
    problems
}

/// Every problem with the unit's text in an install of this kind.
pub fn unit(kind: Kind, text: &str) -> Vec<String> {
    let want = match kind {
        Kind::Deb => UNIT_EXEC_PACKAGED,
        Kind::Tarball => UNIT_EXEC_COPIED,
    };
    let execs: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("ExecStart="))
        .collect();
    if execs.len() == 1 && execs[0].starts_with(&format!("{want}watch ")) {
        Vec::new()
    } else {
        vec![format!(
            "the unit's ExecStart lines are {execs:?}: want one, `{want}watch …`"
        )]
    }
}

/// Every problem with the control part: its fields, its conffiles, and
/// its members (no maintainer script: nothing enables or starts the unit).
pub fn control(
    fields: &BTreeMap<String, String>,
    members: &[String],
    conffiles: &str,
    version: &str,
    deb_arch: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    let field = |k: &str| fields.get(k).map(String::as_str).unwrap_or("");
    let mut want = |k: &str, ok: bool, what: &str| {
        if !ok {
            problems.push(format!("control field {k}: {:?}, want {what}", field(k)));
        }
    };
    want("Package", field("Package") == "nvprobe", "nvprobe");
    want("Version", field("Version") == version, version);
    want("Architecture", field("Architecture") == deb_arch, deb_arch);
    let m = field("Maintainer");
    want(
        "Maintainer",
        m.contains(" <") && m.ends_with('>') && m.contains('@'),
        "Name <email>",
    );
    want(
        "Installed-Size",
        field("Installed-Size").parse::<u64>().is_ok_and(|k| k > 0),
        "a size in KiB",
    );
    let deps = field("Depends");
    want(
        "Depends",
        deps.starts_with("libc6 (>= 2.")
            && deps
                .split(", ")
                .all(|d| d.starts_with("libc6 (>= ") || d.starts_with("libgcc-s1")),
        "libc6 (>= 2.x) and at most libgcc-s1 besides",
    );
    want("Section", !field("Section").is_empty(), "a section");
    want("Priority", field("Priority") == "optional", "optional");
    let d = field("Description");
    want(
        "Description",
        !d.is_empty() && d.lines().next().is_some_and(|s| s.len() <= 80),
        "a synopsis of at most 80 characters and a long description",
    );
    for k in ["Pre-Depends", "Recommends"] {
        if fields.contains_key(k) {
            problems.push(format!(
                "control field {k}: nvprobe needs nothing at run time besides its Depends"
            ));
        }
    }
    let want_conf: String = CONFFILES.iter().map(|c| format!("{c}\n")).collect();
    if conffiles != want_conf {
        problems.push(format!("conffiles: {conffiles:?}, want {want_conf:?}"));
    }
    for m in members {
        if !["control", "conffiles", "md5sums"].contains(&m.as_str()) {
            problems.push(format!(
                "control member {m}: the package has no maintainer scripts (the unit is installed, not enabled or started)"
            ));
        }
    }
    problems
}

fn mode_of(perms: &str) -> Option<(bool, u32)> {
    let b = perms.as_bytes();
    if b.len() != 10 {
        return None;
    }
    let dir = match b[0] {
        b'd' => true,
        b'-' => false,
        _ => return None,
    };
    let mut mode = 0;
    for (i, c) in b[1..].iter().enumerate() {
        let bit = 1 << (8 - i);
        match c {
            b'-' => {}
            b'r' | b'w' | b'x' => mode |= bit,
            _ => return None,
        }
    }
    Some((dir, mode))
}

/// `dpkg-deb --contents`'s lines (`-rwxr-xr-x root/root 5731048
/// 2026-12-02 02:55 ./usr/bin/nvprobe`).
pub fn parse_dpkg_listing(text: &str) -> anyhow::Result<Vec<Listed>> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (Some(perms), Some(owner), Some(path)) = (cols.first(), cols.get(1), cols.get(5))
        else {
            bail!("dpkg-deb --contents: an unexpected line: {line:?}");
        };
        if cols.len() != 6 {
            bail!(
                "dpkg-deb --contents: an unexpected line (a link or a name with spaces?): {line:?}"
            );
        }
        let (dir, mode) = mode_of(perms)
            .with_context(|| format!("dpkg-deb --contents: not a file or folder: {line:?}"))?;
        let path = path.trim_start_matches("./").trim_end_matches('/');
        if path.is_empty() {
            continue;
        }
        out.push(Listed {
            path: path.to_owned(),
            dir,
            mode,
            owner: (*owner).to_owned(),
        });
    }
    Ok(out)
}

fn run(cmd: &mut Command) -> anyhow::Result<Vec<u8>> {
    let o = cmd
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running {cmd:?}"))?;
    if !o.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(o.stdout)
}

/// The control fields of a .deb (`dpkg-deb --field`), continuation lines
/// joined with newlines.
pub fn deb_fields(deb: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let text = String::from_utf8(run(Command::new("dpkg-deb").arg("--field").arg(deb))?)?;
    Ok(parse_fields(&text))
}

/// A control paragraph's fields.
pub fn parse_fields(text: &str) -> BTreeMap<String, String> {
    let mut fields: BTreeMap<String, String> = BTreeMap::new();
    let mut last: Option<String> = None;
    for l in text.lines() {
        if l.starts_with(' ') {
            if let Some(k) = &last
                && let Some(v) = fields.get_mut(k)
            {
                v.push('\n');
                v.push_str(l);
            }
        } else if let Some((k, v)) = l.split_once(": ") {
            fields.insert(k.to_owned(), v.to_owned());
            last = Some(k.to_owned());
        }
    }
    fields
}

/// One file's text out of a tar stream (`./path` or `top/path`).
fn file_in_tar(tar_bytes: &[u8], path: &str) -> anyhow::Result<String> {
    let mut a = tar::Archive::new(tar_bytes);
    for e in a.entries()? {
        let mut e = e?;
        let p = e.path()?.to_string_lossy().into_owned();
        if p.trim_start_matches("./") == path {
            let mut s = String::new();
            e.read_to_string(&mut s)?;
            return Ok(s);
        }
    }
    bail!("{path} is not in the archive")
}

/// Check a built .deb; Err with every problem.
pub fn deb(
    deb: &Path,
    subcommands: &[String],
    version: &str,
    deb_arch: &str,
) -> anyhow::Result<()> {
    let listing = String::from_utf8(run(Command::new("dpkg-deb").arg("--contents").arg(deb))?)?;
    let listed = parse_dpkg_listing(&listing)?;
    let mut problems = files(Kind::Deb, &listed, subcommands);
    let fsys = run(Command::new("dpkg-deb").arg("--fsys-tarfile").arg(deb))?;
    problems.extend(unit(
        Kind::Deb,
        &file_in_tar(&fsys, "usr/lib/systemd/system/nvprobe.service")?,
    ));
    let ctrl = run(Command::new("dpkg-deb").arg("--ctrl-tarfile").arg(deb))?;
    let mut members = Vec::new();
    let mut conffiles = String::new();
    for e in tar::Archive::new(&ctrl[..]).entries()? {
        let mut e = e?;
        let p = e
            .path()?
            .to_string_lossy()
            .trim_start_matches("./")
            .to_owned();
        if p == "conffiles" {
            e.read_to_string(&mut conffiles)?;
        }
        if !p.is_empty() && e.header().entry_type().is_file() {
            members.push(p);
        }
    }
    problems.extend(control(
        &deb_fields(deb)?,
        &members,
        &conffiles,
        version,
        deb_arch,
    ));
    if problems.is_empty() {
        Ok(())
    } else {
        bail!("{}: {}", deb.display(), problems.join("; "))
    }
}

/// The entries of a tarball, their top folder taken off (every entry must
/// be under the one top folder `top`).
pub fn tar_listing(bytes: &[u8], top: &str) -> anyhow::Result<Vec<Listed>> {
    let gz = flate2::read::GzDecoder::new(bytes);
    let mut out = Vec::new();
    for e in tar::Archive::new(gz).entries()? {
        let e = e?;
        let h = e.header();
        let p = e.path()?.to_string_lossy().into_owned();
        let rest = p
            .strip_prefix(top)
            .with_context(|| format!("{p}: not under the top folder {top}/"))?;
        let rest = rest.trim_start_matches('/').trim_end_matches('/');
        if rest.is_empty() {
            continue;
        }
        let dir = match h.entry_type() {
            tar::EntryType::Directory => true,
            tar::EntryType::Regular => false,
            t => bail!("{p}: a {t:?}, not a file or folder"),
        };
        out.push(Listed {
            path: rest.to_owned(),
            dir,
            mode: h.mode()? & 0o7777,
            owner: format!(
                "{}/{}",
                h.username().ok().flatten().unwrap_or("?"),
                h.groupname().ok().flatten().unwrap_or("?")
            ),
        });
        if h.uid()? != 0 || h.gid()? != 0 {
            bail!("{p}: uid/gid {}/{}, not 0/0", h.uid()?, h.gid()?);
        }
    }
    Ok(out)
}

/// Check a built tarball; Err with every problem.
pub fn tarball(path: &Path, top: &str, subcommands: &[String]) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
    let listed = tar_listing(&bytes, top)?;
    let mut problems = files(Kind::Tarball, &listed, subcommands);
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&bytes[..]).read_to_end(&mut raw)?;
    problems.extend(unit(
        Kind::Tarball,
        &file_in_tar(&raw, &format!("{top}/lib/systemd/system/nvprobe.service"))?,
    ));
    if problems.is_empty() {
        Ok(())
    } else {
        bail!("{}: {}", path.display(), problems.join("; "))
    }
}
