//! The tenth batch of start-ups under conditions no rule had been written
//! for, on the real driver: tests/scripts/record-unseen.sh 10 ran each
//! case of unseen10-workload.sh on the H100 host (open module 580.159.04)
//! untraced and under `nvprobe watch --json --raw`
//! (tests/fixtures/gpu-host/h100-unseen10.txt). The start-up disturbed from
//! inside its own process. Two verdicts were wrong or said nothing: a
//! thread's close_range of libcuda's descriptors gave 100, which was read
//! as no visible device with no cause at all ("after rm_client: "), and an
//! mlockall(MCL_FUTURE) under RLIMIT_MEMLOCK gave 304, "a limit or a
//! filter refused it". This recording was made by the build before the
//! close records: the descriptor's end is inferred from the EBADF alone.

mod common;

use common::{case, only};

use nvprobe_model::correlate::{DiagId, DiagSeverity, Outcome};

const REC: &str = "h100-580.159.04-unseen10.ndjson.gz";

/// A profiling timer every 200 us, a thread forking all along, everything
/// locked as root: cuInit 0 and a context, nothing said; the forked
/// children (which inherited libcuda's descriptors and exited at once)
/// get no verdict of their own.
#[test]
fn what_changed_nothing_is_ok_with_nothing_said() {
    let (_, v) = common::verdicts(REC);
    for c in ["ok", "sigstorm", "forkstorm", "mlock_root"] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        assert!(x.diagnoses.is_empty(), "{c}: {:#?}", x.diagnoses);
    }
    let forks = v
        .iter()
        .filter(|x| {
            x.process
                .as_ref()
                .and_then(|p| p.cmdline.as_ref())
                .is_some_and(|c| c.iter().any(|a| a == "forkstorm"))
        })
        .count();
    assert_eq!(forks, 1, "one verdict for the forking process: {v:#?}");
}

/// Another thread closed every descriptor from 3 up while cuInit ran
/// (close_range(3, 199)): libcuda's next RM control on /dev/nvidiactl got
/// EBADF from the kernel, and cuInit returned 100. Not a visibility
/// problem, and no filter.
#[test]
fn a_descriptor_closed_under_cuinit_is_named_not_no_visible_devices() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "close_range");
    assert_eq!(x.curesult.as_deref(), Some("CUDA_ERROR_NO_DEVICE (100)"));
    let (id, evidence) = only(x);
    assert_eq!(id, DiagId::DescriptorClosed);
    assert!(
        evidence.starts_with(
            "cuInit returned CUDA_ERROR_NO_DEVICE (100): fd 8 (/dev/nvidiactl, opened at 3.43 ms) was no longer open \
when the start-up's NV_ESC_RM_CONTROL used it at 3.55 ms (thread 783): it failed with EBADF, and nvprobe saw no close \
of it"
        ),
        "{evidence}"
    );
    assert!(!x.text.ends_with(": "), "{}", x.text);
    assert!(
        x.text.contains("after rm_client: fd 8 (/dev/nvidiactl"),
        "{}",
        x.text
    );
}

/// mlockall(MCL_FUTURE) as nobody under an 8 MiB RLIMIT_MEMLOCK: the
/// first mapping past the limit (a thread's 8 MiB stack) failed with
/// EAGAIN, and cuInit returned 304. mmap answers EAGAIN for an anonymous
/// mapping only at the memory-lock check.
#[test]
fn every_mapping_locked_is_the_memory_lock_limit() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "mlock_nobody");
    assert_eq!(
        x.curesult.as_deref(),
        Some("CUDA_ERROR_OPERATING_SYSTEM (304)")
    );
    let (id, evidence) = only(x);
    assert_eq!(id, DiagId::LockLimit);
    assert!(
        evidence.ends_with(
            "mmap() failed with EAGAIN (mapping memory): the memory-lock limit: the kernel's mmap answers EAGAIN only for a \
mapping that is to be locked when the process's locked memory would pass RLIMIT_MEMLOCK and it lacks CAP_IPC_LOCK; it \
did not ask MAP_LOCKED, so the process locks every new mapping (mlockall with MCL_FUTURE); the call asked for 8.0 MiB \
(8392704 bytes) (PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_STACK)"
        ),
        "{evidence}"
    );
    assert!(
        !x.diagnoses[0].hint.contains("a seccomp profile"),
        "{}",
        x.diagnoses[0].hint
    );
}

/// vm.max_map_count at the kernel's default (65530), the process 10 short
/// of it: traced, cuInit's mapping failed with ENOMEM at the count (2);
/// untraced the same run got past cuInit and its context failed (304).
/// CUDA_VISIBLE_DEVICES with "gpu-" in lower case: CUDA refuses it (100).
#[test]
fn the_map_count_and_a_lower_case_prefix_are_named() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "mapcount_default");
    let (id, evidence) = only(x);
    assert_eq!(id, DiagId::MappingRefused);
    assert!(
        evidence.contains(
            "the map count: the process had 65531 mappings when the call failed, vm.max_map_count is 65530"
        ),
        "{evidence}"
    );
    assert!(
        x.diagnoses[0]
            .hint
            .starts_with("the process had as many mappings as vm.max_map_count allows"),
        "{}",
        x.diagnoses[0].hint
    );
    let x = case(&v, "visible_lower_prefix");
    let (id, evidence) = only(x);
    assert_eq!(id, DiagId::NoVisibleDevices);
    assert!(
        evidence.ends_with(
            "CUDA_VISIBLE_DEVICES=gpu-032ca1d2-4095-80ff-68ab-7f81b7fa5b96 matches none of this host's 1 GPU: \
gpu-032ca1d2-4095-80ff-68ab-7f81b7fa5b96 would be /dev/nvidia0 but for its prefix, which CUDA takes only as \"GPU-\""
        ),
        "{evidence}"
    );
    // The node was passed in and opened: the hint does not ask for it.
    assert!(
        x.diagnoses[0]
            .hint
            .starts_with("the GPU's node was passed in and opened"),
        "{}",
        x.diagnoses[0].hint
    );
}

/// The same workload again with the build that records what takes an
/// NVIDIA descriptor (h100-580.159.04-unseen10-closes): the close_range
/// and the dup2 are records, and the verdicts name the thread and the
/// call. This time the close_range came while libcuda could recover:
/// its RM control on fd 8 got EBADF, it opened /dev/nvidiactl again and
/// cuInit returned 0, and the first context failed (304) with no driver
/// call refusing it. The dup2 of /dev/null onto fd 6 made libcuda's next
/// RM control fail with ENOTTY (100). Two more dup2s fell after libcuda's
/// last call on the descriptor: ok, nothing said.
const CLOSES: &str = "h100-580.159.04-unseen10-closes.ndjson.gz";

#[test]
fn the_call_that_took_the_descriptor_and_its_thread_are_named() {
    let (_, v) = common::verdicts(CLOSES);
    let x = case(&v, "close_range");
    assert_eq!(x.curesult.as_deref(), Some("CUDA_SUCCESS (0)"));
    let (id, evidence) = only(x);
    assert_eq!(id, DiagId::DescriptorClosed);
    assert_eq!(
        evidence,
        "cuCtxCreate_v2 (device 0) returned CUDA_ERROR_OPERATING_SYSTEM (304): fd 8 (/dev/nvidiactl, opened at \
2.80 ms) was closed (close_range(3, 199)) at 2.82 ms by thread 824 (python3), and the start-up's next call on it, \
NV_ESC_RM_ALLOC at 2.83 ms (thread 823), failed with EBADF: the kernel answered it without reaching the driver; cuInit \
opened /dev/nvidiactl again and returned CUDA_SUCCESS, and no driver call refused the context: close_range(3, 199) took \
every descriptor of the process in that range, not only its NVIDIA files"
    );
    let x = case(&v, "dup2_over");
    assert_eq!(x.curesult.as_deref(), Some("CUDA_ERROR_NO_DEVICE (100)"));
    let (id, evidence) = only(x);
    assert_eq!(id, DiagId::DescriptorClosed);
    assert_eq!(
        evidence,
        "cuInit returned CUDA_ERROR_NO_DEVICE (100): fd 6 (/dev/nvidiactl, opened at 3.09 ms) was replaced (dup2(9, \
6), from a file that is not an NVIDIA node) at 3.13 ms by thread 835 (python3), and the start-up's next call on it, \
NV_ESC_RM_CONTROL at 3.20 ms (thread 834), failed with ENOTTY: the kernel answered it without reaching the driver"
    );
    for c in ["memlock_zero", "sigstorm", "forkstorm", "mlock_root"] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        assert!(x.diagnoses.is_empty(), "{c}: {:#?}", x.diagnoses);
    }
    // The dup2 lost its race: libcuda's next call failed with ENOTTY, it
    // opened /dev/nvidiactl again and went on. Ok, with the taking said
    // as recovered (the same workload failed in other runs).
    for c in ["dup2_over2", "dup2_over3"] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        let (id, evidence) = only(x);
        assert_eq!(id, DiagId::DescriptorClosed);
        assert_eq!(x.diagnoses[0].severity, DiagSeverity::Recovered);
        assert!(
            evidence.contains(
                "failed with ENOTTY: the kernel answered it without reaching the driver; cuInit opened \
/dev/nvidiactl again and returned CUDA_SUCCESS: it got past it this time, in a race with the call that took it"
            ),
            "{c}: {evidence}"
        );
    }
    // With the limit read from /proc/PID/limits this time.
    let (id, evidence) = only(case(&v, "mlock_nobody"));
    assert_eq!(id, DiagId::LockLimit);
    assert!(
        evidence.contains(
            "would pass RLIMIT_MEMLOCK, 8 MiB (8388608 bytes) when cuInit had failed, and"
        ),
        "{evidence}"
    );
}

/// The records themselves, decoded: the close_range's range and flags,
/// the dup2's replaced file.
#[test]
fn the_records_that_took_a_descriptor_decode() {
    use nvprobe_model::decode::{DeviceKind, Event};
    let r = common::replay(CLOSES, None);
    let ranges: Vec<(i32, Option<u32>, Option<&str>, DeviceKind)> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Close(c) if c.last_fd.is_some() => {
                Some((c.fd, c.last_fd, c.range_flags.as_deref(), c.device.kind))
            }
            _ => None,
        })
        .collect();
    assert!(
        ranges.contains(&(3, Some(199), Some("0"), DeviceKind::None)),
        "{ranges:?}"
    );
    let replaced: Vec<(&str, i32, Option<i64>, DeviceKind)> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Dup(c) if c.replaced => Some((c.syscall, c.fd, c.newfd, c.device.kind)),
            _ => None,
        })
        .collect();
    assert!(
        replaced.contains(&("dup2", 9, Some(6), DeviceKind::Ctl)),
        "{replaced:?}"
    );
}
