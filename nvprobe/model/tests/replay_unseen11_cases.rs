//! The eleventh batch of start-ups under conditions no rule had been
//! written for, on the real driver: tests/scripts/record-unseen.sh 11 ran
//! each case of unseen11-workload.sh on the H100 host (open module
//! 580.159.04) untraced and under `nvprobe watch --json --raw`
//! (tests/fixtures/gpu-host/h100-unseen11.txt), with the build that records
//! what takes an NVIDIA descriptor. All verdicts were right the first time.

mod common;

use common::case;

use nvprobe_model::correlate::{DiagId, Outcome};
use nvprobe_model::decode::Event;

const REC: &str = "h100-580.159.04-unseen11.ndjson.gz";

/// A double close from another thread (it landed on no descriptor of
/// libcuda's), and subprocesses spawned with close_fds all through the
/// start-up: cuInit 0 and a context, nothing said. Each child's
/// close_range (of the descriptors it inherited, before its exec) is a
/// record of the child's, and takes nothing from the start-up.
#[test]
fn what_changed_nothing_is_ok_with_nothing_said() {
    let (_, v) = common::verdicts(REC);
    for c in ["ok", "double_close", "double_close2", "spawn_closefds"] {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        assert!(x.diagnoses.is_empty(), "{c}: {:#?}", x.diagnoses);
    }
    let spawner = case(&v, "spawn_closefds").pid;
    let r = common::replay(REC, None);
    let ranges: Vec<u32> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Close(c) if c.last_fd.is_some() => Some(c.proc.pid),
            _ => None,
        })
        .collect();
    assert!(
        ranges.len() >= 100,
        "the children's close_range records: {}",
        ranges.len()
    );
    assert!(!ranges.contains(&spawner), "none is the start-up's own");
}

/// Another thread lowered RLIMIT_NOFILE to the descriptors open once
/// /dev/nvidiactl was open: the next opens failed with EMFILE, cuInit 100.
/// The limit named is the one in force (read again when the start-up
/// failed), not the 20000 the process started with.
#[test]
fn a_limit_lowered_in_the_start_up_is_named_as_it_was_then() {
    let (_, v) = common::verdicts(REC);
    let x = case(&v, "nofile_lowered");
    assert_eq!(x.curesult.as_deref(), Some("CUDA_ERROR_NO_DEVICE (100)"));
    assert!(
        x.diagnoses.iter().all(|d| d.id == DiagId::FileLimit),
        "{:#?}",
        x.diagnoses
    );
    assert!(
        x.diagnoses[0]
            .evidence
            .starts_with("/proc/driver/nvidia/params: EMFILE: the process's open-file limit (RLIMIT_NOFILE) was reached (soft limit 11, hard 20000"),
        "{}",
        x.diagnoses[0].evidence
    );
}
