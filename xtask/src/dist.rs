//! `cargo xtask dist [--out DIR]`: nvprobe as a node installs software. A
//! Debian package (`nvprobe_VERSION-1_ARCH.deb`) and a tarball of the same
//! files for other hosts (`nvprobe-VERSION-CPU-linux-gnu.tar.gz`), from a
//! release build of nvprobe alone: the stripped binary, the systemd unit
//! (installed, not enabled), the logrotate file, a manual page for nvprobe
//! and for each subcommand and the shell completions (both made by the
//! binary from its clap definitions), and the docs. The Depends field is
//! read off the binary (layout.rs, deps.rs); what was written is checked
//! (check.rs) before dist says it is done.
//!
//! Reproducible: every timestamp is SOURCE_DATE_EPOCH (when unset, the
//! commit's time, and the build is given it, so `--version`'s build date
//! is the commit's day), archive entries in name order, owners root:root.

pub mod archive;
pub mod check;
pub mod deps;
pub mod layout;
#[cfg(test)]
mod tests;

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::{output, root_dir, target_dir};

/// What dist wrote.
pub struct Built {
    pub deb: PathBuf,
    pub tarball: PathBuf,
    pub deb_version: String,
    pub depends: String,
    /// The subcommands `nvprobe --help` lists.
    pub subcommands: Vec<String>,
    pub version_line: String,
}

pub fn run(out: Option<PathBuf>, maintainer: Option<String>) -> anyhow::Result<Built> {
    let root = root_dir();
    let out = out.unwrap_or_else(|| target_dir().join("dist"));
    // What the user gave, checked before the build.
    if out.exists() && !out.is_dir() {
        bail!(
            "--out {}: exists and is not a folder; give a folder (it is created when missing)",
            out.display()
        );
    }
    fs::create_dir_all(&out)
        .with_context(|| format!("--out {}: cannot create this folder", out.display()))?;
    archive::need_tool("strip", "strips the binary", "binutils")?;
    archive::need_tool("dpkg-deb", "builds the .deb", "dpkg")?;
    archive::need_tool("md5sum", "lists the package's checksums", "coreutils")?;
    let epoch = source_date_epoch(&root)?;
    let maintainer = match maintainer {
        Some(m) => check_maintainer(&m, "--maintainer")?,
        None => default_maintainer(&root)?,
    };
    crate::setup(false)?;
    let release = crate::build_nvprobe(Some(epoch))?;
    let work = target_dir().join("dist-work");
    if work.exists() {
        fs::remove_dir_all(&work).with_context(|| work.display().to_string())?;
    }
    fs::create_dir_all(&work)?;
    let bin = work.join("nvprobe");
    // As dh_strip strips an executable.
    crate::sh(
        Command::new("strip")
            .args([
                "--remove-section=.comment",
                "--remove-section=.note",
                "--strip-unneeded",
                "-o",
            ])
            .arg(&bin)
            .arg(release.join("nvprobe")),
    )?;
    let nvprobe = |args: &[&str]| -> anyhow::Result<String> {
        let mut c = Command::new(&bin);
        c.args(args);
        output(&mut c).with_context(|| format!("running the built nvprobe {}", args.join(" ")))
    };
    let version = env!("CARGO_PKG_VERSION").to_owned();
    let version_line = nvprobe(&["--version"])?.trim().to_owned();
    if !version_line.starts_with(&format!("nvprobe {version} (commit ")) {
        bail!(
            "the built nvprobe says {version_line:?}: want nvprobe {version} (commit …, built …)"
        );
    }
    let subcommands = check::subcommands_in_help(&nvprobe(&["--help"])?)?;
    let mut pages = vec![("nvprobe".to_owned(), nvprobe(&["manpage"])?)];
    for s in &subcommands {
        pages.push((format!("nvprobe-{s}"), nvprobe(&["manpage", s])?));
    }
    let binary = fs::read(&bin)?;
    let needs = deps::needs(&binary).context("reading what the binary links")?;
    let read =
        |rel: &str| fs::read_to_string(root.join(rel)).with_context(|| format!("reading {rel}"));
    let inputs = layout::Inputs {
        version,
        version_line: version_line.clone(),
        epoch,
        maintainer,
        needs,
        binary,
        unit: read("deploy/systemd/nvprobe.service")?,
        logrotate: read("deploy/logrotate/nvprobe")?,
        pages,
        bash: nvprobe(&["completions", "bash"])?,
        zsh: nvprobe(&["completions", "zsh"])?,
        fish: nvprobe(&["completions", "fish"])?,
        docs: layout::docs(&root)?,
        third_party: third_party()?,
    };
    let files = layout::deb_files(&inputs)?;
    let control = layout::control(&inputs, &files);
    let deb = out.join(inputs.deb_name());
    archive::deb(&files, &control, &work, &deb, epoch)?;
    let tar_top = inputs.tar_stem();
    let tarball = out.join(format!("{tar_top}.tar.gz"));
    archive::tarball(&layout::tar_files(&inputs), &tarball, epoch)?;
    let deb_version = inputs.deb_version();
    check::deb(&deb, &subcommands, &deb_version, inputs.needs.deb_arch)
        .context("the package dist wrote is not what it should be")?;
    check::tarball(&tarball, &tar_top, &subcommands)
        .context("the tarball dist wrote is not what it should be")?;
    fs::remove_dir_all(&work)?;
    let size = |p: &Path| fs::metadata(p).map_or(0, |m| m.len());
    eprintln!(
        "xtask: dist: {} ({:.1} MB; Depends: {}) and {} ({:.1} MB), from {version_line}",
        deb.display(),
        size(&deb) as f64 / 1e6,
        inputs.needs.depends,
        tarball.display(),
        size(&tarball) as f64 / 1e6,
    );
    Ok(Built {
        deb,
        tarball,
        deb_version,
        depends: inputs.needs.depends,
        subcommands,
        version_line,
    })
}

/// SOURCE_DATE_EPOCH as given, else the time of the commit the tree is
/// at, else (no git, no checkout) now.
fn source_date_epoch(root: &Path) -> anyhow::Result<i64> {
    if let Some(v) = std::env::var_os("SOURCE_DATE_EPOCH") {
        let v = v.to_string_lossy();
        return v.trim().parse::<i64>().ok().filter(|s| *s >= 0).with_context(|| {
            format!("SOURCE_DATE_EPOCH={v:?} is not a number of seconds since 1970: set it to one (e.g. $(git log -1 --format=%ct)) or unset it")
        });
    }
    if let Some(t) =
        output(
            Command::new("git")
                .arg("-C")
                .arg(root)
                .args(["log", "-1", "--format=%ct"]),
        )
        .and_then(|t| t.trim().parse().ok())
    {
        return Ok(t);
    }
    eprintln!("xtask: dist: not a git checkout and no SOURCE_DATE_EPOCH: the package is dated now");
    Ok(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64))
}

/// "Name <email>", or a message saying what is wrong with it.
fn check_maintainer(m: &str, from: &str) -> anyhow::Result<String> {
    let m = m.trim();
    let ok = m.split_once(" <").is_some_and(|(name, rest)| {
        !name.trim().is_empty() && rest.ends_with('>') && rest.contains('@')
    }) && !m.contains('\n');
    if !ok {
        bail!("{from} {m:?} is not `Name <email>`, as the package's Maintainer field must be");
    }
    Ok(m.to_owned())
}

/// The package's Maintainer, as Debian's tools find it: DEBFULLNAME and
/// DEBEMAIL, else git's user.name and user.email, else the author of the
/// commit the tree is at.
fn default_maintainer(root: &Path) -> anyhow::Result<String> {
    if let Ok(email) = std::env::var("DEBEMAIL") {
        let name = std::env::var("DEBFULLNAME").unwrap_or_default();
        return check_maintainer(
            &format!("{name} <{email}>"),
            "DEBFULLNAME and DEBEMAIL give",
        );
    }
    let git = |args: &[&str]| {
        output(Command::new("git").arg("-C").arg(root).args(args))
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    if let (Some(n), Some(e)) = (
        git(&["config", "user.name"]),
        git(&["config", "user.email"]),
    ) {
        return check_maintainer(&format!("{n} <{e}>"), "git's user.name and user.email give");
    }
    if let Some(a) = git(&["log", "-1", "--format=%an <%ae>"]) {
        return check_maintainer(&a, "the commit's author is");
    }
    bail!(
        "no maintainer for the package: give --maintainer \"Name <email>\", or set DEBFULLNAME and DEBEMAIL"
    )
}

/// The Rust crates linked into the binary and its eBPF programs (normal
/// dependencies, as Cargo.lock resolves them for this host; build-time
/// crates and procedural macros are not in the binary), with their
/// licenses.
fn third_party() -> anyhow::Result<String> {
    let out = output(crate::cargo().args([
        "tree",
        "-p",
        "nvprobe",
        "-p",
        "nvprobe-ebpf",
        "-e",
        "normal",
        "--prefix",
        "none",
        "--no-dedupe",
        "-f",
        "{p}\t{l}",
    ]))
    .context("cargo tree (the crates linked into nvprobe) failed")?;
    let mut lines: Vec<String> = out
        .lines()
        .filter_map(|l| l.split_once('\t'))
        // Workspace members (a path) are nvprobe's own code.
        .filter(|(p, _)| !p.contains(" ("))
        .map(|(p, lic)| {
            let (name, ver) = p.split_once(' ').unwrap_or((p, ""));
            format!("{name} {} {lic}", ver.trim_start_matches('v'))
        })
        .collect();
    lines.sort();
    lines.dedup();
    if lines.len() < 20 {
        bail!(
            "cargo tree listed {} crates for nvprobe: expected its whole dependency tree",
            lines.len()
        );
    }
    Ok(format!(
        "The Rust crates statically linked into /usr/bin/nvprobe and its eBPF\n\
         programs (name, version, license as the crate declares it), as\n\
         Cargo.lock resolves them. Their licenses' texts are in each crate's\n\
         source, https://crates.io/crates/NAME/VERSION.\n\n{}\n",
        lines.join("\n")
    ))
}
