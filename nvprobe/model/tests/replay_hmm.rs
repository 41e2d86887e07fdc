//! Tier 1 (kernel tier): the real NVIDIA open module 535.261.03 on the
//! tier's HMM kernel (Linux 6.1.192 built with CONFIG_HMM_MIRROR and
//! CONFIG_DEVICE_PRIVATE and CONFIG_KPROBE_EVENTS_ON_NOTRACE; no GPU),
//! recorded by `cargo xtask vm-test --only 6.1-hmm` and replayed through
//! today's decoder and correlator.

mod common;

use common::{ioctls, replay, start_of, status, verdicts};
use nvprobe_model::correlate::{DiagId, Outcome};
use nvprobe_model::decode::{DriverCall, Event, args::Arg};

fn driver<'a>(r: &'a common::Replay, f: &str, pid: u32) -> Vec<&'a DriverCall> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::Driver(d) if d.function == f && d.proc.pid == pid => Some(d),
            _ => None,
        })
        .collect()
}

fn inside(d: &DriverCall, outer: &DriverCall) -> bool {
    d.start_ns >= outer.start_ns && d.start_ns + d.duration_ns <= outer.start_ns + outer.duration_ns
}

/// The process that made the two UVM_INITIALIZEs (no flags, then
/// DISABLE_HMM), and what UVM_PAGEABLE_MEM_ACCESS told it each time.
fn client(r: &common::Replay) -> (u32, Vec<bool>) {
    let io = ioctls(r);
    let pid = io
        .iter()
        .find(|i| {
            i.name == Some("UVM_INITIALIZE")
                && matches!(i.args.get("flag_names"), Some(Arg::StrList(f)) if f == &["DISABLE_HMM"])
        })
        .expect("the client's DISABLE_HMM va_space")
        .proc
        .pid;
    let flags: Vec<String> = io
        .iter()
        .filter(|i| i.proc.pid == pid && i.name == Some("UVM_INITIALIZE"))
        .map(|i| format!("{:?}", i.args.get("flag_names")))
        .collect();
    assert_eq!(flags.len(), 2, "{flags:?}");
    let pageable = io
        .iter()
        .filter(|i| i.proc.pid == pid && i.name == Some("UVM_PAGEABLE_MEM_ACCESS"))
        .map(|i| {
            assert_eq!(status(i), Some("NV_OK"));
            match i.args.get("pageableMemAccess") {
                Some(Arg::Bool(b)) => *b,
                other => panic!("pageableMemAccess: {other:?}"),
            }
        })
        .collect();
    (pid, pageable)
}

/// HMM on (uvm_disable_hmm=N) or off (=1): what UVM told the client, and
/// the driver's HMM path inside each uvm_va_space_create.
fn hmm_mode(name: &str, on: bool) {
    let r = replay(name, None);
    let (pid, pageable) = client(&r);
    assert_eq!(pageable, [on, false], "{name}");
    let creates = driver(&r, "uvm_va_space_create", pid);
    assert_eq!(creates.len(), 2);
    assert!(creates.iter().all(|c| c.ok && c.result == "NV_OK"));
    for (i, c) in creates.iter().enumerate() {
        let init: Vec<_> = driver(&r, "uvm_hmm_va_space_initialize", pid)
            .into_iter()
            .filter(|d| inside(d, c))
            .collect();
        assert_eq!(init.len(), 1, "{name}: va_space {i}");
        assert_eq!(init[0].result, "void");
        // The HMM set-up registers the process's mmu notifiers (with no
        // subscription of its own) only where HMM is in effect.
        let reg: Vec<_> = driver(&r, "__mmu_notifier_register", pid)
            .into_iter()
            .filter(|d| inside(d, c))
            .collect();
        let want = usize::from(on && i == 0);
        assert_eq!(reg.len(), want, "{name}: va_space {i}");
        assert!(reg.iter().all(|d| d.ret == 0 && d.module == "vmlinux"));
    }
    // The registration of a GPU that does not exist, on the first va_space:
    // UVM's path down to the RM, each function's status the caller's.
    let reg = ioctls(&r)
        .into_iter()
        .find(|i| i.proc.pid == pid && i.name == Some("UVM_REGISTER_GPU"))
        .expect("the client's UVM_REGISTER_GPU");
    let want = status(reg).expect("a status");
    assert_ne!(want, "NV_OK");
    let chain: Vec<&DriverCall> = [
        "uvm_api_register_gpu",
        "uvm_va_space_register_gpu",
        "uvm_gpu_retain_by_uuid",
    ]
    .iter()
    .map(|f| {
        let d = driver(&r, f, pid);
        assert_eq!(d.len(), 1, "{name}: {f}");
        assert_eq!(d[0].result, want, "{name}: {f}");
        d[0]
    })
    .collect();
    assert!(inside(chain[1], chain[0]) && inside(chain[2], chain[1]));
    // Its verdict, replayed: the driver layer's records carry no fd, and
    // with two va_spaces UVM's answers cannot be told apart: no claim.
    let (_, v) = verdicts(name);
    let cv = v
        .iter()
        .find(|v| v.pid == pid)
        .expect("the client's verdict");
    assert_eq!(cv.result, Outcome::Failed);
    let d = cv
        .diagnoses
        .iter()
        .find(|d| d.id == DiagId::UvmStepFailed)
        .expect("uvm_step_failed");
    assert!(
        d.evidence
            .starts_with(&format!("UVM_REGISTER_GPU returned {want}")),
        "{}",
        d.evidence
    );
    assert!(!d.evidence.contains("UVM told"), "{}", d.evidence);
    assert!(d.hint.starts_with("if this kernel has HMM"), "{}", d.hint);
    // The real cuInit: the same zero-GPU failure either way, and UVM told
    // libcuda what it told the client's first va_space.
    let cu = v
        .iter()
        .find(|v| v.curesult.is_some())
        .expect("the cuInit with its uprobe");
    assert_eq!((cu.class.as_str(), cu.result.as_str()), ("cuda", "failed"));
    assert_eq!(cu.curesult.as_deref(), Some("CUDA_ERROR_UNKNOWN (999)"));
    assert!(cu.text.starts_with("cuInit returned CUDA_ERROR_UNKNOWN (999); the driver call that explains it: NV_ESC_RM_CONTROL NV_CONF_COMPUTE_CTRL_CMD_SYSTEM_GET_CAPABILITIES returned NV_ERR_INVALID_LOCK_STATE"), "{}", cu.text);
    let libcuda_pageable: Vec<Option<&Arg>> = ioctls(&r)
        .into_iter()
        .filter(|i| i.proc.pid == cu.pid && i.name == Some("UVM_PAGEABLE_MEM_ACCESS"))
        .map(|i| i.args.get("pageableMemAccess"))
        .collect();
    assert_eq!(libcuda_pageable, [Some(&Arg::Bool(on))], "{name}");
}

#[test]
fn hmm_on_gives_pageable_memory_access_and_the_mmu_notifier_setup() {
    hmm_mode("vm-6.1-hmm-535-hmm-on.ndjson", true);
}

#[test]
fn uvm_disable_hmm_turns_both_off() {
    hmm_mode("vm-6.1-hmm-535-hmm-off.ndjson", false);
}

/// On the HMM kernel rm_ioctl attaches (CONFIG_KPROBE_EVENTS_ON_NOTRACE):
/// the RM status read from the kernel's copy of the parameters equals the
/// status the driver wrote back to the caller, for every RM call.
#[test]
fn rm_ioctl_reads_the_status_the_caller_got() {
    let r = replay("vm-6.1-hmm-535-calls.ndjson", None);
    let start = start_of(&r);
    let probes = start["probes"].as_array().expect("probes");
    let refused: Vec<&serde_json::Value> = probes
        .iter()
        .filter(|p| p["layer"] == "driver" && p["attached"] != true)
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
    let rm: Vec<&DriverCall> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Driver(d) if d.function == "rm_ioctl" => Some(d),
            _ => None,
        })
        .collect();
    let io: Vec<_> = ioctls(&r)
        .into_iter()
        .filter(|i| i.name.is_some_and(|n| n.starts_with("NV_ESC_RM_")))
        .collect();
    assert!(io.len() >= 15, "{}", io.len());
    let mut statuses = std::collections::BTreeSet::new();
    for i in &io {
        let want = i.status.as_ref().expect("status").code;
        let copy = rm
            .iter()
            .find(|d| {
                d.proc.tid == i.proc.tid
                    && d.start_ns >= i.start_ns
                    && d.start_ns + d.duration_ns <= i.start_ns + i.duration_ns
            })
            .unwrap_or_else(|| panic!("no rm_ioctl inside {:?}", i.name));
        assert_eq!(copy.rm_status.as_ref().map(|s| s.code), Some(want));
        statuses.insert(status(i).unwrap_or("?"));
    }
    // Real answers of several kinds, not only NV_OK.
    for s in [
        "NV_OK",
        "NV_ERR_NOT_SUPPORTED",
        "NV_ERR_INVALID_CLIENT",
        "NV_ERR_INVALID_LOCK_STATE",
    ] {
        assert!(statuses.contains(s), "{s} not in {statuses:?}");
    }
}
