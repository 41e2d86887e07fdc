//! A search that spans batches is still one line (`runs`): the live
//! records of a torch start-up on the H200 (its loader looks for
//! libcuda.so.1 in 41 places), cut into batches inside the search and
//! rendered by two workers, give the text they give in one batch.

use std::sync::Arc;

use nvprobe_model::records::StartRecord;
use serde_json::Value;

use super::{Filters, PipeOpts, Pipeline, fuzz::Sink};
use crate::output::{Clock, Format, Output};

/// The recording's start record and its kernel records (bytes, time).
fn recording() -> (StartRecord, Vec<(Vec<u8>, u64)>) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/h200-580.159.04-libcuda-follow.ndjson"
    );
    let text = std::fs::read_to_string(path).expect("fixture");
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON"));
    let start = serde_json::from_value(lines.next().expect("a start record")).expect("start");
    let raws = lines
        .filter_map(|v| {
            let raw = nvprobe_model::decode::hex_decode(v["raw"].as_str()?)?;
            Some((raw, v["mono_ns"].as_u64()?))
        })
        .collect();
    (start, raws)
}

/// Text of the records sent in batches cut at `cuts`, with `ticks`
/// (after batch i, at time t) between them.
fn text(
    start: &StartRecord,
    raws: &[(Vec<u8>, u64)],
    cuts: &[usize],
    ticks: &[(usize, u64)],
) -> String {
    let sink = Sink::default();
    let out = Output::new(Box::new(sink.clone()), Format::Text, Clock::fixed(0));
    let opts = PipeOpts {
        workers: 2,
        summary_only: false,
        level: nvprobe_model::render::Level::All,
        observers: Vec::new(),
        host_facts: false,
        all_processes: true,
    };
    let ctx = Arc::new(start.context(None));
    let mut pipe =
        Pipeline::start(out, ctx, Arc::new(Filters::default()), &opts).expect("pipeline");
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(raws.len());
    for (i, w) in bounds.windows(2).enumerate() {
        let mut b = pipe.batch();
        for (raw, t) in &raws[w[0]..w[1]] {
            b.push(raw, *t, 0);
        }
        pipe.send(b).expect("send");
        for (_, t) in ticks.iter().filter(|(after, _)| *after == i) {
            pipe.tick(*t).expect("tick");
        }
    }
    pipe.finish().expect("finish");
    let bytes = sink.0.lock().expect("sink").clone();
    String::from_utf8(bytes).expect("UTF-8")
}

/// Where the 41-place search is: the first record that is one of its
/// lookups, and the number of records up to its last.
fn the_search(start: &StartRecord, raws: &[(Vec<u8>, u64)]) -> (usize, usize) {
    let ctx = start.context(None);
    let hits: Vec<usize> = raws
        .iter()
        .enumerate()
        .filter(|(_, (raw, _))| {
            matches!(
                nvprobe_model::decode::decode(raw, &ctx),
                Ok(nvprobe_model::decode::Event::Open(o))
                    if o.ret < 0 && o.path.ends_with("/libcuda.so.1") && o.proc.pid == 6256
            )
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(hits.len(), 41);
    (hits[0], hits[40])
}

#[test]
fn a_search_cut_by_batches_is_one_line_as_in_one_batch() {
    let (start, raws) = recording();
    let whole = text(&start, &raws, &[], &[]);
    let line = "python3[6256] openat libcuda.so.1 in 41 places = -1 ENOENT";
    assert_eq!(whole.matches(line).count(), 1, "{whole}");
    let (first, last) = the_search(&start, &raws);
    for cuts in [
        vec![first + 1],
        vec![first + 7],
        vec![last],
        vec![first + 3, first + 4, first + 20],
        // The search alone in a batch, between two others.
        vec![first + 2, first + 9, first + 10, last],
    ] {
        let cut = text(&start, &raws, &cuts, &[]);
        assert_eq!(cut, whole, "cut at {cuts:?}");
    }
    // The clock between the two halves, a moment after the last call:
    // the search is still one line.
    let soon = raws[first + 6].1 + 1_000_000;
    assert_eq!(text(&start, &raws, &[first + 7], &[(0, soon)]), whole);
    // Long after it (the collector idle): the half seen is written then,
    // and the rest is a line of its own.
    let late = raws[first + 6].1 + 2_000_000_000;
    let split = text(&start, &raws, &[first + 7], &[(0, late)]);
    let at = |n: u32| {
        let l = format!("python3[6256] openat libcuda.so.1 in {n} places = -1 ENOENT");
        assert_eq!(split.matches(&l).count(), 1, "{l}: {split}");
        split.find(&l)
    };
    assert!(at(7) < at(34), "{split}");
    assert_eq!(split.matches(line).count(), 0, "{split}");
    // The search ends with its batch, the clock comes, and the next
    // batch begins with something else; a batch that holds nothing (all
    // filtered) comes between two halves: as in one batch.
    assert_eq!(text(&start, &raws, &[last + 1], &[(0, soon)]), whole);
    assert_eq!(text(&start, &raws, &[first + 7, first + 7], &[]), whole);
}
