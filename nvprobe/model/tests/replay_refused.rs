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
    // ulimit -n 5 / 7, and a seccomp filter answering EPERM to every open:
    // cuInit returns 304 before any call nvprobe follows.
    for c in ["emfile_5", "emfile_7", "seccomp_open"] {
        let x = case(&v, c);
        assert_eq!(ids(x), [DiagId::OsCallFailed], "{c}");
        assert!(x.diagnoses[0].evidence.starts_with(
            "cuInit returned CUDA_ERROR_OPERATING_SYSTEM (304) and no call on an NVIDIA file failed"
        ));
    }
    assert!(
        case(&v, "emfile_5").diagnoses[0]
            .evidence
            .contains("open-file limit 5 (hard 5)")
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
    let mut fixtures: Vec<_> = std::fs::read_dir(common::fixture(""))
        .expect("fixtures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ndjson"))
        .collect();
    fixtures.sort();
    let mut checked = 0;
    for p in fixtures {
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name")
            .to_owned();
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
                ) && d.evidence.starts_with("/dev/nvidia")
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
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "{checked} diagnoses checked");
}
