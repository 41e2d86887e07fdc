//! The failure catalogue on the real driver (docs/FAILURE-CATALOGUE.md):
//! tests/scripts/record-verdict-catalogue.sh ran each reproducible entry
//! on the H200 (open module 580.159.04) under `nvprobe watch --json --raw`.
//! The recording is replayed as `nvprobe decode` does (the start record's
//! context, `process` records in stream order) and each case's verdict is
//! checked: its class, result, diagnoses and their severity.

mod common;

use common::case;

use common::fixture;
use nvprobe_model::correlate::{Class, CuInit, DiagId, Outcome};
use serde_json::Value;

/// Every verdict of the recording, replayed in stream order.
fn replayed(name: &str) -> Vec<CuInit> {
    common::verdicts(name).1
}

fn ids(v: &CuInit) -> Vec<(&str, &str)> {
    v.diagnoses
        .iter()
        .map(|d| (d.id.as_str(), d.severity.as_str()))
        .collect()
}

const REC: &str = "h200-580.159.04-catalogue.ndjson";

#[test]
fn every_catalogue_case_gets_its_verdict_on_the_real_driver() {
    let v = replayed(REC);
    let ok = case(&v, "ok");
    assert_eq!((ok.class.as_str(), ok.result.as_str()), ("cuda", "ok"));
    assert!(ok.diagnoses.is_empty());
    assert_eq!(ok.gpus.len(), 1, "one GPU, tied by the host's list");
    assert!(ok.gpus[0].minor == Some(0) && ok.gpus[0].registered_ms.is_some());

    let stub = case(&v, "stub");
    assert_eq!((stub.result.as_str(), stub.calls), ("failed", 0));
    assert_eq!(ids(stub), [("stub_library", "error")]);
    assert!(
        stub.diagnoses[0]
            .evidence
            .contains("/usr/local/cuda-13.0/targets/x86_64-linux/lib/stubs/libcuda.so"),
        "{}",
        stub.diagnoses[0].evidence
    );
    // Each fact once: the CUresult, then what explains it.
    assert_eq!(
        stub.text,
        "cuInit returned CUDA_ERROR_STUB_LIBRARY (34) after no driver call: the process loaded \
/usr/local/cuda-13.0/targets/x86_64-linux/lib/stubs/libcuda.so, the CUDA toolkit's stub"
    );

    for (c, value) in [
        ("visible_none", "-1"),
        ("visible_uuid", "GPU-00000000-dead-beef-0000-000000000000"),
    ] {
        let x = case(&v, c);
        assert_eq!(ids(x), [("no_visible_devices", "error")], "{c}");
        assert!(
            x.diagnoses[0].evidence.ends_with(&format!(
                "CUDA_VISIBLE_DEVICES={value} matches none of this host's 1 GPU"
            )),
            "{}",
            x.diagnoses[0].evidence
        );
    }

    let t = case(&v, "timeout");
    assert_eq!(t.result, Outcome::Killed);
    assert!(
        t.text.contains("in UVM_REGISTER_GPU for GPU 1 of 1 (GPU-"),
        "{}",
        t.text
    );

    let root = case(&v, "missing_nodes_root");
    assert_eq!(root.result, Outcome::Ok);
    assert_eq!(
        ids(root),
        [
            ("node_missing", "recovered"),
            ("uvm_unusable", "recovered"),
            ("node_missing", "recovered")
        ]
    );
    assert!(
        root.diagnoses[0]
            .evidence
            .contains("libcuda created it (mknod 195:255); start-up recovered and succeeded"),
        "{}",
        root.diagnoses[0].evidence
    );
    assert_eq!(
        root.process
            .as_ref()
            .and_then(|p| p.container.as_ref())
            .map(|c| c.runtime.as_str()),
        Some("docker"),
        "the container the cgroup names"
    );

    let user = case(&v, "missing_uvm_user");
    assert_eq!(user.curesult.as_deref(), Some("CUDA_ERROR_UNKNOWN (999)"));
    assert_eq!(
        ids(user),
        [("uvm_unusable", "error"), ("node_create_failed", "error")]
    );
    assert_eq!(
        user.diagnoses[1].evidence,
        "/dev/nvidia-uvm: mknod 238:0 failed: EPERM"
    );

    let perm = case(&v, "uvm_perm_user");
    assert_eq!(ids(perm), [("node_permission", "error")]);
    assert_eq!(perm.diagnoses[0].evidence, "/dev/nvidia-uvm: EACCES");

    // libcuda replaces a wrong node as root, and cannot replace a bind mount.
    let wrong = case(&v, "uvm_wrong_node");
    assert_eq!(
        (wrong.result.as_str(), ids(wrong)[0]),
        ("ok", ("node_wrong_device", "recovered"))
    );
    let bind = case(&v, "uvm_bind");
    assert_eq!(bind.result, Outcome::Failed);
    assert_eq!(ids(bind), [("node_wrong_device", "error")]);
    assert!(bind.diagnoses[0].evidence.contains("is device 1:3"));

    let torch = case(&v, "torch");
    assert_eq!(
        (torch.class.as_str(), torch.result.as_str()),
        ("cuda", "ok")
    );
}

#[test]
fn the_forked_child_is_named_by_the_call_that_was_refused() {
    let v = replayed(REC);
    let parent = case(&v, "fork");
    let child = v
        .iter()
        .find(|x| x.pid != parent.pid && x.diagnoses.iter().any(|d| d.id == DiagId::ForkAfterInit))
        .expect("the child's verdict");
    assert_eq!(child.class, Class::Cuda);
    assert!(
        child.diagnoses[0]
            .evidence
            .ends_with("its cuDeviceGetCount returned CUDA_ERROR_NOT_INITIALIZED (3)"),
        "{}",
        child.diagnoses[0].evidence
    );
}

#[test]
fn no_process_that_never_started_cuda_is_a_failed_cuda_start_up() {
    let v = replayed(REC);
    for x in &v {
        let comm = x.comm.as_str();
        if matches!(
            comm,
            "ls" | "mknod" | "nvidia-smi" | "sh" | "unshare" | "setpriv"
        ) {
            assert_ne!(x.class, Class::Cuda, "{comm}[{}]: {}", x.pid, x.text);
        }
        if x.class != Class::Cuda {
            assert!(
                x.result == Outcome::Ok
                    || x.diagnoses
                        .iter()
                        .all(|d| !d.id.as_str().starts_with("uvm")),
                "{comm}: {x:#?}"
            );
        }
    }
    let smi = v
        .iter()
        .find(|x| x.comm == "nvidia-smi")
        .expect("nvidia-smi");
    assert_eq!((smi.class.as_str(), smi.result.as_str()), ("nvml", "ok"));
    let ls = v.iter().find(|x| x.comm == "ls").expect("ls");
    assert_eq!((ls.class.as_str(), ls.result.as_str()), ("probe", "ok"));
    assert!(ls.diagnoses.is_empty());
}

#[test]
fn every_verdict_was_in_the_stream_before_nvprobe_stopped() {
    // The recording's own cuinit records (written live) against the
    // processes that ended: each ended process has its verdict, and the
    // summary (written at the stop) comes after all of them.
    let text = std::fs::read_to_string(fixture(REC)).expect("fixture");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let summary_at = lines
        .iter()
        .position(|r| r["type"] == "summary")
        .expect("summary");
    let exits: Vec<u64> = lines
        .iter()
        .filter(|r| r["type"] == "proc" && r["op"] == "exit")
        .filter_map(|r| r["target_pid"].as_u64())
        .collect();
    for pid in &exits {
        let at = lines
            .iter()
            .position(|r| r["type"] == "cuinit" && r["pid"].as_u64() == Some(*pid));
        if let Some(at) = at {
            assert!(at < summary_at, "pid {pid}'s verdict came at the stop");
        }
    }
    let verdicts = lines.iter().filter(|r| r["type"] == "cuinit").count();
    assert!(verdicts >= 20, "{verdicts} verdicts");
}

/// tests/scripts/record-libcuda-follow.sh on the H200, default hooks: the
/// loader's libcuda opens followed, children forked after init.
const FOLLOW: &str = "h200-580.159.04-libcuda-follow.ndjson";
/// The same script's `--libcuda-hooks all` part (every exported function).
const ALL: &str = "h200-580.159.04-libcuda-all.ndjson";

#[test]
fn a_loader_that_finds_no_libcuda_is_named_on_the_real_driver() {
    let v = replayed(FOLLOW);
    // ctypes tries libcuda.so.1, then libcuda.so; torch's cudart retries.
    for (name, searched) in [
        ("notfound", "libcuda.so.1 / libcuda.so 22 times"),
        ("torch-nodriver", "libcuda.so.1 41 times"),
    ] {
        let x = case(&v, name);
        assert_eq!(
            (x.class.as_str(), x.result.as_str(), x.calls),
            ("cuda", "failed", 0),
            "{name}: {}",
            x.text
        );
        assert_eq!(ids(x), [("libcuda_not_found", "error")], "{name}");
        let ev = &x.diagnoses[0].evidence;
        assert!(
            ev.starts_with(&format!(
                "the dynamic loader looked for {searched} and found none: "
            )) && ev.contains("/usr/local/nvidia/lib64/libcuda.so.1 (ENOENT)"),
            "{name}: {ev}"
        );
    }
    // torch's own search starts in its wheel's folder.
    assert!(
        case(&v, "torch-nodriver").diagnoses[0]
            .evidence
            .contains("site-packages/nvidia/cu13/lib/libcuda.so.1 (ENOENT)")
    );
}

#[test]
fn forked_children_are_judged_from_their_first_refused_call_on_the_real_driver() {
    let child_of = |v: &[CuInit], parent: &str| -> CuInit {
        let p = case(v, parent).pid;
        v.iter()
            .find(|x| {
                x.diagnoses.iter().any(|d| d.id == DiagId::ForkAfterInit)
                    && x.diagnoses[0]
                        .evidence
                        .contains(&format!("forked from pid {p} "))
            })
            .unwrap_or_else(|| panic!("no child verdict for {parent}"))
            .clone()
    };
    let refused = |x: &CuInit| {
        x.diagnoses[0]
            .evidence
            .rsplit("; its ")
            .next()
            .map(str::to_owned)
    };
    let v = replayed(FOLLOW);
    // The driver API: cuCtxSynchronize is not a start-up call, cuMemAlloc_v2 is.
    let c = child_of(&v, "forkdrv");
    assert_eq!(
        (c.class.as_str(), c.result.as_str(), c.calls),
        ("cuda", "failed", 0)
    );
    assert_eq!(
        refused(&c).as_deref(),
        Some("cuMemAlloc_v2 returned CUDA_ERROR_NOT_INITIALIZED (3)")
    );
    // The CUDA runtime (libcudart 13): cudaMalloc calls cuCtxGetCurrent only.
    let c = child_of(&v, "forkcudart");
    assert_eq!(
        refused(&c).as_deref(),
        Some("cuCtxGetCurrent returned CUDA_ERROR_NOT_INITIALIZED (3)")
    );
    let all = replayed(ALL);
    let c = child_of(&all, "forkdrv-all");
    assert_eq!(
        refused(&c).as_deref(),
        Some("cuCtxSynchronize returned CUDA_ERROR_NOT_INITIALIZED (3)")
    );
    let c = child_of(&all, "forkcudart-all");
    assert_eq!(
        refused(&c).as_deref(),
        Some("cuCtxGetCurrent returned CUDA_ERROR_NOT_INITIALIZED (3)")
    );
    assert_eq!(case(&all, "torch-all").result, Outcome::Ok);
}

#[test]
fn a_stub_and_a_late_copy_on_the_real_driver() {
    let v = replayed(FOLLOW);
    let stub = case(&v, "stub");
    assert_eq!(
        (stub.class.as_str(), stub.result.as_str()),
        ("cuda", "failed")
    );
    assert_eq!(ids(stub), [("stub_library", "error")]);
    // A copy of libcuda nvprobe had never seen, loaded after it started:
    // its cuInit began before the hooks were in, so the verdict rests on
    // the driver calls, and says so.
    let first = case(&v, "late-copy");
    assert_eq!(first.result, Outcome::Ok);
    assert!(first.curesult.is_none(), "{}", first.text);
    assert_eq!(first.source, "driver calls alone (no libcuda uprobe)");
    // nvidia-smi, started through the dynamic loader by the H200's own
    // monitor (two runs, cut from an earlier recording of the same script),
    // opens libcuda and asks for its export tables without a cuInit: a
    // driver client.
    let smi = replayed("h200-580.159.04-nvidia-smi-via-loader.ndjson");
    let smi: Vec<&CuInit> = smi.iter().filter(|x| x.comm == "ld-linux-x86-64").collect();
    assert_eq!(smi.len(), 2);
    for x in smi {
        assert_eq!(
            (x.class.as_str(), x.result.as_str()),
            ("nvml", "ok"),
            "{}",
            x.text
        );
    }
}
