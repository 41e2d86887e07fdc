//! One reader for every recording: a recording made without `--raw` is
//! read back into the events decoding makes (decode/read.rs), and the
//! model makes its records from them as from a `--raw` one. On every
//! fixture, the events this nvprobe decodes, written as `watch --json`
//! writes them (no `raw`) and read back, give the same events, facts left
//! out of the JSON included (the call as numbers, the CUDA function's
//! number, an open that creates, a failed call's kind and errno), and the
//! same stages, verdicts and faults.

mod common;

use nvprobe_model::{
    correlate::Record,
    decode::Event,
    replay::{self, Item, Line},
};

/// What a replay handed on, comparably: events without their raw hex.
#[derive(Debug, PartialEq)]
enum Seen {
    Event(u64, Box<Event>),
    Record(u64, Box<Record>),
    Undecodable,
    Other,
}

fn seen(text: &[u8]) -> (Vec<Seen>, u64) {
    let mut out = Vec::new();
    let done = replay::replay(text, None, |t, item| {
        out.push(match item {
            Item::Event(e) => {
                let mut e = e.clone();
                *e.raw_mut() = None;
                Seen::Event(t, Box::new(e))
            }
            Item::Record(r) => Seen::Record(t, Box::new(r.clone())),
            Item::Undecodable(..) => Seen::Undecodable,
            _ => Seen::Other,
        });
    })
    .expect("read");
    (out, done.without_raw)
}

/// The recording as `watch --json` without --raw would have written it
/// with this nvprobe: each kernel line replaced by its event decoded again
/// (no `raw`), a line that does not decode left out, every other line kept.
fn without_raw(text: &[u8]) -> String {
    let mut events = Vec::new();
    replay::replay(text, None, |t, item| match item {
        Item::Event(e) => {
            let mut v = Item::Event(e).recorded(t);
            v.as_object_mut().expect("an object").remove("raw");
            events.push(Some(v));
        }
        Item::Undecodable(..) => events.push(None),
        _ => {}
    })
    .expect("read");
    let mut events = events.into_iter();
    let mut out = String::new();
    for l in std::str::from_utf8(text).expect("UTF-8").lines() {
        match Line::parse(l) {
            Line::Kernel { .. } => {
                if let Some(Some(v)) = events.next() {
                    out.push_str(&v.to_string());
                    out.push('\n');
                }
            }
            _ => {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    out
}

#[test]
fn a_recording_without_raw_replays_as_the_same_events_and_records() {
    let fixtures = common::recordings();
    assert!(fixtures.len() >= 20, "{fixtures:?}");
    let (mut events, mut verdicts) = (0u64, 0u64);
    for path in fixtures {
        let text = common::read_fixture_bytes(&path);
        let (raw, _) = seen(&text);
        let stripped = without_raw(&text);
        let (read, n) = seen(stripped.as_bytes());
        let decoded: Vec<&Seen> = raw.iter().filter(|s| **s != Seen::Undecodable).collect();
        let read: Vec<&Seen> = read.iter().collect();
        assert_eq!(decoded.len(), read.len(), "{}", path);
        for (a, b) in decoded.iter().zip(&read) {
            assert_eq!(a, b, "{}", path);
        }
        let evs = decoded
            .iter()
            .filter(|s| matches!(s, Seen::Event(..)))
            .count() as u64;
        assert_eq!(n, evs, "{}: every event read as recorded", path);
        events += evs;
        verdicts += decoded
            .iter()
            .filter(|s| matches!(s, Seen::Record(_, r) if matches!(**r, Record::Cuinit(_))))
            .count() as u64;
    }
    assert!(events > 10_000, "{events} events read back");
    assert!(verdicts > 50, "{verdicts} verdicts made again");
}

/// A recorded event that is not one (a field of the wrong type, an
/// unknown enum value, a hex field that is not hex) is a bad line with the
/// reason, never a panic or a guess.
#[test]
fn a_malformed_recorded_event_is_a_bad_line() {
    for (line, why) in [
        (r#"{"type":"ioctl","pid":"x"}"#, "bad recorded event"),
        (
            r#"{"type":"proc","pid":1,"tid":1,"comm":"a","uid":0,"op":"explode","target_pid":1,"time_ns":1}"#,
            "unknown variant",
        ),
        (
            r#"{"type":"ioctl","pid":1,"tid":1,"comm":"a","uid":0,"fd":3,"device":{"major":195,"minor":255,"kind":"ctl"},"request":"zz","family":"escape","size":0,"args":{},"start_ns":0,"duration_ns":0,"ret":0,"ok":true}"#,
            "not a 32-bit hex number",
        ),
    ] {
        match Line::parse(line) {
            Line::Bad(w) => assert!(w.contains(why), "{line}: {w}"),
            other => panic!("{line}: {other:?}"),
        }
    }
}
