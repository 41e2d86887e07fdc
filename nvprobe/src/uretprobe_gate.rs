//! Return probes and seccomp. From Linux 6.11 on x86_64, a return probe's
//! trampoline goes back to the caller through the `uretprobe` system call.
//! Until "seccomp: passthrough uretprobe systemcall without filtering"
//! (Linux 6.14; 6.12.14 and 6.13.3 in the stable series) that call went
//! through the process's seccomp filters. A filter that does not allow it
//! (Docker's default profile, a systemd unit's `SystemCallFilter=`) then
//! made every traced process crash at a hooked function's return.
//!
//! nvprobe asks the running kernel rather than trusting its version
//! (distributions backport): two short-lived children call `uretprobe`
//! directly, one bare and one under a filter that refuses it. Called from
//! anywhere but the trampoline, the kernel answers SIGILL (caught: no core
//! dump); a filter the kernel applies answers with the filter's errno.

/// What the kernel does with `uretprobe` under seccomp filters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// No `uretprobe` system call (before 6.11, or not x86_64): return
    /// probes trap into the kernel instead, and no filter sees them.
    NoSyscall,
    /// The kernel lets the call past every filter: return probes are safe.
    PassesFilters,
    /// The window: a filtered process would crash at a hooked return.
    Filtered,
}

/// How one child ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The kernel ran the call and refused the caller (not the trampoline).
    Sigill,
    /// The call failed with this errno (a filter's answer, or ENOSYS).
    Errno(i32),
    /// Killed by this signal (a filter's SECCOMP_RET_KILL: SIGSYS).
    Killed(i32),
    /// The child could not be made or set up.
    Unknown(String),
}

/// The errno the test filter answers with: one no kernel path returns
/// for `uretprobe`.
const MARK: i32 = libc::EHWPOISON;
/// The x86_64 system call number of `uretprobe`.
#[cfg(target_arch = "x86_64")]
const NR_URETPROBE: u32 = 335;
/// The children's exit codes besides an errno (below 200).
const EXIT_SIGILL: i32 = 200;
const EXIT_SETUP: i32 = 201;
const EXIT_RETURNED: i32 = 202;

/// Linux release as (major, minor, patch), from `uname -r`'s text.
pub fn parse_release(r: &str) -> Option<(u32, u32, u32)> {
    let mut it = r
        .split(|c: char| !c.is_ascii_digit())
        .take(3)
        .map(|p| p.parse::<u32>().ok());
    let major = it.next()??;
    let minor = it.next()??;
    let patch = it.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// The answer a release number gives, where the children cannot be run.
pub fn by_release(rel: (u32, u32, u32)) -> Gate {
    if !cfg!(target_arch = "x86_64") || rel < (6, 11, 0) {
        return Gate::NoSyscall;
    }
    let filtered = match (rel.0, rel.1) {
        (6, 11) => true,
        (6, 12) => rel.2 < 14,
        (6, 13) => rel.2 < 3,
        _ => false,
    };
    if filtered {
        Gate::Filtered
    } else {
        Gate::PassesFilters
    }
}

/// What the two children's ends say, with the release for what they
/// cannot tell apart.
pub fn judge(rel: Option<(u32, u32, u32)>, bare: &Outcome, filtered: &Outcome) -> Gate {
    let fallback = || rel.map_or(Gate::PassesFilters, by_release);
    match filtered {
        // Past the filter to the call itself: the kernel's passthrough.
        Outcome::Sigill => Gate::PassesFilters,
        Outcome::Errno(e) if *e == MARK => match bare {
            // The call exists, and the filter saw it.
            Outcome::Sigill => Gate::Filtered,
            // No such call (a filter runs before the table is looked at).
            Outcome::Errno(libc::ENOSYS) if rel.is_none_or(|r| r < (6, 11, 0)) => Gate::NoSyscall,
            // nvprobe itself is filtered (a container's profile), so the
            // bare child cannot tell: the release can.
            _ => fallback(),
        },
        // A filter of nvprobe's own killed the filtered child: filters
        // see the call, which a kernel with the passthrough never lets
        // them do.
        Outcome::Killed(libc::SIGSYS) if matches!(bare, Outcome::Sigill) => Gate::Filtered,
        _ => fallback(),
    }
}

/// The environment variable that closes the gate whatever the kernel
/// answers (`closed`): for a kernel whose vendor changed the call in a way
/// the two children cannot see, and for the tests of the window.
pub const FORCE_ENV: &str = "NVPROBE_URETPROBE_GATE";

/// The running kernel's release, as `uname -r` gives it.
pub fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|r| r.trim().to_owned())
        .unwrap_or_else(|_| {
            nix::sys::utsname::uname()
                .map(|u| u.release().to_string_lossy().into_owned())
                .unwrap_or_default()
        })
}

/// Ask the running kernel (two children of a few system calls each),
/// unless [`FORCE_ENV`] closes the gate.
pub fn probe() -> Gate {
    if forced() {
        return Gate::Filtered;
    }
    let rel = parse_release(&release());
    if !cfg!(target_arch = "x86_64") {
        return Gate::NoSyscall;
    }
    let bare = run_child(false);
    let filtered = run_child(true);
    let gate = judge(rel, &bare, &filtered);
    log::debug!("uretprobe gate: bare {bare:?}, filtered {filtered:?}, release {rel:?}: {gate:?}");
    gate
}

/// The text said once where the gate closes the libcuda layer.
pub fn closed_reason(release: &str) -> String {
    const WHAT: &str =
        "so libcuda is not hooked and NCCL only at its collectives' entries (no ncclCommInitRank)";
    if forced() {
        return format!(
            "{FORCE_ENV}=closed in nvprobe's environment: no return probe is attached, as on a kernel that sends a return probe's uretprobe system call through seccomp filters (Linux 6.11 to before 6.12.14, 6.13.3 and 6.14; this one is {release}), {WHAT}; unset it to have cuInit's own result"
        );
    }
    format!(
        "this kernel ({release}) sends the uretprobe system call of a return probe through the process's seccomp filters (fixed in Linux 6.14, 6.12.14 and 6.13.3): a traced process whose filter does not allow it (Docker's default profile, systemd's SystemCallFilter=) would crash at a hooked function's return, {WHAT}; update the kernel to have cuInit's own result"
    )
}

/// Whether [`FORCE_ENV`] closes the gate.
pub fn forced() -> bool {
    std::env::var_os(FORCE_ENV).is_some_and(|v| v == "closed")
}

#[cfg(target_arch = "x86_64")]
extern "C" fn on_sigill(_: libc::c_int) {
    // SAFETY: async-signal-safe exit of the child.
    unsafe { libc::_exit(EXIT_SIGILL) }
}

#[cfg(target_arch = "x86_64")]
fn run_child(filter: bool) -> Outcome {
    // Everything the child uses is made before fork: it only makes system
    // calls, as a child of a threaded process must.
    let mut insns = [
        // A = seccomp_data.arch; another ABI passes.
        sock(0x20, 0, 0, 4),
        sock(0x15, 0, 3, 0xC000_003E),
        // A = seccomp_data.nr
        sock(0x20, 0, 0, 0),
        sock(0x15, 0, 1, NR_URETPROBE),
        sock(0x06, 0, 0, libc::SECCOMP_RET_ERRNO | MARK as u32),
        sock(0x06, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: insns.len() as u16,
        filter: insns.as_mut_ptr(),
    };
    // SAFETY: an empty sigaction filled field by field.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = on_sigill as *const () as usize;
    // SAFETY: fork; the child below makes system calls and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Outcome::Unknown(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: the child: system calls on memory made before the fork.
        unsafe {
            if libc::sigaction(libc::SIGILL, &act, std::ptr::null_mut()) != 0 {
                libc::_exit(EXIT_SETUP);
            }
            if filter
                && (libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::prctl(
                        libc::PR_SET_SECCOMP,
                        libc::SECCOMP_MODE_FILTER,
                        &prog as *const libc::sock_fprog,
                    ) != 0)
            {
                libc::_exit(EXIT_SETUP);
            }
            let r = libc::syscall(libc::c_long::from(NR_URETPROBE));
            if r >= 0 {
                libc::_exit(EXIT_RETURNED);
            }
            let e = *libc::__errno_location();
            libc::_exit(if (1..EXIT_SIGILL).contains(&e) {
                e
            } else {
                EXIT_RETURNED
            });
        }
    }
    let mut status = 0;
    loop {
        // SAFETY: waits for the child just made.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Outcome::Unknown(format!("waitpid: {err}"));
        }
    }
    if libc::WIFSIGNALED(status) {
        return Outcome::Killed(libc::WTERMSIG(status));
    }
    match libc::WEXITSTATUS(status) {
        EXIT_SIGILL => Outcome::Sigill,
        EXIT_SETUP => Outcome::Unknown("the child's signal handler or filter was refused".into()),
        EXIT_RETURNED => Outcome::Unknown("the call returned".into()),
        e => Outcome::Errno(e),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn run_child(_filter: bool) -> Outcome {
    Outcome::Unknown("not x86_64".into())
}

#[cfg(target_arch = "x86_64")]
fn sock(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_as_uname_writes_them() {
        assert_eq!(parse_release("6.12.13-amd64"), Some((6, 12, 13)));
        assert_eq!(parse_release("6.18.44-fc-v1272"), Some((6, 18, 44)));
        assert_eq!(parse_release("6.11.0-19-generic"), Some((6, 11, 0)));
        assert_eq!(parse_release("6.14-rc3"), Some((6, 14, 0)));
        assert_eq!(parse_release("5.14.0-503.el9.x86_64"), Some((5, 14, 0)));
        assert_eq!(parse_release("linux"), None);
        assert_eq!(parse_release(""), None);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_window_by_release() {
        for (rel, want) in [
            ((6, 10, 14), Gate::NoSyscall),
            ((6, 1, 158), Gate::NoSyscall),
            ((6, 11, 0), Gate::Filtered),
            ((6, 11, 11), Gate::Filtered),
            ((6, 12, 0), Gate::Filtered),
            ((6, 12, 13), Gate::Filtered),
            ((6, 12, 14), Gate::PassesFilters),
            ((6, 12, 58), Gate::PassesFilters),
            ((6, 13, 2), Gate::Filtered),
            ((6, 13, 3), Gate::PassesFilters),
            ((6, 14, 0), Gate::PassesFilters),
            ((6, 18, 44), Gate::PassesFilters),
            ((7, 0, 0), Gate::PassesFilters),
        ] {
            assert_eq!(by_release(rel), want, "{rel:?}");
        }
    }

    #[test]
    fn the_children_decide_where_they_can() {
        let old = Some((6, 1, 0));
        let new = Some((6, 18, 0));
        let window = Some((6, 12, 5));
        let mark = Outcome::Errno(MARK);
        // The passthrough: whatever the release says.
        assert_eq!(
            judge(window, &Outcome::Sigill, &Outcome::Sigill),
            Gate::PassesFilters
        );
        // A backported passthrough on a release in the window.
        assert_eq!(
            judge(Some((6, 11, 0)), &Outcome::Sigill, &Outcome::Sigill),
            Gate::PassesFilters
        );
        // The filter saw a call that exists: the window, even on a release
        // that should have the fix (a distribution that lacks it).
        assert_eq!(judge(new, &Outcome::Sigill, &mark), Gate::Filtered);
        assert_eq!(
            judge(new, &Outcome::Sigill, &Outcome::Killed(libc::SIGSYS)),
            Gate::Filtered
        );
        // No such call.
        assert_eq!(
            judge(old, &Outcome::Errno(libc::ENOSYS), &mark),
            Gate::NoSyscall
        );
        // nvprobe under a filter of its own: the release decides.
        assert_eq!(
            judge(window, &Outcome::Errno(libc::EPERM), &mark),
            Gate::Filtered
        );
        assert_eq!(
            judge(window, &Outcome::Errno(libc::ENOSYS), &mark),
            Gate::Filtered
        );
        assert_eq!(
            judge(old, &Outcome::Errno(libc::EPERM), &mark),
            Gate::NoSyscall
        );
        // Children that could not be run.
        let unk = Outcome::Unknown("fork: EAGAIN".into());
        assert_eq!(judge(window, &unk, &unk), Gate::Filtered);
        assert_eq!(judge(new, &unk, &unk), Gate::PassesFilters);
        assert_eq!(judge(None, &unk, &unk), Gate::PassesFilters);
    }

    /// The children on this machine's kernel agree with what its release
    /// says (the kernels tests run on are mainline or Debian's).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_running_kernel_answers_as_its_release_says() {
        let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .and_then(|r| parse_release(r.trim()))
            .expect("the release");
        let bare = run_child(false);
        let filtered = run_child(true);
        if rel >= (6, 11, 0) {
            assert_eq!(bare, Outcome::Sigill, "the uretprobe call exists from 6.11");
        }
        let gate = judge(Some(rel), &bare, &filtered);
        assert_eq!(
            gate,
            by_release(rel),
            "bare {bare:?}, filtered {filtered:?}"
        );
        assert_eq!(probe(), gate);
    }
}
