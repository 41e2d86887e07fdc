//! The real modules on the kernel tier's HMM kernel (xtask/src/vmkernel.rs:
//! CONFIG_HMM_MIRROR and CONFIG_DEVICE_PRIVATE, so nvidia_uvm builds its
//! HMM code). `real_hmm`: the driver's HMM path with HMM on (the default)
//! and with `uvm_disable_hmm=1`, what UVM tells the caller
//! (UVM_PAGEABLE_MEM_ACCESS), what nvprobe records and what `doctor` says.

use std::{os::fd::AsRawFd, path::Path, process::Command};

use nix::{
    fcntl::{OFlag, open},
    sys::stat::Mode,
};
use serde_json::{Value, json};

use super::{Checks, NVPROBE, drv, get32, of, put32, sh, watch_as};

/// UVM_INITIALIZE's flag that turns HMM off for one va_space.
const UVM_INIT_FLAGS_DISABLE_HMM: u64 = 1;

/// Two va_spaces in one process: UVM_INITIALIZE with no flags, then with
/// UVM_INIT_FLAGS_DISABLE_HMM, each followed by UVM_PAGEABLE_MEM_ACCESS
/// (whether HMM is in effect for it). One JSON line per va_space.
pub fn client() -> anyhow::Result<()> {
    let rw = OFlag::O_RDWR | OFlag::O_CLOEXEC;
    let mut fds = Vec::new();
    for flags in [0, UVM_INIT_FLAGS_DISABLE_HMM] {
        let fd = open("/dev/nvidia-uvm", rw, Mode::empty())?;
        // UVM_INITIALIZE_PARAMS (16 bytes): flags @0, rmStatus @8.
        let mut init = [0u8; 16];
        init[..8].copy_from_slice(&flags.to_le_bytes());
        // SAFETY: UVM commands are plain numbers with a pointer argument.
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), 0x3000_0001 as _, init.as_mut_ptr()) };
        // UVM_PAGEABLE_MEM_ACCESS_PARAMS (8 bytes): NvBool @0, rmStatus @4.
        let mut pm = [0u8; 8];
        // SAFETY: as above.
        let rp = unsafe { libc::ioctl(fd.as_raw_fd(), 39 as _, pm.as_mut_ptr()) };
        println!(
            "{}",
            json!({"flags": flags, "init_ret": r, "init_status": get32(&init, 8),
                "pageable_ret": rp, "pageable_status": get32(&pm, 4), "pageable": pm[0] != 0})
        );
        fds.push(fd);
    }
    // UVM_REGISTER_GPU_PARAMS (40 bytes; rmStatus @36) of a GPU that does
    // not exist, on the first va_space: the registration path runs and
    // fails in the RM with a real status.
    let mut g = [0u8; 40];
    g[..16].copy_from_slice(b"nvprobe-no-gpu!!");
    put32(&mut g, 24, u32::MAX);
    // SAFETY: as above.
    let r = unsafe { libc::ioctl(fds[0].as_raw_fd(), 37 as _, g.as_mut_ptr()) };
    println!(
        "{}",
        json!({"register_ret": r, "register_status": get32(&g, 36)})
    );
    Ok(())
}

fn disable_hmm_param() -> String {
    std::fs::read_to_string("/sys/module/nvidia_uvm/parameters/uvm_disable_hmm")
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// `nvprobe doctor --json`'s uvm_hmm check.
fn doctor_hmm() -> Value {
    let o = Command::new(NVPROBE).args(["doctor", "--json"]).output();
    let doc: Value = match &o {
        Ok(o) => serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            println!(
                "NVVM: doctor: {} ({e}): stdout {:?} stderr {:?}",
                o.status,
                String::from_utf8_lossy(&o.stdout)
                    .chars()
                    .take(300)
                    .collect::<String>(),
                String::from_utf8_lossy(&o.stderr)
                    .chars()
                    .take(600)
                    .collect::<String>()
            );
            Value::Null
        }),
        Err(e) => {
            println!("NVVM: doctor: {e}");
            Value::Null
        }
    };
    doc["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["id"] == "uvm_hmm").cloned())
        .unwrap_or(Value::Null)
}

/// A driver record's [start, end] in ns.
fn span(r: &Value) -> (u64, u64) {
    let s = r["start_ns"].as_u64().unwrap_or(0);
    (s, s + r["duration_ns"].as_u64().unwrap_or(0))
}

/// One mode (HMM on, or uvm_disable_hmm=1): the client and a real cuInit
/// under `nvprobe watch`, checked against what the driver does in it.
fn mode(name: &str, hmm_on: bool, c: &mut Checks) -> anyhow::Result<()> {
    let w = watch_as(name, &["--raw"], None)?;
    let (pid, said) = super::real::run_self(&["real-hmm-client"])?;
    let (cu_pid, cu) = super::real::run_self(&["cuinit", "libcuda.so.1"])?;
    let (recs, _) = w.stop()?;
    if let Ok(raw) = std::fs::read(format!("/tmp/{name}.ndjson")) {
        println!(
            "NVVM-FILE: real-{name}.ndjson {}",
            nvprobe::decode::hex_encode(&raw)
        );
    }
    for l in &said {
        println!("NVVM: {name}: client {l}");
    }
    println!("NVVM: {name}: cuinit {cu:?}");
    // What UVM told the caller: HMM in effect for the va_space without
    // the flag, only when the module's HMM is on.
    let (va, reg_said) = said.split_at(said.len().min(2));
    let pageable: Vec<Option<bool>> = va.iter().map(|l| l["pageable"].as_bool()).collect();
    c.check(
        va.len() == 2
            && va
                .iter()
                .all(|l| l["init_status"] == 0 && l["pageable_status"] == 0),
        &format!("{name}: both UVM_INITIALIZEs and UVM_PAGEABLE_MEM_ACCESS: NV_OK"),
    );
    c.check(
        pageable == [Some(hmm_on), Some(false)],
        &format!(
            "{name}: pageable memory access {pageable:?}: HMM {} for the va_space without DISABLE_HMM, off with it",
            if hmm_on { "on" } else { "off" }
        ),
    );
    // nvprobe's records of the same calls: the flags and the answer.
    let mine = |r: &&Value| r["pid"] == u64::from(pid);
    let io: Vec<&Value> = of(&recs, "ioctl").into_iter().filter(mine).collect();
    let pm: Vec<Option<bool>> = io
        .iter()
        .filter(|r| r["name"] == "UVM_PAGEABLE_MEM_ACCESS")
        .map(|r| r["args"]["pageableMemAccess"].as_bool())
        .collect();
    c.check(
        pm == pageable,
        &format!("{name}: nvprobe decodes pageableMemAccess as the caller got it ({pm:?})"),
    );
    let flags: Vec<Value> = io
        .iter()
        .filter(|r| r["name"] == "UVM_INITIALIZE")
        .map(|r| r["args"]["flag_names"].clone())
        .collect();
    c.check(
        flags == [json!([]), json!(["DISABLE_HMM"])],
        &format!("{name}: UVM_INITIALIZE's flags decoded ({flags:?})"),
    );
    // The driver's HMM path, by the driver layer: every va_space runs
    // uvm_hmm_va_space_initialize inside uvm_va_space_create; the mmu
    // notifier set-up for HMM (__mmu_notifier_register with no
    // subscription) happens only where HMM is in effect.
    let creates: Vec<(u64, u64)> = drv(&recs, "uvm_va_space_create")
        .into_iter()
        .filter(mine)
        .map(span)
        .collect();
    let within = |f: &str| -> Vec<usize> {
        creates
            .iter()
            .map(|(s, e)| {
                drv(&recs, f)
                    .into_iter()
                    .filter(mine)
                    .filter(|r| {
                        let (a, b) = span(r);
                        a >= *s && b <= *e
                    })
                    .count()
            })
            .collect()
    };
    c.check(
        creates.len() == 2,
        &format!(
            "{name}: uvm_va_space_create fired for both va_spaces ({})",
            creates.len()
        ),
    );
    let init = within("uvm_hmm_va_space_initialize");
    c.check(
        init == [1, 1],
        &format!("{name}: uvm_hmm_va_space_initialize fired inside each ({init:?})"),
    );
    let reg = within("__mmu_notifier_register");
    let want = [usize::from(hmm_on), 0];
    c.check(
        reg == want,
        &format!("{name}: __mmu_notifier_register inside them {reg:?} (want {want:?})"),
    );
    let regs: Vec<&Value> = drv(&recs, "__mmu_notifier_register")
        .into_iter()
        .filter(mine)
        .collect();
    c.check(
        regs.iter().all(|r| r["ret"] == 0 && r["ok"] == true),
        &format!("{name}: each registration returned 0"),
    );
    // The registration of a GPU that does not exist: UVM's path down to
    // the RM, each function's NV_STATUS the one the caller got, and the
    // client's verdict with what UVM told it about the va_space.
    let reg_status = reg_said.first().and_then(|l| l["register_status"].as_u64());
    c.check(
        reg_said.first().is_some_and(|l| l["register_ret"] == 0)
            && reg_status.is_some_and(|s| s != 0),
        &format!("{name}: UVM_REGISTER_GPU of no GPU fails with a status ({reg_status:?})"),
    );
    for f in [
        "uvm_api_register_gpu",
        "uvm_va_space_register_gpu",
        "uvm_gpu_retain_by_uuid",
    ] {
        let got: Vec<Option<u64>> = drv(&recs, f)
            .into_iter()
            .filter(mine)
            .map(|r| r["ret"].as_u64())
            .collect();
        c.check(
            got == [reg_status],
            &format!("{name}: {f} returned the caller's status ({got:?})"),
        );
    }
    let cv = of(&recs, "cuinit")
        .into_iter()
        .find(|v| v["pid"] == u64::from(pid))
        .cloned()
        .unwrap_or(Value::Null);
    println!("NVVM: {name}: client verdict {cv}");
    let diag = cv["diagnoses"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["id"] == "uvm_step_failed"))
        .cloned()
        .unwrap_or(Value::Null);
    let ev = diag["evidence"].as_str().unwrap_or("");
    let hint = diag["hint"].as_str().unwrap_or("");
    c.check(
        cv["result"] == "failed"
            && ev.starts_with("UVM_REGISTER_GPU returned")
            // The driver layer's records carry no fd: with two va_spaces
            // in the process, UVM's answers cannot be told apart.
            && !ev.contains("UVM told")
            && if hmm_on {
                hint.contains("has HMM and it is enabled") && hint.contains("uvm_disable_hmm=1")
            } else {
                hint.starts_with("HMM is already disabled")
            },
        &format!("{name}: the client's verdict weighs UVM's answer: {ev} / {hint}"),
    );
    // The real cuInit: the same verdict rules as everywhere.
    let ret = cu.first().and_then(|v| v["cuInit"].as_i64());
    let v = of(&recs, "cuinit")
        .into_iter()
        .find(|v| v["pid"] == u64::from(cu_pid))
        .cloned()
        .unwrap_or(Value::Null);
    println!("NVVM: {name}: verdict {}", v["text"]);
    let cu_io: Vec<String> = of(&recs, "ioctl")
        .into_iter()
        .filter(|r| r["pid"] == u64::from(cu_pid) && r["device"]["kind"] == "uvm")
        .map(|r| format!("{} {}", r["name"], r["args"]))
        .collect();
    println!("NVVM: {name}: cuInit's UVM calls {cu_io:?}");
    c.check(
        v["class"] == "cuda"
            && v["result"] == "failed"
            && ret.is_some_and(|r| {
                r != 0
                    && v["curesult"]
                        .as_str()
                        .is_some_and(|s| s.ends_with(&format!("({r})")))
            }),
        &format!("{name}: the real cuInit's verdict: failed with its result ({ret:?})"),
    );
    // doctor on the same host.
    let d = doctor_hmm();
    println!("NVVM: {name}: doctor {d}");
    let ev = d["evidence"].as_str().unwrap_or("");
    c.check(
        ev.contains("nvidia_uvm is built with HMM")
            && ev.contains(if hmm_on {
                "uvm_disable_hmm=N"
            } else {
                "uvm_disable_hmm=Y"
            })
            && ev.contains("kernel config has CONFIG_HMM_MIRROR=y and CONFIG_DEVICE_PRIVATE=y"),
        &format!("{name}: doctor's evidence: {ev}"),
    );
    c.check(
        if hmm_on {
            d["verdict"] == "warn"
                && d["hint"]
                    .as_str()
                    .is_some_and(|h| h.contains("uvm_disable_hmm=1"))
        } else {
            d["verdict"] == "ok"
        },
        &format!("{name}: doctor's verdict {} ({})", d["verdict"], d["hint"]),
    );
    Ok(())
}

/// HMM on, then nvidia_uvm reloaded with uvm_disable_hmm=1.
pub fn hmm(dir: &Path, c: &mut Checks) -> anyhow::Result<()> {
    let syms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    c.check(
        syms.lines()
            .any(|l| l.ends_with("uvm_hmm_va_space_initialize\t[nvidia_uvm]")),
        "this nvidia_uvm is built with HMM (uvm_hmm_va_space_initialize in kallsyms)",
    );
    // The table's prototypes against this build's own BTF (the modules
    // were built against a tree with vmlinux, so they carry BTF).
    let hooks: Value = Command::new(NVPROBE)
        .args(["hooks", "--json"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice(&o.stdout).ok())
        .unwrap_or(Value::Null);
    let rows = hooks["hooks"].as_array().cloned().unwrap_or_default();
    // Brought back as a fixture (the format of the H200's):
    // name<TAB>module<TAB>prototype, "-" where the BTF has none.
    let dump: String = rows
        .iter()
        .map(|h| {
            format!(
                "{}\t{}\t{}\n",
                h["name"].as_str().unwrap_or("?"),
                h["module"].as_str().unwrap_or("?"),
                h["btf"].as_str().unwrap_or("-")
            )
        })
        .collect();
    println!(
        "NVVM-FILE: hook-prototypes.txt {}",
        nvprobe::decode::hex_encode(dump.as_bytes())
    );
    let present: Vec<&Value> = rows.iter().filter(|h| h["kallsyms"] == true).collect();
    let off: Vec<String> = present
        .iter()
        .filter(|h| h["prototype_check"] != "matches")
        .map(|h| format!("{}: {} {}", h["name"], h["prototype_check"], h["btf"]))
        .collect();
    println!(
        "NVVM: hooks: {} of {} in this build; prototype differences: {off:?}",
        present.len(),
        rows.len()
    );
    c.check(
        std::fs::metadata("/sys/kernel/btf/nvidia_uvm").is_ok()
            && !present.is_empty()
            && off.is_empty(),
        &format!(
            "every hook this build has matches its prototype in the module's BTF ({} hooks)",
            present.len()
        ),
    );
    c.check(disable_hmm_param() == "N", "uvm_disable_hmm=N by default");
    mode("hmm-on", true, c)?;
    anyhow::ensure!(sh("rmmod nvidia_uvm"), "rmmod nvidia_uvm failed");
    anyhow::ensure!(
        sh(&format!(
            "insmod {} uvm_disable_hmm=1",
            dir.join("nvidia-uvm.ko").display()
        )),
        "insmod nvidia-uvm.ko uvm_disable_hmm=1 failed"
    );
    super::real::remake_nodes()?;
    c.check(
        disable_hmm_param() == "Y",
        "reloaded with uvm_disable_hmm=Y",
    );
    mode("hmm-off", false, c)
}
