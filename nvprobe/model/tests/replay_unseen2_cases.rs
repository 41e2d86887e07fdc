//! The second batch of start-ups under conditions no rule had been
//! written for, on the real driver: tests/scripts/record-unseen.sh 2 ran
//! each case of unseen2-workload.sh on the H100 host (open module
//! 580.159.04, kernel 6.18.44) untraced and under `nvprobe watch --json
//! --raw`, with the same results (tests/fixtures/gpu-host/h100-unseen2.txt).
//! The first build got four of them wrong: a bare "GPU-" said to select
//! the GPU cuInit did not find, a harness's SIGTERM in cuInit judged ok
//! because the driver side had finished, Python's SIGINT blamed on
//! Python, and a process that never called CUDA given an error. What the
//! real driver did decides what is asserted.

mod common;

use common::{case, only};

use nvprobe_model::correlate::{DiagId, Outcome};

const REC: &str = "h100-580.159.04-unseen2.ndjson.gz";

#[test]
fn what_libcuda_got_past_is_ok_with_nothing_said() {
    let (_, v) = common::verdicts(REC);
    for c in [
        "ok",
        // "0,1" on a one-GPU host: CUDA reads up to the invalid entry.
        "visible_past",
        // The same GPU by index and by UUID: CUDA takes it.
        "visible_0_uuid",
        "shm_ro",
        // Descriptors 0-2 closed: libcuda's first open gets 0.
        "closed012",
        // Every descriptor closed after the first context: the start-up
        // was over (the second context's 304 is the program's).
        "closefds",
        "forkexec",
        "forkexec_child",
        "pidns",
        "userns",
        "nobody",
        "preload_missing",
        "stack_unlimited",
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        assert!(x.diagnoses.is_empty(), "{c}: {:#?}", x.diagnoses);
    }
    // /proc/driver/nvidia hidden: libcuda carries on without its params.
    let x = case(&v, "no_proc_driver");
    assert_eq!(x.result, Outcome::Ok, "{}", x.text);
    let (id, e) = only(x);
    assert_eq!(id, DiagId::NodeMissing);
    assert!(
        e.starts_with("/proc/driver/nvidia/params: ENOENT")
            && e.ends_with("start-up recovered and succeeded"),
        "{e}"
    );
    // A process that loaded libcuda and never called it (the map-count
    // case, skipped on a host whose vm.max_map_count is 8 million) exited
    // 0: its failed library lookups are not an error.
    let x = case(&v, "mapcount");
    assert_eq!(x.result, Outcome::Exited, "{}", x.text);
    assert!(x.diagnoses.is_empty(), "{:#?}", x.diagnoses);
}

#[test]
fn visible_lists_that_hide_the_gpu_say_how() {
    let (_, v) = common::verdicts(REC);
    for (c, says) in [
        (
            "visible_minus1",
            "CUDA_VISIBLE_DEVICES=-1 matches none of this host's 1 GPU",
        ),
        (
            "visible_past_first",
            "CUDA_VISIBLE_DEVICES=1,0 matches none of this host's 1 GPU",
        ),
        // A bare prefix: not the GPU whose UUID it begins.
        (
            "visible_gpu_prefix",
            "CUDA_VISIBLE_DEVICES=GPU- matches none of this host's 1 GPU",
        ),
        (
            "visible_mig_bogus",
            "CUDA_VISIBLE_DEVICES=MIG-00000000-0000-0000-0000-000000000000 matches none of this host's 1 GPU",
        ),
    ] {
        let x = case(&v, c);
        assert_eq!(
            x.curesult.as_deref(),
            Some("CUDA_ERROR_NO_DEVICE (100)"),
            "{c}"
        );
        let (id, e) = only(x);
        assert_eq!(id, DiagId::NoVisibleDevices, "{c}");
        assert!(e.ends_with(says), "{c}: {e}");
    }
}

#[test]
fn who_ended_it_is_the_signals_first_sender() {
    let (_, v) = common::verdicts(REC);
    // timeout's SIGINT caught by Python in cuInit; Python then ended
    // itself with SIGINT (a KeyboardInterrupt's exit).
    let x = case(&v, "sigint_py");
    assert_eq!(x.result, Outcome::Killed, "{}", x.text);
    let (id, e) = only(x);
    assert_eq!(id, DiagId::KilledBySignal);
    assert!(
        e.starts_with("SIGINT from python3[")
            && e.contains("] itself (raising again the SIGINT that timeout[")
            && e.contains("] sent at 69.2 ms)"),
        "{e}"
    );
    let sig = x.signal.as_ref().expect("the signal");
    assert_ne!(sig.sender_pid, Some(x.pid), "{sig:?}");
    // A seccomp profile that kills at the first NVIDIA escape.
    let x = case(&v, "seccomp_kill");
    assert_eq!(x.result, Outcome::Killed, "{}", x.text);
    let (id, e) = only(x);
    assert_eq!(id, DiagId::KilledBySignal);
    assert!(e.starts_with("SIGSYS from a seccomp filter"), "{e}");
    assert!(
        x.diagnoses[0].hint.contains("type=1326") && !x.diagnoses[0].hint.contains("timeout"),
        "{}",
        x.diagnoses[0].hint
    );
    // A harness's 2 s timeout under a 5 % CPU quota: killed in cuInit
    // after its driver side had finished, not a start-up that ended well;
    // the quota is said, as a warning, never the cause.
    let x = case(&v, "cpu_5pct_timeout");
    assert_eq!(x.result, Outcome::Killed, "{}", x.text);
    assert!(
        x.text
            .starts_with("reached UVM GPU registration (S7), then killed by SIGTERM from timeout[")
            && x.text
                .ends_with("while cuInit was still running (it never returned)"),
        "{}",
        x.text
    );
    let ids: Vec<DiagId> = x.diagnoses.iter().map(|d| d.id).collect();
    assert_eq!(
        ids,
        [DiagId::KilledBySignal, DiagId::CpuQuota],
        "{:#?}",
        x.diagnoses
    );
    assert!(
        x.diagnoses[1]
            .evidence
            .contains("in a cgroup allowed 5 % of a CPU (cpu.max 5000 100000 of /nvprobe-cpu)"),
        "{}",
        x.diagnoses[1].evidence
    );
    // From the driver calls alone (no libcuda records): killed, not ok.
    let unseen = common::verdicts_without_libcuda(REC);
    let x = case(&unseen, "cpu_5pct_timeout");
    assert_eq!(x.result, Outcome::Killed, "{}", x.text);
    assert!(
        x.text.ends_with("before a first context was made"),
        "{}",
        x.text
    );
    // The quota alone: ok, said as information.
    let x = case(&v, "cpu_5pct");
    assert_eq!(x.result, Outcome::Ok, "{}", x.text);
    let (id, e) = only(x);
    assert_eq!(id, DiagId::CpuQuota);
    assert!(
        e.starts_with("the start-up took 6.0 s in a cgroup allowed 5 % of a CPU"),
        "{e}"
    );
}

#[test]
fn a_full_address_space_is_found_by_elimination() {
    let (_, v) = common::verdicts(REC);
    // The process reserved all but holes under 1 GiB, then cuInit: libcuda
    // asks for 64 TiB of PROT_NONE addresses and returns 2. The sizes were
    // read after the reservations were given back, so only the other
    // causes' absence says it, and the map count (read as late) stays
    // named as the other possibility.
    let x = case(&v, "vafull");
    assert_eq!(x.curesult.as_deref(), Some("CUDA_ERROR_OUT_OF_MEMORY (2)"));
    let (id, e) = only(x);
    assert_eq!(id, DiagId::MappingRefused);
    assert!(
        e.contains(
            "mmap() failed with ENOMEM, 18 times (mapping memory): no limit counts such a mapping and no overcommit \
policy refuses it here (no address-space limit, no data-size limit, memory no overcommit policy counts): no free range \
of addresses as long as the call asked for, unless the map count was at vm.max_map_count (8250391) then (the process \
had 108 mappings when cuInit had failed, which does not count any it gave back after the failure); the call asked for \
64 TiB (70368744177664 bytes) (PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE), half of the 128 TiB"
        ),
        "{e}"
    );
    let hint = &x.diagnoses[0].hint;
    assert!(
        hint.contains("no free range of addresses") && !hint.contains("ulimit -v"),
        "{hint}"
    );
}
