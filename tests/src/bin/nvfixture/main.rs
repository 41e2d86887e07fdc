//! A process that makes NVIDIA-style calls, for nvprobe's root tests.
//!
//! `nvfixture serve DIR` mounts the FUSE stand-in for the device files at
//! DIR. `nvfixture run SCENARIO --dir DIR` runs one scenario against it and
//! prints one JSON line saying what it did (pids, fds), for the test to
//! compare with what nvprobe saw.

use std::{
    io::{BufRead, IoSlice, IoSliceMut, Write},
    os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd},
    path::{Path, PathBuf},
};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use nix::{
    fcntl::{FcntlArg, OFlag, fcntl, open},
    sys::{
        socket::{
            AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType,
            recvmsg, sendmsg, socketpair,
        },
        stat::Mode,
        wait::waitpid,
    },
    unistd::{ForkResult, Pid, close, dup, dup3, fork},
};
use serde_json::{Value, json};

mod fds;
use fds::{
    after_exec, client_loop, closed_scenario, dup_scenario, exec_scenario, exec_self,
    fork_scenario, held_busy_scenario, held_scenario, pidfd_scenario, preclose_scenario,
    preopen_hang_scenario, preopen_scenario, reuse_scenario, scm_scenario, threads_scenario,
};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Mount the FUSE stand-in at DIR; print "ready"; serve until stdin closes
    /// or SIGTERM.
    Serve { dir: PathBuf },
    /// Run a scenario.
    Run {
        scenario: String,
        #[arg(long)]
        dir: PathBuf,
        /// For `after-exec`: fds inherited across exec.
        #[arg(long, value_delimiter = ',')]
        fds: Vec<i32>,
        /// For `threads`: how many threads.
        #[arg(long, default_value_t = 4)]
        threads: u32,
        /// For `flood`: ioctls to make per thread (0: until killed).
        #[arg(long, default_value_t = 10000)]
        count: u64,
        /// For `cuinit`: the libcuda to dlopen.
        #[arg(long)]
        lib: Option<PathBuf>,
    },
}

const RM_ALLOC21: u64 = 0xc020_462b;
const RM_CONTROL: u64 = 0xc020_462a;
const RM_FREE: u64 = 0xc010_4629;
const SYS_PARAMS: u64 = 0xc008_46d6;
const CARD_INFO: u64 = 0xc090_46c8; // 2 entries
const XFER: u64 = 0xc010_46d3;
const UNKNOWN_ESCAPE: u64 = 0xc008_46ee;

fn ioctl(fd: RawFd, cmd: u64, buf: &mut [u8]) -> i64 {
    // SAFETY: buf is at least _IOC_SIZE(cmd) bytes (checked by callers).
    let r = unsafe { libc::ioctl(fd, cmd as _, buf.as_mut_ptr()) };
    if r < 0 {
        -(std::io::Error::last_os_error().raw_os_error().unwrap_or(0) as i64)
    } else {
        r as i64
    }
}

fn control(fd: RawFd, h: u32, cmd: u32) -> (i64, u32) {
    let mut p = [0u8; 32];
    p[0..4].copy_from_slice(&h.to_le_bytes());
    p[4..8].copy_from_slice(&h.to_le_bytes());
    p[8..12].copy_from_slice(&cmd.to_le_bytes());
    let r = ioctl(fd, RM_CONTROL, &mut p);
    (r, u32::from_le_bytes(p[28..32].try_into().expect("4")))
}

fn open_rw(p: &Path, cloexec: bool) -> anyhow::Result<OwnedFd> {
    let mut f = OFlag::O_RDWR;
    if cloexec {
        f |= OFlag::O_CLOEXEC;
    }
    open(p, f, Mode::empty()).with_context(|| format!("open {}", p.display()))
}

fn ctl(dir: &Path) -> PathBuf {
    dir.join("nvidiactl")
}

/// An XFER wrapper that claims more than the driver's 16384-byte limit and
/// points at a buffer of 0xAB: the kernel side must copy none of it.
fn xfer_big(dir: &Path) -> anyhow::Result<Value> {
    let fd = open_rw(&ctl(dir), true)?;
    let secret = vec![0xABu8; 100_880];
    let mut xfer = [0u8; 16];
    xfer[0..4].copy_from_slice(&0x2au32.to_le_bytes());
    xfer[4..8].copy_from_slice(&100_880u32.to_le_bytes());
    xfer[8..16].copy_from_slice(&(secret.as_ptr() as u64).to_le_bytes());
    let ret = ioctl(fd.as_raw_fd(), XFER, &mut xfer);
    Ok(json!({ "xfer_ret": ret }))
}

fn basic(dir: &Path) -> anyhow::Result<Value> {
    let fd = open_rw(&ctl(dir), true)?;
    let f = fd.as_raw_fd();
    let mut sys = crate_sys_params();
    let sys_ret = ioctl(f, SYS_PARAMS, &mut sys);
    let mut card = vec![0u8; 144];
    let card_ret = ioctl(f, CARD_INFO, &mut card);
    let mut alloc = [0u8; 32];
    let alloc_ret = ioctl(f, RM_ALLOC21, &mut alloc);
    let h = u32::from_le_bytes(alloc[8..12].try_into()?);
    let ok = control(f, h, 0x101);
    let attach = control(f, h, 0x215);
    let gid = control(f, h, 0x2080_014A);
    let slow = control(f, h, 0x2080_0110);
    // XFER: the outer word is NV_ESC_IOCTL_XFER_CMD; the inner NVOS54 lives
    // at `ptr`. The stand-in cannot write through `ptr`, so the fixture puts
    // there what the driver would: a control that failed with
    // NV_ERR_INSUFFICIENT_PERMISSIONS.
    let mut inner = [0u8; 32];
    inner[0..4].copy_from_slice(&h.to_le_bytes());
    inner[4..8].copy_from_slice(&h.to_le_bytes());
    inner[8..12].copy_from_slice(&0x214u32.to_le_bytes());
    inner[28..32].copy_from_slice(&0x1bu32.to_le_bytes());
    let mut xfer = [0u8; 16];
    xfer[0..4].copy_from_slice(&0x2au32.to_le_bytes());
    xfer[4..8].copy_from_slice(&32u32.to_le_bytes());
    xfer[8..16].copy_from_slice(&(inner.as_ptr() as u64).to_le_bytes());
    let xfer_ret = ioctl(f, XFER, &mut xfer);
    let mut unk = [0u8; 8];
    let unk_ret = ioctl(f, UNKNOWN_ESCAPE, &mut unk);
    let mut free = [0u8; 16];
    free[0..4].copy_from_slice(&h.to_le_bytes());
    free[8..12].copy_from_slice(&h.to_le_bytes());
    let free_ret = ioctl(f, RM_FREE, &mut free);
    // The real nodes are absent on a machine without the driver: the open
    // and stat failures must show.
    let uvm = open(
        "/dev/nvidia-uvm",
        OFlag::O_RDWR | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .err()
    .map(|e| e as i32);
    let st = nix::sys::stat::stat("/dev/nvidia0").err().map(|e| e as i32);
    Ok(json!({
        "fd": f, "hClient": h, "sys_ret": sys_ret, "card_ret": card_ret, "alloc_ret": alloc_ret,
        "ok": ok, "attach": attach, "gid": gid, "slow": slow, "xfer_ret": xfer_ret, "unknown_ret": unk_ret,
        "free_ret": free_ret, "uvm_open_errno": uvm, "stat_errno": st,
    }))
}

fn crate_sys_params() -> [u8; 8] {
    // A memblock size the stand-in refuses (-EBUSY), as nv.c does when
    // another value was set system-wide.
    0x1000_0000u64.to_le_bytes()
}

fn wait_child(pid: Pid) -> anyhow::Result<()> {
    waitpid(pid, None).context("waitpid")?;
    Ok(())
}

/// Wait for a line on stdin, then make `count` RM_CONTROL calls per
/// thread as fast as possible on PATH (for the lost-event accounting
/// test); `count` 0 floods until the process is killed (for the tests of
/// nvprobe under a flood that does not end).
fn flood_scenario(dir: &Path, count: u64, threads: u32) -> anyhow::Result<Value> {
    let fd = open_rw(dir, true)?;
    println!("{}", json!({ "ready": true }));
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let f = fd.as_raw_fd();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(move || {
                let mut p = [0u8; 32];
                let mut n = 0u64;
                while count == 0 || n < count {
                    ioctl(f, RM_CONTROL, &mut p);
                    n += 1;
                }
            });
        }
    });
    Ok(json!({ "ioctls": count * u64::from(threads) }))
}

/// Arm alarm(1), then sit in the slow control until SIGALRM (default
/// action: terminate) ends the process, the way a SIGALRM-based test
/// harness kills a start-up it thinks is hung.
/// What libcuda does when a node is missing: stat() it, then run the
/// setuid helper nvidia-modprobe (here a copy of false(1) by that name, so
/// it exits 1).
fn modprobe_scenario() -> anyhow::Result<Value> {
    let missing = format!("/dev/nvidia-nvprobe-missing-{}", std::process::id());
    let err = std::fs::metadata(&missing).expect_err("the node must not exist");
    let dir = std::env::temp_dir().join(format!("nvprobe-modprobe-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let helper = dir.join("nvidia-modprobe");
    let falsebin = ["/bin/false", "/usr/bin/false"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .context("false(1) not found")?;
    std::fs::copy(falsebin, &helper)?;
    let st = std::process::Command::new(&helper)
        .args(["-u", "-c0"])
        .status()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(json!({
        "missing": missing,
        "stat_errno": err.raw_os_error(),
        "helper_status": st.code(),
    }))
}

extern "C" fn on_alarm(_: libc::c_int) {}

/// SIGALRM, caught by a handler installed with SA_RESTART, arrives during
/// the stand-in's 2.5 s control.
fn handled_scenario(dir: &Path) -> anyhow::Result<Value> {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let fd = open_rw(&ctl(dir), true)?;
    let act = SigAction::new(
        SigHandler::Handler(on_alarm),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler does nothing.
    unsafe { sigaction(Signal::SIGALRM, &act) }?;
    // SAFETY: plain alarm(2).
    unsafe { libc::alarm(1) };
    let (r, st) = control(fd.as_raw_fd(), 0xc1d0_0001, 0x2080_0111);
    Ok(json!({ "ret": r, "status": st }))
}

/// `handled`, then successful NULL controls every 5 ms for `secs` seconds
/// (past the 5 s in which calls after a signal are still sent).
fn signal_window_scenario(dir: &Path, secs: u64) -> anyhow::Result<Value> {
    let first = handled_scenario(dir)?;
    let fd = open_rw(&ctl(dir), true)?;
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let mut calls = 0u64;
    while std::time::Instant::now() < end {
        let (r, st) = control(fd.as_raw_fd(), 0xc1d0_0001, 0x0);
        anyhow::ensure!(r == 0 && st == 0, "NULL control: {r} {st:#x}");
        calls += 1;
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(json!({ "handled": first, "calls": calls }))
}

fn alarm_scenario(dir: &Path) -> anyhow::Result<Value> {
    let fd = open_rw(&ctl(dir), true)?;
    // SAFETY: plain alarm(2).
    unsafe { libc::alarm(1) };
    loop {
        control(fd.as_raw_fd(), 0xc1d0_0001, 0x2080_0110);
    }
}

/// A driver call, then memory touched 4 MiB at a time until the memory
/// cgroup's OOM killer ends the process (run it in one with a limit).
fn oom_scenario(dir: &Path) -> anyhow::Result<Value> {
    let fd = open_rw(&ctl(dir), true)?;
    control(fd.as_raw_fd(), 0xc1d0_0001, 0x2080_0110);
    let mut held: Vec<Vec<u8>> = Vec::new();
    loop {
        held.push(vec![1u8; 4 << 20]);
        if held.len() > 16 << 10 {
            bail!("64 GiB touched and no OOM kill: run it in a memory cgroup with a limit");
        }
    }
}

/// Point the stand-in libcuda at the FUSE device folder and dlopen `lib`.
fn open_lib<'a>(
    dir: &Path,
    lib: Option<&'a Path>,
) -> anyhow::Result<(&'a Path, *mut libc::c_void)> {
    let lib = lib.context("--lib is required")?;
    // SAFETY: the environment is set before any other thread exists.
    unsafe { std::env::set_var("NVPROBE_FAKE_DIR", dir) };
    let c = std::ffi::CString::new(lib.as_os_str().as_encoded_bytes())?;
    // SAFETY: dlopen with a valid C string.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW) };
    if h.is_null() {
        bail!("dlopen {} failed", lib.display());
    }
    Ok((lib, h))
}

/// The address of `name` in the library `h` (`lib` names it in the error).
///
/// # Safety
/// `h` is a handle dlopen returned and has not been closed.
unsafe fn symbol(
    h: *mut libc::c_void,
    lib: &Path,
    name: &std::ffi::CStr,
) -> anyhow::Result<*mut libc::c_void> {
    // SAFETY: per the function's contract; `name` is a C string.
    let p = unsafe { libc::dlsym(h, name.as_ptr()) };
    if p.is_null() {
        bail!("{} lacks {name:?}", lib.display());
    }
    Ok(p)
}

/// dlopen a libcuda, say "ready", wait for a line on stdin, then call
/// cuInit(0) and cuDeviceGetCount, like a CUDA application starting.
fn cuinit_scenario(dir: &Path, lib: Option<&Path>) -> anyhow::Result<Value> {
    let (lib, h) = open_lib(dir, lib)?;
    // SAFETY: dlsym with valid C strings; the symbols have the cuda.h
    // prototypes.
    unsafe {
        let init = libc::dlsym(h, c"cuInit".as_ptr());
        let count = libc::dlsym(h, c"cuDeviceGetCount".as_ptr());
        if init.is_null() || count.is_null() {
            bail!("{} lacks cuInit or cuDeviceGetCount", lib.display());
        }
        println!("{}", json!({ "ready": true }));
        std::io::stdout().flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        let init: extern "C" fn(u32) -> i32 = std::mem::transmute(init);
        let count: extern "C" fn(*mut i32) -> i32 = std::mem::transmute(count);
        let r = init(0);
        let mut n = -1;
        let rc = count(&mut n);
        Ok(json!({ "cuInit": r, "cuDeviceGetCount": rc, "count": n }))
    }
}

/// dlopen a libcuda, say "ready", wait for a line on stdin, start CUDA
/// (cuInit, a context), then make the calls where a run-time fault
/// surfaces: cuCtxSynchronize, cuMemcpyDtoH_v2, cuMemFree_v2 (the stand-in
/// fails them as NVPROBE_STUB_FAULT says). Exits 1 when one failed.
fn runtime_scenario(dir: &Path, lib: Option<&Path>) -> anyhow::Result<Value> {
    let (lib, h) = open_lib(dir, lib)?;
    // SAFETY: dlsym with valid C strings; the symbols have the cuda.h
    // prototypes.
    unsafe {
        let sym = |n: &std::ffi::CStr| symbol(h, lib, n);
        let init: extern "C" fn(u32) -> i32 = std::mem::transmute(sym(c"cuInit")?);
        let create: extern "C" fn(*mut usize, u32, i32) -> i32 =
            std::mem::transmute(sym(c"cuCtxCreate_v2")?);
        let sync: extern "C" fn() -> i32 = std::mem::transmute(sym(c"cuCtxSynchronize")?);
        let copy: extern "C" fn(*mut u8, u64, usize) -> i32 =
            std::mem::transmute(sym(c"cuMemcpyDtoH_v2")?);
        let free: extern "C" fn(u64) -> i32 = std::mem::transmute(sym(c"cuMemFree_v2")?);
        println!("{}", json!({ "ready": true }));
        std::io::stdout().flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        let r = init(0);
        let mut ctx = 0usize;
        let c = create(&mut ctx, 0, 0);
        let mut byte = 0u8;
        let (s1, s2) = (sync(), sync());
        let (m, f) = (copy(&mut byte, 0x1000, 1), free(0x1000));
        // More synchronisations after those (NVFIXTURE_MORE_SYNCS): a
        // sticky error fails each.
        let more: u32 = std::env::var("NVFIXTURE_MORE_SYNCS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let more_failed = (0..more).filter(|_| sync() != 0).count();
        let v = json!({ "cuInit": r, "cuCtxCreate_v2": c, "cuCtxSynchronize": [s1, s2],
            "cuMemcpyDtoH_v2": m, "cuMemFree_v2": f, "more_failed": more_failed });
        println!("{v}");
        std::io::stdout().flush()?;
        if s1 != 0 || s2 != 0 || m != 0 || f != 0 {
            std::process::exit(1);
        }
        Ok(v)
    }
}

/// dlopen a libcuda, say "ready", wait for a line on stdin (a test hooks
/// the library meanwhile), cuInit, fork: the child calls cuLaunchKernel
/// and then cuMemGetInfo_v2 without a cuInit of its own (CUDA does not
/// survive a fork; the stand-in answers 3 like the real libcuda) and exits
/// 1 when both fail.
fn forkchild_scenario(dir: &Path, lib: Option<&Path>) -> anyhow::Result<Value> {
    let (lib, h) = open_lib(dir, lib)?;
    // SAFETY: dlsym with valid C strings; the symbols have the cuda.h
    // prototypes (cuLaunchKernel's eleven arguments, all null).
    unsafe {
        let sym = |n: &std::ffi::CStr| symbol(h, lib, n);
        let init: extern "C" fn(u32) -> i32 = std::mem::transmute(sym(c"cuInit")?);
        type Launch =
            extern "C" fn(usize, u32, u32, u32, u32, u32, u32, u32, usize, usize, usize) -> i32;
        let launch: Launch = std::mem::transmute(sym(c"cuLaunchKernel")?);
        let meminfo: extern "C" fn(*mut usize, *mut usize) -> i32 =
            std::mem::transmute(sym(c"cuMemGetInfo_v2")?);
        println!("{}", json!({ "ready": true }));
        std::io::stdout().flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        let r = init(0);
        let child = libc::fork();
        if child == 0 {
            let l = launch(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
            let (mut f, mut t) = (0usize, 0usize);
            let m = meminfo(&mut f, &mut t);
            libc::_exit(if l == 3 && m == 3 { 1 } else { 0 });
        }
        let mut status = 0;
        libc::waitpid(child, &mut status, 0);
        Ok(json!({ "cuInit": r, "child": child, "child_status": libc::WEXITSTATUS(status) }))
    }
}

/// A start-up that succeeds, then a steady loop: ready, (go) cuInit and a
/// first context through the stand-in libcuda, `inited`, (go) `count` RM controls that
/// succeed (NV_OK, SYSTEM_GET_BUILD_VERSION) and 3 that fail with
/// NV_ERR_INVALID_COMMAND behind a return of 0 (an unknown control), for
/// the tests of `--events` and of the kernel dropping quiet processes'
/// successful calls; then, by `then`, an exec of itself, or one control
/// the stand-in answers after 2.5 s (a stall of a quiet process's call).
/// Flush stdout and wait for a line on stdin.
fn go() -> anyhow::Result<()> {
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(())
}

/// The stand-in libcuda at `lib` loaded (with the stand-in driver's folder
/// in the environment): a start-up through it, cuInit and a first context,
/// whose result it returns.
fn load_stub(dir: &Path, lib: Option<&Path>) -> anyhow::Result<impl Fn() -> i32> {
    let lib = lib.context("--lib is required")?;
    // SAFETY: the environment is set before any other thread exists.
    unsafe { std::env::set_var("NVPROBE_FAKE_DIR", dir) };
    let c = std::ffi::CString::new(lib.as_os_str().as_encoded_bytes())?;
    // SAFETY: dlopen/dlsym with valid C strings; cuInit has the cuda.h
    // prototype.
    type Init = extern "C" fn(u32) -> i32;
    type CtxCreate = extern "C" fn(*mut *mut libc::c_void, u32, i32) -> i32;
    let (init, ctx_create): (Init, CtxCreate) = unsafe {
        let h = libc::dlopen(c.as_ptr(), libc::RTLD_NOW);
        if h.is_null() {
            bail!("dlopen {} failed", lib.display());
        }
        let f = libc::dlsym(h, c"cuInit".as_ptr());
        let g = libc::dlsym(h, c"cuCtxCreate_v2".as_ptr());
        if f.is_null() || g.is_null() {
            bail!("{} lacks cuInit or cuCtxCreate_v2", lib.display());
        }
        (
            std::mem::transmute::<*mut libc::c_void, Init>(f),
            std::mem::transmute::<*mut libc::c_void, CtxCreate>(g),
        )
    };
    Ok(move || {
        let r = init(0);
        if r != 0 {
            return r;
        }
        // The first context ends the start-up.
        let mut ctx = std::ptr::null_mut();
        ctx_create(&mut ctx, 0, 0)
    })
}

fn steady_scenario(
    dir: &Path,
    lib: Option<&Path>,
    count: u64,
    then: &str,
) -> anyhow::Result<Value> {
    let then_exec = then == "exec";
    let start_up = load_stub(dir, lib)?;
    println!("{}", json!({ "ready": true }));
    go()?;
    let r = start_up();
    println!("{}", json!({ "inited": r }));
    go()?;
    let fd = open_rw(&ctl(dir), true)?;
    let f = fd.as_raw_fd();
    let mut ok = 0u64;
    for _ in 0..count {
        ok += u64::from(control(f, 0, 0x101) == (0, 0));
    }
    let mut failed = 0u64;
    for _ in 0..3 {
        failed += u64::from(control(f, 0, 0x0000_0dea) == (0, 0x24));
    }
    if then == "hang" {
        // GPU_GET_SHORT_NAME_STRING: answered after HANG_CONTROL_MS.
        control(f, 0xc1d0_0001, 0x2080_0111);
    }
    let answer = json!({ "cuInit": r, "ok_calls": ok, "failed_calls": failed });
    if then_exec {
        // A new program in the same process (no cuInit of its own): its
        // one successful call on the inherited fd is shipped again.
        println!("{answer}");
        std::io::stdout().flush()?;
        let keep = open_rw(&ctl(dir), false)?.into_raw_fd();
        let cloexec = open_rw(&ctl(dir), true)?.into_raw_fd();
        let err = exec_self(&std::env::current_exe()?, dir, keep, cloexec);
        bail!("exec failed: {err}");
    }
    Ok(answer)
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Serve { dir } => {
            std::fs::create_dir_all(&dir)?;
            let session =
                nvprobe_tests::fakedrv::mount(&dir).context("mounting the FUSE stand-in")?;
            println!("ready");
            std::io::stdout().flush()?;
            let mut sink = String::new();
            while std::io::stdin().lock().read_line(&mut sink)? > 0 {}
            drop(session);
            Ok(())
        }
        Cmd::Run {
            scenario,
            dir,
            fds,
            threads,
            count,
            lib,
        } => {
            let v = match scenario.as_str() {
                "basic" => basic(&dir)?,
                "xfer-big" => xfer_big(&dir)?,
                "fork" => fork_scenario(&dir)?,
                "dup" => dup_scenario(&dir)?,
                "scm" => scm_scenario(&dir)?,
                "pidfd" => pidfd_scenario(&dir)?,
                "closed" => closed_scenario(&dir)?,
                "reuse" => reuse_scenario(&dir)?,
                "client-loop" => client_loop(&dir, count)?,
                "exec" => exec_scenario(&dir)?,
                "after-exec" => after_exec(&fds),
                "threads" => threads_scenario(&dir, threads)?,
                "preopen" => preopen_scenario(&dir)?,
                "preclose" => preclose_scenario(&dir)?,
                "held" => held_scenario(&dir, lib.as_deref(), count)?,
                "preopen-hang" => preopen_hang_scenario(&dir)?,
                "held-busy" => held_busy_scenario(&dir)?,
                "flood" => flood_scenario(&dir, count, threads)?,
                "alarm" => alarm_scenario(&dir)?,
                "oom" => oom_scenario(&dir)?,
                "modprobe" => modprobe_scenario()?,
                "handled" => handled_scenario(&dir)?,
                "signal-window" => signal_window_scenario(&dir, count)?,
                "hang" => {
                    let fd = open_rw(&ctl(&dir), true)?;
                    let (r, st) = control(fd.as_raw_fd(), 0xc1d0_0001, 0x2080_0111);
                    json!({ "ret": r, "status": st })
                }
                "cuinit" => cuinit_scenario(&dir, lib.as_deref())?,
                "forkchild" => forkchild_scenario(&dir, lib.as_deref())?,
                "runtime" => runtime_scenario(&dir, lib.as_deref())?,
                "steady" => steady_scenario(&dir, lib.as_deref(), count, "")?,
                "steady-exec" => steady_scenario(&dir, lib.as_deref(), count, "exec")?,
                "steady-hang" => steady_scenario(&dir, lib.as_deref(), count, "hang")?,
                other => bail!("unknown scenario {other}"),
            };
            let mut v = v;
            v["pid"] = json!(std::process::id());
            println!("{v}");
            // A program lives on after its start-up (it prints an error, it
            // goes on working): with NVFIXTURE_HOLD set, this one waits
            // after its result for a line on stdin (or its end).
            if std::env::var_os("NVFIXTURE_HOLD").is_some() {
                std::io::stdout().flush()?;
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line)?;
            }
            Ok(())
        }
    }
}
