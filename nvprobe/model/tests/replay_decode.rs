//! Tier 1: real driver traffic recorded on the GPU machine (NVIDIA H200,
//! open kernel module 580.159.04, `nvprobe watch --json --raw`), replayed
//! through today's decoder. The raw kernel records are the truth; the
//! assertions are on what the decoder makes of them.
//!
//! These replays need the model crate alone (no BPF, no binary, no root);
//! the tier-1 tests that run the nvprobe binary (decode, doctor --root)
//! are in tests/tests/.
//!
//! This file: what each recorded driver call decodes to (names, arguments,
//! NV_STATUS or errno, layouts, devices, processes).

mod common;

use std::collections::BTreeMap;

use common::{ioctls, replay, status};
use nvprobe_model::decode::{self, Event, version::DriverVersion, version::LayoutBasis};

type ByName<'a> = BTreeMap<&'a str, Vec<&'a decode::Ioctl>>;

#[test]
fn cuinit_decodes_every_init_call_by_name_with_its_real_result() {
    let r = replay("h200-580.159.04-cuinit-ctypes.ndjson", None);
    let io = ioctls(&r);
    let mut by_name: ByName = BTreeMap::new();
    for i in &io {
        by_name
            .entry(i.name.expect("every real ioctl has a name"))
            .or_default()
            .push(i);
    }
    status_or_errno_by_escape(&by_name);
    // UVM_REGISTER_GPU's arguments, and the two uvm fds.
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

    rm_classes_and_card_info(&by_name);

    // The usermode doorbell page: RM_MAP_MEMORY names a fresh gpu fd, which
    // is then mmap'ed writable and shared.
    let doorbell = r
        .events
        .iter()
        .find_map(|e| match e {
            Event::Mmap(m) if m.device.kind == decode::DeviceKind::Gpu => Some(m),
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

/// NV_STATUS where the struct has one, the errno otherwise, and UVM init
/// on the uvm node (cuinit-ctypes).
fn status_or_errno_by_escape(by_name: &ByName) {
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
        assert_eq!(c.family, decode::Family::Uvm);
        assert_eq!(c.device.node.as_deref(), Some("/dev/nvidia-uvm"));
        assert_eq!(status(c), Some("NV_OK"), "{name}");
    }
}

/// The RM classes cuInit allocates and the card info (cuinit-ctypes).
fn rm_classes_and_card_info(by_name: &ByName) {
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
    // NVOS21 as in the 545 trace of docs/NVIDIA-ABI.md (§7.1 step 5).
    assert_eq!(
        by_name["NV_ESC_RM_ALLOC"][0].args.to_json()["struct"],
        "NVOS64"
    );
    let card = by_name["NV_ESC_CARD_INFO"][0].args.to_json();
    assert_eq!(card["pci_id0"], "10de:2335", "H200");
    assert_eq!(card["entries"], 32);
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
        assert_eq!((d.major, d.minor, d.kind.as_str()), (1, 3, "none"));
        assert_eq!(
            o.mismatch.as_deref(),
            Some(
                "/dev/nvidia-uvm is device 1:3 (/dev/null, no NVIDIA device), not the NVIDIA uvm node"
            )
        );
        assert!(!o.ok);
    }
    // ioctls on the masked fds are not NVIDIA calls, and are not shown as such.
    assert!(ioctls(&r).iter().all(|i| i.family != decode::Family::Uvm));
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

/// The parameters behind NVOS54.params, copied by the kernel side on a
/// two-GPU H200 host (tests/scripts/record-two-gpu-session.sh): what the RM
/// answered libcuda and nvidia-smi, decoded again from the raw records.
#[test]
fn rm_control_parameters_name_the_driver_build_and_each_gpu() {
    let r = replay("h200x2-580.159.04-one-vs-two-gpus.ndjson", None);
    let io = ioctls(&r);
    let field = |control: &str, key: &str| -> Vec<String> {
        io.iter()
            .filter(|i| i.args.to_json()["control"] == control)
            .filter_map(|i| i.args.to_json()[key].as_str().map(str::to_owned))
            .collect()
    };
    // SYSTEM_GET_BUILD_VERSION: the string behind the params' pointer.
    let bv = field("0x101", "driver_version");
    assert!(
        !bv.is_empty() && bv.iter().all(|v| v == "580.159.04"),
        "{bv:?}"
    );
    // GPU_GET_NAME_STRING.
    let names = field("0x20800110", "gpu_name");
    assert!(
        !names.is_empty() && names.iter().all(|n| n == "NVIDIA H200"),
        "{names:?}"
    );
    // GPU_GET_GID_INFO: the UUIDs nvidia-smi -L printed on that host, the
    // same ones UVM_REGISTER_GPU names.
    let mut gid: Vec<String> = field("0x2080014a", "gpu_uuid");
    gid.sort();
    gid.dedup();
    assert_eq!(
        gid,
        [
            "GPU-35751cd4-1abd-dd07-c841-002347a8409b",
            "GPU-baf28b3f-9f7f-7fe2-340f-975163a9b560"
        ]
    );
    let mut reg: Vec<String> = io
        .iter()
        .filter(|i| i.name == Some("UVM_REGISTER_GPU"))
        .filter_map(|i| i.args.to_json()["gpu_uuid"].as_str().map(str::to_owned))
        .collect();
    reg.sort();
    reg.dedup();
    assert_eq!(reg, gid);
    // GPU_GET_ID_INFO_V2: no NUMA node (an x86 host, no coherent memory).
    let numa: Vec<i64> = io
        .iter()
        .filter(|i| i.args.to_json()["control"] == "0x205")
        .filter_map(|i| i.args.to_json()["numa_id"].as_i64())
        .collect();
    assert!(
        !numa.is_empty() && numa.iter().all(|n| *n == -1),
        "{numa:?}"
    );
    // GPU_GET_ATTACHED_IDS: the two GPUs' ids, every time it was asked.
    let ids: Vec<_> = io
        .iter()
        .filter(|i| i.args.to_json()["control"] == "0x201" && i.ok)
        .map(|i| i.args.to_json()["gpu_ids"].clone())
        .collect();
    assert!(!ids.is_empty());
    assert!(
        ids.iter()
            .all(|v| v.as_array().is_some_and(|a| a.len() == 2)),
        "{ids:?}"
    );
}
