//! Start-ups under conditions no rule had been written for, on the real
//! driver: tests/scripts/record-unseen.sh ran each case of
//! unseen-workload.sh on the H100 host (open module 580.159.04) untraced
//! and under `nvprobe watch --json --raw`, with the same results
//! (tests/fixtures/gpu-host/h100-unseen.txt). What the real driver did
//! decides what is asserted: RLIMIT_DATA from 64 MiB up, an MPS pipe
//! directory whose socket has no daemon and a CPU quota of 5 % did not
//! stop libcuda; a repeated device in CUDA_VISIBLE_DEVICES made cuInit
//! return CUDA_ERROR_INVALID_DEVICE (101), which the first build judged
//! by the start-up's failed system calls, none of them the cause.

mod common;

use common::{case, only};

use nvprobe_model::correlate::{DiagId, Outcome};

const REC: &str = "h100-580.159.04-unseen.ndjson.gz";

#[test]
fn what_libcuda_got_past_is_ok() {
    let (_, v) = common::verdicts(REC);
    for c in [
        "ok",
        "data_64m",
        "data_256m",
        "data_1024m",
        "data_4096m",
        "mps_stale",
        "mps_empty",
        "cpu_5pct",
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        assert!(x.diagnoses.is_empty(), "{c}: {:#?}", x.diagnoses);
    }
    // Without /sys, the module's initstate files are missing and libcuda
    // carries on.
    let x = case(&v, "no_sys");
    assert_eq!(x.result, Outcome::Ok, "{}", x.text);
    assert!(
        x.diagnoses.iter().all(|d| d.id == DiagId::NodeMissing
            && d.evidence.ends_with("start-up recovered and succeeded")),
        "{:#?}",
        x.diagnoses
    );
    // A search path whose first libcuda.so.1 is no library: the loader
    // went on to the real one.
    let x = case(&v, "bad_lib_first");
    assert_eq!(x.result, Outcome::Ok, "{}", x.text);
    let (id, e) = only(x);
    assert_eq!(id, DiagId::LibcudaUnloadable);
    assert!(
        e.contains("not an ELF file") && e.ends_with("start-up recovered and succeeded"),
        "{e}"
    );
}

#[test]
fn a_gpu_named_twice_in_the_visible_list_is_the_cause() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "visible_0_0");
    assert_eq!(x.result, Outcome::Failed, "{}", x.text);
    assert_eq!(
        x.curesult.as_deref(),
        Some("CUDA_ERROR_INVALID_DEVICE (101)")
    );
    let (id, e) = only(x);
    assert_eq!(id, DiagId::InvalidDevice);
    assert_eq!(
        e,
        "cuInit returned CUDA_ERROR_INVALID_DEVICE (101); CUDA_VISIBLE_DEVICES=0,0 names /dev/nvidia0 twice (0), \
which CUDA refuses"
    );
    assert!(x.diagnoses[0].hint.contains("list each GPU once"));
    // The driver calls alone (cuInit's return not seen): the start-up
    // stopped before any GPU was registered, and the list says why.
    let unseen = common::verdicts_without_libcuda(REC);
    let x = case(&unseen, "visible_0_0");
    let (id, e) = only(x);
    assert_eq!(id, DiagId::InvalidDevice, "{e}");
    assert!(
        e.ends_with("names /dev/nvidia0 twice (0), which CUDA refuses (inferred: cuInit's return was not seen)"),
        "{e}"
    );
    // The other values hide every GPU: cuInit's 100.
    for (c, says) in [
        (
            "visible_1",
            "CUDA_VISIBLE_DEVICES=1 matches none of this host's 1 GPU",
        ),
        (
            "visible_empty",
            "CUDA_VISIBLE_DEVICES is set but empty: it hides every GPU",
        ),
        (
            "visible_junk",
            "CUDA_VISIBLE_DEVICES=junk matches none of this host's 1 GPU",
        ),
    ] {
        let x = case(&v, c);
        let (id, e) = only(x);
        assert_eq!(id, DiagId::NoVisibleDevices, "{c}");
        assert!(e.ends_with(says), "{c}: {e}");
    }
}

#[test]
fn proc_hidden_and_a_file_that_is_no_library_are_told_by_what_failed() {
    let (_, v) = common::verdicts(REC);
    // /proc hidden by a tmpfs: libcuda's reads of its own /proc files fail
    // and cuInit returns 304 before any driver call.
    let x = case(&v, "no_proc");
    assert_eq!(
        x.curesult.as_deref(),
        Some("CUDA_ERROR_OPERATING_SYSTEM (304)")
    );
    let (id, e) = only(x);
    assert_eq!(id, DiagId::ProcUnavailable);
    assert!(
        e.contains(
            "4 opens of procfs files failed with ENOENT (/proc/sys/vm/mmap_min_addr at 2.5 ms, then /proc/cpuinfo, \
/proc/self/maps, /proc/self/task/"
        ),
        "{e}"
    );
    // CUDAWORK_LIB names the file itself: nothing else is loaded.
    let x = case(&v, "bad_lib_only");
    assert_eq!(x.result, Outcome::Failed, "{}", x.text);
    let (id, e) = only(x);
    assert_eq!(id, DiagId::LibcudaUnloadable);
    assert!(e.contains("could not load it: not an ELF file"), "{e}");
}
