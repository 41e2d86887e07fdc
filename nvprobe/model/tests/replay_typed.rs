//! The typed stream and the recorded JSON say the same: `diff` and
//! `export` read a `--raw` recording's typed items and a recording made
//! without `--raw` from its JSON, and on every fixture both readings of
//! each record give the same step, stage and verdict.

mod common;

use nvprobe_model::{diff::Fact, replay};

#[test]
fn the_typed_and_the_recorded_readings_agree_on_every_fixture() {
    let dir = common::fixture("");
    let mut fixtures: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ndjson"))
        .collect();
    fixtures.sort();
    assert!(fixtures.len() >= 20, "{fixtures:?}");
    let mut calls = 0u64;
    for path in fixtures {
        let text = std::fs::read(&path).expect("read");
        replay::replay(&text[..], None, |t, item| {
            let Some(typed) = Fact::of_item(&item) else {
                return;
            };
            let recorded = Fact::of_recorded(&item.recorded(t)).expect("a pid");
            assert_eq!(typed, recorded, "{}: {item:?}", path.display());
            if matches!(typed.2, Fact::Call(_)) {
                calls += 1;
            }
        })
        .expect("read");
    }
    assert!(calls > 10_000, "{calls} calls compared");
}
