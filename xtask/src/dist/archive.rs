//! Writing the distribution: the .deb through `dpkg-deb` from a staged
//! tree, the tarball directly. Both the same bytes from the same inputs:
//! every timestamp is SOURCE_DATE_EPOCH, entries are in name order, every
//! owner is root:root (the tree's own modes, 0755 and 0644, whatever the
//! umask).

use std::{
    fs,
    io::Write as _,
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, UNIX_EPOCH},
};

use anyhow::{Context as _, bail};

use super::layout::{CONFFILES, Entry, dirs_of};

/// Write `files` under `dir` (made anew), with their modes, folders 0755,
/// every timestamp `epoch`.
pub fn stage(files: &[Entry], dir: &Path, epoch: i64) -> anyhow::Result<()> {
    if dir.exists() {
        fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dirs = dirs_of(files);
    for d in &dirs {
        let p = dir.join(d);
        fs::create_dir_all(&p).with_context(|| p.display().to_string())?;
    }
    for f in files {
        let p = dir.join(&f.path);
        fs::write(&p, &f.data).with_context(|| format!("writing {}", p.display()))?;
        fs::set_permissions(&p, fs::Permissions::from_mode(f.mode))?;
    }
    // Folders last, deepest first: writing into a folder changes its time.
    let t = UNIX_EPOCH + Duration::from_secs(epoch.max(0) as u64);
    for f in files {
        fs::File::options()
            .write(true)
            .open(dir.join(&f.path))?
            .set_modified(t)?;
    }
    for d in dirs.iter().rev().map(String::as_str).chain([""]) {
        let p = dir.join(d);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755))?;
        fs::File::open(&p)?.set_modified(t)?;
    }
    Ok(())
}

/// The tool a step needs, or a message saying how to get it.
pub fn need_tool(tool: &str, what: &str, package: &str) -> anyhow::Result<()> {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join(tool).is_file());
    if !found {
        bail!(
            "{tool} is missing: it {what}. Install it (Debian, Ubuntu: apt-get install {package}) and run cargo xtask dist again"
        );
    }
    Ok(())
}

/// The .deb: `files` and the control part (`control`, conffiles,
/// md5sums) staged in `work`, built by dpkg-deb into `out`.
pub fn deb(
    files: &[Entry],
    control: &str,
    work: &Path,
    out: &Path,
    epoch: i64,
) -> anyhow::Result<()> {
    need_tool("dpkg-deb", "builds the .deb", "dpkg")?;
    need_tool("md5sum", "lists the package's checksums", "coreutils")?;
    let stage_dir = work.join("deb");
    stage(files, &stage_dir, epoch)?;
    // md5sums: the files' paths relative to the root, in name order.
    let mut cmd = Command::new("md5sum");
    cmd.current_dir(&stage_dir)
        .arg("--")
        .args(files.iter().map(|f| &f.path));
    let sums = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !sums.status.success() {
        bail!(
            "md5sum failed: {}",
            String::from_utf8_lossy(&sums.stderr).trim()
        );
    }
    let debian = stage_dir.join("DEBIAN");
    fs::create_dir(&debian)?;
    let conffiles: String = CONFFILES.iter().map(|c| format!("{c}\n")).collect();
    for (name, text) in [
        ("control", control.as_bytes()),
        ("conffiles", conffiles.as_bytes()),
        ("md5sums", &sums.stdout[..]),
    ] {
        let p = debian.join(name);
        fs::write(&p, text)?;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644))?;
    }
    fs::set_permissions(&debian, fs::Permissions::from_mode(0o755))?;
    let mut cmd = Command::new("dpkg-deb");
    cmd.args(["--root-owner-group", "-Zxz", "--build"])
        .arg(&stage_dir)
        .arg(out)
        .env("SOURCE_DATE_EPOCH", epoch.to_string())
        .stdout(Stdio::null());
    let o = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !o.status.success() {
        bail!(
            "dpkg-deb --build failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    fs::remove_dir_all(&stage_dir)?;
    Ok(())
}

/// The tarball (gzip -9n): the folders and `files`, in name order.
pub fn tarball(files: &[Entry], out: &Path, epoch: i64) -> anyhow::Result<()> {
    let f = fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(f, flate2::Compression::best());
    let mut b = tar::Builder::new(gz);
    let mut all: Vec<(String, Option<&Entry>)> = dirs_of(files)
        .into_iter()
        .map(|d| (format!("{d}/"), None))
        .chain(files.iter().map(|f| (f.path.clone(), Some(f))))
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, file) in all {
        let mut h = tar::Header::new_gnu();
        h.set_uid(0);
        h.set_gid(0);
        h.set_username("root")?;
        h.set_groupname("root")?;
        h.set_mtime(epoch.max(0) as u64);
        let data: &[u8] = match file {
            Some(f) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(f.mode);
                &f.data
            }
            None => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                &[]
            }
        };
        h.set_size(data.len() as u64);
        b.append_data(&mut h, &path, data)
            .with_context(|| format!("adding {path} to {}", out.display()))?;
    }
    let mut gz = b.into_inner()?;
    gz.flush()?;
    gz.finish()?;
    Ok(())
}
