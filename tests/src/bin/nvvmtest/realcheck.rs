//! Checks of the real-module scenarios (real.rs) on nvprobe's records:
//! the hooks the build has, the RM control parameters, and the driver
//! layer's ioctl records against the syscall layer's.

use std::process::Command;

use serde_json::{Value, json};

use super::{Checks, of};

/// Every hook of the table that this build has, attached.
pub fn hooks_attached(start: Option<&&Value>, c: &mut Checks) {
    let probes: Vec<&Value> = start
        .and_then(|s| s["probes"].as_array())
        .map(|p| p.iter().filter(|p| p["layer"] == "driver").collect())
        .unwrap_or_default();
    let refused: Vec<String> = probes
        .iter()
        .filter(|p| p["attached"] != true)
        .map(|p| format!("{}: {}", p["target"], p["error"].as_str().unwrap_or("?")))
        .collect();
    let attached = probes.len() - refused.len();
    println!("NVVM: driver probes: {attached} attached; refused: {refused:?}");
    // A hook missing from a build (HMM code without CONFIG_DEVICE_PRIVATE)
    // gets no probe. Every one that the build has attaches, but for the RM
    // core's functions (rm_ioctl, rm_init_adapter: nv-kernel.o is built
    // without ftrace entries) on a kernel that refuses kprobes on such
    // functions (Debian's: "Could not probe notrace function"), which
    // nvprobe must say.
    // The HMM kernel has CONFIG_KPROBE_EVENTS_ON_NOTRACE: nothing refused.
    if super::real::hmm_stage() {
        c.check(
            attached >= 8 && refused.is_empty(),
            &format!(
                "every driver hook that this build has attaches ({attached}), rm_ioctl included"
            ),
        );
    } else {
        c.check(
            attached >= 8
                && refused.iter().all(|r| {
                    r.contains("is not an ftrace location")
                        && r.contains("CONFIG_KPROBE_EVENTS_ON_NOTRACE")
                }),
            &format!(
                "every driver hook that this build has attaches, or nvprobe says why not ({attached} attached)"
            ),
        );
    }
    // The table against this build, for the record.
    if let Ok(o) = Command::new(super::NVPROBE).args(["hooks"]).output() {
        for l in String::from_utf8_lossy(&o.stdout).lines() {
            println!("NVVM: hooks: {l}");
        }
    }
}

/// The parameters behind NVOS54.params, copied by the kernel side from the
/// real RM's answers: the build version through its pointer, the (empty)
/// list of attached GPUs.
pub fn rm_params_checks(said: &[Value], recs: &[Value], c: &mut Checks) {
    let got = said
        .iter()
        .find(|l| l["cmd"] == 0x101)
        .and_then(|l| l["driver_version"].as_str())
        .unwrap_or("");
    let rec = |control: &str| {
        of(recs, "ioctl")
            .into_iter()
            .filter(|r| r["args"]["control"] == control && r["ok"] == true)
            .collect::<Vec<_>>()
    };
    let bv = rec("0x101");
    println!(
        "NVVM: build version: client {got:?}, nvprobe {:?}",
        bv.iter()
            .map(|r| &r["args"]["driver_version"])
            .collect::<Vec<_>>()
    );
    c.check(
        !got.is_empty() && bv.iter().any(|r| r["args"]["driver_version"] == got),
        &format!(
            "the build version behind the parameters' pointer, as the caller got it ({got:?})"
        ),
    );
    let ids = rec("0x201");
    c.check(
        !ids.is_empty() && ids.iter().all(|r| r["args"]["gpu_ids"] == json!([])),
        "GPU_GET_ATTACHED_IDS' parameters: no GPU attached",
    );
}

/// What a client's ioctl records say, without handles or fds: name,
/// control, status or errno, return value; and which layer made them.
fn call_keys(recs: &[Value], pid: u32) -> (Vec<String>, Vec<String>) {
    let mut keys = Vec::new();
    let mut via = Vec::new();
    for r in of(recs, "ioctl")
        .into_iter()
        .filter(|r| r["pid"] == u64::from(pid))
    {
        keys.push(format!(
            "{} {} {} {}",
            r["name"].as_str().unwrap_or("?"),
            r["args"]["control_name"]
                .as_str()
                .or(r["args"]["control"].as_str())
                .unwrap_or(""),
            r["status"]["name"]
                .as_str()
                .or(r["errno"].as_str())
                .unwrap_or("-"),
            r["ret"]
        ));
        via.push(r["via"].as_str().unwrap_or("syscall").to_owned());
    }
    (keys, via)
}

/// The driver layer's ioctl records (the module's entry point) against the
/// syscall layer's (the ioctl tracepoints) for the same client's calls.
pub fn same_calls_both_layers(drv: &[Value], dpid: u32, sys: &[Value], spid: u32, c: &mut Checks) {
    let (dk, dvia) = call_keys(drv, dpid);
    let (sk, svia) = call_keys(sys, spid);
    for (d, s) in dk.iter().zip(sk.iter()) {
        println!("NVVM: layers: driver [{d}] syscall [{s}]");
    }
    c.check(
        !dk.is_empty() && dvia.iter().all(|v| v == "driver") && svia.iter().all(|v| v == "syscall"),
        &format!(
            "the driver layer made the default run's ioctl records, the syscall layer the other's ({} and {})",
            dk.len(),
            sk.len()
        ),
    );
    c.check(
        dk == sk,
        "driver and syscall layers: the same calls, names and results, in the same order",
    );
}
