//! Tight loops for `cargo xtask bench`: the cost of one traced NVIDIA ioctl,
//! of a non-NVIDIA ioctl and of a plain syscall, and an event flood for the
//! drain rate. Prints one JSON object; timing is done here, around the loop
//! only, so process start-up does not count.

use std::{
    os::fd::{AsRawFd, OwnedFd},
    time::Instant,
};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use nix::fcntl::{OFlag, open};
use nix::sys::stat::Mode;
use serde_json::json;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Iterations per batch.
    #[arg(long, default_value_t = 20000)]
    iters: u64,
    /// Batches; the median batch is reported.
    #[arg(long, default_value_t = 5)]
    batches: u32,
    /// Threads running the loop at once (for the drain rate).
    #[arg(long, default_value_t = 1)]
    threads: u32,
    /// Pace each thread to this many operations per second (0: as fast as
    /// possible). For the drain rate: a steady event rate, not a burst.
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Print each batch as it ends (`{"end_ns": CLOCK_MONOTONIC ns,
    /// "ns_per_op": …}`), for a harness that swaps tracers under one
    /// running loop (tests/scripts/bench-percall-tax.py --same-loop).
    #[arg(long)]
    stream: bool,
}

static STREAM: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn mono_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    })
}

/// Sleep until operation `i` is due at `rate` per second.
fn pace(t0: Instant, i: u64, rate: u64) {
    if rate == 0 || !i.is_multiple_of(256) {
        return;
    }
    let due = std::time::Duration::from_nanos(i.saturating_mul(1_000_000_000) / rate);
    let now = t0.elapsed();
    if due > now {
        std::thread::sleep(due - now);
    }
}

#[derive(Subcommand, Clone)]
enum Cmd {
    /// ioctl(fd, CMD, buf) on PATH, buf of SIZE bytes (result ignored).
    Ioctl {
        #[arg(long)]
        path: String,
        #[arg(long, value_parser = parse_hex)]
        cmd: u64,
        #[arg(long, default_value_t = 32)]
        size: usize,
    },
    /// On a real /dev/nvidiactl: allocate an RM client, then loop
    /// NV_ESC_RM_CONTROL with the NULL control on it (a cheap real RM call).
    RmNullControl {
        #[arg(long, default_value = "/dev/nvidiactl")]
        path: String,
        /// First start CUDA through the real libcuda (cuInit and a first
        /// context), so that the loop is that of a process past its
        /// start-up: quiet at `--events failures|verdicts`.
        #[arg(long)]
        cuda_first: bool,
    },
    /// ioctl(TCGETS) on /dev/null: a non-NVIDIA ioctl (ENOTTY).
    Tcgets,
    /// getppid(): a syscall nvprobe does not trace.
    Getppid,
    /// A call whose failures nvprobe watches in start-ups, in a loop, by a
    /// process past any start-up: `mprotect` (one page, toggled), `pipe2`
    /// (and its two closes), `mmap` (64 KiB anonymous, and its munmap),
    /// `thread` (a thread started and joined: clone3), `ebadf` (lseek on
    /// descriptor -1: a call that fails, and that no tracepoint of
    /// nvprobe's watches, so only the raw sys_exit program sees it), `dup`
    /// (a dup of /dev/null and its close), `filemap` (64 KiB of this
    /// program's file mapped and unmapped: an mmap of a descriptor).
    StartCall {
        #[arg(value_parser = ["mprotect", "pipe2", "mmap", "thread", "ebadf", "dup", "filemap"])]
        call: String,
    },
    /// Another tracer on the host: attach a perf-event uprobe (what perf or
    /// a classic bpftrace asks for; it takes the kernel's tracing lock) on
    /// libc's getppid, then detach it; prints how long each took.
    TracerAttach,
    /// The baseline of a tracer's cost: an empty BPF program (return 0) on
    /// syscalls/sys_enter_ioctl and one on sys_exit_ioctl, as nvprobe's
    /// ioctl programs sit, held until stdin closes (prints "attached"
    /// first). With --all, on the entry and exit of every call nvprobe's
    /// syscall layer watches (attach::table::PROBES, those this kernel
    /// has) and on the raw tracepoint sys_exit, as nvprobe's programs sit:
    /// the floor of every row of the benchmarks.
    EmptyTracepoints {
        #[arg(long)]
        all: bool,
    },
    /// What each operation of a BPF program costs here: a program on
    /// sys_enter_ioctl repeating one operation (a helper, a map lookup, a
    /// ring-buffer record), the TCGETS loop timed under it, against the
    /// bare program (nvprobe_tests::unitcost). The loop runs on CPU
    /// `--cpu`, the ring buffer's drain on the next one.
    UnitCosts {
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        #[arg(long, default_value_t = 8)]
        cpu: usize,
    },
    /// A device cgroup (v2) that refuses char devices of MAJOR: a
    /// BPF_CGROUP_DEVICE program attached to the cgroup directory CGROUP
    /// (it stays until the cgroup is removed). For the "who refused"
    /// cases: an open of an NVIDIA node in that cgroup gets EPERM.
    DenyDevice {
        #[arg(long)]
        cgroup: String,
        #[arg(long, default_value_t = 195)]
        major: u32,
    },
    /// The soak: fork `--iters` short processes per thread (`--threads`
    /// forking at once), each making one ioctl(CMD) on PATH (opened by the
    /// parent, inherited) and exiting: as many distinct processes (and,
    /// past pid_max, reused pids) as asked. Times the whole run.
    Forks {
        #[arg(long)]
        path: String,
        #[arg(long, value_parser = parse_hex, default_value = "c020462a")]
        cmd: u64,
    },
}

/// A cgroup device program (ctx: access_type, major, minor, each u32)
/// that refuses char devices of `major` (returns 0) and allows the rest.
fn deny_major(major: u32) -> Vec<aya_obj::generated::bpf_insn> {
    // (code, dst, src, off, imm): BPF_LDX|BPF_MEM|BPF_W, BPF_JMP|BPF_JEQ|BPF_K,
    // BPF_ALU64|BPF_MOV|BPF_K, BPF_JMP|BPF_EXIT.
    let raw: [(u8, u8, u8, i16, i32); 6] = [
        (0x61, 2, 1, 4, 0),
        (0x15, 2, 0, 2, major as i32),
        (0xb7, 0, 0, 0, 1),
        (0x95, 0, 0, 0, 0),
        (0xb7, 0, 0, 0, 0),
        (0x95, 0, 0, 0, 0),
    ];
    insns(&raw)
}

/// Raw instructions, each (code, dst, src, off, imm).
fn insns(raw: &[(u8, u8, u8, i16, i32)]) -> Vec<aya_obj::generated::bpf_insn> {
    raw.iter()
        .map(|&(code, dst, src, off, imm)| aya_obj::generated::bpf_insn {
            code,
            _bitfield_align_1: [],
            _bitfield_1: aya_obj::generated::bpf_insn::new_bitfield_1(dst, src),
            off,
            imm,
        })
        .collect()
}

fn parse_hex(s: &str) -> Result<u64, String> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).map_err(|e| e.to_string())
}

const NV_ESC_RM_ALLOC_NVOS21: u64 = 0xc020_462b;
const NV_ESC_RM_CONTROL: u64 = 0xc020_462a;
const NV_ESC_RM_FREE: u64 = 0xc010_4629;

/// cuInit and a first context through the real libcuda (`dlopen`), the
/// context kept: the process's start-up is over.
fn cuda_context() -> anyhow::Result<usize> {
    // SAFETY: dlopen/dlsym with valid C strings; the functions have the
    // cuda.h prototypes (CUresult is an int, a context a pointer).
    unsafe {
        let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW);
        if h.is_null() {
            bail!("--cuda-first: dlopen libcuda.so.1 failed");
        }
        let sym = |n: &std::ffi::CStr| {
            let f = libc::dlsym(h, n.as_ptr());
            (!f.is_null())
                .then_some(f)
                .with_context(|| format!("libcuda.so.1 lacks {n:?}"))
        };
        let init: extern "C" fn(u32) -> i32 = std::mem::transmute(sym(c"cuInit")?);
        let get: extern "C" fn(*mut i32, i32) -> i32 = std::mem::transmute(sym(c"cuDeviceGet")?);
        let create: extern "C" fn(*mut usize, u32, i32) -> i32 =
            std::mem::transmute(sym(c"cuCtxCreate_v2")?);
        let (mut dev, mut ctx) = (0i32, 0usize);
        let check = |what: &str, r: i32| match r {
            0 => Ok(()),
            r => Err(anyhow::anyhow!("--cuda-first: {what} returned {r}")),
        };
        check("cuInit", init(0))?;
        check("cuDeviceGet", get(&mut dev, 0))?;
        check("cuCtxCreate_v2", create(&mut ctx, 0, dev))?;
        Ok(ctx)
    }
}

fn ioctl(fd: i32, cmd: u64, buf: *mut u8) -> i64 {
    // SAFETY: buf points to a buffer at least as large as the command's size.
    unsafe { libc::ioctl(fd, cmd as _, buf) as i64 }
}

fn rw(path: &str) -> anyhow::Result<OwnedFd> {
    open(path, OFlag::O_RDWR | OFlag::O_CLOEXEC, Mode::empty())
        .with_context(|| format!("open {path}"))
}

/// Run `f` for `iters` iterations on `threads` threads, `batches` times;
/// return ns per operation of each batch.
fn measure(iters: u64, batches: u32, threads: u32, f: impl Fn(u64) + Sync) -> Vec<f64> {
    (0..batches)
        .map(|_| {
            let t0 = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| f(iters));
                }
            });
            let v = t0.elapsed().as_nanos() as f64 / iters as f64;
            if STREAM.load(std::sync::atomic::Ordering::Relaxed) {
                use std::io::Write as _;
                let mut o = std::io::stdout().lock();
                let _ = writeln!(o, "{}", json!({ "end_ns": mono_ns(), "ns_per_op": v }));
                let _ = o.flush();
            }
            v
        })
        .collect()
}

/// Fork `n` children one after another, each: one ioctl, then exit.
fn forks(fd: i32, cmd: u64, n: u64) {
    for _ in 0..n {
        // SAFETY: the child makes one ioctl and _exits (async-signal-safe
        // only); the parent waits for it.
        match unsafe { libc::fork() } {
            0 => unsafe {
                let mut buf = [0u8; 32];
                libc::ioctl(fd, cmd as _, buf.as_mut_ptr());
                libc::_exit(0)
            },
            pid if pid > 0 => {
                let mut st = 0;
                // SAFETY: waits for the child just forked.
                unsafe { libc::waitpid(pid, &mut st, 0) };
            }
            _ => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
}

/// The file and file offset that hold the code at `addr` in this process
/// (from /proc/self/maps).
fn own_function_offset(addr: usize) -> anyhow::Result<(String, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").context("reading /proc/self/maps")?;
    for l in maps.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (Some(range), Some(off), Some(path)) = (f.first(), f.get(2), f.get(5)) else {
            continue;
        };
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (lo, hi) = (
            usize::from_str_radix(lo, 16)?,
            usize::from_str_radix(hi, 16)?,
        );
        if (lo..hi).contains(&addr) {
            return Ok((
                (*path).to_owned(),
                (addr - lo) as u64 + u64::from_str_radix(off, 16)?,
            ));
        }
    }
    anyhow::bail!("no mapping holds {addr:#x}")
}

/// Mount tracefs in a mount namespace of this process's own when it is not
/// mounted (the host's mounts stay as they are).
fn ensure_tracefs() -> anyhow::Result<()> {
    if ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .any(|d| std::path::Path::new(&format!("{d}/events")).exists())
    {
        return Ok(());
    }
    use nix::mount::{MsFlags, mount};
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
        .context("unshare a mount namespace for tracefs")?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .context("making the mounts private")?;
    mount(
        Some("tracefs"),
        "/sys/kernel/tracing",
        Some("tracefs"),
        MsFlags::empty(),
        None::<&str>,
    )
    .context("mounting tracefs")
}

/// A raw tracepoint program attached to syscalls/`tp`: (program, link).
fn attach_raw(
    prog: &[aya_obj::generated::bpf_insn],
    tp: &str,
) -> anyhow::Result<(OwnedFd, OwnedFd)> {
    ensure_tracefs()?;
    let id_path = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .map(|d| format!("{d}/events/syscalls/{tp}/id"))
        .find(|p| std::path::Path::new(p).exists())
        .with_context(|| format!("no tracefs id for syscalls/{tp} (is tracefs mounted?)"))?;
    let id: u64 = std::fs::read_to_string(&id_path)?.trim().parse()?;
    let prog = nvprobe::attach::sys::load_tracepoint_program(prog)
        .with_context(|| format!("loading a program for syscalls/{tp}"))?;
    let ev = nvprobe::attach::sys::perf_tracepoint(id)
        .with_context(|| format!("perf event for syscalls/{tp}"))?;
    let link = nvprobe::attach::sys::perf_event_link(std::os::fd::AsFd::as_fd(&prog), ev, 0)
        .with_context(|| format!("attaching to syscalls/{tp}"))?;
    Ok((prog, link))
}

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t with one CPU set, for this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// `nvbench unit-costs`: interleaved rounds of every operation; per
/// operation the fastest and the median batch of the TCGETS loop, and its
/// cost over the bare program, divided by the repeat count.
fn unit_costs(rounds: usize, cpu: usize, iters: u64, batches: u32) -> anyhow::Result<()> {
    use nvprobe_tests::unitcost::{Maps, OPS, REPEAT, drain, program};
    let maps = Maps::new()?;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let fd = rw("/dev/null")?;
    let raw = fd.as_raw_fd();
    let mut got: std::collections::BTreeMap<&str, Vec<(f64, f64)>> = Default::default();
    std::thread::scope(|s| -> anyhow::Result<()> {
        let d = s.spawn(|| {
            pin_to(cpu + 1);
            drain(&maps.ringbuf, &stop)
        });
        pin_to(cpu);
        for r in 0..rounds {
            let n = OPS.len();
            for k in 0..n {
                let op = OPS[(k + r) % n];
                let prog = program(op, &maps)?;
                let link = attach_raw(&prog, "sys_enter_ioctl")?;
                let mut v = measure(iters, batches, 1, |n| {
                    let mut buf = [0u8; 64];
                    for _ in 0..n {
                        ioctl(raw, libc::TCGETS, buf.as_mut_ptr());
                    }
                });
                drop(link);
                let mn = v.iter().copied().fold(f64::MAX, f64::min);
                let md = median(&mut v);
                println!(
                    "{}",
                    json!({ "round": r, "op": op, "min": mn, "median": md })
                );
                got.entry(op).or_default().push((mn, md));
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        d.join()
            .map_err(|_| anyhow::anyhow!("the drain thread panicked"))??;
        Ok(())
    })?;
    let best = |op: &str| -> (f64, f64) {
        let v = &got[op];
        let mn = v.iter().map(|x| x.0).fold(f64::MAX, f64::min);
        let mut m: Vec<f64> = v.iter().map(|x| x.1).collect();
        (mn, median(&mut m))
    };
    let (bmin, bmed) = best("bare");
    let table: Vec<_> = OPS
        .iter()
        .map(|op| {
            let (mn, md) = best(op);
            json!({
                "op": op,
                "loop_min_ns": mn,
                "loop_median_ns": md,
                "op_ns_min_to_min": (mn - bmin) / REPEAT as f64,
                "op_ns_median": (md - bmed) / REPEAT as f64,
            })
        })
        .collect();
    println!("{}", json!({ "repeat": REPEAT, "unit_costs": table }));
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    STREAM.store(cli.stream, std::sync::atomic::Ordering::Relaxed);
    let (mut per_batch, extra) = match cli.cmd.clone() {
        Cmd::Ioctl { path, cmd, size } => {
            let fd = rw(&path)?;
            let raw = fd.as_raw_fd();
            let rate = cli.rate;
            let v = measure(cli.iters, cli.batches, cli.threads, |n| {
                let mut buf = vec![0u8; size.max(8)];
                let t0 = Instant::now();
                for i in 0..n {
                    pace(t0, i, rate);
                    ioctl(raw, cmd, buf.as_mut_ptr());
                }
            });
            (v, json!({ "path": path, "cmd": format!("{cmd:#x}") }))
        }
        Cmd::RmNullControl { path, cuda_first } => {
            let context = if cuda_first {
                Some(cuda_context()?)
            } else {
                None
            };
            let fd = rw(&path)?;
            let raw = fd.as_raw_fd();
            // NVOS21: hRoot, hObjectParent, hObjectNew, hClass(0 -> NV01_ROOT_CLIENT), pAllocParms, paramsSize, status
            let mut alloc = [0u8; 32];
            if ioctl(raw, NV_ESC_RM_ALLOC_NVOS21, alloc.as_mut_ptr()) != 0 {
                bail!(
                    "RM_ALLOC of a root client failed: {}",
                    std::io::Error::last_os_error()
                );
            }
            let status = u32::from_le_bytes(alloc[28..32].try_into()?);
            let h = u32::from_le_bytes(alloc[8..12].try_into()?);
            if status != 0 {
                bail!("RM_ALLOC of a root client returned NV_STATUS {status:#x}");
            }
            let mut probe = [0u8; 32];
            probe[0..4].copy_from_slice(&h.to_le_bytes());
            probe[4..8].copy_from_slice(&h.to_le_bytes());
            ioctl(raw, NV_ESC_RM_CONTROL, probe.as_mut_ptr());
            let control_status = u32::from_le_bytes(probe[28..32].try_into()?);
            let v = measure(cli.iters, cli.batches, cli.threads, |n| {
                let mut p = [0u8; 32];
                for _ in 0..n {
                    p[0..4].copy_from_slice(&h.to_le_bytes());
                    p[4..8].copy_from_slice(&h.to_le_bytes());
                    ioctl(raw, NV_ESC_RM_CONTROL, p.as_mut_ptr());
                }
            });
            let mut free = [0u8; 16];
            free[0..4].copy_from_slice(&h.to_le_bytes());
            free[4..8].copy_from_slice(&h.to_le_bytes());
            free[8..12].copy_from_slice(&h.to_le_bytes());
            ioctl(raw, NV_ESC_RM_FREE, free.as_mut_ptr());
            (
                v,
                json!({ "hClient": format!("{h:#x}"), "control_status": format!("{control_status:#x}"), "cuda_context": context.is_some() }),
            )
        }
        Cmd::Tcgets => {
            let fd = rw("/dev/null")?;
            let raw = fd.as_raw_fd();
            let v = measure(cli.iters, cli.batches, cli.threads, |n| {
                let mut buf = [0u8; 64];
                for _ in 0..n {
                    ioctl(raw, libc::TCGETS, buf.as_mut_ptr());
                }
            });
            (v, json!({}))
        }
        Cmd::Forks { path, cmd } => {
            let fd = rw(&path)?;
            let raw = fd.as_raw_fd();
            let t0 = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..cli.threads {
                    s.spawn(|| forks(raw, cmd, cli.iters));
                }
            });
            let secs = t0.elapsed().as_secs_f64();
            let n = cli.iters * u64::from(cli.threads);
            println!(
                "{}",
                json!({ "forks": n, "seconds": secs, "ns_per_op": secs * 1e9 / n.max(1) as f64, "threads": cli.threads })
            );
            return Ok(());
        }
        Cmd::TracerAttach => {
            let (path, off) = own_function_offset(libc::getppid as *const () as usize)?;
            let pmu = nvprobe::attach::sys::uprobe_pmu().context("the uprobe PMU")?;
            let t0 = Instant::now();
            let ev = nvprobe::attach::sys::perf_uprobe(pmu, &path, off, false)
                .with_context(|| format!("perf uprobe on {path}+{off:#x}"))?;
            let attach = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            drop(ev);
            let detach = t1.elapsed().as_secs_f64();
            println!(
                "{}",
                json!({ "attach_s": attach, "detach_s": detach, "path": path, "offset": off })
            );
            return Ok(());
        }
        Cmd::EmptyTracepoints { all } => {
            // BPF_ALU64|BPF_MOV|BPF_K r0 = 0, BPF_JMP|BPF_EXIT.
            let ret0 = insns(&[(0xb7, 0, 0, 0, 0), (0x95, 0, 0, 0, 0)]);
            let mut links = Vec::new();
            let calls: Vec<&str> = if all {
                nvprobe::attach::table::PROBES
                    .iter()
                    .map(|p| p.syscall)
                    .collect()
            } else {
                vec!["ioctl"]
            };
            for call in calls {
                for tp in [format!("sys_enter_{call}"), format!("sys_exit_{call}")] {
                    match attach_raw(&ret0, &tp) {
                        Ok(l) => links.push(l),
                        // A call this kernel does not have (open on arm64).
                        Err(_) if all => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            let mut raw = Vec::new();
            if all {
                let prog = nvprobe::attach::sys::load_raw_tracepoint_program(&ret0)
                    .context("loading a raw tracepoint program")?;
                let link = nvprobe::attach::sys::raw_tracepoint_open(
                    std::os::fd::AsFd::as_fd(&prog),
                    "sys_exit",
                )
                .context("attaching to the raw tracepoint sys_exit")?;
                raw.push((prog, link));
            }
            println!("{}", json!({ "attached": links.len() + raw.len() }));
            let mut sink = String::new();
            let _ = std::io::stdin().read_line(&mut sink);
            drop(links);
            drop(raw);
            return Ok(());
        }
        Cmd::UnitCosts { rounds, cpu } => {
            return unit_costs(rounds, cpu, cli.iters, cli.batches);
        }
        Cmd::DenyDevice { cgroup, major } => {
            let dir = std::fs::File::open(&cgroup).with_context(|| format!("open {cgroup}"))?;
            nvprobe::attach::sys::attach_device_program(
                std::os::fd::AsFd::as_fd(&dir),
                &deny_major(major),
            )
            .with_context(|| format!("attach a device program to {cgroup}"))?;
            println!("{}", json!({ "cgroup": cgroup, "denied_major": major }));
            return Ok(());
        }
        Cmd::StartCall { call } => {
            let v = measure(cli.iters, cli.batches, cli.threads, |n| {
                start_calls(&call, n)
            });
            (v, json!({ "call": call }))
        }
        Cmd::Getppid => {
            let v = measure(cli.iters, cli.batches, cli.threads, |n| {
                for _ in 0..n {
                    // SAFETY: no arguments.
                    unsafe { libc::getppid() };
                }
            });
            (v, json!({}))
        }
    };
    let ops = cli.iters * u64::from(cli.batches) * u64::from(cli.threads);
    let med = median(&mut per_batch);
    println!(
        "{}",
        json!({
            "ns_per_op": med,
            "batches_ns_per_op": per_batch,
            "ops": ops,
            "threads": cli.threads,
            "extra": extra,
        })
    );
    Ok(())
}

/// `n` of one start-up call (see `Cmd::StartCall`).
fn start_calls(call: &str, n: u64) {
    const LEN: usize = 64 << 10;
    // SAFETY: anonymous mappings of our own, unmapped before return;
    // descriptors closed at once.
    unsafe {
        match call {
            "mprotect" => {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                for i in 0..n {
                    let prot = if i & 1 == 0 {
                        libc::PROT_READ
                    } else {
                        libc::PROT_READ | libc::PROT_WRITE
                    };
                    libc::mprotect(p, 4096, prot);
                }
                libc::munmap(p, 4096);
            }
            "ebadf" => {
                for _ in 0..n {
                    libc::lseek(-1, 0, libc::SEEK_SET);
                }
            }
            "pipe2" => {
                let mut fds = [0i32; 2];
                for _ in 0..n {
                    if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) == 0 {
                        libc::close(fds[0]);
                        libc::close(fds[1]);
                    }
                }
            }
            "mmap" => {
                for _ in 0..n {
                    let p = libc::mmap(
                        std::ptr::null_mut(),
                        LEN,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    );
                    if p != libc::MAP_FAILED {
                        libc::munmap(p, LEN);
                    }
                }
            }
            "dup" => {
                let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                for _ in 0..n {
                    let d = libc::dup(fd);
                    if d >= 0 {
                        libc::close(d);
                    }
                }
                libc::close(fd);
            }
            "filemap" => {
                let exe = std::env::current_exe().ok().and_then(|p| {
                    std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()))
                        .ok()
                });
                let fd = exe.map_or(-1, |p| {
                    libc::open(p.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC)
                });
                for _ in 0..n {
                    let p = libc::mmap(
                        std::ptr::null_mut(),
                        LEN,
                        libc::PROT_READ,
                        libc::MAP_PRIVATE,
                        fd,
                        0,
                    );
                    if p != libc::MAP_FAILED {
                        libc::munmap(p, LEN);
                    }
                }
                libc::close(fd);
            }
            _ => {
                for _ in 0..n {
                    let _ = std::thread::spawn(|| ()).join();
                }
            }
        }
    }
}
