//! The real NVIDIA open kernel module in the VM: Debian's build of it with
//! the zero-GPU patch (tests/kmod/real/), the real libcuda of the same
//! version and, when present, one of another version. `nvvmtest real DIR`
//! loads `DIR/nvidia.ko` and `DIR/nvidia-uvm.ko`, traces direct calls on
//! the real nodes and real cuInits with `nvprobe watch`, and checks what
//! the driver layer read from the driver's own code against what the
//! callers got.

use std::{fs, path::Path, process::Command};

use nix::{
    fcntl::{OFlag, open},
    sys::stat::Mode,
};
use serde_json::{Value, json};

use super::{
    Checks, drv, get32, ioctl, iowr, of, put32,
    realcheck::{hooks_attached, rm_params_checks, same_calls_both_layers},
    schema_errors, sh, uvm_major, watch_as,
};

/// Load the real modules and make the nodes the driver would (no GPU: no
/// /dev/nvidia0).
fn load(dir: &Path) -> anyhow::Result<String> {
    // What nvidia.ko needs first (drm), from the kernel's package.
    let order = fs::read_to_string(dir.join("load-order")).unwrap_or_default();
    for m in order.lines().filter(|l| !l.is_empty()) {
        anyhow::ensure!(
            sh(&format!("insmod {}", dir.join(m).display())),
            "insmod {m} failed (dmesg: {})",
            dmesg_tail()
        );
    }
    for m in ["nvidia.ko", "nvidia-uvm.ko"] {
        anyhow::ensure!(
            sh(&format!("insmod {}", dir.join(m).display())),
            "insmod {m} failed (dmesg: {})",
            dmesg_tail()
        );
    }
    remake_nodes()?;
    let v = fs::read_to_string("/proc/driver/nvidia/version")?;
    Ok(v.lines().next().unwrap_or_default().to_owned())
}

fn dmesg_lines() -> Vec<String> {
    Command::new("dmesg")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn dmesg_tail() -> String {
    Command::new("dmesg")
        .output()
        .map(|o| {
            let s = String::from_utf8_lossy(&o.stdout).into_owned();
            s.lines().rev().take(8).collect::<Vec<_>>().join(" | ")
        })
        .unwrap_or_default()
}

/// Direct calls on the real nodes; one JSON line per call with what the
/// caller got.
pub fn client() -> anyhow::Result<()> {
    let rw = OFlag::O_RDWR | OFlag::O_CLOEXEC;
    let ctl = open("/dev/nvidiactl", rw, Mode::empty())?;
    let say = |v: Value| println!("{v}");
    // RM_ALLOC of a root client (NVOS64, 48 bytes; the handle at 8, the
    // status at 40).
    let mut a = [0u8; 48];
    put32(&mut a, 12, 0x41);
    let r = ioctl(&ctl, iowr(0x2b, 48), &mut a);
    let client = get32(&a, 8);
    say(json!({"call": "NV_ESC_RM_ALLOC", "ret": r, "status": get32(&a, 40)}));
    // RM_CONTROL (NVOS54, 32 bytes; status at 28): GPU_GET_ATTACHED_IDS
    // (succeeds: no GPU attached), an unknown command, a bogus client.
    let mut ids = [0u8; 128];
    for (h, cmd, params) in [
        (client, 0x201u32, true),
        (client, 0x0000_0dea, false),
        (0xdead_0001, 0x201, true),
    ] {
        let mut c = [0u8; 32];
        put32(&mut c, 0, h);
        put32(&mut c, 4, h);
        put32(&mut c, 8, cmd);
        if params {
            c[16..24].copy_from_slice(&(ids.as_mut_ptr() as u64).to_le_bytes());
            put32(&mut c, 24, ids.len() as u32);
        }
        let r = ioctl(&ctl, iowr(0x2a, 32), &mut c);
        say(json!({"call": "NV_ESC_RM_CONTROL", "cmd": cmd, "ret": r, "status": get32(&c, 28)}));
    }
    // SYSTEM_GET_BUILD_VERSION (40 bytes: sizeOfStrings @0, pointers to
    // the driver version, version and title strings @8, @16, @24): the
    // kernel side follows the first pointer.
    let mut strings = [[0u8; 256]; 3];
    let mut bv = [0u8; 40];
    put32(&mut bv, 0, 256);
    for (i, s) in strings.iter_mut().enumerate() {
        bv[8 + 8 * i..16 + 8 * i].copy_from_slice(&(s.as_mut_ptr() as u64).to_le_bytes());
    }
    let mut c = [0u8; 32];
    put32(&mut c, 0, client);
    put32(&mut c, 4, client);
    put32(&mut c, 8, 0x101);
    c[16..24].copy_from_slice(&(bv.as_mut_ptr() as u64).to_le_bytes());
    put32(&mut c, 24, bv.len() as u32);
    let r = ioctl(&ctl, iowr(0x2a, 32), &mut c);
    let end = strings[0].iter().position(|&b| b == 0).unwrap_or(256);
    say(
        json!({"call": "NV_ESC_RM_CONTROL", "cmd": 0x101, "ret": r, "status": get32(&c, 28),
        "driver_version": String::from_utf8_lossy(&strings[0][..end])}),
    );
    // An escape the driver does not have.
    let mut u = [0u8; 16];
    let r = ioctl(&ctl, iowr(0x7e, 16), &mut u);
    say(
        json!({"call": "unknown_escape", "ret": r, "errno": std::io::Error::last_os_error().raw_os_error()}),
    );
    // UVM_INITIALIZE (16 bytes: flags, status at 8), then UVM_MM_INITIALIZE
    // (75: the first fd, status at 4) on a second fd.
    let uvm = open("/dev/nvidia-uvm", rw, Mode::empty())?;
    let mut init = [0u8; 16];
    // SAFETY: UVM commands are plain numbers with a pointer argument.
    let r = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&uvm),
            0x3000_0001 as _,
            init.as_mut_ptr(),
        )
    };
    say(json!({"call": "UVM_INITIALIZE", "ret": r, "status": get32(&init, 8)}));
    let mm = open("/dev/nvidia-uvm", rw, Mode::empty())?;
    let mut p = [0u8; 8];
    put32(&mut p, 0, std::os::fd::AsRawFd::as_raw_fd(&uvm) as u32);
    // SAFETY: as above.
    let r = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&mm),
            75 as _,
            p.as_mut_ptr(),
        )
    };
    say(json!({"call": "UVM_MM_INITIALIZE", "ret": r, "status": get32(&p, 4)}));
    Ok(())
}

/// A real cuInit through `lib` (dlopen), then the driver version libcuda
/// reports: one JSON line.
pub fn cuinit(lib: &str) -> anyhow::Result<()> {
    let name = std::ffi::CString::new(lib)?;
    // SAFETY: dlopen/dlsym with valid C strings; the symbols have the
    // CUDA driver API's C signatures.
    unsafe {
        let h = libc::dlopen(name.as_ptr(), libc::RTLD_NOW);
        anyhow::ensure!(!h.is_null(), "dlopen {lib} failed");
        let init = libc::dlsym(h, c"cuInit".as_ptr());
        let ver = libc::dlsym(h, c"cuDriverGetVersion".as_ptr());
        anyhow::ensure!(!init.is_null() && !ver.is_null(), "no cuInit in {lib}");
        let init: extern "C" fn(u32) -> i32 = std::mem::transmute(init);
        let ver: extern "C" fn(*mut i32) -> i32 = std::mem::transmute(ver);
        let r = init(0);
        let mut v = 0i32;
        let vr = ver(&mut v);
        println!("{}", json!({"cuInit": r, "version_ret": vr, "version": v}));
    }
    Ok(())
}

pub(super) fn run_self(args: &[&str]) -> anyhow::Result<(u32, Vec<Value>)> {
    let c = Command::new("/proc/self/exe")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let pid = c.id();
    let o = c.wait_with_output()?;
    anyhow::ensure!(o.status.success(), "nvvmtest {args:?}: {}", o.status);
    let lines = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    Ok((pid, lines))
}

/// The default run: the module's entry points make the ioctl records; the
/// caller's statuses, rm_ioctl's kernel copies and nvprobe's agree.
fn calls(dir: &Path, c: &mut Checks) -> anyhow::Result<()> {
    let banner = load(dir)?;
    println!("NVVM: {banner}");
    let w = watch_as("real", &["--raw", "--bpf-stats"], None)?;
    let (client_pid, said) = run_self(&["real-client"])?;
    let (cu_pid, cu) = run_self(&["cuinit", "libcuda.so.1"])?;
    let (recs, err) = w.stop()?;
    // The same client under the syscall layer alone (the ioctl tracepoints
    // make the records): the same calls, named alike, with the same results.
    let ws = watch_as("real-sys", &["--layers", "syscall,process"], None)?;
    let (sys_pid, _) = run_self(&["real-client"])?;
    let (sys_recs, _) = ws.stop()?;
    same_calls_both_layers(&recs, client_pid, &sys_recs, sys_pid, c);
    if let Ok(raw) = fs::read("/tmp/real.ndjson") {
        println!(
            "NVVM-FILE: real-driver.ndjson {}",
            nvprobe::decode::hex_encode(&raw)
        );
    }
    for l in &said {
        println!("NVVM: client {l}");
    }
    c.check(
        said.len() == 8,
        &format!("the client made its 8 calls ({})", said.len()),
    );
    let status = |call: &str, cmd: Option<u64>| {
        said.iter()
            .find(|l| l["call"] == call && cmd.is_none_or(|c| l["cmd"] == c))
            .and_then(|l| l["status"].as_u64())
    };
    // What the real RM answers (no GPU): a client, no GPU attached, an
    // unknown command refused.
    c.check(
        status("NV_ESC_RM_ALLOC", None) == Some(0),
        "RM_ALLOC of a root client: NV_OK",
    );
    c.check(
        status("NV_ESC_RM_CONTROL", Some(0x201)) == Some(0),
        "GPU_GET_ATTACHED_IDS: NV_OK",
    );
    c.check(
        status("NV_ESC_RM_CONTROL", Some(0xdea)).is_some_and(|s| s != 0),
        "an unknown control: refused with a status",
    );
    c.check(
        status("UVM_INITIALIZE", None) == Some(0),
        "UVM_INITIALIZE: NV_OK",
    );
    c.check(
        status("NV_ESC_RM_CONTROL", Some(0x101)) == Some(0),
        "SYSTEM_GET_BUILD_VERSION: NV_OK",
    );
    rm_params_checks(&said, &recs, c);
    println!("NVVM: cuinit {cu:?}");
    let bad = schema_errors(&recs);
    c.check(
        bad.is_empty(),
        &format!("every record matches the schema {bad:?}"),
    );
    // What each program cost on the real handlers (BPF_ENABLE_STATS).
    for p in of(&recs, "summary")
        .iter()
        .flat_map(|s| s["bpf"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["run_count"].as_u64() > Some(0))
    {
        println!("NVVM-BENCH-PROG: {p}");
    }
    let start = of(&recs, "start");
    let version = banner
        .split_whitespace()
        .find(|w| w.contains('.') && w.chars().next().is_some_and(|c| c.is_ascii_digit()));
    c.check(
        start
            .first()
            .is_some_and(|s| Some(s["driver"]["version"].as_str().unwrap_or("")) == version),
        &format!("nvprobe reads the real module's version {version:?}"),
    );
    c.check(
        !err.contains("driver layer not attached"),
        "no driver-layer refusal",
    );
    hooks_attached(start.first(), c);
    // What the kernel said about probes it refused.
    for l in dmesg_lines()
        .iter()
        .filter(|l| l.contains("probe") || l.contains("Could not"))
    {
        println!("NVVM: dmesg: {l}");
    }
    let io = of(&recs, "ioctl");
    let rm = drv(&recs, "rm_ioctl");
    let rm_refused = start.first().is_some_and(|s| {
        s["probes"].as_array().is_some_and(|p| {
            p.iter()
                .any(|p| p["name"] == "rm_ioctl" && p["attached"] == false)
        })
    });
    // Each RM call the client made: nvprobe's record and rm_ioctl's copy
    // give the status the caller got.
    for l in said.iter().filter(|l| {
        l["call"]
            .as_str()
            .is_some_and(|s| s.starts_with("NV_ESC_RM"))
    }) {
        let want = l["status"].as_u64().unwrap_or(u64::MAX);
        let name = l["call"].as_str().unwrap_or("");
        let seen = io.iter().any(|r| {
            r["name"] == name
                && r["via"] == "driver"
                && r["status"]["code"]
                    .as_str()
                    .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
                    == Some(want)
        });
        c.check(
            seen,
            &format!(
                "{name} {}: the ioctl record has the caller's status {want:#x}",
                l["cmd"]
            ),
        );
        // Without rm_ioctl (see above), the written-back status is all
        // there is.
        if rm_refused {
            continue;
        }
        let copy = rm.iter().any(|r| {
            r["call"] == name
                && r["rm_status"]["code"]
                    .as_str()
                    .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
                    == Some(want)
        });
        c.check(
            copy,
            &format!(
                "{name} {}: rm_ioctl's kernel copy says {want:#x} too",
                l["cmd"]
            ),
        );
    }
    for name in ["UVM_INITIALIZE", "UVM_MM_INITIALIZE"] {
        let want = said
            .iter()
            .find(|l| l["call"] == name)
            .and_then(|l| l["status"].as_u64());
        c.check(
            io.iter().any(|r| {
                r["name"] == name
                    && r["device"]["kind"] == "uvm"
                    && r["status"]["code"]
                        .as_str()
                        .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
                        == want
            }),
            &format!("{name} on the uvm node with the caller's status {want:?}"),
        );
    }
    for f in ["uvm_va_space_create", "nvidia_open", "nvidia_close"] {
        c.check(
            !drv(&recs, f).is_empty(),
            &format!("{f} fired in the real module"),
        );
    }
    // The real cuInit with no GPU: whatever it returns, the verdict must
    // say it (from the uprobe) and name a call the recording has failing.
    let ret = cu.first().and_then(|v| v["cuInit"].as_i64());
    let v = of(&recs, "cuinit");
    let verdict = v.iter().find(|v| v["pid"] == u64::from(cu_pid));
    println!("NVVM: verdict {:?}", verdict.map(|v| &v["text"]));
    c.check(
        ret.is_some_and(|r| r != 0),
        &format!("the real cuInit failed ({ret:?})"),
    );
    c.check(
        verdict.is_some_and(|v| {
            v["class"] == "cuda"
                && v["result"] == "failed"
                && v["source"]
                    .as_str()
                    .is_some_and(|s| s.contains("libcuda uprobe"))
                && ret.is_some_and(|r| {
                    v["curesult"]
                        .as_str()
                        .is_some_and(|c| c.ends_with(&format!("({r})")))
                })
        }),
        "its verdict: a failed CUDA start-up with cuInit's result from the uprobe",
    );
    let failed = verdict.and_then(|v| v.get("failed_call"));
    c.check(
        failed.is_some_and(|f| {
            io.iter().any(|r| {
                r["pid"] == u64::from(cu_pid)
                    && r["ok"] == false
                    && r["status"]["name"] == f["result"]
                    && f["call"]
                        .as_str()
                        .is_some_and(|c| r["name"].as_str().is_some_and(|n| c.starts_with(n)))
            })
        }),
        &format!("the call it names failed so in the recording ({failed:?})"),
    );
    Ok(())
}

/// libcuda of another version against this module: the real mismatch.
fn mismatch(c: &mut Checks) -> anyhow::Result<()> {
    let Some(other) = fs::read_dir("/opt/other")?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libcuda.so."))
        })
    else {
        // apt offered one version only: said, not failed.
        println!("NVVM: skip real_mismatch: no libcuda of another version");
        return Ok(());
    };
    anyhow::ensure!(
        fs::metadata("/proc/driver/nvidia/version").is_ok(),
        "the real module is not loaded (real_calls failed first)"
    );
    // As on a host whose user-space driver is another version: the loader
    // finds it first, and nvprobe hooks it from the start.
    let lib = Path::new("/usr/lib/x86_64-linux-gnu");
    let name = other.file_name().map(|n| n.to_owned()).unwrap_or_default();
    fs::copy(&other, lib.join(&name))?;
    let link = lib.join("libcuda.so.1");
    let before = fs::read_link(&link)?;
    fs::remove_file(&link)?;
    std::os::unix::fs::symlink(&name, &link)?;
    let w = watch_as("mismatch", &["--raw"], None)?;
    let run = run_self(&["cuinit", "libcuda.so.1"]);
    let stopped = w.stop();
    fs::remove_file(&link)?;
    std::os::unix::fs::symlink(before, &link)?;
    let (pid, cu) = run?;
    let (recs, _) = stopped?;
    if let Ok(raw) = fs::read("/tmp/mismatch.ndjson") {
        println!(
            "NVVM-FILE: real-mismatch.ndjson {}",
            nvprobe::decode::hex_encode(&raw)
        );
    }
    println!("NVVM: cuinit {cu:?}");
    let v = of(&recs, "cuinit");
    let verdict = v.iter().find(|v| v["pid"] == u64::from(pid));
    println!("NVVM: verdict {:?}", verdict.map(|v| v.to_string()));
    let lib_ver = other
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .trim_start_matches("libcuda.so.")
                .to_owned()
        })
        .unwrap_or_default();
    let r = cu.first().and_then(|v| v["cuInit"].as_i64());
    // Not the no-GPU answer: libcuda sees the module's other version first.
    c.check(
        r.is_some_and(|r| r != 0 && r != 100),
        &format!("cuInit failed on the version, not the missing GPU ({r:?})"),
    );
    c.check(
        verdict.is_some_and(|v| {
            v["diagnoses"].as_array().is_some_and(|d| {
                d.iter().any(|d| {
                    d["id"] == "version_mismatch"
                        && d["evidence"].as_str().is_some_and(|e| e.contains(&lib_ver))
                })
            })
        }),
        &format!("the verdict names the version mismatch with libcuda {lib_ver}"),
    );
    Ok(())
}

/// RM controls on the real module, `n` of them, for the per-hit costs.
pub fn cost_client(n: u32) -> anyhow::Result<()> {
    let ctl = open(
        "/dev/nvidiactl",
        OFlag::O_RDWR | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let mut a = [0u8; 48];
    put32(&mut a, 12, 0x41);
    ioctl(&ctl, iowr(0x2b, 48), &mut a);
    let client = get32(&a, 8);
    let mut ids = [0u8; 128];
    let mut ok = 0u32;
    for _ in 0..n {
        let mut c = [0u8; 32];
        put32(&mut c, 0, client);
        put32(&mut c, 4, client);
        put32(&mut c, 8, 0x201);
        c[16..24].copy_from_slice(&(ids.as_mut_ptr() as u64).to_le_bytes());
        put32(&mut c, 24, ids.len() as u32);
        ok += u32::from(ioctl(&ctl, iowr(0x2a, 32), &mut c) == 0 && get32(&c, 28) == 0);
    }
    println!("{}", json!({ "ok": ok }));
    Ok(())
}

/// What the driver layer's programs cost per hit on the real handlers:
/// 3000 GET_ATTACHED_IDS controls with --bpf-stats (TCG: indicative).
fn cost(_: &Path, c: &mut Checks) -> anyhow::Result<()> {
    const N: u32 = 3000;
    anyhow::ensure!(
        fs::metadata("/proc/driver/nvidia/version").is_ok(),
        "the real module is not loaded (real_calls failed first)"
    );
    let w = watch_as("cost", &["--bpf-stats"], None)?;
    let run = run_self(&["real-cost", &N.to_string()]);
    let (recs, _) = w.stop()?;
    let (_, said) = run?;
    c.check(
        said.first().and_then(|v| v["ok"].as_u64()) == Some(u64::from(N)),
        &format!("{N} controls answered NV_OK"),
    );
    let progs: Vec<Value> = of(&recs, "summary")
        .iter()
        .flat_map(|s| s["bpf"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["run_count"].as_u64() >= Some(u64::from(N)))
        .collect();
    for p in &progs {
        println!("NVVM-BENCH-PROG: {p}");
    }
    // The module's ioctl entry point (535: nvidia_frontend_unlocked_ioctl)
    // ran its kprobe pair for every control.
    c.check(
        ["nvprobe_drv_enter_", "nvprobe_drv_exit_"].iter().all(|n| {
            progs
                .iter()
                .any(|p| p["program"].as_str().is_some_and(|x| x.starts_with(n)))
        }),
        "the entry point's kprobe pair ran for each control",
    );
    // The HMM kernel lets rm_ioctl's pair attach: it ran for each too.
    if hmm_stage() {
        let id = nvprobe_common::HOOK_RM_IOCTL;
        c.check(
            [
                format!("nvprobe_drv_enter_{id}"),
                format!("nvprobe_drv_exit_{id}"),
            ]
            .iter()
            .all(|n| progs.iter().any(|p| p["program"] == n.as_str())),
            "rm_ioctl's kprobe pair ran for each control",
        );
    }
    Ok(())
}

/// The nodes the driver would make (no GPU: no /dev/nvidia0), made again
/// after a scenario removed them.
pub(super) fn remake_nodes() -> anyhow::Result<()> {
    let major = uvm_major().ok_or_else(|| anyhow::anyhow!("no nvidia-uvm in /proc/devices"))?;
    for (path, ma, mi) in [
        ("/dev/nvidiactl", 195, 255),
        ("/dev/nvidia-uvm", major, 0),
        ("/dev/nvidia-uvm-tools", major, 1),
    ] {
        let _ = fs::remove_file(path);
        nix::sys::stat::mknod(
            path,
            nix::sys::stat::SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(ma, mi),
        )?;
    }
    Ok(())
}

/// A real cuInit under `nvprobe watch` named `name`: its process's
/// verdict, every record, and what the program printed.
fn traced_cuinit(name: &str) -> anyhow::Result<(Value, Vec<Value>, Vec<Value>)> {
    let w = watch_as(name, &["--raw"], None)?;
    let run = run_self(&["cuinit", "libcuda.so.1"]);
    let stopped = w.stop();
    let (pid, said) = run?;
    let (recs, _) = stopped?;
    if let Ok(raw) = fs::read(format!("/tmp/{name}.ndjson")) {
        println!(
            "NVVM-FILE: real-{name}.ndjson {}",
            nvprobe::decode::hex_encode(&raw)
        );
    }
    let verdict = of(&recs, "cuinit")
        .into_iter()
        .find(|v| v["pid"] == u64::from(pid))
        .cloned()
        .unwrap_or(Value::Null);
    println!("NVVM: {name}: cuinit {said:?}");
    println!("NVVM: {name}: verdict {verdict}");
    Ok((verdict, recs, said))
}

fn diagnoses(v: &Value) -> Vec<(String, String, String)> {
    v["diagnoses"]
        .as_array()
        .map(|d| {
            d.iter()
                .map(|d| {
                    (
                        d["id"].as_str().unwrap_or("").to_owned(),
                        d["severity"].as_str().unwrap_or("").to_owned(),
                        d["evidence"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The nodes missing as root: the real libcuda recreates them (mknod, or
/// nvidia-modprobe) and its start-up then fails for the reason it fails
/// without a GPU, which the verdict must still name; the missing nodes
/// are problems it got past.
fn nodes(c: &mut Checks) -> anyhow::Result<()> {
    anyhow::ensure!(
        fs::metadata("/proc/driver/nvidia/version").is_ok(),
        "the real module is not loaded (real_calls failed first)"
    );
    for p in ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"] {
        let _ = fs::remove_file(p);
    }
    let res = traced_cuinit("nodes");
    let made = fs::metadata("/dev/nvidiactl").is_ok();
    remake_nodes()?;
    let (v, recs, _) = res?;
    c.check(made, "the real libcuda recreated /dev/nvidiactl");
    let mknods = of(&recs, "mknod");
    let helpers = of(&recs, "cuinit")
        .into_iter()
        .filter(|x| x["class"] == "helper")
        .count();
    println!(
        "NVVM: nodes: {} mknod records, {helpers} helper verdicts",
        mknods.len()
    );
    c.check(
        !mknods.is_empty() || helpers > 0,
        "the node's creation is in the trace (a mknod, or nvidia-modprobe as a helper)",
    );
    let d = diagnoses(&v);
    c.check(
        v["class"] == "cuda" && v["result"] == "failed",
        &format!(
            "the start-up is a failed CUDA start-up ({} {})",
            v["class"], v["result"]
        ),
    );
    c.check(
        d.iter().any(|(_, _, e)| e.contains("/dev/nvidiactl"))
            && d.iter()
                .filter(|(_, _, e)| e.contains("/dev/nvidiactl"))
                .all(|(_, s, _)| s == "recovered"),
        &format!("the missing nodes are problems it got past, not the cause: {d:?}"),
    );
    c.check(
        v["text"]
            .as_str()
            .is_some_and(|t| !t.contains("/dev/nvidiactl")),
        &format!("the verdict's text names the real cause: {}", v["text"]),
    );
    Ok(())
}

/// nvidia_uvm not loaded: the verdict says the module is missing (libcuda
/// 535 looks for /sys/module/nvidia_uvm/initstate and gives up with 999).
fn no_uvm(dir: &Path, c: &mut Checks) -> anyhow::Result<()> {
    anyhow::ensure!(
        sh("rmmod nvidia_uvm"),
        "rmmod nvidia_uvm failed (dmesg: {})",
        dmesg_tail()
    );
    for p in ["/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"] {
        let _ = fs::remove_file(p);
    }
    let res = traced_cuinit("no-uvm");
    let back = sh(&format!("insmod {}", dir.join("nvidia-uvm.ko").display()));
    if back {
        remake_nodes()?;
    }
    let (v, recs, said) = res?;
    c.check(back, "nvidia_uvm loaded again afterwards");
    let r = said.first().and_then(|s| s["cuInit"].as_i64());
    c.check(r.is_some_and(|r| r != 0), &format!("cuInit failed ({r:?})"));
    let d = diagnoses(&v);
    let helpers: Vec<String> = of(&recs, "cuinit")
        .into_iter()
        .filter(|x| x["class"] == "helper")
        .map(|x| x["text"].to_string())
        .collect();
    println!("NVVM: no-uvm: helpers {helpers:?}");
    c.check(
        v["class"] == "cuda" && v["result"] == "failed",
        &format!("a failed CUDA start-up ({} {})", v["class"], v["result"]),
    );
    // Seen here: libcuda 535 reads /sys/module/nvidia_uvm/initstate, gets
    // ENOENT, returns 999 and runs no nvidia-modprobe.
    c.check(
        d.iter().any(|(id, s, e)| {
            id == "module_not_loaded"
                && s == "error"
                && e.ends_with("the nvidia_uvm kernel module is not loaded")
        }),
        &format!("the diagnosis: nvidia_uvm is not loaded ({d:?})"),
    );
    c.check(
        v["text"]
            .as_str()
            .is_some_and(|t| t.contains("nvidia_uvm kernel module is not loaded")),
        &format!("and the verdict's text says so: {}", v["text"]),
    );
    Ok(())
}

/// Booted on the HMM kernel (xtask passes `nvvm.stage=hmm`).
pub(super) fn hmm_stage() -> bool {
    fs::read_to_string("/proc/cmdline")
        .is_ok_and(|l| l.split_whitespace().any(|w| w == "nvvm.stage=hmm"))
}

pub fn run(dir: &Path) -> bool {
    let mut all_ok = true;
    type Scenario = fn(&Path, &mut Checks) -> anyhow::Result<()>;
    // The HMM kernel (nvvm.stage=hmm): the calls again (every hook
    // attaches there, rm_ioctl included), then HMM on and off.
    let scenarios: Vec<(&'static str, Scenario)> = if hmm_stage() {
        vec![
            ("real_calls", calls),
            ("real_cost", cost),
            ("real_hmm", super::realhmm::hmm),
        ]
    } else {
        vec![
            ("real_calls", calls),
            ("real_nodes", |_, c| nodes(c)),
            ("real_no_uvm", no_uvm),
            ("real_mismatch", |_, c| mismatch(c)),
            ("real_cost", cost),
        ]
    };
    for (name, f) in scenarios {
        let mut c = Checks {
            scenario: name,
            failed: 0,
            passed: 0,
        };
        if let Err(e) = f(dir, &mut c) {
            c.check(false, &format!("could not run: {e:#}"));
        }
        println!("NVVM: {name}: {} passed, {} failed", c.passed, c.failed);
        all_ok &= c.failed == 0;
    }
    all_ok
}
