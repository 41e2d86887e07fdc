//! The eighth batch of start-ups under conditions no rule had been written
//! for, on the real driver: tests/scripts/record-unseen.sh 8 ran each case
//! of unseen8-workload.sh on an H100 host (open module 580.159.04, kernel
//! 6.18.44) untraced and under `nvprobe watch --json --raw`, with the same
//! results (tests/fixtures/gpu-host/h100-unseen8.txt). Per-process kernel
//! settings, personalities, a closed stdin, a read-only /dev, visibility
//! lists with an entry that names no GPU, a 48 MiB memory cgroup. Ten of
//! twelve changed nothing; the recording's verdicts were right, and the
//! rdtsc fault's said less than it could (its hint blamed a library).

mod common;

use common::{case, only};

use nvprobe_model::correlate::{DiagId, Outcome};

const REC: &str = "h100-580.159.04-unseen8.ndjson.gz";

/// libcuda 580 needs no writable-and-executable memory (the kernel's
/// memory-deny-write-execute changed nothing), works without transparent
/// huge pages, address randomisation, the top-down layout or above a 3 GiB
/// personality limit (a 64-bit process's is not lowered), with descriptor
/// 0 its first, through a read-only bind of /dev (opening a device node
/// writes nothing to its file system), with a list whose second entry
/// names no GPU (CUDA stops at it), and in 48 MiB of memory.
#[test]
fn what_changed_nothing_is_ok_with_nothing_said() {
    let (_, v) = common::verdicts(REC);
    for c in [
        "ok",
        "mdwe",
        "thp_off",
        "no_aslr",
        "legacy_layout",
        "addr_3gb",
        "stdin_closed",
        "dev_ro",
        "visible_second_bad",
        "memory_48m",
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        assert!(x.diagnoses.is_empty(), "{c}: {:#?}", x.diagnoses);
        assert!(x.context.as_ref().is_some_and(|c| c.code == 0), "{c}");
    }
}

/// rdtsc made to fault (PR_SET_TSC, PR_TSC_SIGSEGV): libcuda's first rdtsc
/// in cuInit, 0.2 ms after its entry and before any driver call, took a
/// general protection fault (the kernel log: "traps: python3[N] general
/// protection fault"), SIGSEGV with SI_KERNEL, exit 139.
#[test]
fn a_general_protection_fault_is_no_bad_library() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "tsc_sigsegv");
    assert_eq!(x.result, Outcome::Killed);
    assert_eq!(x.calls, 0);
    let (id, evidence) = only(x);
    assert_eq!(id, DiagId::KilledBySignal);
    assert!(
        evidence.starts_with(
            "SIGSEGV from the kernel (a general protection fault, an instruction the CPU refused, or a signal frame \
it could not write: not a bad address) at "
        ) && evidence.ends_with(": a fault, not a kill"),
        "{evidence}"
    );
    let hint = x.diagnoses[0].hint;
    assert!(
        hint.contains("PR_SET_TSC") && !hint.contains("corrupt or mismatched library"),
        "{hint}"
    );
}

/// CUDA_VISIBLE_DEVICES=99,0: CUDA stops at the first entry that names no
/// GPU, so none is visible: cuInit 100.
#[test]
fn a_list_whose_first_entry_names_no_gpu_hides_them_all() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "visible_first_bad");
    assert_eq!(x.curesult.as_deref(), Some("CUDA_ERROR_NO_DEVICE (100)"));
    let (id, evidence) = only(x);
    assert_eq!(id, DiagId::NoVisibleDevices);
    assert_eq!(
        evidence,
        "cuInit returned CUDA_ERROR_NO_DEVICE (100); CUDA_VISIBLE_DEVICES=99,0 matches none of this host's 1 GPU"
    );
}
