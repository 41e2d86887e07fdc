//! Who refused, on the real driver: tests/scripts/record-who-refused.sh ran
//! each case of who-refused-workload.sh on the H200 (open module
//! 580.159.04) under `nvprobe watch --json --raw`
//! (tests/fixtures/gpu-host/h200-who-refused.txt has the untraced results
//! beside the verdicts). Each verdict names the mechanism: the open-file
//! limit, a seccomp filter, a node no driver answers; nvprobe's own doctor
//! run gets none. And over every fixture, no hint offers a remedy the
//! evidence rules out.

mod common;

use common::case;

use nvprobe_model::correlate::{CuInit, DiagId, Outcome};

const REC: &str = "h200-580.159.04-who-refused.ndjson";

fn ids(v: &CuInit) -> Vec<DiagId> {
    v.diagnoses.iter().map(|d| d.id).collect()
}

#[test]
fn each_refusal_is_named_by_its_mechanism() {
    let (_, v) = common::verdicts(REC);
    assert_eq!(case(&v, "ok").result, Outcome::Ok);
    // ulimit -n 9 / 12: libcuda's open of a node or the driver's params
    // file gets EMFILE (untraced: cuInit 999 and 100).
    for (c, limit, code) in [("emfile_9", 9, 999), ("emfile_12", 12, 100)] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Failed, "{c}");
        assert!(
            x.curesult
                .as_deref()
                .is_some_and(|r| r.ends_with(&format!("({code})")))
        );
        assert!(
            ids(x).iter().all(|d| *d == DiagId::FileLimit),
            "{c}: {:?}",
            ids(x)
        );
        assert!(
            x.diagnoses[0]
                .evidence
                .contains(&format!("(soft limit {limit}, hard {limit};")),
            "{}",
            x.diagnoses[0].evidence
        );
    }
    // ulimit -n 5 / 7, a seccomp filter answering EPERM to every open, and
    // a cgroup at pids.max 1: cuInit returns 304 before any call on an
    // NVIDIA file; the call of libcuda's own that failed (the kernel side's
    // call_failed records) names the limit or the filter.
    for (c, id, call) in [
        (
            "emfile_5",
            DiagId::FileLimit,
            "pipe2() failed with EMFILE (a pipe)",
        ),
        (
            "emfile_7",
            DiagId::FileLimit,
            "pipe2() failed with EMFILE (a pipe)",
        ),
        (
            "seccomp_open",
            DiagId::NotPermitted,
            "openat() failed with EPERM, 8 times or more (opening a file)",
        ),
        (
            "pids_max",
            DiagId::ThreadLimit,
            "clone3() failed with EAGAIN (a new thread or process)",
        ),
    ] {
        let x = case(&v, c);
        assert_eq!(ids(x), [id], "{c}");
        assert!(
            x.diagnoses[0].evidence.starts_with(&format!(
                "cuInit returned CUDA_ERROR_OPERATING_SYSTEM (304) and no call on an NVIDIA file failed: {call}: "
            )),
            "{c}: {}",
            x.diagnoses[0].evidence
        );
    }
    assert!(
        case(&v, "emfile_5").diagnoses[0].evidence.ends_with(
            "the process's open-file limit (RLIMIT_NOFILE) was reached (soft limit 5, hard 5; 4 descriptors were \
open when cuInit had failed)"
        ),
        "{}",
        case(&v, "emfile_5").diagnoses[0].evidence
    );
    // The filter was installed after libcuda loaded: the read at cuInit's
    // failure has it.
    assert!(
        case(&v, "seccomp_open").diagnoses[0].evidence.ends_with(
            "not a device, so not the device cgroup: a seccomp filter or sandbox refused it; the process ran under \
1 seccomp filter"
        ),
        "{}",
        case(&v, "seccomp_open").diagnoses[0].evidence
    );
    assert!(
        case(&v, "pids_max").diagnoses[0].evidence.ends_with(
            "the cgroup's pids.max refused it: its tasks (pids.current) 1 of 1 (at the limit) when cuInit had failed; \
it ran 1 thread"
        ),
        "{}",
        case(&v, "pids_max").diagnoses[0].evidence
    );
    // A device program on the process's cgroup refusing char 195:*: EPERM
    // on /dev/nvidiactl, with no seccomp filter: the device cgroup.
    let d = case(&v, "devcg_deny");
    assert_eq!(ids(d), [DiagId::NotPermitted]);
    assert!(
        d.diagnoses[0].evidence.starts_with(
            "/dev/nvidiactl: EPERM: not the file's mode (that refuses with EACCES): the device cgroup refused it (1 device program (cgroup v2 BPF_CGROUP_DEVICE)"
        ),
        "{}",
        d.diagnoses[0].evidence
    );
    // A read-only tmpfs /dev without the nodes, as root: the mknod gets
    // EROFS, and the mount says why.
    let r = case(&v, "ro_dev");
    assert_eq!(ids(r), [DiagId::NodeMissing, DiagId::NodeCreateFailed]);
    assert_eq!(
        r.diagnoses[1].evidence,
        "/dev/nvidiactl: mknod 195:255 failed: EROFS; the /dev it is in is mounted read-only"
    );
    // A user namespace with its own /dev: libcuda's mknod is refused, and
    // that (not the visibility list) is why no device is seen.
    let u = case(&v, "userns_mknod");
    assert_eq!(ids(u), [DiagId::NodeMissing, DiagId::NodeCreateFailed]);
    assert!(
        u.diagnoses[1].evidence.contains(
            "mknod 195:255 failed: EPERM; the process runs in a user namespace (uid_map 0 0 1)"
        ),
        "{}",
        u.diagnoses[1].evidence
    );
    // A seccomp filter answering EPERM to the escapes: they never reach
    // the syscall tracepoints; libcuda opens /dev/nvidiactl again and again.
    let s = case(&v, "seccomp_escapes");
    assert_eq!(ids(s), [DiagId::CallsBlocked]);
    assert!(
        s.diagnoses[0]
            .evidence
            .starts_with("/dev/nvidiactl: opened ")
    );
    // /dev/nvidia-uvm made with major 60: ENXIO, no driver there.
    let u = case(&v, "stale_uvm");
    assert!(ids(u).contains(&DiagId::NodeStale), "{:?}", ids(u));
    // /dev/nvidia0 made as 195:7 on a one-GPU host: another device at the
    // path, and so no visible GPU; the visibility list is not blamed.
    assert_eq!(ids(case(&v, "stale_gpu")), [DiagId::NodeWrongDevice]);
    // /dev/nvidia-uvm a regular file: not a character device, so not the
    // uvm node; the shell that created it (`: >/dev/nvidia-uvm`) before it
    // ran python in the same pid is no CUDA start-up.
    let f = case(&v, "file_uvm");
    assert_eq!(ids(f), [DiagId::NodeWrongDevice]);
    assert_eq!(
        f.diagnoses[0].evidence,
        "/dev/nvidia-uvm is not a character device: this is not the NVIDIA uvm node"
    );
    assert!(
        v.iter()
            .filter(|x| x.comm == "sh")
            .all(|x| x.class.as_str() != "cuda"),
        "{:#?}",
        v.iter().filter(|x| x.comm == "sh").collect::<Vec<_>>()
    );
    // The uvm node mode 000, as nobody: the mode refuses; every node 0666
    // in a nodev tmpfs /dev: the mount refuses (and hides the GPU).
    let m = case(&v, "perm_mode");
    assert_eq!(ids(m), [DiagId::NodePermission]);
    assert!(m.diagnoses[0].evidence.ends_with(
        "EACCES: the mode refuses read and write (the node is 0000 0:0; the process runs as uid 65534 gid 65534, no supplementary groups, without CAP_DAC_OVERRIDE)"
    ));
    let n = case(&v, "perm_nodev");
    assert_eq!(ids(n), [DiagId::NodeNodev]);
    assert!(
        n.diagnoses[0]
            .evidence
            .starts_with("/dev/nvidiactl: EACCES: the mode allows it (the node is 0666 0:0;")
    );
    // nvprobe doctor ran among them: no verdict is about nvprobe.
    assert!(v.iter().all(|x| x.comm != "nvprobe"));
}

/// The invariant the issue names: no hint may suggest a remedy that the
/// evidence rules out, on any recording we have.
#[test]
fn no_hint_contradicts_its_evidence_on_any_fixture() {
    let mut checked = 0;
    for name in common::recordings() {
        let (_, v) = common::verdicts(&name);
        for x in &v {
            let refused_gpu = x.diagnoses.iter().any(|d| {
                matches!(
                    d.id,
                    DiagId::FileLimit
                        | DiagId::NotPermitted
                        | DiagId::NodeStale
                        | DiagId::NodeWrongDevice
                        | DiagId::NodeNodev
                        | DiagId::SecurityModuleDenied
                        | DiagId::NodeMissing
                        | DiagId::NodeCreateFailed
                ) && d.evidence.starts_with("/dev/nvidia")
            });
            // A preload answered cuInit: libcuda's meanings do not apply.
            let interposed = x.diagnoses.iter().any(|d| {
                d.id == DiagId::CudaInterposer && d.evidence.starts_with("cuInit was answered")
            });
            for d in &x.diagnoses {
                let (e, h) = (d.evidence.as_str(), d.hint);
                // EPERM is not the file mode: no chmod.
                if e.contains(": EPERM") && !e.contains("mknod") {
                    assert!(!h.contains("fix the node's mode"), "{name}: {e} / {h}");
                }
                // EACCES is not the device cgroup: no device allow rule.
                if e.contains(": EACCES") {
                    assert!(!h.contains("allow char 195"), "{name}: {e} / {h}");
                }
                // A limit is not the node.
                if e.contains(": EMFILE") || e.contains(": ENFILE") {
                    assert!(!h.contains("check the node"), "{name}: {e} / {h}");
                }
                // A refused GPU node is not the visibility list.
                if refused_gpu {
                    assert_ne!(d.id, DiagId::NoVisibleDevices, "{name}: {x:#?}");
                }
                if interposed {
                    assert_eq!(d.id, DiagId::CudaInterposer, "{name}: {x:#?}");
                }
                // A fault is not a harness timeout.
                if e.contains("SIGSEGV") || e.contains("SIGBUS") {
                    assert!(!h.contains("test harness timeout"), "{name}: {e} / {h}");
                }
                // Nobody else held the GPU: do not send people after them.
                if e.contains("no other process had") {
                    assert!(!h.contains("stop or wait for them"), "{name}: {e} / {h}");
                }
                // A thread or an address-space limit is not descriptors,
                // and a refused mapping is not the GPU's memory.
                if matches!(d.id, DiagId::ThreadLimit | DiagId::AddressSpaceLimit) {
                    assert!(!h.contains("ulimit -n"), "{name}: {e} / {h}");
                }
                if e.contains("mmap() failed with ENOMEM") {
                    assert!(
                        d.id != DiagId::ContextOutOfMemory && !h.contains("stop or wait for them"),
                        "{name}: {e} / {h}"
                    );
                }
                // An ordinal past the count is not a missing node.
                if d.id == DiagId::InvalidDevice {
                    assert!(!h.contains("nvidia-modprobe"), "{name}: {e} / {h}");
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 60, "{checked} diagnoses checked");
}
