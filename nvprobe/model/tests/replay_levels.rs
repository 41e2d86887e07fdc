//! `--events failures|verdicts` sends less from the kernel: a process's
//! successful calls only when a verdict reads them
//! (`correlate::needs`), and counts the rest. Every recording of the real
//! driver (and of the qemu kernels) was made with everything sent; each is
//! replayed twice, in full and with the kernel side's decision made again
//! over it (`KernelLevel`, what `nvprobe-ebpf` decides), and the verdicts
//! must be the same: result, class, text, diagnoses with their evidence,
//! milestones, GPUs and call count. Recordings hold hundreds of processes
//! (the catalogue's failures, start-ups killed by signals, stalls, torch).

mod common;

use nvprobe_model::{
    correlate::{Record, needs::KernelLevel},
    decode::version::VersionCtx,
    replay::Item,
};
use serde_json::Value;
use std::collections::BTreeMap;

/// The verdicts of a recording as JSON, keyed by pid, with the kernel
/// events the replay saw (by type) and the number left out.
fn verdicts(text: &str, level: bool) -> (Vec<(u32, Value)>, BTreeMap<&'static str, u64>, u64) {
    let copied: Vec<u32> = nvprobe_model::decode::rmparams::kernel_entries(&VersionCtx::assumed())
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    let mut k = KernelLevel::new(&recorded_version(text), &copied);
    // User space marks the processes that held a descriptor at its start
    // before the first event comes.
    for pid in held_at_start(text) {
        k.held_at_start(pid);
    }
    let (mut out, mut events, mut dropped) = (Vec::new(), BTreeMap::new(), 0u64);
    let keep = |ev: &mut nvprobe_model::decode::Event| {
        if !level {
            return true;
        }
        let kept = k.keep(ev);
        dropped += u64::from(!kept);
        kept
    };
    nvprobe_model::replay::replay_filtered(text.as_bytes(), None, keep, |_, item| match item {
        Item::Event(e) => *events.entry(e.type_name()).or_default() += 1,
        Item::Record(Record::Cuinit(v)) => {
            let mut j = serde_json::to_value(&**v).expect("verdict as JSON");
            // When the verdict was made is not what it says.
            if let Some(o) = j.as_object_mut() {
                o.remove("time_ns");
                o.remove("mono_ns");
            }
            // What another process (a GPU's holder, past its own start-up)
            // did while followed is counted from what was sent: at these
            // levels the kernel counts most of its calls instead, so those
            // two numbers are the one known difference (docs/SCHEMA.md).
            if let Some(ds) = j.get_mut("diagnoses").and_then(Value::as_array_mut) {
                for d in ds {
                    if let Some(e) = d.get_mut("evidence")
                        && let Some(t) = e.as_str()
                    {
                        *e = Value::String(holder_counts_out(t));
                    }
                }
            }
            out.push((v.pid, j));
        }
        Item::Record(Record::FirstContext(f)) => {
            out.push((f.pid, serde_json::to_value(&**f).expect("as JSON")));
        }
        _ => {}
    })
    .expect("reading from memory");
    (out, events, dropped)
}

/// The driver version the recording was decoded as (its start record's),
/// whose tables the kernel side had.
fn recorded_version(text: &str) -> VersionCtx {
    let start = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "start");
    VersionCtx::from_version(
        start
            .as_ref()
            .and_then(|s| s["decode_version"].as_str())
            .and_then(|v| v.parse().ok()),
    )
}

/// The processes the recording's start found holding an NVIDIA
/// descriptor: user space marks them before any event comes, and their
/// process records say `held_at_start` before any record of theirs. (A
/// process the kernel side found first at a call on such a descriptor is
/// marked `held_at_start` too, after that call, which it always sends.)
fn held_at_start(text: &str) -> Vec<u32> {
    let mut seen = std::collections::HashSet::new();
    let mut held = Vec::new();
    for v in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let Some(pid) = v["pid"].as_u64().and_then(|p| u32::try_from(p).ok()) else {
            continue;
        };
        if v["type"] == "process" && v["held_at_start"] == true && !seen.contains(&pid) {
            held.push(pid);
        }
        seen.insert(pid);
    }
    held
}

/// Whether the recording was made with everything sent (`--events all`):
/// one made at a level already lacks what the kernel counted, which its
/// summary says (`quieted`).
fn sent_everything(text: &str) -> bool {
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .is_none_or(|s| s.get("quieted").is_none())
}

/// `t` with each "made N memory allocation(s) (RM) and M driver calls"
/// of a holder replaced by "made … (RM) and … driver calls".
fn holder_counts_out(t: &str) -> String {
    let mut out = String::new();
    let mut rest = t;
    while let Some(i) = rest.find(" made ") {
        let (head, tail) = rest.split_at(i + 6);
        out.push_str(head);
        match tail.find(" driver calls while nvprobe followed it") {
            Some(j) if tail[..j].contains("memory allocation") => {
                out.push_str("… (RM) and …");
                rest = &tail[j..];
            }
            _ => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn every_recording_gets_the_same_verdicts_when_the_kernel_sends_less() {
    let names: Vec<(String, String)> = common::recordings()
        .into_iter()
        .map(|n| {
            let text = common::read_fixture(&n);
            (n, text)
        })
        .filter(|(_, text)| sent_everything(text))
        .collect();
    assert!(
        names.len() >= 30,
        "{:?}",
        names.iter().map(|n| &n.0).collect::<Vec<_>>()
    );
    // The recordings of processes that held a descriptor when nvprobe
    // started are among them (HELD's path).
    assert!(names.iter().any(|(_, t)| !held_at_start(t).is_empty()));
    let (mut total, mut left, mut compared) = (0u64, 0u64, 0usize);
    for (n, text) in &names {
        let text = text.as_str();
        let (full, events, _) = verdicts(text, false);
        let (less, _, dropped) = verdicts(text, true);
        assert_eq!(
            full.iter().map(|v| v.0).collect::<Vec<_>>(),
            less.iter().map(|v| v.0).collect::<Vec<_>>(),
            "{n}: the same processes' verdicts"
        );
        for ((p, a), (q, b)) in full.iter().zip(&less) {
            assert_eq!(p, q, "{n}: verdicts in the same order");
            // A CUDA start-up's verdict is made before the process ends:
            // its `calls` are the calls that reached nvprobe by then, which
            // at these levels leaves out what the kernel counted (those are
            // in the summary). A driver client's verdict comes at its exit,
            // whose record carries the kernel's count: the same number.
            let (mut a, mut b) = (a.clone(), b.clone());
            if a["class"] == "cuda" {
                let (ca, cb) = (a["calls"].as_u64(), b["calls"].as_u64());
                assert!(
                    cb <= ca,
                    "{n}: pid {p}: {cb:?} calls at the level, {ca:?} in full"
                );
                a["calls"] = Value::Null;
                b["calls"] = Value::Null;
            }
            // The start-up's length runs to its last call that reached
            // nvprobe: one the kernel counted instead may end it later.
            let (ta, tb) = (a["total_ms"].as_f64(), b["total_ms"].as_f64());
            assert!(
                tb <= ta,
                "{n}: pid {p}: total_ms {tb:?} at the level, {ta:?} in full"
            );
            a["total_ms"] = Value::Null;
            b["total_ms"] = Value::Null;
            let differ: Vec<String> = a
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, v)| b.get(k.as_str()) != Some(v))
                .map(|(k, v)| format!("{k}: {v} | {}", b.get(k.as_str()).unwrap_or(&Value::Null)))
                .collect();
            assert!(
                differ.is_empty(),
                "{n}: pid {p}'s verdict differs when the kernel sends less (full | less):\n{}",
                differ.join("\n")
            );
        }
        total += events.values().sum::<u64>();
        left += dropped;
        compared += full.len();
    }
    eprintln!(
        "{} recordings, {compared} verdicts the same; {left} of {total} kernel events would not have been sent",
        names.len()
    );
    // The comparison means something only if calls were left out.
    assert!(left * 4 > total, "{left} of {total} left out");
}

/// Two nvprobes ran at once on the H100 over the same processes, one with
/// everything sent and one at `--events verdicts`
/// (`tests/scripts/held-levels.sh`, `held-start.sh`): what the kernel
/// side is modelled to leave out of the first is exactly what the second's
/// kernel counted (`quieted`), and what it keeps is what the second
/// received, for processes that held a descriptor when nvprobe started
/// and one that then began a start-up.
#[test]
fn the_kernel_level_leaves_out_what_the_real_kernel_counted_beside_it() {
    let pairs = ["h100-580.159.04-held", "h100-580.159.04-held-start"];
    for base in pairs {
        let full = common::read_fixture(&format!("{base}.ndjson.gz"));
        let level = common::read_fixture(&format!("{base}-verdicts.ndjson.gz"));
        assert!(sent_everything(&full) && !sent_everything(&level), "{base}");
        let summary = level
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["type"] == "summary")
            .expect("a summary");
        let counted = summary["quieted"].as_u64().expect("quieted");
        let received: BTreeMap<&str, u64> = summary["events"]
            .as_object()
            .expect("events")
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.as_u64()?)))
            .collect();
        let (_, mut kept, dropped) = verdicts(&full, true);
        // The summary counts calls, not the process records.
        kept.remove("proc");
        assert!(counted > 100, "{base}: {counted}");
        assert_eq!(
            (dropped, kept),
            (counted, received),
            "{base}: (left out, kept by type) as modelled | as the kernel did"
        );
    }
}
