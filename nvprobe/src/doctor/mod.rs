//! `nvprobe doctor`: what a host says about the things that break CUDA
//! start-up, as verdicts (ok, warn, fail) with evidence and a hint.
//!
//! Areas: the kernel's tracing ability (asked of the kernel by loading
//! probes, `kernel`), the driver, its parameters, GPUs and nvidia_uvm's HMM,
//! the device nodes and who may open them (`access`), the user-space
//! libraries (`libs`), the container context (`container`) and the kernel
//! log (`kmsg`).
//!
//! `--root DIR` reads a host tree instead of `/`. Git cannot hold device
//! nodes or owners, so a tree describes its nodes in `dev.manifest` (one
//! `PATH c MAJOR:MINOR MODE [UID GID]` line each); when it is present it
//! replaces `stat()` of `ROOT/dev`. `--snapshot` (`snapshot`) writes such a
//! tree.
//!
//! This module runs the areas in order; `check` holds the shared types,
//! `driver`, `nodes` and `tracing` their areas' checks, `render` the text
//! form. Every file of a tree is read through `crate::safefs` (inside the
//! tree, regular files only, capped); `unpack` unpacks a `--root` archive
//! into a private folder.

pub mod access;
mod check;
pub mod container;
mod driver;
pub mod kernel;
pub mod kmsg;
pub mod libs;
mod nodes;
mod render;
pub mod snapshot;
mod tracing;
pub mod unpack;

use std::path::Path;

use check::check;
pub use check::{Check, Options, Report, Verdict, report_schema, validate_report};
pub use render::text;

use crate::host::driver_info;

/// Every check, in order; Err for a user error (an unknown `--user`).
pub fn run_with(o: &Options) -> Result<Vec<Check>, String> {
    let root = o.root.as_path();
    let user = if o.watch_startup {
        None
    } else {
        access::resolve(root, o.live, o.user.as_deref())?
    };
    let mut out = Vec::new();
    let root_user = nix::unistd::geteuid().is_root();
    // Before any thread starts (it may unshare a mount namespace).
    let prep = (o.live && root_user && !o.watch_startup).then(kernel::prepare);
    driver::prefetch(root);
    let libs = {
        let (r, live) = (root.to_path_buf(), o.live);
        let expected = driver_info(root).map(|d| d.version.to_string());
        std::thread::spawn(move || libs::find_for(&r, live, expected.as_deref()))
    };
    if !o.watch_startup {
        tracing::kernel_checks(o, prep.as_ref(), &mut out);
    }
    let mut t = std::time::Instant::now();
    let mut lap = |what: &str| {
        log::debug!("doctor: {what} took {:?}", t.elapsed());
        t = std::time::Instant::now();
    };
    lap("tracing checks");
    let log = kmsg::nvidia_lines(root, o.live, 400);
    lap("kernel log");
    if !o.watch_startup
        && let Some(d) = driver_info(root)
    {
        tracing::hook_check(root, &d.version, &mut out);
    }
    lap("hook survey");
    out.extend(driver::proc_driver_check(root));
    let m = driver::driver_checks(root, &log, &mut out);
    driver::param_and_gpu_checks(root, &mut out);
    driver::pci_checks(root, &log, &mut out);
    driver::persistence_check(root, o.live, &log, &mut out);
    lap("driver checks");
    nodes::node_checks(o, user.as_ref(), &m, &mut out);
    lap("node checks");
    libs::checks_of(
        libs.join().unwrap_or_default(),
        driver_info(root).as_ref().map(|d| &d.version),
        &mut out,
    );
    lap("library checks");
    container::checks(root, &m, &mut out);
    kmsg::checks(&log, &mut out);
    lap("container checks");
    tree_checks(root, &mut out);
    Ok(out)
}

/// The files of a tree that were there but not read (`safefs` noted
/// them): a link out of the tree, not a regular file, too large,
/// permission denied. One warning each, so that a check that saw nothing
/// is not taken for a host that has nothing.
fn tree_checks(root: &Path, out: &mut Vec<Check>) {
    use crate::safefs::SafeReadError as E;
    for (rel, e) in crate::safefs::take_notes(root) {
        let hint = match e {
            E::LinkOutside { .. } => {
                "doctor reads a tree's files only inside the tree: copy the file itself into it (a snapshot holds no links); the checks that need it ran without it"
            }
            E::NotRegular(_) => {
                "doctor reads only regular files of a tree (a FIFO or a device could block it or never end); the checks that need it ran without it"
            }
            E::TooLarge(_) => {
                "far larger than this file is on a real host: doctor reads at most that much; the checks that need it ran without it"
            }
            E::PermissionDenied => {
                "run doctor as a user who may read the tree (sudo), or fix its permissions; the checks that need it ran without it"
            }
            E::NotFound | E::Io(_) => "the checks that need this file ran without it",
        };
        out.push(check(
            "tree",
            "file",
            Verdict::Warn,
            e.describe(&rel),
            Some(hint),
        ));
    }
}

/// The file checks of a host tree.
pub fn run(root: &Path) -> Vec<Check> {
    run_with(&Options::tree(root)).unwrap_or_default()
}

#[cfg(test)]
mod tests;
