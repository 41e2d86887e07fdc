//! The live view fed by the replay pipeline with real H200 recordings.

use std::io::BufReader;

use super::{Rank, View, draw::plain};
use crate::{
    output::{Clock, Format, Level, Opened, Output},
    pipeline::{PipeOpts, replay},
};

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

/// Replay a recording through the pipeline into `view`.
fn replay_into(view: &View, name: &str) {
    let opts = PipeOpts {
        workers: 2,
        summary_only: false,
        level: Level::All,
        observers: vec![std::sync::Arc::new(view.clone())],
        host_facts: false,
        all_processes: false,
    };
    let f = std::fs::File::open(fixture(name)).expect("fixture");
    let out = Output::opened(Opened::sink(), Format::Json, Clock::fixed(0));
    replay::run(BufReader::new(f), name, out, None, &opts).expect("replay");
}

fn view() -> View {
    View::new("syscall 24/24".into(), 5_000_000_000, false)
}

/// The view after replaying one recording, at time 0: every process's
/// time is its verdict's, none has expired.
fn viewed(name: &str) -> super::Snapshot {
    let v = view();
    replay_into(&v, name);
    v.snapshot(0)
}

/// Events in a recording: its lines but the start and summary records.
fn events_in(name: &str) -> u64 {
    std::fs::read_to_string(fixture(name))
        .expect("fixture")
        .lines()
        .filter(|l| !l.contains(r#""type":"start""#) && !l.contains(r#""type":"summary""#))
        .count() as u64
}

#[test]
fn masked_uvm_is_a_failed_row_with_the_node_it_found() {
    let f = "h200-580.159.04-uvm-masked.ndjson";
    let s = viewed(f);
    assert_eq!(s.events, events_in(f));
    assert_eq!(s.rows.len(), 1, "{s:#?}");
    let r = &s.rows[0];
    assert_eq!(
        (r.pid, r.comm.as_str(), r.class.as_str()),
        (470, "python3", "cuda")
    );
    // The RM client came before the version handshake in this start-up:
    // the milestone reached last shows.
    assert_eq!(r.stage, "version_handshake");
    assert_eq!((r.state.as_str(), r.rank), ("failed", Rank::Failed));
    assert_eq!(
        r.last_failure,
        "openat /dev/nvidia-uvm = device 1:3 (/dev/null, no NVIDIA device), not the NVIDIA uvm node"
    );
    assert!(
        r.why.starts_with("stopped after version_handshake"),
        "{}",
        r.why
    );
    assert!((r.time_ms - 0.5).abs() < 0.01, "{}", r.time_ms);
}

#[test]
fn busy_retry_names_the_uvm_call() {
    let s = viewed("h200-580.159.04-timeout-kill.ndjson");
    let r = &s.rows[0];
    assert_eq!(r.rank, Rank::Failed);
    assert_eq!(r.stage, "device_objects");
    assert_eq!(r.last_failure, "UVM_REGISTER_GPU = NV_ERR_BUSY_RETRY");
}

#[test]
fn sixteen_start_ups_and_a_stalled_call_sort_first() {
    let v = view();
    replay_into(&v, "h200-580.159.04-concurrent16.ndjson");
    replay_into(&v, "h200-580.159.04-uvm-masked.ndjson");
    let s = v.snapshot(0);
    assert_eq!(s.rows.len(), 17);
    // The failed start-up first, then the healthy ones, longest first.
    assert_eq!((s.rows[0].pid, s.rows[0].rank), (470, Rank::Failed));
    let ok = &s.rows[1..];
    assert!(ok.iter().all(|r| r.state == "ok"
        && r.rank == Rank::Done
        && r.stage == "uvm_gpu_registered"
        && r.last_failure.is_empty()));
    assert!(ok.windows(2).all(|w| w[0].time_ms >= w[1].time_ms));
    // Three processes of this recording were still starting when it
    // stopped (no exit): a call of thread 453 in flight for 6 s, over the
    // 5 s --stall-after, puts it first, with the call and its time; the
    // tick gives only the thread, known from its events. One of 456 for
    // 2 ms shows without moving it. A cuInit of 545, which has exited, is
    // not shown.
    replay_into(&v, "h200-580.159.04-novisible.ndjson");
    let now = 60_000_000_000;
    v.lock().flights(vec![
        super::Flight {
            tid: 453,
            pid: None,
            start_ns: now - 6_000_000_000,
            call: "NV_ESC_RM_CONTROL".into(),
        },
        super::Flight {
            tid: 456,
            pid: None,
            start_ns: now - 2_000_000,
            call: "NV_ESC_RM_ALLOC NV01_DEVICE_0".into(),
        },
        super::Flight {
            tid: 545,
            pid: Some(545),
            start_ns: now - 6_000_000_000,
            call: "cuInit".into(),
        },
    ]);
    let s = v.snapshot(now);
    assert_eq!(s.rows.len(), 20);
    let order: Vec<(u32, Rank)> = s.rows.iter().take(4).map(|r| (r.pid, r.rank)).collect();
    assert_eq!(
        order,
        [
            (453, Rank::Stalled),
            (470, Rank::Failed),
            (456, Rank::Starting),
            (459, Rank::Starting)
        ]
    );
    assert_eq!(s.rows[0].in_flight, "6.0s NV_ESC_RM_CONTROL");
    assert_eq!(
        s.rows[0].why,
        "NV_ESC_RM_CONTROL has been running for 6.0s (stage device_objects)"
    );
    assert_eq!(s.rows[2].in_flight, "2.0ms NV_ESC_RM_ALLOC NV01_DEVICE_0");
    let r545 = s.rows.iter().find(|r| r.pid == 545).expect("545");
    assert_eq!((r545.in_flight.as_str(), r545.rank), ("", Rank::Done));
    let text = plain(&s, Some(12.0));
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with(
            "nvprobe top: 20 processes (2 starting, 1 failed, 1 stalled) · 12 events/s"
        ),
        "{text}"
    );
    let cols = [
        "PID",
        "COMM",
        "CLASS",
        "STAGE",
        "TIME",
        "IN FLIGHT",
        "LAST FAILURE",
        "STATE",
    ];
    let mut at = 0;
    for c in cols {
        let i = lines[1][at..]
            .find(c)
            .unwrap_or_else(|| panic!("{c} in {}", lines[1]));
        at += i + c.len();
    }
    assert!(
        lines[2].starts_with("453 ") && lines[2].contains("6.0s NV_ESC_RM_CONTROL"),
        "{text}"
    );
    assert!(lines[3].starts_with("470 ") && lines[3].contains("openat /dev/nvidia-uvm = device"));
    assert!(
        text.contains("  python3 [470]: stopped after version_handshake"),
        "{text}"
    );
    assert!(text.ends_with("probes: syscall 24/24\n\n"), "{text}");
}

#[test]
fn ended_processes_leave_after_a_minute_and_hostile_names_stay_one_line() {
    let v = view();
    replay_into(&v, "h200-580.159.04-concurrent16.ndjson");
    let last_exit = 44_000_000_000u64;
    assert_eq!(v.snapshot(0).rows.len(), 16);
    // Long after every exit of the recording: all gone.
    assert!(v.snapshot(last_exit + 120_000_000_000).rows.is_empty());
    let mut st = v.lock();
    st.procs.insert(
        7,
        super::Row {
            pid: 7,
            comm: "evil\n\x1b[2J\u{202e}".into(),
            last_failure: Some(format!("\u{2066}{}", "x".repeat(500))),
            ..Default::default()
        },
    );
    drop(st);
    let text = plain(&v.snapshot(0), None);
    let row = text.lines().find(|l| l.starts_with("7 ")).expect("row");
    assert!(!row.contains('\x1b') && row.chars().count() < 250, "{row}");
    assert!(
        !text.contains('\u{202e}') && !text.contains('\u{2066}'),
        "{text}"
    );
}
