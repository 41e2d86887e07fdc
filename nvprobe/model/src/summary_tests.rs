//! The summary's tests.

use super::*;
use crate::{
    decode::{self, ProcKind},
    records::StartRecord,
};

/// An ioctl and a process exit decoded from a real recording; the tests
/// change only who, when, and whether it failed.
fn templates() -> (Event, Event) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/h200-580.159.04-rules.ndjson"
    );
    let text = std::fs::read_to_string(path).expect("fixture");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let start: StartRecord = serde_json::from_value(lines[0].clone()).expect("start");
    let ctx = start.context(None);
    let find = |pick: &dyn Fn(&serde_json::Value) -> bool| {
        let v = lines.iter().find(|v| pick(v)).expect("a line");
        let raw = decode::hex_decode(v["raw"].as_str().expect("raw")).expect("hex");
        decode::decode(&raw, &ctx).expect("decodes")
    };
    (
        find(&|v| v["type"] == "ioctl"),
        find(&|v| v["type"] == "proc" && v["op"] == "exit"),
    )
}

struct Make(Event, Event);

impl Make {
    fn new() -> Self {
        let (i, x) = templates();
        Self(i, x)
    }
    fn ioctl(&self, pid: u32, comm: &str, t: u64, ok: bool) -> Event {
        let mut e = self.0.clone();
        if let Event::Ioctl(i) = &mut e {
            i.proc.pid = pid;
            i.proc.tid = pid;
            i.proc.comm = comm.into();
            i.start_ns = t;
            i.ok = ok;
        }
        e
    }
    fn exit(&self, pid: u32, t: u64) -> Event {
        let mut e = self.1.clone();
        if let Event::Proc(p) = &mut e {
            assert_eq!(p.op, ProcKind::Exit);
            p.proc.pid = pid;
            p.target_pid = pid;
            p.time_ns = t;
        }
        e
    }
}

/// Feed events as the pipeline does: each batch counted on its own,
/// then merged in order.
fn feed(total: &mut Stats, batch: &[Event]) {
    let mut s = Stats::default();
    for e in batch {
        match e {
            Event::Proc(p) => s.process(e, p.time_ns),
            Event::Ioctl(i) => s.record(e, i.start_ns),
            _ => s.record(e, 0),
        }
    }
    total.merge(s);
}

fn rows(s: &Summary, pid: u32) -> Vec<&ProcSummary> {
    s.processes.iter().filter(|p| p.pid == pid).collect()
}

/// Mangled recordings carry absurd durations (the decode fuzz found two
/// near u64::MAX): a call's total saturates, in a batch and across the
/// merge, instead of overflowing.
#[test]
fn call_totals_saturate() {
    let m = Make::new();
    let long = |t| {
        let mut e = m.ioctl(9, "w", t, true);
        if let Event::Ioctl(i) = &mut e {
            i.duration_ns = u64::MAX - 5;
        }
        e
    };
    let mut s = Stats::default();
    feed(&mut s, &[long(1), long(2)]);
    feed(&mut s, &[long(3)]);
    let sum = s.finish(0.0, LostSummary::default());
    assert_eq!(sum.calls.len(), 1);
    assert_eq!(sum.calls[0].count, 3);
    assert_eq!(sum.calls[0].total_ns, u64::MAX);
    assert_eq!(sum.calls[0].max_ns, u64::MAX - 5);
    assert!(sum.to_text().contains(&sum.calls[0].name));
}

/// A pid used again after an exit is another process (another row,
/// each with its start), in one batch or across batches; without an
/// exit between, later batches go on with the same process.
#[test]
fn a_reused_pid_is_another_process() {
    let m = Make::new();
    let mut one = Stats::default();
    feed(
        &mut one,
        &[
            m.ioctl(100, "app", 1_000, true),
            m.exit(100, 2_000),
            m.ioctl(100, "app", 5_000, false),
        ],
    );
    let mut split = Stats::default();
    feed(&mut split, &[m.ioctl(100, "app", 1_000, true)]);
    feed(&mut split, &[m.ioctl(200, "other", 1_500, true)]);
    feed(&mut split, &[m.exit(100, 2_000)]);
    feed(&mut split, &[m.ioctl(100, "app", 5_000, false)]);
    feed(&mut split, &[m.ioctl(200, "other", 6_000, true)]);
    for s in [
        one.finish(0.0, LostSummary::default()),
        split.finish(0.0, LostSummary::default()),
    ] {
        let r = rows(&s, 100);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(
            (r[0].start_ns, r[0].events, r[0].failed),
            (Some(1_000), 1, 0)
        );
        assert_eq!(
            (r[1].start_ns, r[1].events, r[1].failed),
            (Some(5_000), 1, 1)
        );
        assert_eq!(s.processes_omitted, 0);
    }
    let s = split.finish(0.0, LostSummary::default());
    let r = rows(&s, 200);
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].start_ns, r[0].events),
        (None, 2),
        "no start shown: one process"
    );
}

/// An exec (new name, same process) is still its own row.
#[test]
fn an_exec_is_its_own_row() {
    let m = Make::new();
    let mut s = Stats::default();
    feed(&mut s, &[m.ioctl(7, "sh", 1, true)]);
    feed(
        &mut s,
        &[
            m.ioctl(7, "python3", 2, true),
            m.ioctl(7, "python3", 3, true),
        ],
    );
    let s = s.finish(0.0, LostSummary::default());
    let r = rows(&s, 7);
    assert_eq!(r.len(), 2);
    assert_eq!((r[0].comm.as_str(), r[0].events), ("python3", 2));
    assert_eq!((r[1].comm.as_str(), r[1].events), ("sh", 1));
}

/// The calls the kernel counted for a program, carried by its exec record,
/// are that program's: in the same batch, or in a batch that saw nothing
/// of it before the exec (at `--events verdicts` a quiet program sends
/// nothing), and the program that came back to a name is the one running.
#[test]
fn the_count_an_exec_carries_is_the_program_before_it() {
    let m = Make::new();
    let exec = |n: u64, t: u64| {
        let mut e = m.exit(7, t);
        if let Event::Proc(p) = &mut e {
            p.op = ProcKind::Exec;
            p.unsent = Some(n);
            p.proc.comm = "next".into();
        }
        e
    };
    let mut s = Stats::default();
    feed(&mut s, &[m.ioctl(7, "sh", 1, true)]);
    feed(&mut s, &[exec(5, 2), m.ioctl(7, "python3", 3, true)]);
    feed(
        &mut s,
        &[
            m.ioctl(7, "sh", 4, true),
            exec(3, 5),
            m.ioctl(7, "python3", 6, true),
        ],
    );
    let s = s.finish(0.0, LostSummary::default());
    let r = rows(&s, 7);
    let by = |c: &str| r.iter().find(|x| x.comm == c).map(|x| (x.ioctls, x.unsent));
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(by("sh"), Some((2 + 5 + 3, 8)));
    assert_eq!(by("python3"), Some((2, 0)));
}

/// A process's other threads (libcuda's `cuda-EvtHandlr`, a thread named
/// by its program) count in its row, under its main thread's name, in
/// whichever order and batch they come; an exec still makes its own row.
#[test]
fn threads_count_in_their_process_row() {
    let m = Make::new();
    let thread = |pid: u32, tid: u32, comm: &str, t: u64| {
        let mut e = m.ioctl(pid, comm, t, true);
        if let Event::Ioctl(i) = &mut e {
            i.proc.tid = tid;
        }
        e
    };
    let mut s = Stats::default();
    // A thread first; then the main thread; a later batch of a thread
    // only.
    feed(
        &mut s,
        &[
            thread(9, 11, "cuda-EvtHandlr", 1),
            m.ioctl(9, "python3", 2, true),
        ],
    );
    feed(&mut s, &[thread(9, 12, "pt_main_thread", 3)]);
    let mut other = Stats::default();
    feed(&mut other, &[thread(9, 11, "cuda-EvtHandlr", 4)]);
    s.merge(other);
    feed(
        &mut s,
        &[m.ioctl(9, "nvidia-smi", 5, true), thread(9, 13, "w", 6)],
    );
    let s = s.finish(0.0, LostSummary::default());
    let r = rows(&s, 9);
    let mut got: Vec<(&str, u64)> = r.iter().map(|r| (r.comm.as_str(), r.events)).collect();
    got.sort();
    assert_eq!(got, [("nvidia-smi", 2), ("python3", 4)]);
}

/// 100,000 short processes (pids reused: pid_max 32768), each with an
/// exit: the table held stays bounded the whole time, the summary lists
/// the busiest and the failing ones up to their caps, and counts every
/// other process and event it leaves out.
#[test]
fn the_process_table_stays_bounded_over_100000_processes() {
    let m = Make::new();
    let mut s = Stats::default();
    let (mut events, mut held_max) = (0u64, 0usize);
    let mut t = 0u64;
    let n = 100_000u32;
    let mut batch = Vec::new();
    for i in 0..n {
        let pid = 300 + i % 32_000;
        // A few busy processes, some failing ones, the rest small.
        let k = if i % 997 == 0 {
            50
        } else {
            1 + u64::from(i % 3)
        };
        for j in 0..k {
            t += 10;
            batch.push(m.ioctl(pid, "worker", t, !(i % 211 == 0 && j == 0)));
            events += 1;
        }
        t += 10;
        batch.push(m.exit(pid, t));
        if batch.len() >= 512 {
            feed(&mut s, &std::mem::take(&mut batch));
            held_max = held_max.max(s.processes_held());
        }
    }
    feed(&mut s, &batch);
    let sum = s.finish(1.0, LostSummary::default());
    eprintln!(
        "held at most {held_max} processes; listed {}, omitted {}",
        sum.processes.len(),
        sum.processes_omitted
    );
    assert!(held_max <= KEEP_AT_MOST + 512, "held {held_max}");
    assert!(sum.processes.len() <= TOP_PROCESSES + TOP_FAILING);
    assert_eq!(
        sum.processes.len() as u64 + sum.processes_omitted,
        u64::from(n)
    );
    let listed: u64 = sum.processes.iter().map(|p| p.events).sum();
    assert_eq!(listed + sum.processes_omitted_events, events);
    assert_eq!(sum.events["ioctl"], events);
    // The busiest (50 events each: 101 of them) fill the top; every
    // failing process (474 fail) past them is listed up to the cap.
    let busy = sum.processes.iter().filter(|p| p.events == 50).count();
    assert_eq!(busy, TOP_PROCESSES);
    let failing = sum.processes.iter().filter(|p| p.failed > 0).count();
    assert!(failing >= TOP_FAILING, "{failing}");
    // A pid listed twice (two processes) says each one's start.
    for p in &sum.processes {
        let twice = sum.processes.iter().filter(|q| q.pid == p.pid).count() > 1;
        assert_eq!(p.start_ns.is_some(), twice, "{p:?}");
    }
    let text = sum.to_text();
    assert!(text.contains(&format!("and {} more processes", sum.processes_omitted)));
    let line = serde_json::to_string(&sum).expect("json");
    assert!(
        line.len() < 64 << 10,
        "summary line of {} bytes",
        line.len()
    );
}
