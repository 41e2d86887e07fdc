//! Replay support shared by the fixture tests: a recording made on the
//! GPU machine, read back by the model's own replay (the one `decode`,
//! `diff` and `export` use).
//!
//! Each test file uses a part of this module; the rest is unused there.
#![allow(dead_code)]

use std::path::PathBuf;

use nvprobe_model::{
    correlate::{CuInit, DiagId, Record, SignalReport},
    decode::{self, Event, version::DriverVersion},
    replay::Item,
};
use serde_json::Value;

/// The recordings live with the test tiers (tests/fixtures; its README says
/// which script made each one, where, on which driver).
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures")).join(name)
}

/// A fixture's bytes; one whose name ends in `.gz` is gzip-compressed
/// (the larger recordings, so that the tree stays small enough to carry
/// to the GPU host).
pub fn read_fixture_bytes(name: &str) -> Vec<u8> {
    let path = fixture(name);
    let bytes = std::fs::read(&path).expect("fixture present");
    if !name.ends_with(".gz") {
        return bytes;
    }
    use std::io::Read as _;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_end(&mut out)
        .expect("a gzip-compressed recording");
    out
}

/// A fixture's text (see [`read_fixture_bytes`]).
pub fn read_fixture(name: &str) -> String {
    String::from_utf8(read_fixture_bytes(name)).expect("a UTF-8 recording")
}

/// Every recording in tests/fixtures (`.ndjson`, `.ndjson.gz`), sorted.
pub fn recordings() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixture(""))
        .expect("fixtures")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".ndjson") || n.ends_with(".ndjson.gz"))
        .collect();
    names.sort();
    names
}

pub struct Replay {
    /// Every recorded line, as JSON (what the live run wrote).
    pub records: Vec<Value>,
    /// Every kernel record, decoded again.
    pub events: Vec<Event>,
    /// The records the model made again, in stream order.
    pub made: Vec<Record>,
}

/// Replay a recording as `nvprobe decode` does ([`nvprobe_model::replay`]:
/// the start record's context, process records in stream order, the
/// host's GPUs and driver), optionally with a forced driver version.
/// Every recorded line must be JSON and every kernel record must decode.
pub fn replay(name: &str, force: Option<DriverVersion>) -> Replay {
    replay_text(name, &read_fixture(name), force)
}

/// [`replay`] of a recording's text (`name` for the messages).
pub fn replay_text(name: &str, text: &str, force: Option<DriverVersion>) -> Replay {
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("every recorded line is JSON"))
        .collect();
    let (mut events, mut made) = (Vec::new(), Vec::new());
    let done = nvprobe_model::replay::replay(text.as_bytes(), force, |_, item| match item {
        Item::Event(e) => events.push(e.clone()),
        Item::Record(r) => made.push(r.clone()),
        Item::Process(_) | Item::Stall(_) | Item::Hang(_) | Item::HangEnd(_) | Item::Start(..) => {}
        Item::Undecodable(line, e) => panic!("{name}:{line}: {e}"),
    })
    .expect("reading from memory");
    assert!(done.start.is_some(), "{name}: start record");
    assert_eq!(
        (done.bad_count, done.bad),
        (0, Vec::new()),
        "{name}: every line reads and decodes"
    );
    Replay {
        records,
        events,
        made,
    }
}

/// The recording's start record.
pub fn start_of(r: &Replay) -> &Value {
    r.records
        .iter()
        .find(|x| x["type"] == "start")
        .expect("start record")
}

pub fn ioctls(r: &Replay) -> Vec<&decode::Ioctl> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::Ioctl(i) => Some(i),
            _ => None,
        })
        .collect()
}

pub fn status(i: &decode::Ioctl) -> Option<&'static str> {
    i.status.as_ref().and_then(|s| s.name)
}

/// The model's records of a recording, and its verdicts.
pub fn verdicts(name: &str) -> (Vec<Record>, Vec<CuInit>) {
    cuinits(replay(name, None).made)
}

/// The verdicts of a recording as nvprobe makes them when it sees the
/// driver calls alone: its libcuda records (`cuda`) left out, as when a
/// libcuda copy was hooked after the process's cuInit.
pub fn verdicts_without_libcuda(name: &str) -> Vec<CuInit> {
    let text: String = read_fixture(name)
        .lines()
        .filter(|l| !l.contains(r#""type":"cuda""#))
        .flat_map(|l| [l, "\n"])
        .collect();
    cuinits(replay_text(name, &text, None).made).1
}

/// The verdicts of a recording whose lines `edit` changed first.
pub fn verdicts_edited(name: &str, edit: impl Fn(&str) -> String) -> Vec<CuInit> {
    let text: String = read_fixture(name)
        .lines()
        .map(edit)
        .flat_map(|l| [l, "\n".to_owned()])
        .collect();
    cuinits(replay_text(name, &text, None).made).1
}

fn cuinits(out: Vec<Record>) -> (Vec<Record>, Vec<CuInit>) {
    let v = out
        .iter()
        .filter_map(|rec| match rec {
            Record::Cuinit(v) => Some((**v).clone()),
            _ => None,
        })
        .collect();
    (out, v)
}

pub fn stage_ids(v: &CuInit) -> Vec<&'static str> {
    v.stages.iter().map(|s| s.stage).collect()
}

pub fn signal_reports(records: &[Record]) -> Vec<&SignalReport> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Signal(s) => Some(&**s),
            _ => None,
        })
        .collect()
}

/// The verdict of the process whose command line carries `--case NAME`.
pub fn case<'a>(v: &'a [CuInit], name: &str) -> &'a CuInit {
    v.iter()
        .find(|x| {
            x.process
                .as_ref()
                .and_then(|p| p.cmdline.as_ref())
                .is_some_and(|c| c.windows(2).any(|w| w[0] == "--case" && w[1] == name))
        })
        .unwrap_or_else(|| panic!("no verdict for case {name}"))
}

/// A verdict's one diagnosis: its id and evidence (fails when it has not
/// exactly one).
pub fn only(v: &CuInit) -> (DiagId, &str) {
    assert_eq!(v.diagnoses.len(), 1, "{:#?}", v.diagnoses);
    (v.diagnoses[0].id, v.diagnoses[0].evidence.as_str())
}
