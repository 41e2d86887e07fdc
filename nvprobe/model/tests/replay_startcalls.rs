//! A start-up's own calls, on the real driver: tests/scripts/record-start-calls.sh
//! ran each case of start-calls-workload.sh on the H200 (open module
//! 580.159.04) under `nvprobe watch --json --raw`
//! (tests/fixtures/gpu-host/h200-start-calls.txt has the untraced results
//! beside the verdicts). No call on an NVIDIA file fails in any of them:
//! the thread libcuda starts is refused by the cgroup's pids.max, the
//! user's RLIMIT_NPROC or a seccomp filter (cuInit 304), its address-space
//! reservation by RLIMIT_AS (cuInit 2); the kernel side's `call_failed`
//! records name the call, and the verdict the limit.

mod common;

use common::{case, only};

use nvprobe_model::correlate::{DiagId, Outcome};

const REC: &str = "h200-580.159.04-start-calls.ndjson";

#[test]
fn each_refused_start_call_is_named_with_its_limit() {
    let (_, v) = common::verdicts(REC);
    // Untraced and traced alike: these start up and make a context.
    for c in ["ok", "pids_max_3", "as_16g", "as_64g", "as_256g"] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        assert!(x.diagnoses.is_empty(), "{c}: {:#?}", x.diagnoses);
    }
    // clone3 answered ENOSYS: glibc used clone, cuInit succeeded, and the
    // ENOSYS explains nothing.
    let x = case(&v, "seccomp_clone3");
    assert_eq!(x.result, Outcome::Ok, "{}", x.text);
    assert!(x.diagnoses.is_empty(), "{:#?}", x.diagnoses);

    let x = case(&v, "pids_max_1");
    assert_eq!(
        x.curesult.as_deref(),
        Some("CUDA_ERROR_OPERATING_SYSTEM (304)")
    );
    let (id, e) = only(x);
    assert_eq!(id, DiagId::ThreadLimit);
    assert!(
        e.ends_with(
            "no call on an NVIDIA file failed: clone3() failed with EAGAIN (a new thread or process): the cgroup's \
pids.max refused it: its tasks (pids.current) 1 of 1 (at the limit) when cuInit had failed; it ran 1 thread"
        ),
        "{e}"
    );
    // Said once in the verdict's line.
    assert_eq!(
        x.text.matches("CUDA_ERROR_OPERATING_SYSTEM (304)").count(),
        1,
        "{}",
        x.text
    );

    let (id, e) = only(case(&v, "nproc_1"));
    assert_eq!(id, DiagId::ThreadLimit);
    assert!(
        e.contains("clone3() failed with EAGAIN (a new thread or process): the user's process limit (RLIMIT_NPROC) 1"),
        "{e}"
    );

    let (id, e) = only(case(&v, "seccomp_threads"));
    assert_eq!(id, DiagId::NotPermitted);
    assert!(
        e.contains("clone3() failed with EPERM (a new thread or process): not a device, so not the device cgroup: a seccomp filter or sandbox refused it; the process ran under 1 seccomp filter"),
        "{e}"
    );

    // libcuda reserves more than 4 GiB of addresses and less than 16.
    for (c, limit) in [("as_1g", "1 GiB"), ("as_4g", "4 GiB")] {
        let x = case(&v, c);
        assert_eq!(
            x.curesult.as_deref(),
            Some("CUDA_ERROR_OUT_OF_MEMORY (2)"),
            "{c}"
        );
        let (id, e) = only(x);
        assert_eq!(id, DiagId::AddressSpaceLimit, "{c}");
        assert!(
            e.contains(&format!(
                "mmap() failed with ENOMEM (mapping memory): the address-space limit (RLIMIT_AS, ulimit -v) of {limit}"
            )),
            "{c}: {e}"
        );
    }
    assert!(v.iter().all(|x| x.comm != "nvprobe"));
}
