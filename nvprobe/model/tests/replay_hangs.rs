//! Issue 39 on the real driver (an H100 host, open module 580.159.04,
//! NCCL 2.28.9): hangs that end, made on purpose by
//! tests/scripts/gpuhang.py under one `nvprobe watch --json --raw
//! --hang-after 3 --libcuda-hooks launches` (record-hangs.sh; the
//! figures are in tests/fixtures/gpu-host/h100-hangs.txt).

mod common;

use common::replay;
use nvprobe_model::{
    decode::{Event, NcclCallKind},
    hang::{HangEndHow, Waiting},
    replay::Item,
};

const NAME: &str = "h100-580.159.04-hangs.ndjson.gz";

/// The hang records and their ends, as the model reads them back.
fn hangs() -> (
    Vec<nvprobe_model::hang::HangReport>,
    Vec<nvprobe_model::hang::HangEnd>,
) {
    let text = common::read_fixture(NAME);
    let (mut hangs, mut ends) = (Vec::new(), Vec::new());
    nvprobe_model::replay::replay(text.as_bytes(), None, |_, item| match item {
        Item::Hang(h) => hangs.push((*h).clone()),
        Item::HangEnd(e) => ends.push((*e).clone()),
        _ => {}
    })
    .expect("reading from memory");
    (hangs, ends)
}

/// Four held synchronisations, each one hang and one end: spinning in
/// user space (libcuda's default), asleep in a futex
/// (CU_CTX_SCHED_BLOCKING_SYNC), stopped by SIGSTOP from the shell, and
/// an NCCL rank's cuStreamSynchronize; each returned.
#[test]
fn each_held_synchronisation_is_one_hang_told_by_how_the_thread_waits() {
    let (h, e) = hangs();
    assert_eq!(h.len(), 4, "{h:#?}");
    let got: Vec<(&str, Waiting, &str)> = h
        .iter()
        .map(|r| (r.call.as_str(), r.waiting, r.state.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("cuCtxSynchronize", Waiting::SpinningUser, "R"),
            ("cuCtxSynchronize", Waiting::Sleeping, "S"),
            ("cuCtxSynchronize", Waiting::Stopped, "T"),
            ("cuStreamSynchronize", Waiting::SpinningUser, "R"),
        ]
    );
    // A spinning thread used a whole CPU in user space; a sleeping one none.
    assert!(h[0].cpu_user_pct.is_some_and(|p| p >= 90), "{:?}", h[0]);
    assert_eq!(h[1].cpu_user_pct, Some(0));
    assert_eq!(h[1].wchan.as_deref(), Some("futex_do_wait"));
    assert!(
        h[2].stopped_by
            .as_deref()
            .is_some_and(|s| s.starts_with("SIGSTOP from bash[")),
        "{:?}",
        h[2].stopped_by
    );
    assert!(
        h[2].hint
            .starts_with("The process is stopped, not waiting for the GPU")
    );
    for r in &h {
        assert!(r.launches_hooked);
        assert!(
            r.last_launch
                .as_ref()
                .is_some_and(|l| l.call == "cuLaunchKernel"),
            "{r:?}"
        );
        assert!((3.0..5.0).contains(&r.elapsed_s), "{r:?}");
        assert!(r.meanwhile.is_empty(), "{r:?}");
    }
    // Each ended by returning, after the 8-10 s it was held, same thread.
    assert_eq!(e.len(), 4);
    for (r, end) in h.iter().zip(&e) {
        assert_eq!(
            (end.pid, end.tid, end.how),
            (r.pid, r.tid, HangEndHow::Returned)
        );
        assert!((8.0..12.0).contains(&end.lasted_s), "{end:?}");
    }
}

/// The NCCL rank: its communicator made while hooked (init seen), hashed
/// as NCCL 2.28.9 printed it (commId 0x5059c012ccb8852e in NCCL_DEBUG=INFO's
/// "Init START"); 20 all-reduces numbered 1-20, a grouped send and
/// receive 21-22, the held all-reduce 23; the hang names the single rank
/// and says no rank is behind.
#[test]
fn an_nccl_rank_is_numbered_and_hashed_as_nccl_prints_it() {
    const COMM_ID: u64 = 0x5059_c012_ccb8_852e;
    let r = replay(NAME, None);
    let calls: Vec<_> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Nccl(n) => Some(n),
            _ => None,
        })
        .collect();
    let init = calls
        .iter()
        .find(|c| c.kind == NcclCallKind::Init)
        .expect("ncclCommInitRank seen");
    assert_eq!(
        (
            init.func,
            init.comm_hash,
            init.rank,
            init.nranks,
            init.result
        ),
        ("ncclCommInitRank", Some(COMM_ID), Some(0), Some(1), Some(0))
    );
    let numbered: Vec<(&str, u64, Option<u64>)> = calls
        .iter()
        .filter_map(|c| Some((c.func, c.seq?, c.count)))
        .collect();
    let mut want: Vec<(&str, u64, Option<u64>)> = (1..=20)
        .map(|i| ("ncclAllReduce", i, Some(1023 + i)))
        .collect();
    want.push(("ncclSend", 21, Some(16)));
    want.push(("ncclRecv", 22, Some(16)));
    want.push(("ncclAllReduce", 23, Some(1 << 20)));
    assert_eq!(&numbered[..23], &want[..]);
    for c in calls.iter().filter(|c| c.seq.is_some()) {
        assert_eq!(c.comm_hash, Some(COMM_ID), "{c:?}");
        assert_eq!(c.communicator, init.communicator);
    }
    let (h, _) = hangs();
    let n = h[3].nccl.as_ref().expect("the rank's communicator");
    assert_eq!(
        (n.comm_hash.as_str(), n.nranks, n.rank, n.seq, n.behind),
        ("5059c012ccb8852e", 1, 0, 23, None)
    );
    assert_eq!(n.ranks.len(), 1);
    assert_eq!(n.ranks[0].op.as_deref(), Some("ncclAllReduce"));
    // (The hint as the recording's build wrote it; this build says "The
    // communicator's one rank is on this node …".)
    assert!(
        h[3].hint.starts_with(
            "All 1 rank(s) of this communicator are on this node and have entered the same call: no rank is behind."
        ),
        "{}",
        h[3].hint
    );
}
