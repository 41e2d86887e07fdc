//! A cause when libcuda's return was not seen (issue 37): the real H200
//! start-ups of the catalogue, start-calls and failed-calls recordings,
//! replayed with their libcuda records left out, as nvprobe sees a
//! process whose libcuda copy was hooked after its cuInit (or a host where
//! no uprobe attaches). The driver calls and the process's facts alone
//! still name the mechanism, each diagnosis marked as inferred; a start-up
//! that got through is never judged failed.

mod common;

use common::{case, only, verdicts, verdicts_without_libcuda};

use nvprobe_model::correlate::{DiagId, Outcome};

const INFERRED: &str = " (inferred: cuInit's return was not seen)";

#[test]
fn visibility_that_hides_every_gpu_is_inferred_from_a_start_up_that_registered_none() {
    let v = verdicts_without_libcuda("h200-580.159.04-catalogue.ndjson");
    for (c, value) in [
        ("visible_none", "CUDA_VISIBLE_DEVICES=-1"),
        (
            "visible_uuid",
            "CUDA_VISIBLE_DEVICES=GPU-00000000-dead-beef-0000-000000000000",
        ),
    ] {
        let x = case(&v, c);
        assert_eq!(x.curesult, None, "{c}");
        assert_eq!(x.source, "driver calls alone (no libcuda uprobe)", "{c}");
        assert_eq!(x.result, Outcome::Failed, "{c}: {}", x.text);
        let (id, e) = only(x);
        assert_eq!(id, DiagId::NoVisibleDevices, "{c}");
        assert_eq!(
            e,
            format!(
                "the start-up stopped after device_objects, before any GPU was registered with UVM; \
{value} matches none of this host's 1 GPU{INFERRED}"
            ),
            "{c}"
        );
    }
    // With cuInit's return seen, the same start-ups say what it returned,
    // and nothing is inferred.
    let (_, seen) = verdicts("h200-580.159.04-catalogue.ndjson");
    let (id, e) = only(case(&seen, "visible_none"));
    assert_eq!(id, DiagId::NoVisibleDevices);
    assert!(
        e.starts_with("cuInit returned CUDA_ERROR_NO_DEVICE (100)"),
        "{e}"
    );
    assert!(!e.contains("inferred"), "{e}");
}

#[test]
fn a_refused_start_up_call_is_the_inferred_cause() {
    let v = verdicts_without_libcuda("h200-580.159.04-start-calls.ndjson");
    for (c, id, says) in [
        (
            "pids_max_1",
            DiagId::ThreadLimit,
            "the start-up made no driver call and no call on an NVIDIA file failed: clone3() failed with EAGAIN \
(a new thread or process): the cgroup's pids.max refused it",
        ),
        (
            "nproc_1",
            DiagId::ThreadLimit,
            "clone3() failed with EAGAIN (a new thread or process): the user's process limit (RLIMIT_NPROC) 1",
        ),
        (
            "seccomp_threads",
            DiagId::NotPermitted,
            "clone3() failed with EPERM (a new thread or process): not a device, so not the device cgroup: a \
seccomp filter or sandbox refused it",
        ),
        (
            "as_1g",
            DiagId::AddressSpaceLimit,
            "the start-up stopped after device_objects, before any GPU was registered with UVM and no call on \
an NVIDIA file failed: mmap() failed with ENOMEM (mapping memory): the address-space limit (RLIMIT_AS, \
ulimit -v) of 1 GiB",
        ),
    ] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Failed, "{c}: {}", x.text);
        let (got, e) = only(x);
        assert_eq!(got, id, "{c}: {e}");
        assert!(e.contains(says), "{c}: {e}");
        assert!(e.ends_with(INFERRED), "{c}: {e}");
    }
}

#[test]
fn escapes_a_filter_answered_are_inferred_without_cuinits_return() {
    let v = verdicts_without_libcuda("h200-580.159.04-failed-calls.ndjson.gz");
    let x = case(&v, "seccomp_escapes_eacces");
    assert_eq!(x.result, Outcome::Failed, "{}", x.text);
    let d = x
        .diagnoses
        .iter()
        .find(|d| d.id == DiagId::CallsBlocked)
        .unwrap_or_else(|| panic!("{:#?}", x.diagnoses));
    assert!(
        d.evidence.starts_with(
            "/dev/nvidiactl: opened 10 times and no ioctl of it reached the kernel's syscall tracing; 21 escapes \
failed with EACCES at the system call's exit (the first: NV_ESC_SYS_PARAMS)"
        ),
        "{}",
        d.evidence
    );
    assert!(d.evidence.ends_with(INFERRED), "{}", d.evidence);
    let (id, e) = only(case(&v, "seccomp_uname"));
    assert_eq!(id, DiagId::NotPermitted);
    assert!(e.contains("uname() failed with EPERM"), "{e}");
}

#[test]
fn a_refused_version_handshake_names_both_versions_without_cuinits_return() {
    let v = verdicts_without_libcuda("h200-580.159.04-startup.ndjson");
    // The case late_copy_535 (its process record was read before its exec).
    let x = v.iter().find(|x| x.pid == 700).expect("pid 700");
    assert_eq!(x.result, Outcome::Failed, "{}", x.text);
    let (id, e) = only(x);
    assert_eq!(id, DiagId::VersionMismatch);
    assert!(
        e.starts_with(
            "libcuda /work/main/.dev/other/libcuda.so.535.261.03 is 535.261.03, the kernel module is 580.159.04; \
the driver answered its version handshake with build 580.159.04"
        ),
        "{e}"
    );
}

/// Leaving libcuda's records out never turns a start-up that got through
/// into a failed one, nor finds a cause where every call succeeded.
#[test]
fn without_libcuda_a_start_up_that_got_through_is_never_failed() {
    for name in common::recordings() {
        let (_, seen) = verdicts(&name);
        let unseen = verdicts_without_libcuda(&name);
        for s in seen
            .iter()
            .filter(|s| s.result == Outcome::Ok && s.stages.iter().any(|h| h.stage == "S7"))
        {
            let Some(u) = unseen.iter().find(|u| u.pid == s.pid) else {
                continue;
            };
            assert_ne!(
                u.result,
                Outcome::Failed,
                "{name}: pid {}: {}",
                s.pid,
                u.text
            );
            assert!(
                u.diagnoses.iter().all(|d| !d.evidence.ends_with(INFERRED)),
                "{name}: pid {}: {:#?}",
                s.pid,
                u.diagnoses
            );
        }
    }
}

/// Live on the H100 with no return probe at all (`NVPROBE_URETPROBE_GATE
/// =closed`: the uretprobe window's behaviour, libcuda never hooked, a
/// libnccl at its collectives' entries), the workloads of
/// tests/scripts/record-window-and-fold.sh: each verdict has the result
/// and the diagnosis the same workloads got with libcuda hooked
/// (tests/fixtures/gpu-host/h100-window-and-fold.txt), inferred from the
/// driver calls; the NCCL collectives are numbered from the first one.
#[test]
fn with_no_libcuda_hooked_live_each_verdict_is_the_one_libcuda_gave() {
    let (_, v) = verdicts("h100-580.159.04-window.ndjson.gz");
    for (c, ok, id) in [
        ("ok", true, None),
        ("torch", true, None),
        ("nccl", true, None),
        ("escapes-eperm", false, Some(DiagId::CallsBlocked)),
        ("escapes-eacces", false, Some(DiagId::CallsBlocked)),
        ("threads", false, Some(DiagId::NotPermitted)),
        ("open-eperm", false, Some(DiagId::NotPermitted)),
        ("no-visible-device", false, Some(DiagId::NoVisibleDevices)),
    ] {
        let x = case(&v, c);
        assert_eq!(x.source, "driver calls alone (no libcuda uprobe)", "{c}");
        assert_eq!(x.curesult, None, "{c}");
        if ok {
            assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
            assert!(x.diagnoses.is_empty(), "{c}: {:#?}", x.diagnoses);
        } else {
            assert_eq!(x.result, Outcome::Failed, "{c}: {}", x.text);
            let (got, e) = only(x);
            assert_eq!(Some(got), id, "{c}");
            assert!(e.ends_with(INFERRED), "{c}: {e}");
        }
    }
    let r = common::replay("h100-580.159.04-window.ndjson.gz", None);
    let nccl: Vec<&nvprobe_model::decode::NcclCall> = r
        .events
        .iter()
        .filter_map(|e| match e {
            nvprobe_model::decode::Event::Nccl(n) => Some(n),
            _ => None,
        })
        .collect();
    assert!(nccl.iter().all(|n| n.func != "ncclCommInitRank"));
    let seqs: Vec<u64> = nccl
        .iter()
        .filter(|n| n.func == "ncclAllReduce")
        .filter_map(|n| n.seq)
        .collect();
    assert_eq!(seqs[..20], (1..=20).collect::<Vec<u64>>()[..], "{seqs:?}");
    assert!(nccl.iter().all(|n| n.comm_hash.is_none()));
    assert!(
        r.events
            .iter()
            .all(|e| !matches!(e, nvprobe_model::decode::Event::Cuda(_)))
    );
}

/// A CUDA process already running when two nvprobes started on the H100
/// (tests/scripts/held-levels.sh: `--events all --raw` and `--events
/// verdicts` at once), then 200 allocations and frees: its start-up was
/// not seen, so its verdict is how it ended, the same from both
/// recordings, not a failed start-up (the build before said "failed:
/// stopped before any driver call" at `all`, and called it a driver client
/// at `verdicts`).
#[test]
fn a_process_running_before_nvprobe_is_judged_by_how_it_ended() {
    const TEXT: &str = "exited with status 0; it held an NVIDIA descriptor when nvprobe started, so its start-up was not seen";
    let (_, v) = verdicts("h100-580.159.04-held.ndjson.gz");
    let held: Vec<_> = v
        .iter()
        .filter(|x| {
            x.process
                .as_ref()
                .is_some_and(|p| p.held_at_start && p.exe.is_some())
        })
        .collect();
    assert_eq!(held.len(), 1, "{v:#?}");
    let x = held[0];
    assert_eq!(
        (x.result, x.class.as_str(), x.text.as_str(), x.calls),
        (Outcome::Ok, "cuda", TEXT, 1400)
    );
    assert!(x.diagnoses.is_empty(), "{:#?}", x.diagnoses);
    // At `--events verdicts` (which writes no `process` record and none of
    // the calls, all counted in the kernel) the verdict made live was the
    // same, with the kernel's count.
    let live = live_verdicts("h100-580.159.04-held-verdicts.ndjson.gz", x.pid);
    assert_eq!(live.len(), 1);
    assert_eq!(
        (&live[0]["result"], &live[0]["text"], &live[0]["calls"]),
        (&"ok".into(), &TEXT.into(), &1400.into())
    );
}

/// A process that held /dev/nvidiactl when two nvprobes started on the
/// H100 (tests/scripts/held-start.sh: `--events all --raw` and `--events
/// verdicts` at once), made a refused RM control while traced
/// (NV_ERR_INVALID_CLIENT, on a client handle that does not exist), then
/// started CUDA: its start-up is judged from its own first step (cuInit's
/// entry, or libcuda's open of the node when cuInit's records are not
/// seen), so the refused control it made before is neither its failed
/// call nor its cause, and the stages are timed from there. The build
/// before gave both verdicts (with cuInit's records and without) that
/// control as their `failed_call`, at 0.0 ms of a start-up it was not
/// part of (a constructed start-up that then fails is told by it:
/// `tests_classes.rs`).
#[test]
fn a_held_process_that_starts_cuda_is_judged_from_its_own_start_up() {
    let (_, v) = verdicts("h100-580.159.04-held-start.ndjson.gz");
    let held: Vec<_> = v
        .iter()
        .filter(|x| x.process.as_ref().is_some_and(|p| p.held_at_start))
        .collect();
    assert_eq!(held.len(), 1, "{v:#?}");
    let x = held[0];
    // The refused control was recorded, as a failure of the process.
    let r = common::replay("h100-580.159.04-held-start.ndjson.gz", None);
    let refused: Vec<&str> = common::ioctls(&r)
        .into_iter()
        .filter(|i| i.proc.pid == x.pid && !i.ok)
        .filter_map(common::status)
        .collect();
    assert_eq!(refused, ["NV_ERR_INVALID_CLIENT"]);
    assert_eq!(x.result, Outcome::Ok, "{}", x.text);
    assert!(
        x.text
            .starts_with("cuInit returned CUDA_SUCCESS (0) after uvm_gpu_registered"),
        "{}",
        x.text
    );
    assert!(x.failed_call.is_none(), "{:?}", x.failed_call);
    assert!(x.diagnoses.is_empty(), "{:#?}", x.diagnoses);
    let first = x.stages.first().expect("stages");
    assert_eq!(first.name, "ctl_opened");
    assert!(first.at_ms < 10.0, "{:?}", x.stages);
    // Live at `--events verdicts`, the same verdict.
    let live = live_verdicts("h100-580.159.04-held-start-verdicts.ndjson.gz", x.pid);
    assert_eq!(live.len(), 1);
    assert_eq!(
        (&live[0]["result"], &live[0]["text"]),
        (&"ok".into(), &x.text.as_str().into())
    );
    // Without cuInit's records, libcuda's own open of the node begins the
    // start-up: the control refused before is not what stopped it.
    let bare = verdicts_without_libcuda("h100-580.159.04-held-start.ndjson.gz");
    let b = bare
        .iter()
        .find(|y| y.pid == x.pid)
        .expect("the held process");
    assert!(
        b.failed_call.is_none() && !b.text.contains("INVALID_CLIENT"),
        "{}: {:?}",
        b.text,
        b.failed_call
    );
    assert_ne!(b.result, Outcome::Failed, "{}", b.text);
    assert_eq!(b.stages.first().map(|s| s.name), Some("ctl_opened"));
}

/// The verdicts of `pid` that a live run wrote into the recording `name`
/// (one made at `--events verdicts`, which the replay cannot remake: it
/// holds no call the kernel counted).
fn live_verdicts(name: &str, pid: u32) -> Vec<serde_json::Value> {
    common::read_fixture(name)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["type"] == "cuinit" && r["pid"] == pid)
        .collect()
}
