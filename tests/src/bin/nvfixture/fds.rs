//! The descriptor scenarios: an NVIDIA fd forked, dup'ed, passed over a
//! socket or pidfd_getfd, reused after close, kept or closed across exec,
//! used from threads, opened before nvprobe and closed after.

#[allow(clippy::wildcard_imports)]
use super::*;

pub(super) fn fork_scenario(dir: &Path) -> anyhow::Result<Value> {
    let fd = open_rw(&ctl(dir), true)?;
    // SAFETY: single-threaded here; the child only does async-signal-safe
    // work (ioctl) and _exit.
    match unsafe { fork() }? {
        ForkResult::Child => {
            let (r, _) = control(fd.as_raw_fd(), 0xc1d0_0001, 0x101);
            // SAFETY: immediate exit in the child.
            unsafe { libc::_exit(if r == 0 { 0 } else { 1 }) }
        }
        ForkResult::Parent { child } => {
            wait_child(child)?;
            Ok(json!({ "fd": fd.as_raw_fd(), "child": child.as_raw() }))
        }
    }
}

pub(super) fn dup_scenario(dir: &Path) -> anyhow::Result<Value> {
    let fd = open_rw(&ctl(dir), true)?;
    let a = fd.as_raw_fd();
    let b = dup(&fd)?.into_raw_fd();
    let c = fcntl(&fd, FcntlArg::F_DUPFD_CLOEXEC(100))?;
    // dup3 onto a free fd from 200 up (the test runner may have handed
    // this process fds of its own: the fds used are printed, not assumed).
    let free = (200..1000)
        .find(|&n| fcntl_getfd_ebadf(n))
        .context("no free fd from 200 up")?;
    // SAFETY: `free` is not in use in this process (F_GETFD said EBADF).
    let mut target = unsafe { OwnedFd::from_raw_fd(free) };
    dup3(&fd, &mut target, OFlag::O_CLOEXEC)?;
    let d = target.into_raw_fd();
    let mut rets = Vec::new();
    for x in [b, c, d] {
        rets.push(control(x, 0xc1d0_0001, 0x101).0);
    }
    for x in [b, c, d] {
        close(x)?;
    }
    Ok(json!({ "fd": a, "dups": [b, c, d], "rets": rets }))
}

/// Whether `fd` is not open in this process.
fn fcntl_getfd_ebadf(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only reads the descriptor's flags.
    let r = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF)
}

pub(super) fn scm_scenario(dir: &Path) -> anyhow::Result<Value> {
    let (p, c) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    // SAFETY: see fork_scenario.
    match unsafe { fork() }? {
        ForkResult::Child => {
            drop(p);
            let mut buf = [0u8; 1];
            let mut iov = [IoSliceMut::new(&mut buf)];
            let mut space = nix::cmsg_space!([RawFd; 1]);
            let msg = recvmsg::<()>(c.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::empty());
            let mut code = 1;
            if let Ok(msg) = msg
                && let Ok(mut cmsgs) = msg.cmsgs()
                && let Some(ControlMessageOwned::ScmRights(fds)) = cmsgs.next()
                && let Some(&fd) = fds.first()
            {
                let (r, _) = control(fd, 0xc1d0_0001, 0x101);
                let _ = std::io::stdout().write_all(format!("{fd}\n").as_bytes());
                code = i32::from(r != 0);
            }
            // SAFETY: exit in the child.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            drop(c);
            let fd = open_rw(&ctl(dir), true)?;
            let fds = [fd.as_raw_fd()];
            let cmsg = [ControlMessage::ScmRights(&fds)];
            sendmsg::<()>(
                p.as_raw_fd(),
                &[IoSlice::new(b"x")],
                &cmsg,
                MsgFlags::empty(),
                None,
            )?;
            drop(fd);
            wait_child(child)?;
            Ok(json!({ "child": child.as_raw() }))
        }
    }
}

pub(super) fn pidfd_scenario(dir: &Path) -> anyhow::Result<Value> {
    let (r, w) = nix::unistd::pipe()?;
    // SAFETY: see fork_scenario.
    match unsafe { fork() }? {
        ForkResult::Child => {
            drop(r);
            let fd = open_rw(&ctl(dir), false)
                .map(IntoRawFd::into_raw_fd)
                .unwrap_or(-1);
            let _ = nix::unistd::write(&w, &fd.to_le_bytes());
            // Keep the fd open until the parent kills us.
            loop {
                // SAFETY: plain pause.
                unsafe { libc::pause() };
            }
        }
        ForkResult::Parent { child } => {
            drop(w);
            let mut b = [0u8; 4];
            nix::unistd::read(&r, &mut b)?;
            let target_fd = i32::from_le_bytes(b);
            // SAFETY: raw syscalls with valid arguments.
            let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.as_raw(), 0) } as i32;
            if pidfd < 0 {
                bail!("pidfd_open: {}", std::io::Error::last_os_error());
            }
            // SAFETY: as above.
            let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, target_fd, 0) } as i32;
            if got < 0 {
                bail!("pidfd_getfd: {}", std::io::Error::last_os_error());
            }
            let (ret, _) = control(got, 0xc1d0_0001, 0x101);
            nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL)?;
            wait_child(child)?;
            Ok(json!({ "child": child.as_raw(), "fd": got, "ret": ret }))
        }
    }
}

/// One fd number that refers to one file after another: an NVIDIA call
/// on it must be named after the file it refers to at that call, whatever
/// the kernel side remembered of the number (its per-thread cache). Each
/// step replaces the file behind `n` another way: dup2 of a file, dup2 of
/// another NVIDIA node, close(2) then F_DUPFD, close_range(2) then
/// F_DUPFD. Prints the steps' files in order.
pub(super) fn reuse_scenario(dir: &Path) -> anyhow::Result<Value> {
    let ctl = open_rw(&ctl(dir), true)?;
    let gpu = open_rw(&dir.join("nvidia0"), true)?;
    let null = open_rw(Path::new("/dev/null"), true)?;
    let n = (300..1000)
        .find(|&n| fcntl_getfd_ebadf(n))
        .context("no free fd from 300 up")?;
    let onto = |src: &OwnedFd| -> anyhow::Result<()> {
        // SAFETY: dup2 onto `n`, a number this scenario owns.
        if unsafe { libc::dup2(src.as_raw_fd(), n) } != n {
            bail!("dup2: {}", std::io::Error::last_os_error());
        }
        Ok(())
    };
    let dupfd_at = |src: &OwnedFd| -> anyhow::Result<()> {
        // F_DUPFD takes the lowest free number from `n`: `n` itself, free now.
        // SAFETY: plain fcntl on an fd this scenario holds.
        let got = unsafe { libc::fcntl(src.as_raw_fd(), libc::F_DUPFD, n) };
        if got != n {
            bail!("F_DUPFD gave {got}, not {n}");
        }
        Ok(())
    };
    let call = || control(n, 0xc1d0_0001, 0x101).0;
    let mut rets = Vec::new();
    onto(&ctl)?; // n: nvidiactl
    rets.push(call());
    rets.push(call());
    onto(&null)?; // n: /dev/null (dup2 over an NVIDIA fd)
    rets.push(call());
    onto(&gpu)?; // n: nvidia0
    rets.push(call());
    close(n)?;
    dupfd_at(&ctl)?; // n: nvidiactl again, after a close
    rets.push(call());
    // SAFETY: close_range of the one number this scenario owns.
    if unsafe { libc::syscall(libc::SYS_close_range, n as u32, n as u32, 0u32) } != 0 {
        bail!("close_range: {}", std::io::Error::last_os_error());
    }
    dupfd_at(&null)?; // n: /dev/null, after a close_range
    rets.push(call());
    close(n)?;
    dupfd_at(&gpu)?; // n: nvidia0, after a close
    rets.push(call());
    close(n)?;
    Ok(json!({
        "fd": n,
        "steps": ["ctl", "ctl", "null", "gpu", "ctl", "null", "gpu"],
        "rets": rets,
    }))
}

/// A driver client (no libcuda): `count` successful RM controls (the NULL
/// control, which nothing reads) with one failing control (an unknown one:
/// NV_ERR_INVALID_COMMAND) halfway.
pub(super) fn client_loop(dir: &Path, count: u64) -> anyhow::Result<Value> {
    let fd = open_rw(&ctl(dir), true)?;
    let f = fd.as_raw_fd();
    let mut ok = 0u64;
    let mut failed = 0u64;
    for i in 0..count {
        if i == count / 2 {
            let (r, st) = control(f, 0xc1d0_0001, 0x0bad_0001);
            failed += u64::from(r != 0 || st != 0);
        }
        let (r, st) = control(f, 0xc1d0_0001, 0x0);
        ok += u64::from(r == 0 && st == 0);
    }
    Ok(json!({ "ok_calls": ok, "failed_calls": failed }))
}

pub(super) fn closed_scenario(dir: &Path) -> anyhow::Result<Value> {
    let fd = open_rw(&ctl(dir), true)?.into_raw_fd();
    close(fd)?;
    let (r, _) = control(fd, 0xc1d0_0001, 0x101);
    Ok(json!({ "fd": fd, "ret": r }))
}

pub(super) fn exec_scenario(dir: &Path) -> anyhow::Result<Value> {
    let keep = open_rw(&ctl(dir), false)?.into_raw_fd();
    let cloexec = open_rw(&ctl(dir), true)?.into_raw_fd();
    let exe = std::env::current_exe()?;
    let err = exec_self(&exe, dir, keep, cloexec);
    bail!("exec failed: {err}")
}

pub(super) fn exec_self(exe: &Path, dir: &Path, keep: i32, cloexec: i32) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    std::process::Command::new(exe)
        .args(["run", "after-exec", "--dir"])
        .arg(dir)
        .arg("--fds")
        .arg(format!("{keep},{cloexec}"))
        .exec()
}

pub(super) fn after_exec(fds: &[i32]) -> Value {
    let rets: Vec<i64> = fds
        .iter()
        .map(|&fd| control(fd, 0xc1d0_0001, 0x101).0)
        .collect();
    json!({ "fds": fds, "rets": rets })
}

pub(super) fn threads_scenario(dir: &Path, n: u32) -> anyhow::Result<Value> {
    let fd = open_rw(&ctl(dir), true)?;
    let f = fd.as_raw_fd();
    let tids: Vec<i32> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|_| {
                s.spawn(move || {
                    for _ in 0..5 {
                        control(f, 0xc1d0_0001, 0x101);
                    }
                    nix::unistd::gettid().as_raw()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    Ok(json!({ "tids": tids }))
}

pub(super) fn preopen_scenario(dir: &Path) -> anyhow::Result<Value> {
    let fd = open_rw(&ctl(dir), true)?;
    println!("{}", json!({ "ready": true, "fd": fd.as_raw_fd() }));
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let (r, st) = control(fd.as_raw_fd(), 0xc1d0_0001, 0x215);
    Ok(json!({ "fd": fd.as_raw_fd(), "ret": r, "status": st }))
}

/// Open the ctl stand-in, say so, wait for a line on stdin (nvprobe
/// starts meanwhile), then make one RM control the stand-in answers after
/// `HANG_CONTROL_MS`: a call in flight of a process past a start-up
/// nvprobe never saw.
pub(super) fn preopen_hang_scenario(dir: &Path) -> anyhow::Result<Value> {
    let fd = open_rw(&ctl(dir), true)?;
    println!("{}", json!({ "ready": true, "fd": fd.as_raw_fd() }));
    super::go()?;
    // GPU_GET_SHORT_NAME_STRING: answered late.
    let (r, st) = control(fd.as_raw_fd(), 0xc1d0_0001, 0x2080_0111);
    Ok(json!({ "fd": fd.as_raw_fd(), "ret": r, "status": st }))
}

/// Open the ctl stand-in, say so, wait for a line on stdin (nvprobe
/// starts meanwhile), then make no NVIDIA call: dup the descriptor, fork a
/// child that closes its copies, close both here. Descriptor calls only, of
/// a process that had its descriptor before nvprobe started (and of its
/// child): what the descriptor programs' gate must let through.
pub(super) fn preclose_scenario(dir: &Path) -> anyhow::Result<Value> {
    let fd = open_rw(&ctl(dir), true)?;
    println!("{}", json!({ "ready": true, "fd": fd.as_raw_fd() }));
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let copy = nix::unistd::dup(&fd)?;
    // SAFETY: the child only closes descriptors and exits.
    let child = match unsafe { nix::unistd::fork() }? {
        nix::unistd::ForkResult::Child => {
            // SAFETY: raw descriptors of this process, closed once.
            unsafe {
                libc::close(copy.as_raw_fd());
                libc::close(fd.as_raw_fd());
                libc::_exit(0);
            }
        }
        nix::unistd::ForkResult::Parent { child } => child,
    };
    nix::sys::wait::waitpid(child, None)?;
    let (fd_n, copy_n) = (fd.as_raw_fd(), copy.as_raw_fd());
    drop(copy);
    drop(fd);
    Ok(json!({ "fd": fd_n, "copy": copy_n, "child": child.as_raw() }))
}

/// Open the ctl stand-in, say so, and wait for a line on stdin (nvprobe
/// starts meanwhile, and finds the descriptor in its scan); then `count`
/// successful RM controls, one that fails behind a return of 0, one more
/// that succeeds (the call after a failure), `count` more; then, with
/// `lib`, a CUDA start-up through the stand-in libcuda (cuInit and a first
/// context): a process past a start-up nvprobe never saw, that starts CUDA
/// while traced.
pub(super) fn held_scenario(dir: &Path, lib: Option<&Path>, count: u64) -> anyhow::Result<Value> {
    let start_up = lib.map(|l| super::load_stub(dir, Some(l))).transpose()?;
    let fd = open_rw(&ctl(dir), true)?;
    println!("{}", json!({ "ready": true, "fd": fd.as_raw_fd() }));
    super::go()?;
    let f = fd.as_raw_fd();
    let loop_ns = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)?;
    let mut ok = 0u64;
    for _ in 0..count {
        ok += u64::from(control(f, 0, 0x101) == (0, 0));
    }
    let failed = u64::from(control(f, 0, 0x0000_0dea) == (0, 0x24));
    for _ in 0..=count {
        ok += u64::from(control(f, 0, 0x101) == (0, 0));
    }
    let inited = start_up.map(|s| s());
    Ok(json!({
        "fd": f,
        "loop_ns": loop_ns.tv_sec() as u64 * 1_000_000_000 + loop_ns.tv_nsec() as u64,
        "ok_calls": ok,
        "failed_calls": failed,
        "inited": inited,
    }))
}

/// Open the ctl stand-in, say so, and make successful RM controls until a
/// line comes on stdin (nvprobe starts meanwhile: its first sight of the
/// process is one of these calls, on a descriptor it never saw opened);
/// then one that fails behind a return of 0.
pub(super) fn held_busy_scenario(dir: &Path) -> anyhow::Result<Value> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static GO: AtomicBool = AtomicBool::new(false);
    let fd = open_rw(&ctl(dir), true)?;
    println!("{}", json!({ "ready": true, "fd": fd.as_raw_fd() }));
    std::io::stdout().flush()?;
    std::thread::spawn(|| {
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        GO.store(true, Ordering::SeqCst);
    });
    let f = fd.as_raw_fd();
    let mut ok = 0u64;
    while !GO.load(Ordering::SeqCst) {
        for _ in 0..100 {
            ok += u64::from(control(f, 0, 0x101) == (0, 0));
        }
    }
    let failed = u64::from(control(f, 0, 0x0000_0dea) == (0, 0x24));
    Ok(json!({ "fd": f, "ok_calls": ok, "failed_calls": failed }))
}
