//! Hints the verdict's own evidence rules out, found by reading every
//! recorded verdict of the real driver (580.159.04, H100 and H200) as a
//! user would: "give cuInit more time" after cuInit had returned
//! CUDA_SUCCESS, "load nvidia-uvm" for a node libcuda had just created
//! with the loaded module's major, "create the nodes" for files in /sys,
//! "raise ulimit -n" at 4 descriptors of 20000, the device cgroup for a
//! call on no device, "check CUDA_VISIBLE_DEVICES" where none was set and
//! the GPU was opened. Each case is asserted on what the real driver and
//! kernel did, by replay of its recording.

mod common;

use common::{case, only, verdicts};

use nvprobe_model::correlate::{CuInit, DiagId, DiagSeverity, Outcome};

fn diag(v: &CuInit, id: DiagId) -> &nvprobe_model::correlate::Diagnosis {
    v.diagnoses
        .iter()
        .find(|d| d.id == id)
        .unwrap_or_else(|| panic!("no {id:?} in {:#?}", v.diagnoses))
}

/// A tmpfs over /proc (its /proc/self/maps, /proc/cpuinfo, /proc/sys
/// missing): cuInit 304 before any driver call, on both batches that ran
/// it; the open-file limit (20000, 4 open) is not suggested.
#[test]
fn a_missing_procfs_is_named_not_the_open_file_limit() {
    for (rec, name) in [
        ("h100-580.159.04-unseen.ndjson.gz", "no_proc"),
        ("h100-580.159.04-unseen3.ndjson.gz", "proc_hidden"),
    ] {
        let (_, v) = verdicts(rec);
        let v = case(&v, name);
        assert_eq!(v.result, Outcome::Failed, "{name}");
        let (id, evidence) = only(v);
        assert_eq!(id, DiagId::ProcUnavailable, "{name}: {evidence}");
        assert!(
            evidence.starts_with(
                "cuInit returned CUDA_ERROR_OPERATING_SYSTEM (304) and no call on an NVIDIA file failed: 4 opens of \
procfs files failed with ENOENT (/proc/sys/vm/mmap_min_addr at "
            ) && evidence.ends_with(
                "its /proc is no procfs (not mounted, or covered by another file system)"
            ),
            "{name}: {evidence}"
        );
        assert!(v.diagnoses[0].hint.contains("mount -t proc proc /proc"));
        assert!(!v.diagnoses[0].hint.contains("ulimit"));
    }
}

/// A tmpfs over /sys: libcuda got past the missing module entries; their
/// hint is a driver file's, not a node's.
#[test]
fn a_missing_sys_entry_is_no_node_to_create() {
    for (rec, name) in [
        ("h100-580.159.04-unseen.ndjson.gz", "no_sys"),
        ("h100-580.159.04-unseen3.ndjson.gz", "sys_hidden"),
    ] {
        let (_, v) = verdicts(rec);
        let v = case(&v, name);
        assert_eq!(v.result, Outcome::Ok, "{name}");
        assert_eq!(v.diagnoses.len(), 2, "{name}: {:#?}", v.diagnoses);
        for d in &v.diagnoses {
            assert_eq!(
                (d.id, d.severity),
                (DiagId::NodeMissing, DiagSeverity::Recovered)
            );
            assert!(
                d.evidence.starts_with("/sys/module/nvidia"),
                "{}",
                d.evidence
            );
            assert!(
                d.hint.starts_with(
                    "the path is the driver's own file in /sys or /proc, not a device node"
                ) && !d.hint.contains("nvidia-modprobe"),
                "{}",
                d.hint
            );
        }
    }
}

/// Nodes missing in a container run as root: libcuda made each with
/// mknod, the uvm one with the major the loaded nvidia_uvm registered, so
/// loading the module is ruled out.
#[test]
fn a_node_libcuda_created_needs_no_module_loaded() {
    let (_, v) = verdicts("h200-580.159.04-catalogue.ndjson");
    let v = case(&v, "missing_nodes_root");
    assert_eq!(v.result, Outcome::Ok);
    let uvm = diag(v, DiagId::UvmUnusable);
    assert!(
        uvm.evidence.contains("libcuda created it (mknod 238:0)"),
        "{}",
        uvm.evidence
    );
    for d in &v.diagnoses {
        assert!(
            d.hint
                .starts_with("libcuda created the missing node itself")
                && !d.hint.contains("modprobe nvidia-uvm"),
            "{:?}: {}",
            d.id,
            d.hint
        );
    }
}

/// A preload failed an escape with no system call (the shim's EIO at the
/// 30th): cuInit 100 with no CUDA_VISIBLE_DEVICES and /dev/nvidia0 opened
/// at 4.0 ms: the list and the container's nodes are not the cause.
#[test]
fn no_device_with_the_gpu_opened_and_no_list_does_not_blame_the_list() {
    let (_, v) = verdicts("h100-580.159.04-unseen6.ndjson.gz");
    let v = case(&v, "preload_escape");
    let d = diag(v, DiagId::NoVisibleDevices);
    assert_eq!(
        d.evidence,
        "cuInit returned CUDA_ERROR_NO_DEVICE (100); its environment (/proc/PID/environ) held no CUDA_VISIBLE_DEVICES, \
and /dev/nvidia0 was opened at 4.0 ms: what came after that open decided it"
    );
    assert!(
        d.hint
            .starts_with("the GPU's node was passed in and opened")
            && d.hint.contains("preloaded library"),
        "{}",
        d.hint
    );
    assert_eq!(
        diag(v, DiagId::AnsweredInProcess).severity,
        DiagSeverity::Warning
    );
}

/// The same start-up, where nvprobe read only part of the process's
/// environment (`env_cut`: it went on past 4 MiB): CUDA_VISIBLE_DEVICES
/// may be set past that point, so no verdict says it was not set.
#[test]
fn an_environment_read_in_part_says_nothing_of_a_variable_missing_from_it() {
    let v = common::verdicts_edited("h100-580.159.04-unseen6.ndjson.gz", |l| {
        l.replacen(
            r#""type":"process","#,
            r#""type":"process","env_cut":true,"#,
            1,
        )
    });
    let v = case(&v, "preload_escape");
    let d = diag(v, DiagId::NoVisibleDevices);
    assert_eq!(d.evidence, "cuInit returned CUDA_ERROR_NO_DEVICE (100)");
    assert!(
        !d.hint
            .starts_with("the GPU's node was passed in and opened"),
        "{}",
        d.hint
    );
    assert!(
        v.process.as_ref().is_some_and(|p| p.env_cut),
        "the field was read back"
    );
}

/// Killed after cuInit returned CUDA_SUCCESS, before a first context: the
/// first line names the start-up, not cuInit, and no hint asks for more
/// cuInit time. Where the sender was the process's parent (the workload's
/// shell writing cgroup.kill, timeout's SIGINT the process raised again, a
/// parent-death SIGKILL) the hint says so; a shell's kill of the process
/// group is the start-up's kill.
#[test]
fn a_kill_after_cuinit_succeeded_is_the_start_ups() {
    const PARENT: &str = "the process did not hang in the driver: its parent ended it";
    const AFTER_INIT: &str =
        "the process did not hang in the driver: cuInit had succeeded, and something killed it";
    for (rec, name, hint) in [
        ("h100-580.159.04-unseen3.ndjson.gz", "cgroup_kill", PARENT),
        ("h100-580.159.04-unseen2.ndjson.gz", "sigint_py", PARENT),
        (
            "h100-580.159.04-unseen5.ndjson.gz",
            "sigint_pgrp",
            AFTER_INIT,
        ),
    ] {
        let (_, v) = verdicts(rec);
        let v = case(&v, name);
        assert_eq!(v.result, Outcome::Killed, "{name}");
        assert!(!v.cuinit_seen, "{name}: the text says \"CUDA start-up\"");
        assert!(
            v.text.starts_with(
                "cuInit returned CUDA_SUCCESS (0) after uvm_gpu_registered, then killed by"
            ),
            "{name}: {}",
            v.text
        );
        let d = diag(v, DiagId::KilledBySignal);
        assert!(
            !d.hint.contains("Give cuInit more time") && d.hint.starts_with(hint),
            "{name}: {}",
            d.hint
        );
    }
    let (_, v) = verdicts("h100-580.159.04-unseen4.ndjson.gz");
    let v = case(&v, "pdeath");
    assert!(v.cuinit_seen, "killed in cuInit");
    let d = diag(v, DiagId::KilledBySignal);
    assert!(d.hint.contains("PR_SET_PDEATHSIG"), "{}", d.hint);
}

/// A seccomp filter refusing opens with EPERM: the evidence says no
/// device was involved, and the hint does not begin with the device
/// cgroup's fix.
#[test]
fn an_eperm_on_no_device_gets_no_device_cgroup_hint() {
    let (_, v) = verdicts("h200-580.159.04-who-refused.ndjson");
    let v = case(&v, "seccomp_open");
    let (id, evidence) = only(v);
    assert_eq!(id, DiagId::NotPermitted);
    assert!(
        evidence.contains("not a device, so not the device cgroup"),
        "{evidence}"
    );
    let hint = v.diagnoses[0].hint;
    assert!(
        hint.starts_with("EPERM for a call on no device is a seccomp profile")
            && !hint.contains("195:*"),
        "{hint}"
    );
}

/// A process that exited with status 0 before any GPU was registered
/// (the host's own tool, read too late for its identity): its failed calls
/// are said as a warning, never as an error of a process that ended
/// content.
#[test]
fn failed_calls_of_a_content_exit_are_no_error() {
    let (_, v) = verdicts("h100-580.159.04-unseen6.ndjson.gz");
    let v = v.iter().find(|v| v.pid == 870).expect("pid 870");
    assert_eq!(v.result, Outcome::Exited);
    assert_eq!(
        (
            v.diagnoses.len(),
            v.diagnoses[0].id,
            v.diagnoses[0].severity
        ),
        (1, DiagId::FailedSyscalls, DiagSeverity::Warning),
        "{:#?}",
        v.diagnoses
    );
}
