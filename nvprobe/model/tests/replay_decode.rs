//! Tier 1: real driver traffic recorded on the GPU machine (NVIDIA H200,
//! open kernel module 580.159.04, `nvprobe watch --json --raw`), replayed
//! through today's decoder. The raw kernel records are the truth; the
//! assertions are on what the decoder makes of them.

use std::{collections::BTreeMap, path::PathBuf};

use nvprobe::{
    decode::{
        self, Context, Event, version::DriverVersion, version::LayoutBasis, version::VersionCtx,
    },
    render::{Clock, schema},
};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

struct Replay {
    records: Vec<Value>,
    events: Vec<Event>,
}

/// Decode every raw record of a recording with the context its start
/// record describes (or a forced driver version).
fn replay(name: &str, force: Option<DriverVersion>) -> Replay {
    let text = std::fs::read_to_string(fixture(name)).expect("fixture present");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("every recorded line is JSON"))
        .collect();
    let start = records
        .iter()
        .find(|r| r["type"] == "start")
        .expect("start record");
    let recorded: DriverVersion = start["decode_version"]
        .as_str()
        .expect("version")
        .parse()
        .expect("parses");
    let mut ctx = Context::new(VersionCtx::from_version(Some(force.unwrap_or(recorded))));
    ctx.uvm_major = start["uvm_major"].as_u64().expect("uvm major") as u32;
    ctx.caps_major = start["caps_major"].as_u64().unwrap_or(0) as u32;
    for (k, v) in start["nodes"].as_object().expect("nodes") {
        let (ma, mi) = k.split_once(':').expect("major:minor");
        ctx.nodes.insert(
            nvprobe_common::kdev_make(ma.parse().expect("major"), mi.parse().expect("minor")),
            v.as_str().expect("path").into(),
        );
    }
    let events = records
        .iter()
        .filter_map(|r| r["raw"].as_str())
        .map(|raw| {
            let bytes = decode::hex_decode(raw).expect("raw is hex");
            decode::decode(&bytes, &ctx).expect("every recorded kernel record decodes")
        })
        .collect();
    Replay { records, events }
}

fn ioctls(r: &Replay) -> Vec<&decode::Ioctl> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::Ioctl(i) => Some(i),
            _ => None,
        })
        .collect()
}

fn status(i: &decode::Ioctl) -> Option<&'static str> {
    i.status.as_ref().and_then(|s| s.name)
}

const FIXTURES: [&str; 10] = [
    "h200-580.159.04-cuinit-ctypes.ndjson",
    "h200-580.159.04-ctx3-ctypes.ndjson",
    "h200-580.159.04-mem20-ctypes.ndjson",
    "h200-580.159.04-torch-init.ndjson",
    "h200-580.159.04-novisible.ndjson",
    "h200-580.159.04-uvm-masked.ndjson",
    "h200-580.159.04-timeout-kill.ndjson",
    "h200-580.159.04-concurrent16.ndjson",
    "h200-580.159.04-signals.ndjson",
    "h200-580.159.04-stall-sigstop.ndjson",
];

#[test]
fn recorded_streams_match_the_schema_and_lost_nothing() {
    for f in FIXTURES {
        let r = replay(f, None);
        for rec in &r.records {
            schema::validate(rec).unwrap_or_else(|e| panic!("{f}: {e}\n{rec}"));
        }
        let summary = r
            .records
            .iter()
            .rev()
            .find(|x| x["type"] == "summary")
            .expect("summary");
        assert_eq!(
            summary["lost"]["total"], 0,
            "{f}: the default ring buffer lost events"
        );
        assert_eq!(summary["decode_errors"], 0, "{f}");
        assert!(r.events.len() > 30, "{f}: only {} events", r.events.len());
        // Today's decoder re-emits every record as valid schema too.
        for ev in &r.events {
            let mut v = serde_json::to_value(ev).expect("serializes");
            v["v"] = 1.into();
            v["time"] = "2026-11-30T00:00:00.000000Z".into();
            v["mono_ns"] = 1.into();
            schema::validate(&v).unwrap_or_else(|e| panic!("{f}: {e}\n{v}"));
        }
    }
}

#[test]
fn cuinit_decodes_every_init_call_by_name_with_its_real_result() {
    let r = replay("h200-580.159.04-cuinit-ctypes.ndjson", None);
    let io = ioctls(&r);
    let mut by_name: BTreeMap<&str, Vec<&decode::Ioctl>> = BTreeMap::new();
    for i in &io {
        by_name
            .entry(i.name.expect("every real ioctl has a name"))
            .or_default()
            .push(i);
    }
    // The frequent escapes: NV_STATUS where the struct has one…
    for name in [
        "NV_ESC_RM_CONTROL",
        "NV_ESC_RM_ALLOC",
        "NV_ESC_RM_FREE",
        "NV_ESC_ALLOC_OS_EVENT",
        "NV_ESC_RM_MAP_MEMORY",
    ] {
        let calls = by_name
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing"));
        for c in calls {
            assert_eq!(c.ret, 0);
            assert_eq!(status(c), Some("NV_OK"), "{name}");
            assert_ne!(
                c.status.as_ref().expect("status").layout,
                LayoutBasis::Assumed
            );
        }
    }
    // …and the errno otherwise, never an invented status.
    for name in [
        "NV_ESC_CARD_INFO",
        "NV_ESC_SYS_PARAMS",
        "NV_ESC_REGISTER_FD",
        "NV_ESC_NUMA_INFO",
    ] {
        let calls = by_name
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing"));
        for c in calls {
            assert_eq!((c.ret, c.errno.as_deref()), (0, None), "{name}");
            assert!(c.status.is_none(), "{name} has no NV_STATUS field");
        }
    }
    // UVM init, on the uvm node, with rmStatus.
    for name in [
        "UVM_INITIALIZE",
        "UVM_MM_INITIALIZE",
        "UVM_PAGEABLE_MEM_ACCESS",
        "UVM_REGISTER_GPU",
    ] {
        let c = by_name
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing"))[0];
        assert_eq!(c.family, "uvm");
        assert_eq!(c.device.node.as_deref(), Some("/dev/nvidia-uvm"));
        assert_eq!(status(c), Some("NV_OK"), "{name}");
    }
    let reg = by_name["UVM_REGISTER_GPU"][0];
    let args = reg.args.to_json();
    assert_eq!(
        args["gpu_uuid"], "GPU-f0568750-7765-f166-dd86-a87a8ebdc1bf",
        "matches nvidia-smi -L"
    );
    assert_eq!(args["rmCtrlFd"], -1);
    assert!(
        reg.duration_ns > 100_000_000,
        "REGISTER_GPU is the slow step: {} ns",
        reg.duration_ns
    );
    let mm = by_name["UVM_MM_INITIALIZE"][0].args.to_json();
    let init_fd = by_name["UVM_INITIALIZE"][0].fd;
    assert_eq!(mm["uvmFd"], init_fd, "MM_INITIALIZE names the first uvm fd");
    assert_ne!(
        by_name["UVM_MM_INITIALIZE"][0].fd, init_fd,
        "and runs on a second one"
    );

    // The classes cuInit allocates, in order, as RM names them.
    let classes: Vec<String> = by_name["NV_ESC_RM_ALLOC"]
        .iter()
        .map(|c| {
            c.args.to_json()["hClass_name"]
                .as_str()
                .unwrap_or("?")
                .to_owned()
        })
        .collect();
    let want = [
        "NV01_ROOT_CLIENT",
        "NV01_ROOT_CLIENT",
        "NV_CONFIDENTIAL_COMPUTE",
        "NV01_DEVICE_0",
        "NV20_SUBDEVICE_0",
        "NV2081_BINAPI",
        "HOPPER_USERMODE_A",
        "HOPPER_USERMODE_A",
        "GF100_SUBDEVICE_MASTER",
        "RM_USER_SHARED_DATA",
        "FERMI_VASPACE_A",
        "FERMI_VASPACE_A",
        "NV50_MEMORY_VIRTUAL",
        "NV50_THIRD_PARTY_P2P",
    ];
    assert_eq!(classes, want);
    // Real driver: root clients are allocated with NVOS64 (48 bytes), not
    // NVOS21 as in the 545 trace of the ABI reference (§7.1 step 5).
    assert_eq!(
        by_name["NV_ESC_RM_ALLOC"][0].args.to_json()["struct"],
        "NVOS64"
    );
    let card = by_name["NV_ESC_CARD_INFO"][0].args.to_json();
    assert_eq!(card["pci_id0"], "10de:2335", "H200");
    assert_eq!(card["entries"], 32);
    // The usermode doorbell page: RM_MAP_MEMORY names a fresh gpu fd, which
    // is then mmap'ed writable and shared.
    let doorbell = r
        .events
        .iter()
        .find_map(|e| match e {
            Event::Mmap(m) if m.device.kind == "gpu" => Some(m),
            _ => None,
        })
        .expect("an mmap of /dev/nvidia0");
    assert_eq!(
        (
            doorbell.length,
            doorbell.prot.as_str(),
            doorbell.flags.as_str()
        ),
        (65536, "PROT_WRITE", "MAP_SHARED")
    );
    assert!(doorbell.ok);
    // Every ioctl came from the one python process.
    assert!(
        io.iter()
            .all(|i| i.proc.pid == io[0].proc.pid && i.proc.comm == "python3")
    );
}

#[test]
fn context_creation_uses_the_580_uvm_layouts() {
    let r = replay("h200-580.159.04-ctx3-ctypes.ndjson", None);
    let io = ioctls(&r);
    let count = |n: &str| io.iter().filter(|i| i.name == Some(n)).count();
    assert_eq!(
        count("UVM_REGISTER_CHANNEL"),
        60,
        "3 contexts x 20 channels"
    );
    assert_eq!(
        count("UVM_REGISTER_CHANNEL"),
        count("UVM_UNREGISTER_CHANNEL")
    );
    let map = io
        .iter()
        .find(|i| i.name == Some("UVM_MAP_EXTERNAL_ALLOCATION"))
        .expect("map");
    let st = map.status.as_ref().expect("status");
    assert_eq!(
        (st.offset, st.layout, st.name),
        (9260, LayoutBasis::DriverVersion, Some("NV_OK"))
    );
    assert_eq!(map.size, 9264);
    // UVM_FREE is 24 bytes with rmStatus @16 before 590.44.
    let free = io
        .iter()
        .find(|i| i.name == Some("UVM_FREE"))
        .expect("free");
    assert_eq!(
        free.status.as_ref().map(|s| (s.offset, s.name)),
        Some((16, Some("NV_OK")))
    );
    assert!(
        io.iter().all(|i| i.ok),
        "a healthy context creation has no failed ioctl"
    );

    // Decoded as if the driver were 595, UVM_FREE's status moves to @8 and
    // reads another field: the driver version matters, and says so.
    let wrong = replay(
        "h200-580.159.04-ctx3-ctypes.ndjson",
        Some(DriverVersion::new(595, 45, 4)),
    );
    let free = ioctls(&wrong)
        .into_iter()
        .find(|i| i.name == Some("UVM_FREE"))
        .cloned()
        .expect("free");
    let st = free.status.expect("status");
    assert_eq!((st.offset, st.layout), (8, LayoutBasis::DriverVersion));
}

#[test]
fn torch_init_shows_nvml_style_calls() {
    let r = replay("h200-580.159.04-torch-init.ndjson", None);
    let io = ioctls(&r);
    let check = io
        .iter()
        .find(|i| i.name == Some("NV_ESC_CHECK_VERSION_STR"))
        .expect("version check");
    assert_eq!(
        check.args.to_json()["version"],
        "580.159.04",
        "the kernel writes its version back"
    );
    assert!(check.status.is_none());
    let wait = io
        .iter()
        .find(|i| i.name == Some("NV_ESC_WAIT_OPEN_COMPLETE"))
        .expect("wait");
    assert_eq!(wait.status.as_ref().and_then(|s| s.name), Some("NV_OK"));
    // UVM_DEINITIALIZE carries no struct: errno only.
    let deinit = io
        .iter()
        .find(|i| i.name == Some("UVM_DEINITIALIZE"))
        .expect("deinit");
    assert!(deinit.status.is_none() && deinit.status_note.is_some());
    // torch and its helpers made calls from more than one process.
    let pids: std::collections::BTreeSet<u32> = io.iter().map(|i| i.proc.pid).collect();
    assert!(!pids.is_empty());
}

#[test]
fn text_lines_read_like_strace_with_names() {
    let r = replay("h200-580.159.04-cuinit-ctypes.ndjson", None);
    let clock = Clock::fixed(0);
    let lines: Vec<String> = r
        .events
        .iter()
        .map(|e| nvprobe::render::text::event_line(&clock, 0, e))
        .collect();
    let reg = lines
        .iter()
        .find(|l| l.contains("UVM_REGISTER_GPU"))
        .expect("line");
    assert!(
        reg.contains("ioctl(9</dev/nvidia-uvm>, UVM_REGISTER_GPU{gpu_uuid=GPU-f0568750-7765-f166-dd86-a87a8ebdc1bf"),
        "{reg}"
    );
    assert!(reg.contains(") = 0 NV_OK <168.580ms>"), "{reg}");
    let ctl = lines
        .iter()
        .find(|l| l.contains("NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION"))
        .expect("line");
    assert!(
        ctl.contains("ioctl(8</dev/nvidiactl>, NV_ESC_RM_CONTROL{"),
        "{ctl}"
    );
    let proc_open = lines
        .iter()
        .find(|l| l.contains("/proc/driver/nvidia/params"))
        .expect("line");
    assert!(
        !proc_open.contains("[none"),
        "no device shown for a /proc file: {proc_open}"
    );
    let stat = lines
        .iter()
        .find(|l| l.contains("stat(\"/dev/nvidiactl\""))
        .expect("line");
    assert!(stat.contains("= 0 [ctl 195:255]"), "{stat}");
}

#[test]
fn a_masked_uvm_node_is_flagged_on_the_real_machine() {
    // `mount --bind /dev/null /dev/nvidia-uvm` in a private mount namespace:
    // cuInit returned 999 (CUDA_ERROR_UNKNOWN) there.
    let r = replay("h200-580.159.04-uvm-masked.ndjson", None);
    let opens: Vec<&decode::PathCall> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Open(p) if p.path == "/dev/nvidia-uvm" => Some(p),
            _ => None,
        })
        .collect();
    assert_eq!(opens.len(), 2, "libcuda opens the uvm node twice");
    for o in opens {
        let d = o.device.as_ref().expect("device");
        assert_eq!((d.major, d.minor, d.kind), (1, 3, "none"));
        assert_eq!(
            o.mismatch.as_deref(),
            Some("/dev/nvidia-uvm is device 1:3 (none), not the NVIDIA uvm node (minor 0)")
        );
        assert!(!o.ok);
    }
    // ioctls on the masked fds are not NVIDIA calls, and are not shown as such.
    assert!(ioctls(&r).iter().all(|i| i.family != "uvm"));
}

#[test]
fn a_signal_during_register_gpu_shows_as_busy_retry() {
    // `timeout -s TERM 0.15 python3 cudawork.py cuinit`: the SIGTERM landed
    // inside UVM_REGISTER_GPU, which returned 0 with NV_ERR_BUSY_RETRY after
    // 133 ms; the process then died.
    let r = replay("h200-580.159.04-timeout-kill.ndjson", None);
    let io = ioctls(&r);
    let last = io.last().expect("ioctls");
    assert_eq!(last.name, Some("UVM_REGISTER_GPU"));
    assert_eq!((last.ret, status(last)), (0, Some("NV_ERR_BUSY_RETRY")));
    assert!(!last.ok);
    assert!(
        io[..io.len() - 1].iter().all(|i| i.ok),
        "everything before it succeeded"
    );
}

#[test]
fn sixteen_concurrent_cuinits_keep_their_own_pids() {
    let r = replay("h200-580.159.04-concurrent16.ndjson", None);
    let io = ioctls(&r);
    let regs: std::collections::BTreeSet<u32> = io
        .iter()
        .filter(|i| i.name == Some("UVM_REGISTER_GPU"))
        .map(|i| {
            assert_eq!(status(i), Some("NV_OK"));
            i.proc.pid
        })
        .collect();
    assert_eq!(regs.len(), 16, "one REGISTER_GPU per process");
    // Each process's UVM calls use its own uvm fd numbers and client handles.
    for pid in &regs {
        let mine: Vec<_> = io.iter().filter(|i| i.proc.pid == *pid).collect();
        assert!(mine.iter().any(|i| i.name == Some("UVM_INITIALIZE")));
        assert!(mine.len() > 90, "pid {pid}: {} ioctls", mine.len());
    }
}

#[test]
fn no_visible_devices_stops_before_uvm_registration() {
    // CUDA_VISIBLE_DEVICES= : cuInit returned 100 (CUDA_ERROR_NO_DEVICE).
    let r = replay("h200-580.159.04-novisible.ndjson", None);
    let io = ioctls(&r);
    assert!(io.iter().all(|i| i.ok), "no driver call failed");
    assert!(io.iter().any(|i| i.name == Some("UVM_INITIALIZE")));
    assert!(
        !io.iter().any(|i| i.name == Some("UVM_REGISTER_GPU")),
        "no GPU was registered with UVM"
    );
}

/// The correlator's view of a recording (driver calls only: these
/// recordings predate the process events).
fn verdicts(
    name: &str,
) -> (
    Vec<nvprobe::correlate::Record>,
    Vec<nvprobe::correlate::CuInit>,
) {
    let r = replay(name, None);
    let mut c = nvprobe::correlate::Correlator::default();
    let mut out = Vec::new();
    for ev in &r.events {
        c.observe(ev, &mut out);
    }
    c.finish(&mut out);
    let v = out
        .iter()
        .filter_map(|rec| match rec {
            nvprobe::correlate::Record::Cuinit(v) => Some((**v).clone()),
            _ => None,
        })
        .collect();
    (out, v)
}

fn stage_ids(v: &nvprobe::correlate::CuInit) -> Vec<&'static str> {
    v.stages.iter().map(|s| s.stage).collect()
}

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
    assert_eq!(v.result, "ok");
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
        .filter(|r| matches!(r, nvprobe::correlate::Record::Stage { .. }))
        .count();
    assert_eq!(stage_records, 8, "one stage record per transition");
}

#[test]
fn real_failures_get_their_verdicts() {
    let (_, v) = verdicts("h200-580.159.04-uvm-masked.ndjson");
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].result, "failed");
    assert_eq!(stage_ids(&v[0]), ["S0", "S2", "S1"]);
    let d = &v[0].diagnoses[0];
    assert_eq!(d.id, "uvm_unusable");
    assert!(
        d.evidence.contains("/dev/nvidia-uvm is device 1:3"),
        "{}",
        d.evidence
    );
    assert!(d.hint.contains("nvidia-modprobe -u"), "{}", d.hint);

    // Without the process events (this recording predates them) the
    // BUSY_RETRY is ambiguous, and the verdict says so instead of blaming HMM.
    let (_, v) = verdicts("h200-580.159.04-timeout-kill.ndjson");
    assert_eq!(v[0].result, "failed");
    let f = v[0].failed_call.as_ref().expect("failed call");
    assert_eq!(
        (f.call.as_str(), f.result.as_str()),
        ("UVM_REGISTER_GPU", "NV_ERR_BUSY_RETRY")
    );
    assert_eq!(v[0].diagnoses[0].id, "uvm_busy_retry");
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
        assert_eq!(x.result, "ok", "{}", x.text);
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
    let ok = v.iter().filter(|x| x.result == "ok").count();
    assert!(ok >= 1, "the clean run: {v:#?}");
    let killed: Vec<_> = v.iter().filter(|x| x.result == "killed").collect();
    assert_eq!(killed.len(), 2, "{v:#?}");
    let term = killed
        .iter()
        .find(|x| x.signal.as_ref().is_some_and(|s| s.name == "SIGTERM"))
        .expect("SIGTERM");
    assert!(
        term.text.starts_with("killed by SIGTERM from timeout[")
            && term
                .text
                .ends_with(" in UVM_REGISTER_GPU; the call was still running"),
        "{}",
        term.text
    );
    assert_eq!(term.diagnoses[0].id, "killed_by_signal");
    let alrm = killed
        .iter()
        .find(|x| x.signal.as_ref().is_some_and(|s| s.name == "SIGALRM"))
        .expect("SIGALRM");
    assert!(
        alrm.text.contains("from the kernel (alarm/itimer"),
        "{}",
        alrm.text
    );
    // The BUSY_RETRY that the interrupted REGISTER_GPU returned is not
    // blamed on HMM when the signal explains it.
    for k in &killed {
        assert!(
            k.diagnoses
                .iter()
                .all(|d| d.id != "uvm_step_failed" && d.id != "uvm_busy_retry"),
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
    let start = r
        .records
        .iter()
        .find(|x| x["type"] == "start")
        .expect("start");
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
            .filter(|c| c.func == f && c.phase == "return")
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
    let by_result = |res: &str| v.iter().filter(|x| x.result == res).collect::<Vec<_>>();
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
    assert_eq!(failed[0].diagnoses[0].id, "uvm_unusable");
    // torch's short-lived helper processes (comm ld-linux-x86-64) open the
    // GPU and exit cleanly: not failures.
    for x in v.iter().filter(|x| x.comm != "python3") {
        assert_eq!(x.result, "exited", "{}", x.text);
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
    assert_eq!(nodev.diagnoses[0].id, "no_visible_devices");
    assert!(nodev.diagnoses[0].hint.contains("CUDA_VISIBLE_DEVICES"));
    let child = v
        .iter()
        .find(|x| x.curesult.as_deref() == Some("CUDA_ERROR_NOT_INITIALIZED (3)"))
        .expect("the forked child");
    assert_eq!(child.calls, 0, "libcuda refused without calling the driver");
    assert_eq!(child.diagnoses[0].id, "fork_after_init");
    assert!(child.diagnoses[0].hint.contains("spawn"));
    let parent = v.iter().find(|x| x.result == "ok").expect("the parent");
    assert!(parent.diagnoses.is_empty());
}

/// Real signals during cuInit (H200, 580.159.04): timeout's SIGTERM and an
/// alarm(2) SIGALRM both landed in UVM_REGISTER_GPU, which did not return
/// EINTR but NV_ERR_BUSY_RETRY. Each is reported once (timeout signals the
/// child and then its group), with the stage and the call.
#[test]
fn real_signals_name_the_call_they_landed_in() {
    let (records, _) = verdicts("h200-580.159.04-verdicts.ndjson");
    let signals: Vec<&nvprobe::correlate::SignalReport> = records
        .iter()
        .filter_map(|r| match r {
            nvprobe::correlate::Record::Signal(s) => Some(&**s),
            _ => None,
        })
        .collect();
    let term: Vec<_> = signals.iter().filter(|s| s.signal == "SIGTERM").collect();
    assert_eq!(term.len(), 1, "{signals:#?}");
    let t = term[0];
    assert_eq!(t.sender, "timeout[439]");
    assert_eq!(t.sender_pid, Some(439));
    assert_eq!(t.in_flight, "UVM_REGISTER_GPU");
    assert_eq!(t.stage.as_deref(), Some("S6 device_objects"));
    assert_eq!(t.outcome, "completed");
    assert_eq!(
        t.text,
        "SIGTERM from timeout[439] at 69.7 ms in UVM_REGISTER_GPU (after S6 device_objects): the call returned NV_ERR_BUSY_RETRY, not EINTR"
    );
    let alrm = signals
        .iter()
        .find(|s| s.signal == "SIGALRM")
        .expect("the alarm's SIGALRM");
    assert_eq!(alrm.sender, "the kernel (alarm/itimer or a fault)");
    assert_eq!(alrm.sender_pid, None);
    assert_eq!(alrm.in_flight, "UVM_REGISTER_GPU");
}

/// `nvprobe doctor` on the host trees: verdicts, JSON, exit codes.
#[test]
fn doctor_on_host_trees() {
    let run = |tree: &str, json: bool| {
        let mut c = std::process::Command::new(nvprobe_tests::harness::bin("nvprobe"));
        c.arg("doctor")
            .arg("--root")
            .arg(fixture("hosts").join(tree));
        if json {
            c.arg("--json");
        }
        c.output().expect("run nvprobe doctor")
    };
    let ok = run("healthy", false);
    assert_eq!(ok.status.code(), Some(0));
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(
        text.contains("ok   driver  driver_loaded  open kernel module 580.159.04"),
        "{text}"
    );
    let warn = run("proxmox-hmm", true);
    assert_eq!(warn.status.code(), Some(0), "a warning is not a failure");
    let doc: Value = serde_json::from_slice(&warn.stdout).expect("one JSON document");
    assert_eq!(doc["result"], "warn");
    let hmm = doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == "uvm_hmm")
        .expect("uvm_hmm check");
    assert_eq!(hmm["verdict"], "warn");
    let bad = run("no-uvm", false);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("a check failed"));
    let missing = std::process::Command::new(nvprobe_tests::harness::bin("nvprobe"))
        .args(["doctor", "--root", "/nonexistent-nvprobe-root"])
        .output()
        .expect("run");
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&missing.stderr)
            .contains("--root /nonexistent-nvprobe-root: no such folder or snapshot archive"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
    let nouser = std::process::Command::new(nvprobe_tests::harness::bin("nvprobe"))
        .args(["doctor", "--user", "zed", "--root"])
        .arg(fixture("hosts/wrong-perms"))
        .output()
        .expect("run");
    assert_eq!(nouser.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&nouser.stderr).contains("--user zed: no such user in "));
    let junk = std::env::temp_dir().join(format!("nvprobe-junk-{}.tar", std::process::id()));
    std::fs::write(&junk, b"not a tar file at all").expect("write");
    let bad_tar = std::process::Command::new(nvprobe_tests::harness::bin("nvprobe"))
        .args(["doctor", "--root"])
        .arg(&junk)
        .output()
        .expect("run");
    assert_eq!(bad_tar.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad_tar.stderr).contains("not a readable snapshot archive"),
        "{}",
        String::from_utf8_lossy(&bad_tar.stderr)
    );
    let _ = std::fs::remove_file(&junk);
    // Every tree's JSON is one document with the verdicts the unit tests
    // pin down; the exit code follows the worst verdict.
    for (tree, code, result) in [
        ("healthy", 0, "warn"),
        ("proxmox-hmm", 0, "warn"),
        ("no-uvm", 1, "fail"),
        ("version-mismatch", 1, "fail"),
        ("lxc-no-uvm", 1, "fail"),
        ("wrong-perms", 0, "warn"),
        ("no-btf-kprobes", 1, "fail"),
    ] {
        let o = run(tree, true);
        assert_eq!(o.status.code(), Some(code), "{tree}");
        let doc: Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
        assert_eq!(doc["result"], result, "{tree}");
        assert_eq!(doc["type"], "doctor");
        assert!(
            doc["scope"].as_str().is_some_and(
                |s| s.ends_with("file evidence only (no probes loaded, no opens tried)")
            ),
            "{tree}: {}",
            doc["scope"]
        );
        for c in doc["checks"].as_array().expect("checks") {
            assert!(["ok", "warn", "fail"].contains(&c["verdict"].as_str().expect("verdict")));
            assert!(c["evidence"].as_str().is_some_and(|e| !e.is_empty()), "{c}");
            if c["verdict"] != "ok" {
                assert!(
                    c.get("hint").is_some() || c["id"] == "fentry",
                    "{tree}: {c}"
                );
            }
        }
    }
}

/// The library version comes from the file's contents: a stand-in libcuda
/// built here with "575.57.08" in its .rodata, named like any libcuda,
/// ahead of the matching one in the search path, is caught as a mismatch
/// with the 580.159.04 module.
#[test]
fn doctor_reads_library_versions_from_the_elf() {
    let dir = std::env::temp_dir().join(format!("nvprobe-libs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let copy = std::process::Command::new("cp")
        .arg("-r")
        .arg(fixture("hosts/healthy"))
        .arg(&dir)
        .status()
        .expect("cp");
    assert!(copy.success());
    std::fs::remove_file(dir.join("libs.manifest")).expect("the tree lists libraries");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("cuda-stub/libcuda.c");
    let build = |version: &str, to: &str| {
        let out = dir.join(to);
        std::fs::create_dir_all(out.parent().expect("dir")).expect("mkdir");
        std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&out)
            .arg(format!("-DSTUB_VERSION=\"{version}\""))
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success())
    };
    if !build("575.57.08", "etc/libold/libcuda.so.1")
        || !build(
            "580.159.04",
            "usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04",
        )
    {
        eprintln!("skipping: no C compiler to build the stand-in libcuda");
        return;
    }
    std::fs::write(
        dir.join("etc/ld.so.conf"),
        "include /etc/ld.so.conf.d/*.conf\n",
    )
    .expect("write");
    std::fs::create_dir_all(dir.join("etc/ld.so.conf.d")).expect("mkdir");
    std::fs::write(dir.join("etc/ld.so.conf.d/old.conf"), "/etc/libold\n").expect("write");
    let o = std::process::Command::new(nvprobe_tests::harness::bin("nvprobe"))
        .args(["doctor", "--json", "--root"])
        .arg(&dir)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let cuda: Vec<&Value> = doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"] == "libcuda")
        .collect();
    assert_eq!(cuda.len(), 2, "{cuda:?}");
    assert_eq!(cuda[0]["verdict"], "fail");
    let e0 = cuda[0]["evidence"].as_str().expect("evidence");
    assert!(
        e0.starts_with("/etc/libold/libcuda.so.1 (version 575.57.08, ")
            && e0.ends_with(" bytes), loaded first, but the kernel module is 580.159.04"),
        "{e0}"
    );
    assert_eq!(cuda[1]["verdict"], "ok");
    assert!(
        cuda[1]["evidence"].as_str().is_some_and(|e| e
            .starts_with("/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04 (version 580.159.04, ")),
        "{}",
        cuda[1]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn signal_reports(
    records: &[nvprobe::correlate::Record],
) -> Vec<&nvprobe::correlate::SignalReport> {
    records
        .iter()
        .filter_map(|r| match r {
            nvprobe::correlate::Record::Signal(s) => Some(&**s),
            _ => None,
        })
        .collect()
}

/// H200, 580.159.04, process layer on: `timeout -s TERM 0.15` and an itimer
/// kill cuInit; then two cuInits run while another process sends SIGUSR1
/// every millisecond, once to a handler with SA_RESTART and once without.
/// The real driver finishes every RM and UVM call it is in when a signal
/// comes (no EINTR, no ERESTARTSYS), so both cuInits succeed.
#[test]
fn real_handled_signals_leave_the_driver_calls_alone() {
    let r = replay("h200-580.159.04-signals.ndjson", None);
    // SA_RESTART as the kernel saw it at delivery, per process.
    let mut restart: BTreeMap<u64, std::collections::BTreeSet<bool>> = BTreeMap::new();
    for rec in &r.records {
        if rec["op"] == "signal_delivered" && rec["signal"] == "SIGUSR1" {
            restart
                .entry(rec["pid"].as_u64().expect("pid"))
                .or_default()
                .insert(rec["sa_restart"].as_bool().expect("sa_restart"));
        }
    }
    let flags: Vec<Vec<bool>> = restart
        .values()
        .map(|s| s.iter().copied().collect())
        .collect();
    assert_eq!(flags, [vec![true], vec![false]], "{restart:?}");

    let (records, v) = verdicts("h200-580.159.04-signals.ndjson");
    let sigs = signal_reports(&records);
    let usr1: Vec<_> = sigs.iter().filter(|s| s.signal == "SIGUSR1").collect();
    assert!(usr1.len() >= 10, "{usr1:#?}");
    assert!(
        usr1.iter().any(|s| s.outcome == "completed")
            && usr1
                .iter()
                .all(|s| s.outcome == "completed" || s.outcome == "in_user_space"),
        "{usr1:#?}"
    );
    let landed = usr1
        .iter()
        .find(|s| s.outcome == "completed")
        .expect("one in a call");
    assert!(
        landed.text.starts_with("SIGUSR1 from python3[")
            && landed.text.contains(" ms in ")
            && landed.text.contains(": the call "),
        "{}",
        landed.text
    );
    // timeout(1) follows its SIGTERM with a SIGCONT: not a report of its own.
    assert!(!sigs.iter().any(|s| s.signal == "SIGCONT"), "{sigs:#?}");
    assert_eq!(sigs.iter().filter(|s| s.signal == "SIGTERM").count(), 1);
    let results: Vec<&str> = v.iter().map(|x| x.result).collect();
    assert_eq!(results, ["killed", "killed", "ok", "ok"], "{v:#?}");
    let term = &v[0];
    assert!(
        term.text.starts_with("killed by SIGTERM from timeout["),
        "{}",
        term.text
    );
    assert_eq!(term.diagnoses[0].id, "killed_by_signal");
    assert!(
        v[1].text.starts_with("killed by SIGALRM from the kernel"),
        "{}",
        v[1].text
    );
    for ok in &v[2..] {
        assert_eq!(ok.curesult.as_deref(), Some("CUDA_SUCCESS (0)"));
        assert!(ok.diagnoses.is_empty(), "{:?}", ok.diagnoses);
        assert!(ok.signal.is_some(), "the verdict keeps the signal it saw");
    }
}

/// H200: cuInit stopped by SIGSTOP from another process 0.12 s in, for
/// 3 s, traced with `--stall-after 1`. The stall reports recorded live say
/// the process is stopped, by whom, at which stage, with its kernel stack;
/// the verdict still ends in success, 3 s later.
#[test]
fn real_stopped_cuinit_is_a_stop_not_a_hang() {
    let r = replay("h200-580.159.04-stall-sigstop.ndjson", None);
    let stalls: Vec<&Value> = r.records.iter().filter(|x| x["type"] == "stall").collect();
    assert_eq!(stalls.len(), 2, "1 s, then 2 s (back-off)");
    let s = stalls[0];
    assert_eq!(s["call"], "cuInit");
    assert_eq!(s["state"], "T");
    assert_eq!(s["wchan"], "do_signal_stop");
    assert_eq!(s["stage"], "S7 uvm_gpu_registered");
    let by = s["stopped_by"].as_str().expect("stopped_by");
    assert!(by.starts_with("SIGSTOP from sh["), "{by}");
    assert!(
        s["text"].as_str().expect("text").ends_with(&format!(
            "the process is stopped (T) by {by}, not stuck in the driver"
        )),
        "{s}"
    );
    assert!(
        s["stack"][0]
            .as_str()
            .expect("stack")
            .starts_with("do_signal_stop+")
    );
    assert!(stalls[1]["elapsed_s"].as_f64() > stalls[0]["elapsed_s"].as_f64());

    let (records, v) = verdicts("h200-580.159.04-stall-sigstop.ndjson");
    let sigs = signal_reports(&records);
    let names: Vec<&str> = sigs.iter().map(|s| s.signal.as_str()).collect();
    assert_eq!(
        names,
        ["SIGSTOP", "SIGCONT"],
        "the SIGCONT after a stop is news"
    );
    assert_eq!(sigs[0].in_flight, "UVM_REGISTER_GPU");
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].result, "ok");
    assert!(v[0].total_ms > 3000.0, "{}", v[0].total_ms);
}

/// `nvprobe decode` keeps what only the live run knew: the stall reports
/// and the recording's duration and lost counts (here raised to 5 lost,
/// which must show; a decode must never claim that nothing was lost).
#[test]
fn decode_carries_stalls_and_the_recorded_losses() {
    let text =
        std::fs::read_to_string(fixture("h200-580.159.04-stall-sigstop.ndjson")).expect("fixture");
    let edited: String = text
        .lines()
        .map(|l| {
            if l.contains(r#""type":"summary""#) {
                let mut v: Value = serde_json::from_str(l).expect("json");
                v["lost"]["total"] = 5.into();
                v["lost"]["per_kind"] = serde_json::json!({"ioctl": 5});
                format!("{v}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let path = std::env::temp_dir().join(format!("nvprobe-lost-{}.ndjson", std::process::id()));
    std::fs::write(&path, edited).expect("write");
    let run = |json: bool| {
        let mut c = std::process::Command::new(nvprobe_tests::harness::bin("nvprobe"));
        c.arg("decode").arg("--summary-only").arg(&path);
        if json {
            c.arg("--json");
        }
        c.output().expect("run nvprobe decode")
    };
    let t = run(false);
    assert_eq!(t.status.code(), Some(0));
    let out = String::from_utf8_lossy(&t.stdout);
    assert!(
        out.contains(
            "--- nvprobe summary: 166 events in 3.7 s, 7 failed, 5 lost, 0 undecodable ---"
        ),
        "{out}"
    );
    assert_eq!(
        out.matches("!! stall: python3[603/603] cuInit (after S7 uvm_gpu_registered) has run ")
            .count(),
        2,
        "{out}"
    );
    let j = run(true);
    let recs: Vec<Value> = String::from_utf8_lossy(&j.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    for r in &recs {
        schema::validate(r).unwrap_or_else(|e| panic!("{e}\n{r}"));
    }
    let s = recs
        .iter()
        .find(|r| r["type"] == "summary")
        .expect("summary");
    assert_eq!(s["lost"]["total"], 5);
    assert_eq!(recs.iter().filter(|r| r["type"] == "stall").count(), 2);
    let _ = std::fs::remove_file(&path);
}

/// The H200's own snapshot (`nvprobe doctor --snapshot` on the GPU
/// machine, tests/fixtures/hosts/h200-snapshot) read back with `--root`
/// gives the file-level verdicts and evidence that doctor gave live there
/// (tests/fixtures/gpu-host/h200-580.159.04-doctor.json).
#[test]
fn the_h200_snapshot_reads_back_like_the_live_host() {
    let live: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("gpu-host/h200-580.159.04-doctor.json")).expect("fixture"),
    )
    .expect("json");
    assert_eq!(
        live["result"], "warn",
        "the live H200: warnings (no kprobes), no failure"
    );
    let o = std::process::Command::new(nvprobe_tests::harness::bin("nvprobe"))
        .args(["doctor", "--json", "--root"])
        .arg(fixture("hosts/h200-snapshot"))
        .output()
        .expect("run");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let snap: Value = serde_json::from_slice(&o.stdout).expect("json");
    let pick = |d: &Value, id: &str| -> Vec<(String, String)> {
        d["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .filter(|c| c["id"] == id)
            .map(|c| {
                (
                    c["verdict"].as_str().unwrap_or("").to_owned(),
                    c["evidence"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    };
    for id in [
        "driver_loaded",
        "uvm_loaded",
        "uvm_hmm",
        "params",
        "gpu",
        "pci_gpu",
        "persistence",
        "node",
        "caps",
        "libcuda",
        "libnvidia-ml",
        "runtime",
        "device_cgroup",
        "btf_nvidia",
        "btf_nvidia_uvm",
    ] {
        let l = pick(&live, id);
        assert!(!l.is_empty(), "{id} live");
        assert_eq!(pick(&snap, id), l, "{id}");
    }
    // The hook survey reads the snapshot's kallsyms: same symbols, and the
    // refusal comes from its event-source listing.
    let h = pick(&snap, "driver_hooks");
    assert_eq!(h, pick(&live, "driver_hooks"));
    assert!(
        h[0].1
            .starts_with("driver 580.159.04: 14/16 driver-hook symbols"),
        "{h:?}"
    );
    // The kernel checks are file evidence there, and agree on kprobes.
    assert_eq!(pick(&snap, "kprobe")[0].0, "warn");
    assert!(pick(&snap, "kprobe")[0].1.ends_with("(file evidence)"));
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
    let start = r
        .records
        .iter()
        .find(|x| x["type"] == "start")
        .expect("start");
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
            nvprobe::correlate::Record::Breakdown(b) if b.call == "UVM_REGISTER_GPU" => Some(b),
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
        .find(|d| d.id == "uvm_step_failed")
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
