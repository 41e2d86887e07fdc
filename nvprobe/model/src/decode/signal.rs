//! Signal names (SIGTERM, …), for decoded process records and verdicts.

/// "SIGTERM", or "signal N" for a number the platform does not name.
pub fn name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_owned())
}

/// A signal's si_code by its name (uapi asm-generic/siginfo.h): who made
/// it, as the kernel records it. The task named before "sends" is the one
/// in whose context the signal was made; with SI_KERNEL that is the
/// kernel's own work (a timer, a fault, a limit), not the task's kill.
pub fn si_code_text(sig: i32, code: i32) -> String {
    let name = match (sig, code) {
        (_, 0) => "SI_USER: kill(2)",
        (_, 0x80) => "SI_KERNEL: the kernel's own, not this task's kill",
        (_, -1) => "SI_QUEUE: sigqueue",
        (_, -2) => "SI_TIMER: a POSIX timer",
        (_, -6) => "SI_TKILL: tgkill",
        (libc::SIGCHLD, 1) => "CLD_EXITED",
        (libc::SIGCHLD, 2) => "CLD_KILLED",
        (libc::SIGCHLD, 3) => "CLD_DUMPED",
        (libc::SIGCHLD, 4) => "CLD_TRAPPED",
        (libc::SIGCHLD, 5) => "CLD_STOPPED",
        (libc::SIGCHLD, 6) => "CLD_CONTINUED",
        (libc::SIGSYS, 1) => "SYS_SECCOMP: a seccomp filter",
        _ => return format!("si_code {code}"),
    };
    format!("si_code {code}, {name}")
}
