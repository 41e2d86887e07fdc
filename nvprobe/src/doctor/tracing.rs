//! The tracing area: what the kernel lets nvprobe attach (asked of the
//! kernel, or read from a tree's files, by `kernel`), the layers that
//! leaves, and the driver layer's hook symbols.

use std::path::Path;

use super::check::{Check, Options, Verdict, check};
use super::kernel;

/// The kernel's tracing ability and the layers it allows. `prep` is the
/// live host's preparation (root only); a tree is judged from its files.
pub(super) fn kernel_checks(o: &Options, prep: Option<&kernel::Prepared>, out: &mut Vec<Check>) {
    let root = o.root.as_path();
    let ability = if !o.live {
        kernel::from_files(root, out)
    } else if let Some(prep) = prep {
        kernel::live(prep, out)
    } else {
        out.push(check(
            "tracing",
            "root",
            Verdict::Warn,
            format!(
                "not root (euid {}): the kernel checks load BPF programs and were skipped",
                nix::unistd::geteuid()
            ),
            Some("run sudo nvprobe doctor to ask the kernel what it allows"),
        ));
        kernel::Ability::default()
    };
    if o.live && !nix::unistd::geteuid().is_root() {
        // Nothing was asked: no layer verdict.
    } else {
        kernel::layers(&ability, out);
    }
}

/// The driver layer's hook symbols for this driver version, and whether
/// they can be attached here.
pub(super) fn hook_check(
    root: &Path,
    v: &crate::decode::version::DriverVersion,
    out: &mut Vec<Check>,
) {
    let Some(s) = crate::hooks::survey(root, Some(v)) else {
        out.push(check(
            "tracing",
            "driver_hooks",
            Verdict::Warn,
            "/proc/kallsyms shows no nvidia module symbols (not root, or kptr_restrict)",
            Some("run as root to see which driver functions can be hooked"),
        ));
        return;
    };
    let have = crate::hooks::describe(&s);
    let required_missing = !crate::hooks::covers_ioctls(&s);
    out.push(match unavailable_reason(root) {
        Some(why) => check(
            "tracing",
            "driver_hooks",
            Verdict::Warn,
            format!("driver {v}: {have}; not attachable: {why}"),
            Some("watch traces at the syscalls instead: every call, its status and time, but not the time inside the driver or the function a stalled call is in. A kernel with CONFIG_KPROBES=y gives the driver layer"),
        ),
        None if required_missing => check(
            "tracing",
            "driver_hooks",
            Verdict::Warn,
            format!("driver {v}: {have}"),
            Some("the ioctl entry points are inlined or renamed in this build: watch stays at the syscalls"),
        ),
        None => check("tracing", "driver_hooks", Verdict::Ok, format!("driver {v}: {have}"), None),
    });
}

/// `hooks::unavailable_reason`, with a tree's files read through `safefs`
/// (its own reads follow links and wait on FIFOs).
fn unavailable_reason(root: &Path) -> Option<String> {
    if root == Path::new("/") {
        return crate::hooks::unavailable_reason(root);
    }
    if crate::safefs::exists(root, "sys/bus/event_source/devices/kprobe/type")
        || kernel::listed(root, "sys/bus/event_source/devices", "kprobe")
    {
        return None;
    }
    Some(NO_KPROBES.to_owned())
}

/// What `hooks::unavailable_reason` says of a kernel without kprobes.
use crate::hooks::NO_KPROBES;

#[cfg(test)]
mod tests {
    /// The text is the one `hooks` gives.
    #[test]
    fn no_kprobes_reads_as_in_hooks() {
        let (dir, _) = crate::safefs::private_temp_dir(&std::env::temp_dir(), "nvprobe-nokp-")
            .expect("mkdtemp");
        assert_eq!(
            crate::hooks::unavailable_reason(&dir).as_deref(),
            Some(super::NO_KPROBES)
        );
        assert_eq!(
            super::unavailable_reason(&dir).as_deref(),
            Some(super::NO_KPROBES)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
