//! What could not be left to the kernel (no private bpffs, see
//! `attach::keep`): a child that outlives nvprobe holds the descriptors and
//! closes them after nvprobe's exit.

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};

/// Remove the uprobes of `links` without making nvprobe wait for it: a
/// child process takes over their descriptors and closes them once nvprobe
/// has exited, and nvprobe goes on to exit. Each uprobe's removal takes the
/// kernel's event_mutex and waits for an RCU Tasks Trace grace period, one
/// after the other (threads side by side do not help: seen on the 16-vCPU
/// H200 host, 90 detaching threads all in `perf_uprobe_destroy`); under a
/// flood of system calls that is a third of a second each, so the 354
/// uprobes of three libcuda copies kept a stopping nvprobe for over a
/// minute. Call it before the other probes are detached: the child inherits
/// every descriptor open at the fork, so the other probes' links too, and
/// closes them all after nvprobe's exit, lowest first: the tracepoints and
/// kprobes (attached first) within seconds, then the uprobes. nvprobe's own
/// detach then costs nothing; done here instead, it queued behind an
/// earlier nvprobe's removals (seen on the two-GPU H200 host: 4.6–6.6 s
/// under a flood, over 60 s behind three earlier runs' removals, against
/// 0.02–0.6 s this way). Used only for what could not be left to the
/// kernel (no private bpffs, see `attach::keep`). Returns the child's pid
/// and the number of descriptors in `links`; None when there were none, or
/// when no child could be made (they are then removed here, the slow way).
pub fn remove_in_background(links: Vec<OwnedFd>) -> Option<(u32, usize)> {
    if links.is_empty() {
        return None;
    }
    let n = links.len();
    let max_fd = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1 << 16, |(soft, _)| soft.min(1 << 20) as i32);
    // The child waits until this process has exited (the write end, kept
    // open until then, closes with it): whoever closes a link last pays for
    // its removal, and that must be the child.
    let Ok((rd, wr)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else {
        drop(links);
        return None;
    };
    let (rd_fd, wr_fd) = (rd.as_raw_fd(), wr.as_raw_fd());
    // SAFETY: the child runs only async-signal-safe calls (setsid,
    // sigaction, close_range or close, read, _exit) before it exits; no
    // destructor, no allocation, no lock.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => unsafe {
            // Out of the terminal's process group (a second Ctrl-C is not
            // for it); the default dispositions back (the handlers it
            // inherited write into nvprobe's self-pipe); stdout/stderr
            // closed first, so that a reader of nvprobe's output sees its
            // end now.
            libc::setsid();
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
                libc::signal(sig, libc::SIG_DFL);
            }
            libc::close(0);
            libc::close(1);
            libc::close(2);
            libc::close(wr_fd);
            let mut b = 0u8;
            // EOF (or an error other than EINTR) once the parent has exited.
            loop {
                let r = libc::read(rd_fd, (&raw mut b).cast(), 1);
                if r > 0 || (r < 0 && *libc::__errno_location() == libc::EINTR) {
                    continue;
                }
                break;
            }
            if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
                for fd in 0..max_fd {
                    libc::close(fd);
                }
            }
            libc::_exit(0);
        },
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            // Closing our copies costs nothing while the child holds the
            // uprobes. The write end stays open until this process exits:
            // then the child may go on.
            drop(links);
            drop(rd);
            let _ = wr.into_raw_fd();
            Some((child.as_raw() as u32, n))
        }
        Err(_) => {
            drop((rd, wr));
            drop(links);
            None
        }
    }
}
