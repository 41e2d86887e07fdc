//! The kernel tier of nvprobe's tests, run inside a VM booted by
//! `cargo xtask vm-test` (a kernel with kprobes, the stand-in modules of
//! tests/kmod loaded on the real device numbers).
//!
//! `nvvmtest run KMOD_DIR` loads the stand-ins with each scenario's
//! injected failures, traces a client process with `nvprobe watch`, checks
//! the records and prints one line per check and `NVVM-RESULT: PASS|FAIL`.
//! `nvvmtest client` is that client: the driver calls of a cuInit, on
//! /dev/nvidiactl, /dev/nvidia0 and /dev/nvidia-uvm.

use std::{
    fs,
    io::Write as _,
    os::fd::{AsRawFd, OwnedFd},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use nix::{
    fcntl::{OFlag, open},
    sys::{
        signal::{Signal, kill},
        stat::{Mode, SFlag, makedev, mknod},
    },
    unistd::Pid,
};
use serde_json::Value;

mod gate;
mod real;
mod realcheck;
mod realhmm;

const NVPROBE: &str = "/bin/nvprobe";

fn iowr(nr: u32, size: u32) -> u64 {
    u64::from((3u32 << 30) | (size << 16) | (0x46 << 8) | nr)
}

fn ioctl(fd: &OwnedFd, cmd: u64, buf: &mut [u8]) -> i32 {
    // SAFETY: buf is as large as the command's size field says.
    unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, buf.as_mut_ptr()) }
}

fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn get32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

/// The driver calls of a cuInit, in the real 580 order (docs/NVIDIA-ABI.md §7,
/// H200 recordings). Prints what each returned.
fn client() -> anyhow::Result<()> {
    let rw = OFlag::O_RDWR | OFlag::O_CLOEXEC;
    let ctl = open("/dev/nvidiactl", rw, Mode::empty())?;
    // RM_ALLOC of a root client (NVOS64, 48 bytes; status at 40).
    let mut a = [0u8; 48];
    let r = ioctl(&ctl, iowr(0x2b, 48), &mut a);
    let client = get32(&a, 8);
    println!(
        "alloc ret={r} status={:#x} client={client:#x}",
        get32(&a, 40)
    );
    // RM_CONTROL SYSTEM_GET_BUILD_VERSION, then an unknown control.
    for cmd in [0x101u32, 0x2080_0110, 0x215] {
        let mut c = [0u8; 32];
        put32(&mut c, 0, client);
        put32(&mut c, 4, client);
        put32(&mut c, 8, cmd);
        let r = ioctl(&ctl, iowr(0x2a, 32), &mut c);
        println!("control {cmd:#x} ret={r} status={:#x}", get32(&c, 28));
    }
    let uvm = open("/dev/nvidia-uvm", rw, Mode::empty())?;
    let mut init = [0u8; 16];
    // SAFETY: UVM commands are plain numbers with a pointer argument.
    let r = unsafe { libc::ioctl(uvm.as_raw_fd(), 0x3000_0001 as _, init.as_mut_ptr()) };
    println!("uvm_initialize ret={r} status={:#x}", get32(&init, 8));
    let gpu = open("/dev/nvidia0", rw, Mode::empty())?;
    let mut reg = [0u8; 4];
    put32(&mut reg, 0, ctl.as_raw_fd() as u32);
    let r = ioctl(&gpu, iowr(0xc9, 4), &mut reg);
    println!("register_fd ret={r}");
    let mut dev = [0u8; 48];
    put32(&mut dev, 0, client);
    put32(&mut dev, 4, client);
    put32(&mut dev, 8, 0x5c00_0002);
    put32(&mut dev, 12, 0x80);
    let r = ioctl(&ctl, iowr(0x2b, 48), &mut dev);
    println!("device ret={r} status={:#x}", get32(&dev, 40));
    let mut g = [0u8; 40];
    g[..16].copy_from_slice(&[
        0xf0, 0x56, 0x87, 0x50, 0x77, 0x65, 0xf1, 0x66, 0xdd, 0x86, 0xa8, 0x7a, 0x8e, 0xbd, 0xc1,
        0xbf,
    ]);
    put32(&mut g, 20, u32::MAX);
    put32(&mut g, 24, u32::MAX);
    // SAFETY: as above; UVM_REGISTER_GPU is 37.
    let r = unsafe { libc::ioctl(uvm.as_raw_fd(), 37 as _, g.as_mut_ptr()) };
    println!("register_gpu ret={r} status={:#x}", get32(&g, 36));
    std::io::stdout().flush()?;
    Ok(())
}

struct Checks {
    scenario: &'static str,
    failed: u32,
    passed: u32,
}

impl Checks {
    fn check(&mut self, ok: bool, what: &str) {
        if ok {
            self.passed += 1;
            println!("NVVM: ok   {}: {what}", self.scenario);
        } else {
            self.failed += 1;
            println!("NVVM: FAIL {}: {what}", self.scenario);
        }
    }
}

fn sh(cmd: &str) -> bool {
    Command::new("/bin/sh")
        .args(["-c", cmd])
        .status()
        .is_ok_and(|s| s.success())
}

fn uvm_major() -> Option<u64> {
    fs::read_to_string("/proc/devices")
        .ok()?
        .lines()
        .find_map(|l| {
            let (n, name) = l.trim().split_once(' ')?;
            (name == "nvidia-uvm").then(|| n.parse().ok()).flatten()
        })
}

/// Load the stand-ins with these parameters and make the nodes.
fn load(kmod: &Path, nv: &str, uvm: &str) -> anyhow::Result<()> {
    let _ = sh("rmmod nvidia_uvm 2>/dev/null; rmmod nvidia 2>/dev/null");
    for (m, p) in [("nvidia.ko", nv), ("nvidia-uvm.ko", uvm)] {
        anyhow::ensure!(
            sh(&format!("insmod {} {p}", kmod.join(m).display())),
            "insmod {m} {p} failed"
        );
    }
    let major = uvm_major().ok_or_else(|| anyhow::anyhow!("no nvidia-uvm in /proc/devices"))?;
    for (path, ma, mi) in [
        ("/dev/nvidiactl", 195, 255),
        ("/dev/nvidia0", 195, 0),
        ("/dev/nvidia-uvm", major, 0),
        ("/dev/nvidia-uvm-tools", major, 1),
    ] {
        let _ = fs::remove_file(path);
        mknod(
            path,
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o666),
            makedev(ma, mi),
        )?;
        // mknod honours the umask; the driver's nodes are 0666.
        fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o666))?;
    }
    Ok(())
}

struct Watch {
    child: Child,
    out: PathBuf,
}

/// `nvprobe watch` decoding as 580.159.04 (the stand-ins' version).
fn watch(name: &str, extra: &[&str]) -> anyhow::Result<Watch> {
    watch_as(name, extra, Some("580.159.04"))
}

/// How long a start may take in the VM: qemu's TCG emulates every
/// instruction, the verifier's included (Linux 6.1's explores far more
/// states than 6.12's on the same programs).
const START_LIMIT: Duration = Duration::from_secs(240);

/// `nvprobe watch`, decoding as `version`, else as the loaded module's.
fn watch_as(name: &str, extra: &[&str], version: Option<&str>) -> anyhow::Result<Watch> {
    let out = PathBuf::from(format!("/tmp/{name}.ndjson"));
    let _ = fs::remove_file(&out);
    let mut cmd = Command::new(NVPROBE);
    cmd.args(["watch", "--json"]);
    if let Some(v) = version {
        cmd.args(["--driver-version", v]);
    }
    let child = cmd
        .arg("-o")
        .arg(&out)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()?;
    let mut child = child;
    let t0 = Instant::now();
    while t0.elapsed() < START_LIMIT {
        if fs::read_to_string(&out).is_ok_and(|s| s.contains("\"type\":\"start\"")) {
            // Under qemu's TCG the verifier runs many times slower than on
            // hardware: how long a start took is worth seeing.
            println!(
                "NVVM: nvprobe {extra:?} started in {:.1} s",
                t0.elapsed().as_secs_f64()
            );
            return Ok(Watch { child, out });
        }
        if let Some(st) = child.try_wait()? {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read as _;
                let _ = e.read_to_string(&mut err);
            }
            anyhow::bail!("nvprobe {extra:?} exited with {st} before starting: {err}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Say what it said meanwhile.
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read as _;
        let _ = e.read_to_string(&mut err);
    }
    anyhow::bail!(
        "nvprobe {extra:?} did not start within {} s: {err}",
        START_LIMIT.as_secs()
    )
}

/// Every record nvprobe wrote in the VM must match its published schema.
fn schema_errors(recs: &[Value]) -> Vec<String> {
    recs.iter()
        .filter_map(|r| {
            nvprobe::render::schema::validate(r)
                .err()
                .map(|e| format!("{e}: {r}"))
        })
        .take(3)
        .collect()
}

impl Watch {
    fn stop(self) -> anyhow::Result<(Vec<Value>, String)> {
        std::thread::sleep(Duration::from_millis(300));
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGINT)?;
        let o = self.child.wait_with_output()?;
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let recs = fs::read_to_string(&self.out)?
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        Ok((recs, err))
    }
}

fn run_client() -> anyhow::Result<(u32, String)> {
    let o = Command::new("/proc/self/exe").arg("client").output()?;
    let pid_hint = 0;
    Ok((pid_hint, String::from_utf8_lossy(&o.stdout).into_owned()))
}

fn of<'a>(recs: &'a [Value], t: &str) -> Vec<&'a Value> {
    recs.iter().filter(|r| r["type"] == t).collect()
}

fn drv<'a>(recs: &'a [Value], f: &str) -> Vec<&'a Value> {
    recs.iter()
        .filter(|r| r["type"] == "driver" && r["function"] == f)
        .collect()
}

/// The hooks attach by name on the stand-ins and report names, statuses
/// from rm_ioctl's kernel copy, and in-driver durations. By default the
/// module's ioctl entry points make the ioctl records (the ioctl syscall
/// tracepoints stay off), with the status written back to user memory.
fn hooks(kmod: &Path, c: &mut Checks) -> anyhow::Result<()> {
    load(kmod, "adapter_delay_ms=40", "")?;
    let w = watch("hooks", &[])?;
    let (_, out) = run_client()?;
    let (recs, err) = w.stop()?;
    println!("{out}");
    let bad = schema_errors(&recs);
    c.check(
        bad.is_empty(),
        &format!("every record matches the schema {bad:?}"),
    );
    let start = of(&recs, "start");
    c.check(
        start
            .first()
            .is_some_and(|s| s["driver_layer"]["attached"] == true),
        "the driver layer is attached",
    );
    c.check(
        start.first().is_some_and(|s| s["ioctls_in_driver"] == true),
        "by default the NVIDIA ioctls are traced inside the driver",
    );
    c.check(
        start.first().is_some_and(|s| {
            s["probes"].as_array().is_some_and(|p| {
                !p.iter()
                    .any(|p| p["name"] == "ioctl" && p["attached"] == true)
            })
        }),
        "and the ioctl syscall tracepoints are not attached",
    );
    c.check(
        !err.contains("driver layer not attached"),
        "no driver-layer refusal",
    );
    let io = of(&recs, "ioctl");
    c.check(
        io.len() >= 8 && io.iter().all(|r| r["via"] == "driver" && r["fd"] == -1),
        &format!("{} ioctl records, all made by the driver layer", io.len()),
    );
    c.check(
        io.iter().any(|r| {
            r["device"]["major"] == 195
                && r["device"]["minor"] == 255
                && r["name"] == "NV_ESC_RM_CONTROL"
                && r["status"]["name"] == "NV_OK"
        }),
        "an NV_ESC_RM_CONTROL on 195:255 with its NV_OK status",
    );
    c.check(
        io.iter().any(|r| {
            r["name"] == "UVM_REGISTER_GPU"
                && r["status"]["name"] == "NV_OK"
                && r["device"]["kind"] == "uvm"
        }),
        "UVM_REGISTER_GPU on the uvm node with its written-back rmStatus",
    );
    hooks_driver_records(&recs, c);
    hooks_both_layers(c)
}

/// The driver records of the default run: rm_ioctl's kernel copies, the
/// adapter's init time, the UVM path, and the kernel's own function inside
/// UVM_INITIALIZE.
fn hooks_driver_records(recs: &[Value], c: &mut Checks) {
    let start = of(recs, "start");
    let io = of(recs, "ioctl");
    let rm = drv(recs, "rm_ioctl");
    let status_of = |r: &&Value| r["rm_status"]["name"].as_str().map(str::to_owned);
    c.check(
        rm.iter()
            .any(|r| r["call"] == "NV_ESC_RM_CONTROL" && status_of(r).as_deref() == Some("NV_OK")),
        "rm_ioctl's kernel copy gives NV_OK for the build-version control",
    );
    c.check(
        rm.iter()
            .any(|r| status_of(r).as_deref() == Some("NV_ERR_INVALID_COMMAND") && r["ok"] == false),
        "rm_ioctl's kernel copy gives NV_ERR_INVALID_COMMAND for the unknown control",
    );
    let adapter = drv(recs, "rm_init_adapter");
    c.check(
        adapter
            .iter()
            .any(|r| r["result"] == "true" && r["duration_ns"].as_u64() >= Some(40_000_000)),
        "rm_init_adapter returned true after its 40 ms",
    );
    for f in [
        "uvm_va_space_create",
        "uvm_hmm_va_space_initialize",
        "uvm_api_register_gpu",
        "uvm_va_space_register_gpu",
        "uvm_gpu_retain_by_uuid",
        "uvm_pmm_devmem_init",
        "nvidia_open",
        "nvidia_close",
    ] {
        c.check(!drv(recs, f).is_empty(), &format!("{f} fired"));
    }
    c.check(
        drv(recs, "uvm_api_register_gpu")
            .iter()
            .any(|r| r["result"] == "NV_OK" && r["module"] == "nvidia_uvm"),
        "uvm_api_register_gpu returned NV_OK (nvidia_uvm)",
    );
    // The kernel's own function, inside UVM_INITIALIZE, through fentry
    // (these kernels allow TRACING programs).
    c.check(
        start.first().is_some_and(|s| {
            s["probes"].as_array().is_some_and(|p| {
                p.iter().any(|p| {
                    p["target"] == "fentry vmlinux:__mmu_notifier_register" && p["attached"] == true
                })
            })
        }),
        "__mmu_notifier_register is hooked with fentry/fexit",
    );
    let init = io.iter().find(|r| r["name"] == "UVM_INITIALIZE");
    c.check(
        drv(recs, "__mmu_notifier_register").iter().any(|r| {
            r["module"] == "vmlinux"
                && r["result"] == "0"
                && init.is_some_and(|i| {
                    let s = i["start_ns"].as_u64().unwrap_or(0);
                    let e = s + i["duration_ns"].as_u64().unwrap_or(0);
                    (s..=e).contains(&r["start_ns"].as_u64().unwrap_or(0))
                })
        }),
        "__mmu_notifier_register returned 0 inside UVM_INITIALIZE",
    );
}

/// Asked for both layers, the syscall tracepoints make the ioctl records
/// and the entry points are driver records of their own.
fn hooks_both_layers(c: &mut Checks) -> anyhow::Result<()> {
    let w = watch("hooks-both", &["--layers", "syscall,process,driver"])?;
    let _ = run_client()?;
    let (recs, _) = w.stop()?;
    let io = of(&recs, "ioctl");
    c.check(
        !io.is_empty()
            && io
                .iter()
                .all(|r| r.get("via").is_none() && r["fd"].as_i64() >= Some(0)),
        "--layers syscall,...: ioctl records come from the syscall layer, with fds",
    );
    let ctl = drv(&recs, "nvidia_unlocked_ioctl");
    c.check(
        ctl.iter()
            .any(|r| r["call"] == "NV_ESC_RM_CONTROL" && r["device"] == "195:255"),
        "nvidia_unlocked_ioctl records name NV_ESC_RM_CONTROL on 195:255",
    );
    c.check(
        drv(&recs, "uvm_unlocked_ioctl_entry")
            .iter()
            .any(|r| r["call"] == "UVM_REGISTER_GPU"),
        "uvm_unlocked_ioctl_entry records name UVM_REGISTER_GPU",
    );
    Ok(())
}

/// The HMM device-memory step fails slowly: the UVM step, the HMM
/// function on its path with its return value and time, and the hint.
fn hmm_failure(kmod: &Path, c: &mut Checks) -> anyhow::Result<()> {
    // NV_ERR_NO_MEMORY (0x51) after 300 ms in uvm_pmm_devmem_init.
    load(kmod, "", "hmm_status=81 hmm_delay_ms=300")?;
    let w = watch("hmm", &["--raw"])?;
    let (_, out) = run_client()?;
    let (recs, _) = w.stop()?;
    println!("{out}");
    let bad = schema_errors(&recs);
    c.check(
        bad.is_empty(),
        &format!("every record matches the schema {bad:?}"),
    );
    // The recording goes out over the console (hex), for the fixture that
    // replays it on machines without kprobes.
    if let Ok(raw) = fs::read("/tmp/hmm.ndjson") {
        println!(
            "NVVM-FILE: hmm-failure.ndjson {}",
            nvprobe::decode::hex_encode(&raw)
        );
    }
    c.check(
        out.contains("register_gpu ret=0 status=0x51"),
        "the client saw rmStatus NV_ERR_NO_MEMORY",
    );
    let pmm = drv(&recs, "uvm_pmm_devmem_init");
    c.check(
        pmm.iter().any(|r| {
            r["result"] == "NV_ERR_NO_MEMORY" && r["duration_ns"].as_u64() >= Some(300_000_000)
        }),
        "uvm_pmm_devmem_init returned NV_ERR_NO_MEMORY after its 300 ms",
    );
    let b = of(&recs, "breakdown");
    let text = b
        .iter()
        .find(|b| b["call"] == "UVM_REGISTER_GPU")
        .and_then(|b| b["text"].as_str())
        .unwrap_or("");
    println!("breakdown: {text}");
    c.check(
        text.starts_with("UVM_REGISTER_GPU ") && text.contains(" in uvm_pmm_devmem_init, which returned NV_ERR_NO_MEMORY (in uvm_gpu_retain_by_uuid < uvm_va_space_register_gpu < uvm_api_register_gpu)"),
        "the breakdown names the HMM function, its result and its callers",
    );
    let v = of(&recs, "cuinit");
    let d = v
        .iter()
        .flat_map(|v| v["diagnoses"].as_array().cloned().unwrap_or_default())
        .find(|d| d["id"] == "uvm_step_failed");
    println!("diagnosis: {d:?}");
    c.check(
        d.as_ref().is_some_and(|d| {
            d["evidence"].as_str().is_some_and(|e| {
                e.starts_with(
                    "UVM_REGISTER_GPU returned NV_ERR_NO_MEMORY; in the driver: UVM_REGISTER_GPU ",
                )
            })
        }),
        "the verdict names the failing UVM step and its in-driver breakdown",
    );
    c.check(
        d.as_ref().is_some_and(|d| {
            d["hint"].as_str().is_some_and(|h| {
                h.starts_with(
                    "this kernel's nvidia_uvm has HMM and it is enabled (uvm_disable_hmm=N)",
                ) && h.contains("uvm_disable_hmm=1")
            })
        }),
        "the hint, from this host's module, gives uvm_disable_hmm=1",
    );
    Ok(())
}

/// A call that blocks in the driver until signalled: the stall report names
/// the driver function and its kernel stack.
fn stall(kmod: &Path, c: &mut Checks) -> anyhow::Result<()> {
    load(kmod, "", "block_register=1")?;
    let w = watch("stall", &["--stall-after", "1"])?;
    let mut client = Command::new("/proc/self/exe")
        .arg("client")
        .stdout(Stdio::piped())
        .spawn()?;
    std::thread::sleep(Duration::from_millis(2500));
    kill(Pid::from_raw(client.id() as i32), Signal::SIGTERM)?;
    let _ = client.wait();
    let (recs, _) = w.stop()?;
    let bad = schema_errors(&recs);
    c.check(
        bad.is_empty(),
        &format!("every record matches the schema {bad:?}"),
    );
    let s = of(&recs, "stall");
    let first = s.iter().find(|s| s["call"] == "UVM_REGISTER_GPU");
    println!("stall: {first:?}");
    c.check(first.is_some(), "a stall report for UVM_REGISTER_GPU");
    c.check(
        first.is_some_and(|s| s["driver_function"] == "uvm_gpu_retain_by_uuid (nvidia_uvm)"),
        "it names the blocked driver function",
    );
    c.check(
        first.is_some_and(|s| {
            s["stack"].as_array().is_some_and(|st| {
                st.iter().any(|f| {
                    f.as_str()
                        .is_some_and(|f| f.starts_with("uvm_unlocked_ioctl_entry+"))
                })
            })
        }),
        "with its kernel stack",
    );
    c.check(
        first.is_some_and(|s| {
            s["text"].as_str().is_some_and(|t| {
                t.contains("inside the driver in uvm_gpu_retain_by_uuid (nvidia_uvm)")
            })
        }),
        "the text says where in the driver",
    );
    let sig = of(&recs, "signal");
    c.check(
        sig.iter()
            .any(|s| s["signal"] == "SIGTERM" && s["in_flight"] == "UVM_REGISTER_GPU"),
        "the SIGTERM that ended it landed in UVM_REGISTER_GPU",
    );
    Ok(())
}

/// Median ns per operation over `batches` batches of `iters`.
fn time_op(iters: u32, batches: u32, mut op: impl FnMut()) -> f64 {
    let mut v: Vec<f64> = (0..batches)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                op();
            }
            t.elapsed().as_nanos() as f64 / f64::from(iters)
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// ns per op for getppid, a non-NVIDIA ioctl and an NVIDIA RM_CONTROL.
fn loops() -> anyhow::Result<[f64; 3]> {
    let rw = OFlag::O_RDWR | OFlag::O_CLOEXEC;
    let null = open("/dev/null", rw, Mode::empty())?;
    let ctl = open("/dev/nvidiactl", rw, Mode::empty())?;
    let mut a = [0u8; 48];
    ioctl(&ctl, iowr(0x2b, 48), &mut a);
    let client = get32(&a, 8);
    let (iters, batches) = (3000, 7);
    // SAFETY: getppid has no preconditions.
    let ppid = time_op(iters, batches, || unsafe {
        libc::getppid();
    });
    let mut n = 0i32;
    let other = time_op(iters, batches, || {
        // SAFETY: FIONREAD on /dev/null writes an int we own (or fails).
        unsafe { libc::ioctl(null.as_raw_fd(), libc::FIONREAD, &mut n) };
    });
    let mut c = [0u8; 32];
    let nv = time_op(iters, batches, || {
        put32(&mut c, 0, client);
        put32(&mut c, 4, client);
        put32(&mut c, 8, 0x101);
        ioctl(&ctl, iowr(0x2a, 32), &mut c);
    });
    Ok([ppid, other, nv])
}

/// The cost of each layer in this VM: per-operation time with no tracing,
/// the syscall layer, the driver layer and both, in interleaved rounds, and
/// each BPF program's run time per hit (BPF_ENABLE_STATS). TCG timings are
/// indicative only. Also checks that `--layers driver,process` runs with no
/// syscall tracepoint and still records the NVIDIA calls.
fn bench(kmod: &Path, c: &mut Checks) -> anyhow::Result<()> {
    load(kmod, "", "")?;
    let configs: [(&str, Option<&str>); 5] = [
        ("untraced", None),
        ("syscall", Some("syscall,process")),
        ("driver", Some("driver,process")),
        ("default", Some("")),
        ("both", Some("syscall,process,driver")),
    ];
    let mut samples: std::collections::BTreeMap<&str, Vec<[f64; 3]>> = Default::default();
    let mut progs: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for round in 0..3 {
        for (name, layers) in configs {
            let w = match layers {
                Some("") => Some(watch(&format!("bench-{name}"), &["--bpf-stats"])?),
                Some(l) => Some(watch(
                    &format!("bench-{name}"),
                    &["--layers", l, "--bpf-stats"],
                )?),
                None => None,
            };
            let r = loops()?;
            samples.entry(name).or_default().push(r);
            if let Some(w) = w {
                let (recs, _) = w.stop()?;
                if round == 0 && name == "driver" {
                    let start = of(&recs, "start");
                    let layers: Vec<&str> = start
                        .first()
                        .and_then(|s| s["probes"].as_array())
                        .map(|p| {
                            p.iter()
                                .filter(|p| p["attached"] == true)
                                .filter_map(|p| p["layer"].as_str())
                                .collect()
                        })
                        .unwrap_or_default();
                    c.check(
                        !layers.contains(&"syscall"),
                        "--layers driver,process attaches no syscall tracepoint",
                    );
                    c.check(
                        of(&recs, "ioctl")
                            .iter()
                            .filter(|r| r["via"] == "driver")
                            .count()
                            >= 3000,
                        "and the driver layer still records every NVIDIA ioctl",
                    );
                }
                if let Some(s) = of(&recs, "summary").first()
                    && let Some(b) = s["bpf"].as_array()
                {
                    for p in b {
                        let e = progs
                            .entry(format!("{name}:{}", p["program"].as_str().unwrap_or("?")))
                            .or_default();
                        e.0 += p["run_count"].as_u64().unwrap_or(0);
                        e.1 += p["run_time_ns"].as_u64().unwrap_or(0);
                    }
                }
            }
        }
    }
    let med = |name: &str, i: usize| -> f64 {
        let mut v: Vec<f64> = samples[name].iter().map(|r| r[i]).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (name, _) in configs {
        let line = serde_json::json!({
            "config": name,
            "getppid_ns": med(name, 0),
            "other_ioctl_ns": med(name, 1),
            "nvidia_ioctl_ns": med(name, 2),
            "getppid_ratio": med(name, 0) / med("untraced", 0),
            "other_ioctl_ratio": med(name, 1) / med("untraced", 1),
            "nvidia_ioctl_ratio": med(name, 2) / med("untraced", 2),
        });
        println!("NVVM-BENCH: {line}");
    }
    for (k, (n, t)) in &progs {
        if *n > 0 {
            let line = serde_json::json!({ "program": k, "run_count": n, "run_time_ns": t, "ns_per_run": *t as f64 / *n as f64 });
            println!("NVVM-BENCH-PROG: {line}");
        }
    }
    c.check(samples.len() == 5, "benchmarks ran for every configuration");
    Ok(())
}

fn run(kmod: &Path) -> bool {
    let mut all_ok = true;
    type Scenario = fn(&Path, &mut Checks) -> anyhow::Result<()>;
    let mut scenarios: Vec<(&'static str, Scenario)> = vec![
        ("hooks", hooks),
        ("hmm_failure", hmm_failure),
        ("stall", stall),
        ("uretprobe_gate", gate::uretprobe_gate),
    ];
    if std::env::var_os("NVVM_BENCH").is_some()
        || fs::read_to_string("/proc/cmdline").is_ok_and(|c| c.contains("nvvm.bench=1"))
    {
        scenarios.push(("bench", bench));
    }
    for (name, f) in scenarios {
        let mut c = Checks {
            scenario: name,
            failed: 0,
            passed: 0,
        };
        if let Err(e) = f(kmod, &mut c) {
            c.check(false, &format!("could not run: {e:#}"));
        }
        println!("NVVM: {name}: {} passed, {} failed", c.passed, c.failed);
        all_ok &= c.failed == 0;
    }
    all_ok
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("client") => {
            if let Err(e) = client() {
                eprintln!("client: {e:#}");
                std::process::exit(1);
            }
        }
        Some("real-client") => {
            if let Err(e) = real::client() {
                eprintln!("real-client: {e:#}");
                std::process::exit(1);
            }
        }
        Some("real-hmm-client") => {
            if let Err(e) = realhmm::client() {
                eprintln!("real-hmm-client: {e:#}");
                std::process::exit(1);
            }
        }
        Some("real-cost") => {
            let n = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(3000);
            if let Err(e) = real::cost_client(n) {
                eprintln!("real-cost: {e:#}");
                std::process::exit(1);
            }
        }
        Some("cuinit") => {
            if let Err(e) = real::cuinit(args.get(2).map_or("libcuda.so.1", String::as_str)) {
                eprintln!("cuinit: {e:#}");
                std::process::exit(1);
            }
        }
        Some("real") => {
            let dir = PathBuf::from(args.get(2).map_or("/kmod-real", String::as_str));
            let ok = real::run(&dir);
            println!("NVVM-RESULT: {}", if ok { "PASS" } else { "FAIL" });
        }
        Some("run") => {
            let kmod = PathBuf::from(args.get(2).map_or("/kmod", String::as_str));
            let ok = run(&kmod);
            println!("NVVM-RESULT: {}", if ok { "PASS" } else { "FAIL" });
        }
        _ => {
            eprintln!(
                "usage: nvvmtest run KMOD_DIR | client | real DIR | real-client | cuinit LIB"
            );
            std::process::exit(2);
        }
    }
}
