//! Tier 1: real driver traffic recorded on the GPU machine (NVIDIA H200,
//! open kernel module 580.159.04, `nvprobe watch --json --raw`), replayed
//! through today's decoder. The raw kernel records are the truth; the
//! assertions are on what the decoder makes of them.
//!
//! These replays need the model crate alone (no BPF, no binary, no root);
//! the tier-1 tests that run the nvprobe binary (decode, doctor --root)
//! are in tests/tests/.
//!
//! This file: the recordings against the NDJSON schema (as recorded and as
//! today's decoder re-emits them), and the text renderer's lines.

mod common;

use common::replay;
use nvprobe_model::render::{Clock, schema};

const FIXTURES: [&str; 10] = [
    "h200-580.159.04-cuinit-ctypes.ndjson",
    "h200-580.159.04-ctx3-ctypes.ndjson",
    "h200-580.159.04-mem20-ctypes.ndjson",
    "h200-580.159.04-torch-init.ndjson",
    "h200-580.159.04-novisible.ndjson",
    "h200-580.159.04-uvm-masked.ndjson",
    "h200-580.159.04-timeout-kill.ndjson",
    "h200-580.159.04-concurrent16.ndjson",
    "h200-580.159.04-signals.ndjson",
    "h200-580.159.04-stall-sigstop.ndjson",
];

#[test]
fn recorded_streams_match_the_schema_and_lost_nothing() {
    for f in FIXTURES {
        let r = replay(f, None);
        for rec in &r.records {
            schema::validate(rec).unwrap_or_else(|e| panic!("{f}: {e}\n{rec}"));
        }
        let summary = r
            .records
            .iter()
            .rev()
            .find(|x| x["type"] == "summary")
            .expect("summary");
        assert_eq!(
            summary["lost"]["total"], 0,
            "{f}: the default ring buffer lost events"
        );
        assert_eq!(summary["decode_errors"], 0, "{f}");
        assert!(r.events.len() > 30, "{f}: only {} events", r.events.len());
        // Today's decoder re-emits every record as valid schema too.
        for ev in &r.events {
            let mut v = serde_json::to_value(ev).expect("serializes");
            v["v"] = 1.into();
            v["time"] = "2026-11-30T00:00:00.000000Z".into();
            v["mono_ns"] = 1.into();
            schema::validate(&v).unwrap_or_else(|e| panic!("{f}: {e}\n{v}"));
        }
    }
}

#[test]
fn text_lines_read_like_strace_with_names() {
    let r = replay("h200-580.159.04-cuinit-ctypes.ndjson", None);
    let clock = Clock::fixed(0);
    let lines: Vec<String> = r
        .events
        .iter()
        .map(|e| nvprobe_model::render::text::event_line(&clock, 0, e))
        .collect();
    let reg = lines
        .iter()
        .find(|l| l.contains("UVM_REGISTER_GPU"))
        .expect("line");
    assert!(
        reg.contains("ioctl(9</dev/nvidia-uvm>, UVM_REGISTER_GPU{gpu_uuid=GPU-f0568750-7765-f166-dd86-a87a8ebdc1bf"),
        "{reg}"
    );
    assert!(reg.contains(") = 0 NV_OK <168.580ms>"), "{reg}");
    let ctl = lines
        .iter()
        .find(|l| l.contains("NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION"))
        .expect("line");
    assert!(
        ctl.contains("ioctl(8</dev/nvidiactl>, NV_ESC_RM_CONTROL{"),
        "{ctl}"
    );
    let proc_open = lines
        .iter()
        .find(|l| l.contains("/proc/driver/nvidia/params"))
        .expect("line");
    assert!(
        !proc_open.contains("[none"),
        "no device shown for a /proc file: {proc_open}"
    );
    let stat = lines
        .iter()
        .find(|l| l.contains("stat(\"/dev/nvidiactl\""))
        .expect("line");
    assert!(stat.contains("= 0 [ctl 195:255]"), "{stat}");
}

/// A verdict's text view says its evidence once: the first line is the
/// headline, and no diagnosis's evidence is repeated on it (a missing
/// libcuda listed the same paths twice), on every fixture.
#[test]
fn a_verdicts_first_line_repeats_no_diagnosis() {
    let mut verdicts = 0;
    for path in common::recordings() {
        let text = common::read_fixture_bytes(&path);
        nvprobe_model::replay::replay(&text[..], None, |_, item| {
            let nvprobe_model::replay::Item::Record(
                r @ nvprobe_model::correlate::Record::Cuinit(v),
            ) = item
            else {
                return;
            };
            let shown = nvprobe_model::render::text::record_text(r);
            // Text shows the CUDA start-ups' verdicts only.
            let Some(first) = shown.lines().next() else {
                return;
            };
            verdicts += 1;
            for d in &v.diagnoses {
                let ev = nvprobe_model::decode::terminal_safe(&d.evidence);
                // Evidence that begins with the outcome ("cuInit returned
                // … (100)"), which the headline says too: its detail.
                let ev = match ev.split_once("): ") {
                    Some((_, detail)) if ev.starts_with("cu") => detail,
                    _ if ev.starts_with("cu") => continue,
                    _ => &ev,
                };
                assert!(
                    ev.len() < 12 || !first.contains(ev),
                    "{}: the first line repeats {}'s evidence:\n{shown}",
                    path,
                    d.id
                );
            }
        })
        .expect("read");
    }
    assert!(verdicts > 100, "{verdicts} verdicts");
}

/// Readable verdicts (issue 37): in every recording, the first line of
/// each text verdict, first context and fault stays within
/// `FIRST_LINE_MAX` characters, and a first context's first line does not
/// say again what its diagnoses say (a verdict's is checked above).
#[test]
fn a_verdicts_first_line_is_short() {
    use nvprobe_model::correlate::Record;
    use nvprobe_model::render::text::{FIRST_LINE_MAX, record_text};
    let mut seen = 0;
    for name in common::recordings() {
        for rec in replay(&name, None).made {
            if !matches!(
                rec,
                Record::Cuinit(_) | Record::FirstContext(_) | Record::Fault(_)
            ) {
                continue;
            }
            let text = record_text(&rec);
            let Some(first) = text.lines().next() else {
                continue;
            };
            seen += 1;
            assert!(
                first.chars().count() <= FIRST_LINE_MAX,
                "{name}: {} characters: {first}",
                first.chars().count()
            );
            if let Record::FirstContext(c) = &rec {
                for d in &c.diagnoses {
                    // The evidence goes on after the outcome it begins with.
                    let detail = d.evidence.split_once("); ").map_or("", |x| x.1);
                    assert!(
                        detail.len() < 12 || !first.contains(detail),
                        "{name}: the first line repeats {}'s evidence: {first}",
                        d.id
                    );
                }
            }
        }
    }
    assert!(seen > 150, "{seen} records");
}
