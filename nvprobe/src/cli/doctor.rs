//! `nvprobe doctor`: check this host (or a host tree or snapshot) for what
//! breaks CUDA start-up and tracing.

use std::{io::Write as _, path::PathBuf};

use clap::Args;
use nvprobe::render;

use super::common::{Fail, exit};

#[derive(Args)]
pub struct DoctorArgs {
    /// Read /proc, /sys, /dev and the library paths under DIR instead of /
    /// (a host tree or a snapshot folder, or a snapshot's .tar/.tar.gz;
    /// nodes may be listed in DIR/dev.manifest). Only file evidence is
    /// available then.
    #[arg(long, value_name = "DIR|FILE.tar")]
    pub root: Option<PathBuf>,
    /// Check device access for this user (name or uid) instead of the
    /// invoking one (the user behind sudo).
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Also write the files doctor reads to OUT (a new folder, or a new
    /// .tar / .tar.gz file; never over an existing path) for someone else
    /// to check with --root.
    #[arg(long, value_name = "OUT")]
    pub snapshot: Option<PathBuf>,
    /// One JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What `--root` names: a host tree (a folder) or a snapshot archive (a
/// regular file, unpacked).
#[derive(Debug, PartialEq, Eq)]
enum RootKind {
    Tree,
    Archive,
}

/// What --root accepts, said with every refusal.
const ROOT_TAKES: &str = "--root takes a host tree (a folder) or a snapshot archive (a .tar or .tar.gz file written by `nvprobe doctor --snapshot`)";

/// Looked at, not opened (a FIFO would block an open, a device's open can
/// do things): a folder or a regular file, else a usage error that says
/// what the path is.
fn root_kind(p: &std::path::Path) -> Result<RootKind, Fail> {
    use std::os::unix::fs::FileTypeExt as _;
    let refuse = |why: String| {
        Fail(
            exit::USAGE,
            anyhow::anyhow!("--root {}: {why}: {ROOT_TAKES}", p.display()),
        )
    };
    let m = match std::fs::metadata(p) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refuse("no such folder or snapshot archive".into()));
        }
        Err(e) => return Err(refuse(format!("cannot look at it ({e})"))),
    };
    let ft = m.file_type();
    let what = if ft.is_dir() {
        return Ok(RootKind::Tree);
    } else if ft.is_file() {
        return Ok(RootKind::Archive);
    } else if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "neither a folder nor a regular file"
    };
    Err(refuse(format!("it is {what}, not read")))
}

pub fn run(a: DoctorArgs) -> Result<(), Fail> {
    use nvprobe::doctor;
    let given = a.root.clone();
    if a.snapshot.is_some() && given.is_some() {
        return Err(Fail(
            exit::USAGE,
            anyhow::anyhow!("--snapshot captures this host: it cannot be combined with --root"),
        ));
    }
    let mut unpacked = None;
    let root = match &given {
        None => PathBuf::from("/"),
        Some(p) => match root_kind(p)? {
            RootKind::Archive => {
                let d = doctor::snapshot::unpack(p).map_err(|e| Fail(exit::USAGE, e))?;
                unpacked = Some(d.clone());
                d
            }
            RootKind::Tree => p.clone(),
        },
    };
    // The snapshot's folder or archive is made first: a path that is taken
    // or cannot be written fails before the checks run.
    let target = match &a.snapshot {
        Some(out) => Some(doctor::snapshot::Target::create(out).map_err(|e| {
            Fail(
                exit::USAGE,
                e.context(format!(
                    "--snapshot {}: could not write the snapshot",
                    out.display()
                )),
            )
        })?),
        None => None,
    };
    let live = given.is_none();
    let opts = doctor::Options {
        root: root.clone(),
        live,
        user: a.user.clone(),
        watch_startup: false,
    };
    let res = doctor::run_with(&opts);
    if let Some(d) = &unpacked {
        let _ = std::fs::remove_dir_all(d);
    }
    let checks = match res {
        Ok(c) => c,
        Err(e) => {
            if let Some(t) = target {
                t.discard();
            }
            return Err(Fail(exit::USAGE, anyhow::anyhow!(e)));
        }
    };
    if let (Some(out), Some(target)) = (&a.snapshot, target) {
        let n = target.write(&checks, a.user.as_deref()).map_err(|e| {
            Fail(
                exit::USAGE,
                e.context(format!(
                    "--snapshot {}: could not write the snapshot",
                    out.display()
                )),
            )
        })?;
        let _ = writeln!(
            std::io::stderr(),
            "nvprobe: wrote a snapshot of this host to {} ({n} files); check it elsewhere with: nvprobe doctor --root {}",
            out.display(),
            out.display()
        );
    }
    report(&checks, live, given.as_deref().unwrap_or(&root), a.json)
}

/// The checks, as text or one JSON document; a FAIL is exit 5.
fn report(
    checks: &[nvprobe::doctor::Check],
    live: bool,
    root: &std::path::Path,
    json: bool,
) -> Result<(), Fail> {
    use nvprobe::doctor::{self, Verdict};
    let worst = checks
        .iter()
        .map(|c| c.verdict)
        .max()
        .unwrap_or(Verdict::Ok);
    let scope = if live {
        if nix::unistd::geteuid().is_root() {
            "this host: the kernel was asked (probes loaded), files read, opens tried".to_owned()
        } else {
            "this host, not as root: kernel tracing checks skipped; files read, opens tried"
                .to_owned()
        }
    } else {
        format!(
            "the tree {}: file evidence only (no probes loaded, no opens tried)",
            root.display()
        )
    };
    if json {
        let doc = doctor::Report {
            v: render::SCHEMA_VERSION,
            kind: "doctor",
            root: root.display().to_string(),
            scope,
            result: worst,
            checks,
        };
        let doc =
            anyhow::Context::context(serde_json::to_string(&doc), "writing the doctor document")?;
        super::common::print(&format!("{doc}\n"))?;
    } else {
        super::common::print(&format!("{}({scope})\n", doctor::text(checks)))?;
    }
    if worst == Verdict::Fail {
        return Err(Fail(
            exit::CHECK_FAILED,
            anyhow::anyhow!("a check failed: see FAIL above and its hint"),
        ));
    }
    Ok(())
}
