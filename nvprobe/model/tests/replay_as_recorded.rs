//! A recording written at an `--events` level below all does not hold the
//! kernel events its verdicts rest on (the successful calls were counted,
//! not written): its start record says the level, and a replay hands on
//! its start-up verdicts as the live run made them, never ones made again
//! from what is left. The H100's `--events verdicts` recordings were made
//! before the start record said so; with the level said, the verdict the
//! live run made is the one shown.

mod common;

use nvprobe_model::correlate::{CuInit, Outcome, Record};
use nvprobe_model::replay;

fn verdicts_of(text: &str) -> Vec<CuInit> {
    let mut v = Vec::new();
    replay::replay(text.as_bytes(), None, |_, item| {
        if let replay::Item::Record(Record::Cuinit(c)) = item {
            v.push((**c).clone());
        }
    })
    .expect("read");
    v
}

/// The recording with its start record saying `level`.
fn at_level(name: &str, level: &str) -> String {
    common::read_fixture(name)
        .lines()
        .map(|l| {
            if l.contains(r#""type":"start""#) {
                l.replacen(
                    r#""type":"start","#,
                    &format!(r#""type":"start","events":"{level}","#),
                    1,
                )
            } else {
                l.to_owned()
            }
        })
        .flat_map(|l| [l, "\n".to_owned()])
        .collect()
}

#[test]
fn a_verdicts_level_recording_shows_the_verdicts_it_recorded() {
    let name = "h100-580.159.04-held-verdicts.ndjson.gz";
    // As recorded (no level said): made again from one libcuda event, it
    // is wrong: "incomplete", no driver call.
    let again = verdicts_of(&common::read_fixture(name));
    let v = again.iter().find(|v| v.pid == 530).expect("pid 530");
    assert_eq!(v.result, Outcome::Incomplete, "{}", v.text);
    // With the level said: the live run's verdict.
    let shown = verdicts_of(&at_level(name, "verdicts"));
    assert_eq!(shown.len(), 1, "{shown:#?}");
    let v = &shown[0];
    assert_eq!((v.pid, v.result), (530, Outcome::Ok));
    assert!(
        v.text
            .starts_with("exited with status 0; it held an NVIDIA descriptor when nvprobe started"),
        "{}",
        v.text
    );
    assert_eq!(v.source, "driver calls and path lookups");
    // At `all` the verdicts are made again, as before.
    let all = verdicts_of(&at_level(name, "all"));
    assert_eq!(all, again);
}

/// Every verdict of a full recording reads back as the record it was
/// written from: the typed reader keeps every field the JSON holds.
#[test]
fn a_verdict_reads_back_as_written() {
    for name in [
        "h100-580.159.04-unseen6.ndjson.gz",
        "h100-580.159.04-held-start-verdicts.ndjson.gz",
    ] {
        let text = common::read_fixture(name);
        let mut n = 0;
        for l in text.lines().filter(|l| l.contains(r#""type":"cuinit""#)) {
            let mut v: serde_json::Value = serde_json::from_str(l).expect("json");
            let c: CuInit = serde_json::from_value(v.clone()).expect("a verdict");
            let mut again = serde_json::to_value(&c).expect("json");
            for k in [
                "v",
                "time",
                "mono_ns",
                "severity",
                "severity_number",
                "type",
            ] {
                v.as_object_mut().expect("object").remove(k);
                again.as_object_mut().expect("object").remove(k);
            }
            assert_eq!(again, v, "{name}");
            n += 1;
        }
        assert!(n > 0, "{name}");
    }
}

/// A verdict line that does not read back (a newer nvprobe's diagnosis
/// id, a field of the wrong type) is a bad line that says so: neither it
/// nor one made again from what is left is shown.
#[test]
fn a_verdict_this_nvprobe_cannot_read_is_a_bad_line() {
    let name = "h100-580.159.04-held-verdicts.ndjson.gz";
    let text = at_level(name, "verdicts").replace(r#""result":"ok""#, r#""result":"triumphant""#);
    let mut v = 0;
    let done = replay::replay(text.as_bytes(), None, |_, item| {
        if let replay::Item::Record(Record::Cuinit(_)) = item {
            v += 1;
        }
    })
    .expect("read");
    assert_eq!(v, 0);
    assert_eq!(done.bad_count, 1, "{:?}", done.bad);
    assert!(
        done.bad[0]
            .1
            .starts_with("a cuinit record this nvprobe cannot read back (")
            && done.bad[0].1.ends_with("): not shown"),
        "{:?}",
        done.bad
    );
}
