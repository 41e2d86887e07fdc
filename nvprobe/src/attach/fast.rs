//! The kernel side's fast paths, as the attach phase sets them up
//! (`nvprobe_common::fastpath`): the per-thread fd cache is on only when
//! every probe that keeps it true is attached, and the ioctl exit that
//! decides per call at `--events failures|verdicts` is used only where the
//! kernel's verifier takes it.

use std::io;

use aya::Ebpf;
use nvprobe_common::maps;

use super::settings::ProbeState;

/// What the ioctl exit for older kernels does not do, for the warning.
pub(super) const COUNTING_EXIT: &str = "the ioctl exit program that decides in the kernel which successful calls --events failures|verdicts sends, and that takes the header's ids from each thread's cache, is not used: at those levels every call of a start-up before its first context is sent (a process that held its descriptor when nvprobe started is quiet as with the counting exit), and the ones left in the kernel are counted in `quieted` alone";

/// The first kernel release whose verifier was seen to take the counting
/// ioctl exit (the kernel tier: 6.12; 6.18 on the GPU machine). Linux 6.1's
/// runs its million-instruction budget out on it.
pub(super) const COUNTING_EXIT_SINCE: (u32, u32) = (6, 12);

/// The environment variable that picks the ioctl exit whatever the
/// kernel's release says: `simple` (the exit kept for older kernels) or
/// `counting` (tried first; a verifier that refuses it still gets the
/// simpler one). For a vendor kernel whose verifier is not its release's,
/// and for the tests of the simpler exit on a newer kernel.
pub const EXIT_ENV: &str = "NVPROBE_IOCTL_EXIT";

/// What [`EXIT_ENV`] asks for: `Ok(None)` when unset, `Err` with the
/// value when it is neither choice (then ignored, said once).
pub fn exit_forced() -> Result<Option<bool>, String> {
    match std::env::var_os(EXIT_ENV) {
        None => Ok(None),
        Some(v) => match v.to_str() {
            Some("counting") => Ok(Some(true)),
            Some("simple") => Ok(Some(false)),
            _ => Err(v.to_string_lossy().into_owned()),
        },
    }
}

/// Whether this kernel is one whose verifier takes the counting ioctl exit
/// (or [`EXIT_ENV`] says to try it).
pub(super) fn counting_exit_verifies() -> bool {
    if let Ok(Some(forced)) = exit_forced() {
        return forced;
    }
    nix::sys::utsname::uname().map_or(true, |u| {
        release_at_least(&u.release().to_string_lossy(), COUNTING_EXIT_SINCE)
    })
}

/// Whether a kernel release ("6.1.0-57-amd64", "6.18.44") is at least
/// `since` (major, minor).
fn release_at_least(release: &str, since: (u32, u32)) -> bool {
    let mut n = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    (n.next().unwrap_or(0), n.next().unwrap_or(0)) >= since
}

/// The first line of an error (a verifier's log follows it).
pub(super) fn first_line(e: &str) -> &str {
    let l = e.lines().next().unwrap_or(e);
    match l.find(" Verifier output:") {
        Some(i) => &l[..i],
        None => l,
    }
}

/// Whether probe `name` of `layer` is attached.
fn attached(probes: &[ProbeState], layer: &str, name: &str) -> bool {
    probes
        .iter()
        .any(|p| p.layer == layer && p.name == name && p.attached)
}

/// Whether probe `name` is missing because the kernel has no such call.
fn absent(probes: &[ProbeState], name: &str) -> bool {
    probes.iter().any(|p| {
        p.name == name
            && !p.attached
            && p.error
                .as_deref()
                .is_some_and(|e| e.contains("does not exist on this kernel"))
    })
}

/// Whether every probe that tells the kernel side a descriptor may now
/// refer to another file is attached (`nvprobe_common::fastpath`): then the
/// ioctl entry may answer from its cache. dup2 and close_range count as
/// attached where the kernel has no such call.
pub(super) fn fd_cache_on(probes: &[ProbeState]) -> bool {
    let ok = |layer: &str, name: &str| attached(probes, layer, name);
    // dup2 is absent from arm64's syscalls, close_range from kernels
    // before 5.9: a call the kernel does not have changes no descriptor.
    ["close", "dup3"].iter().all(|n| ok("syscall", n))
        && ["dup2", "close_range"]
            .iter()
            .all(|n| ok("syscall", n) || absent(probes, n))
        && ["nvprobe_proc_exit", "nvprobe_proc_exec"]
            .iter()
            .all(|n| ok("process", n))
}

/// Whether every way a process gets an NVIDIA descriptor after the start
/// is watched, so that the descriptor programs may stop at the top for a
/// process outside `NV_PROCS` (`attach::holders`): the opens (open and
/// openat2 where the kernel has them) and fork, with exit and exec, which
/// clear a thread's answer when its tid is given up.
pub(super) fn fd_gate_on(probes: &[ProbeState]) -> bool {
    let ok = |layer: &str, name: &str| attached(probes, layer, name);
    ok("syscall", "openat")
        && ["open", "openat2"]
            .iter()
            .all(|n| ok("syscall", n) || absent(probes, n))
        && [
            "nvprobe_proc_fork",
            "nvprobe_proc_exit",
            "nvprobe_proc_exec",
        ]
        .iter()
        .all(|n| ok("process", n))
}

pub(super) fn set_fd_gen(ebpf: &mut Ebpf, v: u64) -> anyhow::Result<()> {
    let mut g: aya::maps::Array<_, u64> = aya::maps::Array::try_from(
        ebpf.map_mut(maps::FD_GEN)
            .ok_or_else(|| io::Error::other("FD_GEN missing"))?,
    )?;
    g.set(0, v, 0)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(layer: &str, name: &str, attached: bool, error: Option<&str>) -> ProbeState {
        ProbeState {
            name: name.into(),
            target: String::new(),
            layer: layer.into(),
            attached,
            error: error.map(str::to_owned),
        }
    }

    fn all() -> Vec<ProbeState> {
        let mut v: Vec<ProbeState> = ["close", "dup2", "dup3", "close_range"]
            .iter()
            .map(|n| probe("syscall", n, true, None))
            .collect();
        v.push(probe("process", "nvprobe_proc_exit", true, None));
        v.push(probe("process", "nvprobe_proc_exec", true, None));
        v
    }

    /// `on` says yes for `all` and no with any one of them refused.
    fn on_only_with_each(all: &[ProbeState], on: fn(&[ProbeState]) -> bool) {
        assert!(on(all));
        for i in 0..all.len() {
            let mut v = all.to_vec();
            v[i].attached = false;
            v[i].error = Some("refused".into());
            assert!(!on(&v), "without {}", v[i].name);
        }
    }

    /// The fd cache is on only when every probe that tells the kernel a
    /// descriptor may mean another file is in; close_range may be absent
    /// from a kernel that has no such call, not refused.
    #[test]
    fn the_fd_cache_needs_every_probe_that_invalidates_it() {
        on_only_with_each(&all(), fd_cache_on);
        let mut v = all();
        v[3] = probe(
            "syscall",
            "close_range",
            false,
            Some("tracepoint syscalls/sys_enter_close_range does not exist on this kernel"),
        );
        assert!(fd_cache_on(&v));
        v[1] = probe(
            "syscall",
            "dup2",
            false,
            Some("tracepoint syscalls/sys_enter_dup2 does not exist on this kernel"),
        );
        assert!(fd_cache_on(&v), "arm64 has no dup2");
        assert!(!fd_cache_on(&all()[1..]), "no close probe at all");
    }

    /// The gate opens only when every way into `NV_PROCS` after the start
    /// is watched: the opens (open and openat2 may be absent from the
    /// kernel, not refused) and fork, exit and exec.
    #[test]
    fn the_descriptor_gate_needs_the_opens_and_the_process_layer() {
        let gate = || -> Vec<ProbeState> {
            let mut v: Vec<ProbeState> = ["openat", "open", "openat2"]
                .iter()
                .map(|n| probe("syscall", n, true, None))
                .collect();
            for n in [
                "nvprobe_proc_fork",
                "nvprobe_proc_exit",
                "nvprobe_proc_exec",
            ] {
                v.push(probe("process", n, true, None));
            }
            v
        };
        on_only_with_each(&gate(), fd_gate_on);
        let mut v = gate();
        for i in [1, 2] {
            let name = v[i].name.clone();
            v[i] = probe(
                "syscall",
                &name,
                false,
                Some(&format!(
                    "tracepoint syscalls/sys_enter_{name} does not exist on this kernel"
                )),
            );
        }
        assert!(
            fd_gate_on(&v),
            "arm64 has no open(2), older kernels no openat2"
        );
        v.remove(0);
        assert!(!fd_gate_on(&v), "openat is every libc's open");
    }

    #[test]
    fn kernel_releases_are_compared_by_major_and_minor() {
        assert!(!release_at_least("6.1.0-57-amd64", (6, 12)));
        assert!(release_at_least("6.12.117+deb12-amd64", (6, 12)));
        assert!(release_at_least("6.18.44", (6, 12)));
        assert!(!release_at_least("5.15.0", (6, 12)));
        assert!(release_at_least("7.0", (6, 12)));
        assert!(!release_at_least("", (6, 12)));
    }

    #[test]
    fn an_error_s_first_line_leaves_the_verifier_log_out() {
        assert_eq!(
            first_line(
                "loading x: the BPF_PROG_LOAD syscall returned EACCES. Verifier output: 0: R1=ctx\n1: ..."
            ),
            "loading x: the BPF_PROG_LOAD syscall returned EACCES."
        );
        assert_eq!(first_line("plain"), "plain");
    }
}
