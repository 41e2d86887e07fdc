//! Start-ups that fail, or not, for a reason outside the NVIDIA files, on
//! the real driver: tests/scripts/record-failed-calls.sh ran each case of
//! failed-calls-workload.sh on the H200 (open module 580.159.04) under
//! `nvprobe watch --json --raw` (tests/fixtures/gpu-host/h200-failed-calls.txt
//! has each case's untraced, traced and strace'd result and the verdicts
//! recorded live). None of them was written into a rule beforehand: files
//! libcuda reads hidden in a mount namespace, limits at the first context,
//! seccomp filters answering one system call with one errno. What the
//! layer beneath the rules (every failed system call of a start-up) says
//! about each is asserted here.

mod common;

use common::{case, only};
use serde_json::Value;

use nvprobe_model::correlate::{CuInit, DiagId, Outcome};

const REC: &str = "h200-580.159.04-failed-calls.ndjson.gz";

fn failed(v: &CuInit) -> Vec<(&str, Option<&str>, String)> {
    v.failed_syscalls
        .iter()
        .map(|f| {
            let json = serde_json::to_value(f).expect("json");
            (
                f.call.as_str(),
                f.path.as_deref(),
                json["errno"].as_str().unwrap_or("?").to_owned(),
            )
        })
        .collect()
}

#[test]
fn libcuda_gets_past_what_is_hidden_and_the_verdict_says_ok() {
    let (_, v) = common::verdicts(REC);
    // libcuda carries on without these files and calls: the start-up and
    // its first context succeed, traced and untraced alike, and a verdict
    // that ends well lists no failed call.
    for c in [
        "ok",
        "null_params",
        "no_pci_sysfs",
        "no_numa_sysfs",
        "no_caps_nodes",
        "ro_dev_shm",
        "memlock_0",
        "pids_4",
        "pids_6",
        "seccomp_get_mempolicy",
        "seccomp_mbind",
        "seccomp_set_mempolicy",
        "seccomp_readlink",
        "seccomp_readlinkat",
        "seccomp_sched_getaffinity",
        "seccomp_sysinfo",
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        assert!(x.diagnoses.is_empty(), "{c}: {:#?}", x.diagnoses);
        assert!(x.failed_syscalls.is_empty(), "{c}");
    }
    // /proc/driver/nvidia hidden: the params file it reads is missing, and
    // the start-up got past it.
    let x = case(&v, "no_proc_driver");
    assert_eq!(x.result, Outcome::Ok, "{}", x.text);
    let (id, e) = only(x);
    assert_eq!(id, DiagId::NodeMissing);
    assert!(e.starts_with("/proc/driver/nvidia/params: ENOENT"), "{e}");
}

#[test]
fn each_failure_is_named_by_the_call_it_rests_on() {
    let (_, v) = common::verdicts(REC);

    // RLIMIT_AS 4 GiB: libcuda's address-space reservation.
    let x = case(&v, "as_4g");
    assert_eq!(x.curesult.as_deref(), Some("CUDA_ERROR_OUT_OF_MEMORY (2)"));
    let (id, e) = only(x);
    assert_eq!(id, DiagId::AddressSpaceLimit);
    assert!(
        e.contains(
            "mmap() failed with ENOMEM (mapping memory): the address-space limit (RLIMIT_AS, ulimit -v) of 4 GiB"
        ),
        "{e}"
    );
    // The newest failed call of the start-up is the one the rule rests on.
    assert_eq!(failed(x)[0], ("mmap", None, "ENOMEM".to_owned()));

    // pids.max 2: cuInit succeeds, the first context's thread is refused.
    let x = case(&v, "pids_2");
    assert_eq!(x.curesult.as_deref(), Some("CUDA_SUCCESS (0)"));
    let ctx = x.context.as_ref().expect("a context step");
    assert_eq!(ctx.result, "CUDA_ERROR_OPERATING_SYSTEM (304)");
    let (id, e) = only(x);
    assert_eq!(id, DiagId::ThreadLimit);
    assert!(
        e.contains(
            "clone3() failed with EAGAIN (a new thread or process): the cgroup's pids.max refused it: its tasks \
(pids.current) 2 of 2 (at the limit)"
        ),
        "{e}"
    );
    assert_eq!(failed(x)[0], ("clone3", None, "EAGAIN".to_owned()));

    // uname answered EPERM by a seccomp filter: uname has no permission
    // check of its own, so EPERM is the filter's.
    let x = case(&v, "seccomp_uname");
    assert_eq!(
        x.curesult.as_deref(),
        Some("CUDA_ERROR_OPERATING_SYSTEM (304)")
    );
    let (id, e) = only(x);
    assert_eq!(id, DiagId::NotPermitted);
    assert!(
        e.contains("uname() failed with EPERM")
            && e.contains("the process ran under 1 seccomp filter"),
        "{e}"
    );

    // The escapes answered EACCES by a seccomp filter: no ioctl reached
    // the syscall tracepoints, and the raw exit program saw each refused
    // (its entry never traced: the filter answered before the call ran).
    let x = case(&v, "seccomp_escapes_eacces");
    assert_eq!(x.curesult.as_deref(), Some("CUDA_ERROR_NO_DEVICE (100)"));
    let (id, e) = only(x);
    assert_eq!(id, DiagId::CallsBlocked);
    assert!(
        e.contains("escapes failed with EACCES at the system call's exit (the first: NV_ESC_")
            && e.contains("answered before they ran: a seccomp filter refuses a call before the kernel traces it"),
        "{e}"
    );
}

/// The window the kernel side sends failed calls in: from the process's
/// own first NVIDIA call (the loader's open of libcuda for these), not
/// from its birth (the workload's shell looked at /dev/nvidia-caps, so
/// every process it ran was followed), to its first context.
#[test]
fn failed_calls_are_sent_from_the_processs_own_first_nvidia_call() {
    let r = common::replay(REC, None);
    let (_, v) = common::verdicts(REC);
    let mut checked = 0;
    // The CUDA start-ups (the workload's shell only looked at a path).
    for x in v.iter().filter(|x| x.comm == "python3") {
        let mine = |r: &&Value| r["pid"].as_u64() == Some(u64::from(x.pid));
        let first_nv = r
            .records
            .iter()
            .filter(mine)
            .filter(|r| matches!(r["type"].as_str(), Some("open" | "ioctl" | "cuda")))
            .filter_map(|r| r["mono_ns"].as_u64())
            .min()
            .expect("an NVIDIA call");
        let failed: Vec<u64> = r
            .records
            .iter()
            .filter(mine)
            .filter(|r| r["op"] == "call_failed")
            .filter_map(|r| r["mono_ns"].as_u64())
            .collect();
        assert!(!failed.is_empty(), "{}: a start-up fails some calls", x.pid);
        assert!(
            failed.iter().all(|t| *t >= first_nv),
            "{}: a failed call before its first NVIDIA call",
            x.pid
        );
        checked += 1;
    }
    assert!(checked >= 21, "{checked}");
    // A healthy start-up fails about 50 calls of its own (application
    // profiles, the MPS socket, /dev/char links): all sent, below the bound.
    let ok = case(&v, "ok");
    let n = r
        .records
        .iter()
        .filter(|r| r["pid"].as_u64() == Some(u64::from(ok.pid)) && r["op"] == "call_failed")
        .count() as u32;
    assert!(
        (30..nvprobe_common::call_failed::SENT_MAX).contains(&n),
        "{n}"
    );
}
