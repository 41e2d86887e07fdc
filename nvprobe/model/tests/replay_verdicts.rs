//! Tier 1: real driver traffic recorded on the GPU machine (NVIDIA H200,
//! open kernel module 580.159.04, `nvprobe watch --json --raw`), replayed
//! through today's decoder. The raw kernel records are the truth; the
//! assertions are on what the decoder makes of them.
//!
//! These replays need the model crate alone (no BPF, no binary, no root);
//! the tier-1 tests that run the nvprobe binary (decode, doctor --root)
//! are in tests/tests/.
//!
//! This file: the correlator's stages, verdicts, diagnoses and breakdowns
//! for the recorded start-ups.

mod common;

use common::{ioctls, replay, stage_ids, start_of, status, verdicts};
use nvprobe_model::correlate::{Class, DiagId, Outcome};
use nvprobe_model::decode::CudaPhase;
use nvprobe_model::{
    correlate::CuInit,
    decode::{self, Event},
    render::schema,
};

#[test]
fn real_cuinit_stages_in_the_580_order() {
    let (records, v) = verdicts("h200-580.159.04-cuinit-ctypes.ndjson");
    assert_eq!(v.len(), 1);
    let v = &v[0];
    // The real order: the version handshake runs on a probe client (S2
    // before S1), and UVM init (S4) comes before the GPU attach (S3).
    assert_eq!(
        stage_ids(v),
        ["S0", "S2", "S1", "S4", "S3", "S5", "S6", "S7"]
    );
    assert_eq!(v.result, Outcome::Ok);
    assert_eq!(v.source, "driver calls alone (no libcuda uprobe)");
    let s7 = v.stages.iter().find(|s| s.stage == "S7").expect("S7");
    assert_eq!(s7.via, "UVM_REGISTER_GPU");
    assert!(
        s7.at_ms > 200.0,
        "REGISTER_GPU ends the 217 ms start-up: {}",
        s7.at_ms
    );
    assert!(v.diagnoses.is_empty(), "{:?}", v.diagnoses);
    let stage_records = records
        .iter()
        .filter(|r| matches!(r, nvprobe_model::correlate::Record::Stage { .. }))
        .count();
    assert_eq!(stage_records, 8, "one stage record per transition");
}

#[test]
fn real_failures_get_their_verdicts() {
    let (_, v) = verdicts("h200-580.159.04-uvm-masked.ndjson");
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].result, Outcome::Failed);
    assert_eq!(stage_ids(&v[0]), ["S0", "S2", "S1"]);
    // /dev/null over the uvm node: another file at the path. Loading the
    // module or creating the node would not replace it, so neither is
    // suggested (issue 38: a hint the evidence rules out).
    let d = &v[0].diagnoses[0];
    assert_eq!(d.id, DiagId::NodeWrongDevice);
    assert!(
        d.evidence.contains("/dev/nvidia-uvm is device 1:3"),
        "{}",
        d.evidence
    );
    assert!(d.hint.contains("bind mounts"), "{}", d.hint);
    assert!(!d.hint.contains("modprobe"), "{}", d.hint);

    // Without the process events (this recording predates them) the
    // BUSY_RETRY is ambiguous, and the verdict says so instead of blaming HMM.
    let (_, v) = verdicts("h200-580.159.04-timeout-kill.ndjson");
    assert_eq!(v[0].result, Outcome::Failed);
    let f = v[0].failed_call.as_ref().expect("failed call");
    assert_eq!(
        (f.call.as_str(), f.result.as_str()),
        ("UVM_REGISTER_GPU", "NV_ERR_BUSY_RETRY")
    );
    assert_eq!(v[0].diagnoses[0].id, DiagId::UvmBusyRetry);
    assert!(
        v[0].diagnoses[0].hint.contains("signal"),
        "{}",
        v[0].diagnoses[0].hint
    );

    let (_, v) = verdicts("h200-580.159.04-novisible.ndjson");
    let py: Vec<_> = v.iter().filter(|x| x.comm == "python3").collect();
    assert_eq!(py.len(), 1);
    assert!(
        !py[0].stages.iter().any(|s| s.stage == "S7"),
        "no GPU registered"
    );
    assert!(py[0].diagnoses.is_empty());

    // Recorded with the process layer and the libcuda uprobes on: each of
    // the 16 has its own verdict from cuInit's own return, all 8 stages.
    let (_, v) = verdicts("h200-580.159.04-concurrent16.ndjson");
    assert_eq!(v.len(), 16);
    for x in &v {
        assert_eq!(x.result, Outcome::Ok, "{}", x.text);
        assert_eq!(
            x.source,
            "libcuda uprobe (cuInit's return) and driver calls"
        );
        assert_eq!(
            stage_ids(x),
            ["S0", "S2", "S1", "S4", "S3", "S5", "S6", "S7"],
            "{}",
            x.text
        );
    }
}

#[test]
fn real_timeouts_and_itimers_are_reported_as_kills_not_hangs() {
    // Recorded with the process layer on the H200: a clean cuInit, cuInit
    // under `timeout -s TERM 0.15`, and cuInit with setitimer(0.12 s).
    let (_, v) = verdicts("h200-580.159.04-verdicts.ndjson");
    let ok = v.iter().filter(|x| x.result == Outcome::Ok).count();
    assert!(ok >= 1, "the clean run: {v:#?}");
    let killed: Vec<_> = v.iter().filter(|x| x.result == Outcome::Killed).collect();
    assert_eq!(killed.len(), 2, "{v:#?}");
    let term = killed
        .iter()
        .find(|x| x.signal.as_ref().is_some_and(|s| s.name == "SIGTERM"))
        .expect("SIGTERM");
    assert!(
        term.text.starts_with("killed by SIGTERM from timeout[")
            && term
                .text
                .ends_with(" in UVM_REGISTER_GPU for GPU-b913914d-600b-40a8-dc6a-fdee51c74b76; the call was still running"),
        "{}",
        term.text
    );
    assert_eq!(term.diagnoses[0].id, DiagId::KilledBySignal);
    let alrm = killed
        .iter()
        .find(|x| x.signal.as_ref().is_some_and(|s| s.name == "SIGALRM"))
        .expect("SIGALRM");
    assert!(
        alrm.text
            .contains("from the kernel (a timer the process set: alarm, setitimer)"),
        "{}",
        alrm.text
    );
    // The BUSY_RETRY that the interrupted REGISTER_GPU returned is not
    // blamed on HMM when the signal explains it.
    for k in &killed {
        assert!(
            k.diagnoses
                .iter()
                .all(|d| d.id != DiagId::UvmStepFailed && d.id != DiagId::UvmBusyRetry),
            "{:?}",
            k.diagnoses
        );
    }
}

#[test]
fn real_uprobes_fire_for_ctypes_and_torch_and_name_the_curesult() {
    // Recorded with libcuda uprobes on the H200: ctypes cuInit, torch (cudart
    // reaches libcuda through cuGetProcAddress), and cuInit with
    // /dev/nvidia-uvm masked by /dev/null.
    let r = replay("h200-580.159.04-uprobes.ndjson", None);
    let start = start_of(&r);
    assert!(
        start["libcuda"][0]["functions"]
            .as_array()
            .expect("functions")
            .len()
            >= 5
    );
    let cuda: Vec<&decode::CudaCall> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Cuda(c) => Some(c),
            _ => None,
        })
        .collect();
    let returns = |f: &str| -> Vec<&decode::CudaCall> {
        cuda.iter()
            .copied()
            .filter(|c| c.func == f && c.phase == CudaPhase::Return)
            .collect()
    };
    let inits = returns("cuInit");
    assert_eq!(inits.len(), 3, "ctypes, torch and the masked run");
    let names: Vec<_> = inits.iter().map(|c| c.result_name).collect();
    assert_eq!(
        names,
        [
            Some("CUDA_SUCCESS"),
            Some("CUDA_SUCCESS"),
            Some("CUDA_ERROR_UNKNOWN")
        ]
    );
    // torch asks the driver version first, through cuGetProcAddress.
    let ver = returns("cuDriverGetVersion");
    assert_eq!(ver[0].value, Some(13000));
    assert!(
        returns("cuDeviceGetCount")
            .iter()
            .any(|c| c.value == Some(1))
    );

    let (_, v) = verdicts("h200-580.159.04-uprobes.ndjson");
    let by_result = |res: &str| {
        v.iter()
            .filter(|x| x.result.as_str() == res)
            .collect::<Vec<_>>()
    };
    assert_eq!(by_result("ok").len(), 2);
    for ok in by_result("ok") {
        assert_eq!(ok.curesult.as_deref(), Some("CUDA_SUCCESS (0)"));
        assert!(ok.stages.iter().any(|s| s.stage == "S7"));
    }
    let failed = by_result("failed");
    assert_eq!(
        failed.len(),
        1,
        "{:#?}",
        failed
            .iter()
            .map(|x| (&x.comm, x.pid, &x.text))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        failed[0].curesult.as_deref(),
        Some("CUDA_ERROR_UNKNOWN (999)")
    );
    assert_eq!(
        failed[0].diagnoses.len(),
        1,
        "one diagnosis, not one per open: {:?}",
        failed[0].diagnoses
    );
    // The uvm node masked with /dev/null (1:3): another file at the path.
    assert_eq!(failed[0].diagnoses[0].id, DiagId::NodeWrongDevice);
    assert_eq!(
        failed[0].diagnoses[0].evidence,
        "/dev/nvidia-uvm is device 1:3 (/dev/null, no NVIDIA device), not the NVIDIA uvm node"
    );
    // torch's short-lived helper processes (comm ld-linux-x86-64) open the
    // GPU and exit cleanly: not failures.
    for x in v.iter().filter(|x| x.comm != "python3") {
        assert_eq!(x.result, Outcome::Exited, "{}", x.text);
        assert!(x.text.starts_with("exited with status 0"), "{}", x.text);
    }
}

#[test]
fn real_no_device_and_fork_after_init_rules() {
    // H200: `CUDA_VISIBLE_DEVICES= cuInit` and a python parent that forks
    // after cuInit; the child calls cuInit again.
    let (_, v) = verdicts("h200-580.159.04-rules.ndjson");
    let nodev = v
        .iter()
        .find(|x| x.curesult.as_deref() == Some("CUDA_ERROR_NO_DEVICE (100)"))
        .expect("the CUDA_VISIBLE_DEVICES= run");
    assert_eq!(nodev.diagnoses[0].id, DiagId::NoVisibleDevices);
    assert!(nodev.diagnoses[0].hint.contains("CUDA_VISIBLE_DEVICES"));
    let child = v
        .iter()
        .find(|x| x.curesult.as_deref() == Some("CUDA_ERROR_NOT_INITIALIZED (3)"))
        .expect("the forked child");
    assert_eq!(child.calls, 0, "libcuda refused without calling the driver");
    assert_eq!(child.diagnoses[0].id, DiagId::ForkAfterInit);
    assert!(child.diagnoses[0].hint.contains("spawn"));
    let parent = v
        .iter()
        .find(|x| x.result == Outcome::Ok)
        .expect("the parent");
    assert!(parent.diagnoses.is_empty());
}

/// The kernel tier's HMM-failure run (Debian 6.1 under qemu, the stand-in
/// modules with uvm_pmm_devmem_init failing NV_ERR_NO_MEMORY after 300 ms;
/// `watch --raw` by default, so the ioctl records come from the driver
/// layer), replayed here where no kernel has kprobes: the driver records
/// decode with the rm_ioctl kernel-copy statuses, and the correlator gives
/// the breakdown and the verdict the VM gave.
#[test]
fn the_vm_hmm_failure_replays_with_its_breakdown_and_verdict() {
    let name = "vm-6.1-standin-hmm-failure.ndjson";
    let r = replay(name, None);
    for rec in &r.records {
        schema::validate(rec).unwrap_or_else(|e| panic!("{e}\n{rec}"));
    }
    let start = start_of(&r);
    assert_eq!(start["ioctls_in_driver"], true);
    let drv: Vec<&decode::DriverCall> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Driver(d) => Some(d),
            _ => None,
        })
        .collect();
    let pmm = drv
        .iter()
        .find(|d| d.function == "uvm_pmm_devmem_init")
        .expect("the HMM step");
    assert_eq!(
        (pmm.module, pmm.result.as_str(), pmm.ok),
        ("nvidia_uvm", "NV_ERR_NO_MEMORY", false)
    );
    assert!(pmm.duration_ns >= 300_000_000, "{}", pmm.duration_ns);
    let rm_bad = drv
        .iter()
        .find(|d| {
            d.function == "rm_ioctl"
                && d.rm_status.as_ref().and_then(|s| s.name) == Some("NV_ERR_INVALID_COMMAND")
        })
        .expect("the unknown control, from rm_ioctl's kernel copy");
    assert_eq!(rm_bad.call.as_deref(), Some("NV_ESC_RM_CONTROL"));
    assert!(!rm_bad.ok);
    let io = ioctls(&r);
    assert!(io.iter().all(|i| i.via == Some("driver") && i.fd == -1));
    let reg = io
        .iter()
        .find(|i| i.name == Some("UVM_REGISTER_GPU"))
        .expect("REGISTER_GPU");
    assert_eq!(status(reg), Some("NV_ERR_NO_MEMORY"));

    let (records, v) = verdicts(name);
    let b = records
        .iter()
        .find_map(|x| match x {
            nvprobe_model::correlate::Record::Breakdown(b) if b.call == "UVM_REGISTER_GPU" => {
                Some(b)
            }
            _ => None,
        })
        .expect("a breakdown of the failed REGISTER_GPU");
    assert!(
        b.text.ends_with(" in uvm_pmm_devmem_init, which returned NV_ERR_NO_MEMORY (in uvm_gpu_retain_by_uuid < uvm_va_space_register_gpu < uvm_api_register_gpu)"),
        "{}",
        b.text
    );
    let spans: Vec<&str> = b.spans.iter().map(|s| s.function).collect();
    assert_eq!(
        spans,
        [
            "uvm_pmm_devmem_init",
            "uvm_gpu_retain_by_uuid",
            "uvm_va_space_register_gpu",
            "uvm_api_register_gpu"
        ]
    );
    let d = v
        .iter()
        .flat_map(|x| x.diagnoses.iter())
        .find(|d| d.id == DiagId::UvmStepFailed)
        .expect("the UVM step diagnosis");
    assert!(
        d.evidence.starts_with(
            "UVM_REGISTER_GPU returned NV_ERR_NO_MEMORY; in the driver: UVM_REGISTER_GPU "
        ),
        "{}",
        d.evidence
    );
    assert!(d.hint.contains("uvm_disable_hmm=1"), "{}", d.hint);
}

/// The kernel tier on the real NVIDIA open module (Debian's 535.261.03
/// with the zero-GPU patch, Debian 6.1 under qemu; `cargo xtask vm-test`'s
/// real-driver stage): the real libcuda's cuInit with no GPU, replayed.
/// The RM core's rm_ioctl cannot be kprobed there (not an ftrace
/// location), and the recording says so; the verdict comes from cuInit's
/// uprobe and the written-back RM statuses.
#[test]
fn the_real_module_in_the_vm_replays_with_its_verdict() {
    let name = "vm-6.1-real-535.261.03.ndjson";
    let r = replay(name, None);
    for rec in &r.records {
        schema::validate(rec).unwrap_or_else(|e| panic!("{e}\n{rec}"));
    }
    let start = start_of(&r);
    assert_eq!(start["driver"]["version"], "535.261.03");
    assert_eq!(start["ioctls_in_driver"], true);
    let rm = start["probes"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "rm_ioctl"))
        .expect("rm_ioctl's probe");
    assert_eq!(rm["attached"], false);
    assert!(
        rm["error"]
            .as_str()
            .is_some_and(|e| e.contains("rm_ioctl is not an ftrace location")),
        "{rm}"
    );
    let (_, v) = verdicts(name);
    let cu = v
        .iter()
        .find(|v| v.curesult.is_some())
        .expect("the cuInit with its uprobe");
    assert_eq!(cu.result, Outcome::Failed);
    assert_eq!(cu.class, Class::Cuda);
    assert_eq!(cu.curesult.as_deref(), Some("CUDA_ERROR_UNKNOWN (999)"));
    assert_eq!(stage_ids(cu), ["S0", "S2", "S1", "S4"]);
    let f = cu.failed_call.as_ref().expect("failed call");
    assert_eq!(
        (f.call.as_str(), f.result.as_str()),
        (
            "NV_ESC_RM_CONTROL NV_CONF_COMPUTE_CTRL_CMD_SYSTEM_GET_CAPABILITIES",
            "NV_ERR_INVALID_LOCK_STATE"
        )
    );
    assert!(
        cu.text.starts_with("cuInit returned CUDA_ERROR_UNKNOWN (999); the driver call that explains it: NV_ESC_RM_CONTROL NV_CONF_COMPUTE_CTRL_CMD_SYSTEM_GET_CAPABILITIES returned NV_ERR_INVALID_LOCK_STATE"),
        "{}",
        cu.text
    );
    // Every NVIDIA ioctl came from the real module's entry points.
    let io = ioctls(&r);
    assert!(io.len() >= 20 && io.iter().all(|i| i.via == Some("driver")));
}

/// The same VM with the real libcuda 550.163.01 as the loader's
/// libcuda.so.1 against module 535.261.03: the verdict keeps cuInit's
/// result and the failing call, and names the version mismatch with both
/// versions (550's only version string is in a sentence; its file name
/// gave it, checked against the contents).
#[test]
fn the_real_version_mismatch_is_named_with_both_versions() {
    use nvprobe_model::correlate::Record;
    // As the live pipeline does: the module's version (the start record's
    // driver), and each process's identity (its libcuda) in order with the
    // events.
    let r = replay("vm-6.1-real-535-libcuda-550.ndjson", None);
    let out = r.made;
    let v: Vec<_> = out
        .iter()
        .filter_map(|x| match x {
            Record::Cuinit(v) => Some((**v).clone()),
            _ => None,
        })
        .collect();
    let cu = v
        .iter()
        .find(|v| v.curesult.is_some())
        .expect("the cuInit with its uprobe");
    assert_eq!(
        (cu.result.as_str(), cu.curesult.as_deref()),
        ("failed", Some("CUDA_ERROR_UNKNOWN (999)"))
    );
    let d = cu
        .diagnoses
        .iter()
        .find(|d| d.id == DiagId::VersionMismatch)
        .expect("version_mismatch");
    assert_eq!(
        d.evidence,
        "libcuda /usr/lib/x86_64-linux-gnu/libcuda.so.550.163.01 is 550.163.01, the kernel module is 535.261.03"
    );
}

/// The verdict of the cuInit (the one with its uprobe) of a kernel-tier
/// recording on the real module with no GPU: a failed CUDA start-up,
/// CUDA_ERROR_UNKNOWN.
fn real_cuinit_999(name: &str) -> CuInit {
    let (_, v) = verdicts(name);
    let cu = v
        .into_iter()
        .find(|v| v.curesult.is_some())
        .expect("the cuInit with its uprobe");
    assert_eq!((cu.class.as_str(), cu.result.as_str()), ("cuda", "failed"));
    assert_eq!(cu.curesult.as_deref(), Some("CUDA_ERROR_UNKNOWN (999)"));
    cu
}

#[test]
fn the_real_module_with_its_nodes_removed_recovers_them_and_fails_for_its_own_reason() {
    // Kernel tier, real_nodes: libcuda 535 recreates /dev/nvidiactl and the
    // uvm node itself (mknod), then fails as it does without a GPU.
    let cu = &real_cuinit_999("vm-6.1-real-535-nodes-missing.ndjson");
    let f = cu.failed_call.as_ref().expect("failed call");
    assert_eq!(
        f.call,
        "NV_ESC_RM_CONTROL NV_CONF_COMPUTE_CTRL_CMD_SYSTEM_GET_CAPABILITIES"
    );
    let d: Vec<(&str, &str)> = cu
        .diagnoses
        .iter()
        .map(|d| (d.id.as_str(), d.severity.as_str()))
        .collect();
    assert_eq!(
        d,
        [("node_missing", "recovered"), ("uvm_unusable", "recovered")],
        "{:#?}",
        cu.diagnoses
    );
    assert!(
        cu.diagnoses[0]
            .evidence
            .starts_with("/dev/nvidiactl: ENOENT; libcuda created it (mknod 195:255)")
    );
    assert!(!cu.text.contains("/dev/nvidiactl"), "{}", cu.text);
}

#[test]
fn the_real_module_without_nvidia_uvm_is_module_not_loaded() {
    // Kernel tier, real_no_uvm: libcuda 535 reads
    // /sys/module/nvidia_uvm/initstate, gets ENOENT and returns 999 after S2.
    let cu = &real_cuinit_999("vm-6.1-real-535-no-uvm.ndjson");
    assert!(!stage_ids(cu).contains(&"S4"), "{:?}", stage_ids(cu));
    let d: Vec<(&str, &str)> = cu
        .diagnoses
        .iter()
        .map(|d| (d.id.as_str(), d.severity.as_str()))
        .collect();
    assert_eq!(d, [("module_not_loaded", "error")]);
    assert_eq!(
        cu.text,
        "cuInit returned CUDA_ERROR_UNKNOWN (999) after version_handshake: /sys/module/nvidia_uvm/initstate: ENOENT: the nvidia_uvm kernel module is not loaded"
    );
}
