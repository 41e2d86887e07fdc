//! The ninth batch of start-ups under conditions no rule had been written
//! for, on the real driver: tests/scripts/record-unseen.sh 9 ran each case
//! of unseen9-workload.sh on the H200 host (open module 580.159.04) untraced
//! and under `nvprobe watch --json --raw`, with the same results
//! (tests/fixtures/gpu-host/h200-unseen9.txt). Odd shapes of process and
//! odd settings. Two verdicts said less than they could, or more than the
//! evidence allowed: a seccomp trap handled by the process gave 803, which
//! was also blamed on two drivers, and CUDA_DEVICE_ORDER=junk gave 101,
//! which fell to the failed-call list.

mod common;

use common::{case, only};

use nvprobe_model::correlate::{DiagId, Outcome};

const REC: &str = "h200-580.159.04-unseen9.ndjson.gz";

/// The main thread gone (exit(2) of the leader while another thread
/// started CUDA: /proc/self/maps then reads empty), root dropping to
/// nobody after loading libcuda, CUDA_MPS_PIPE_DIRECTORY a file, a 4 KiB
/// /dev/shm, an LD_AUDIT library that does not exist, one CPU: cuInit 0
/// and a context.
#[test]
fn what_changed_nothing_is_ok_with_nothing_said() {
    let (_, v) = common::verdicts(REC);
    for c in [
        "ok",
        "setuid",
        "mps_pipe_file",
        "shm_tiny",
        "ld_audit_missing",
        "one_cpu",
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        assert!(x.diagnoses.is_empty(), "{c}: {:#?}", x.diagnoses);
    }
    // The leader's command line could not be read (it was a zombie): its
    // verdict is ok all the same.
    let main_exited = v.iter().filter(|x| x.result == Outcome::Ok).count();
    assert!(main_exited >= 7, "{v:#?}");
}

/// A seccomp filter whose action at the escapes is SECCOMP_RET_TRAP, with a
/// SIGSYS handler: no escape reached the driver, the refused call returned
/// its own number (x86), and libcuda read that as a driver of another
/// version (803). The refused calls explain it; "two drivers" does not.
#[test]
fn a_handled_trap_is_the_filters_not_two_drivers() {
    let (_, v) = common::verdicts(REC);
    // (It ended before nvprobe read its command line: pid 681 in the
    // recording.)
    let x = v.iter().find(|x| x.pid == 681).expect("pid 681");
    assert_eq!(
        x.curesult.as_deref(),
        Some("CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)")
    );
    let (id, evidence) = only(x);
    assert_eq!(id, DiagId::CallsBlocked);
    assert!(
        evidence.contains(
            "; the filter's trap action sent SIGSYS 5 times and the process's handler took it, so the refused call \
returned what the handler left (on x86 the call's own number), which libcuda read as the driver's answer"
        ),
        "{evidence}"
    );
}

/// CUDA_DEVICE_ORDER=junk: cuInit 101 after the GPU was opened.
#[test]
fn an_unknown_device_order_is_named() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "device_order_junk");
    let (id, evidence) = only(x);
    assert_eq!(id, DiagId::InvalidDevice);
    assert_eq!(
        evidence,
        "cuInit returned CUDA_ERROR_INVALID_DEVICE (101); CUDA_DEVICE_ORDER=junk is not an order CUDA knows \
(FASTEST_FIRST or PCI_BUS_ID), which it refuses"
    );
}

/// cpuid made to fault (ARCH_SET_CPUID 0): a general protection fault in
/// libcuda (the kernel's "traps: … general protection fault … in
/// libcuda.so.580.159.04"), SIGSEGV with SI_KERNEL, while its other thread
/// was in an RM control.
#[test]
fn a_cpuid_fault_is_a_general_protection_fault() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "cpuid_fault");
    assert_eq!(x.result, Outcome::Killed);
    let (id, evidence) = only(x);
    assert_eq!(id, DiagId::KilledBySignal);
    assert!(
        evidence.starts_with("SIGSEGV from the kernel (a general protection fault"),
        "{evidence}"
    );
    assert!(x.diagnoses[0].hint.contains("ARCH_SET_CPUID"));
}
