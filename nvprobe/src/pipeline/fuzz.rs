//! A fuzz target for `nvprobe decode`: random recordings through the replay
//! path (`replay::run`, an in-memory reader, an in-memory output). Lines
//! are real records from the fixtures, whole, truncated or with their raw
//! bytes mutated; raw records of every kind (and of none) with random
//! contents and lengths; random JSON; records with huge or negative
//! numbers; bytes that are not text. Whatever comes in: no panic on any
//! thread, every output line of `--json` is JSON (the summary last), the
//! output stays within a bound of the input, the bad lines are counted.

use std::{
    io::{Cursor, Write},
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
};

use nvprobe_common::{
    CudaEvent, DriverEvent, FdEvent, IoctlEvent, MmapEvent, PathEvent, ProcEvent, RmControlEvent,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::{PipeOpts, replay};
use crate::output::{Clock, Format, Output};

/// Panics on any thread of this test binary (decode workers included),
/// counted by a hook installed once.
static PANICS: AtomicU64 = AtomicU64::new(0);

fn count_panics() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            prev(info);
        }));
    });
}

/// Lines of real recordings: a start record first, then every record.
fn pool() -> &'static Vec<Value> {
    static POOL: OnceLock<Vec<Value>> = OnceLock::new();
    POOL.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/");
        let mut v = Vec::new();
        for f in [
            "h200-580.159.04-uprobes.ndjson",
            "vm-6.1-standin-hmm-failure.ndjson",
            "vm-6.1-hmm-535-hmm-on.ndjson",
            "h200-580.159.04-stall-sigstop.ndjson",
            "h200-580.159.04-signals.ndjson",
        ] {
            let text = std::fs::read_to_string(format!("{dir}{f}")).expect("fixture");
            v.extend(
                text.lines()
                    .map(|l| serde_json::from_str::<Value>(l).expect("fixture JSON")),
            );
        }
        v
    })
}

fn raw_pool() -> &'static Vec<(String, Vec<u8>)> {
    static RAW: OnceLock<Vec<(String, Vec<u8>)>> = OnceLock::new();
    RAW.get_or_init(|| {
        pool()
            .iter()
            .filter_map(|v| {
                let raw = nvprobe_model::decode::hex_decode(v["raw"].as_str()?)?;
                Some((v["type"].as_str()?.to_owned(), raw))
            })
            .collect()
    })
}

fn hex(b: &[u8]) -> String {
    nvprobe_model::decode::hex_encode(b)
}

/// The size of each kind's record (index = kind).
fn sizes() -> [usize; 9] {
    use std::mem::size_of;
    [
        0,
        size_of::<IoctlEvent>(),
        size_of::<PathEvent>(),
        size_of::<FdEvent>(),
        size_of::<MmapEvent>(),
        size_of::<ProcEvent>(),
        size_of::<CudaEvent>(),
        size_of::<DriverEvent>(),
        size_of::<RmControlEvent>(),
    ]
}

/// A number as JSON: small, huge, negative, fractional, or not a number.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::from),
        Just(json!(1e308)),
        Just(json!(-1)),
        Just(json!(u64::MAX)),
        ".{0,12}".prop_map(Value::from),
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number(),
        ".{0,20}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A record type name: one nvprobe writes, or not.
fn type_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select({
            // Every type the schema (so the types) has.
            let mut v: Vec<String> = nvprobe_model::render::schema::record_types()
                .iter()
                .cloned()
                .collect();
            v.sort();
            v
        }),
        "[a-z]{0,8}",
    ]
}

/// One line of input, as bytes (not always text).
fn line() -> impl Strategy<Value = Vec<u8>> {
    let n = pool().len();
    let nraw = raw_pool().len();
    prop_oneof![
        // A real record.
        (0..n).prop_map(|i| pool()[i].to_string().into_bytes()),
        // A real record cut short.
        (0..n, any::<prop::sample::Index>()).prop_map(|(i, at)| {
            let mut b = pool()[i].to_string().into_bytes();
            b.truncate(at.index(b.len() + 1));
            b
        }),
        // A real raw record with bytes changed, cut or grown.
        (
            0..nraw,
            prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..12),
            0..4usize,
            prop::collection::vec(any::<u8>(), 0..16),
            number(),
        )
            .prop_map(|(i, flips, how, extra, t)| {
                let (ty, raw) = &raw_pool()[i];
                let mut b = raw.clone();
                for (at, x) in flips {
                    let k = at.index(b.len());
                    b[k] = x;
                }
                match how {
                    1 => b.truncate(b.len() / 2),
                    2 => b.extend(extra),
                    _ => {}
                }
                json!({"type": ty, "mono_ns": t, "raw": hex(&b)})
                    .to_string()
                    .into_bytes()
            }),
        // A record of a kind (or of none) with random contents, its size
        // right or not.
        (
            0u32..10,
            prop::collection::vec(any::<u8>(), 0..600),
            any::<bool>(),
            type_name(),
        )
            .prop_map(|(kind, mut bytes, right, ty)| {
                let sizes = sizes();
                if right && (kind as usize) < sizes.len() && kind > 0 {
                    bytes.resize(sizes[kind as usize], 0);
                }
                if bytes.len() >= 4 {
                    bytes[..4].copy_from_slice(&kind.to_le_bytes());
                }
                json!({"type": ty, "raw": hex(&bytes)})
                    .to_string()
                    .into_bytes()
            }),
        // Random JSON, and a record type with random fields.
        any_json().prop_map(|v| v.to_string().into_bytes()),
        (
            type_name(),
            prop::collection::btree_map("[a-z_]{1,12}", any_json(), 0..8)
        )
            .prop_map(|(ty, m)| {
                let mut o: serde_json::Map<String, Value> = m.into_iter().collect();
                o.insert("type".into(), ty.into());
                Value::Object(o).to_string().into_bytes()
            }),
        // A real start, summary or stall record with a field replaced.
        (
            prop::sample::select(vec!["start", "summary", "stall"]),
            prop::sample::select(vec![
                "time",
                "mono_ns",
                "duration_s",
                "lost",
                "driver",
                "decode_version",
                "nodes",
                "extra_devices",
                "ringbuf_bytes",
                "after_s",
                "tid",
                "pid",
                "layouts",
            ]),
            any_json(),
        )
            .prop_map(|(ty, field, val)| {
                let mut v = pool()
                    .iter()
                    .find(|v| v["type"] == ty)
                    .cloned()
                    .unwrap_or_else(|| json!({"type": ty}));
                v[field] = val;
                v.to_string().into_bytes()
            }),
        // A start record whose clock is at the end of time.
        prop::sample::select(vec![
            "9999-12-31T23:59:59Z",
            "9000-01-01T00:00:00Z",
            "1970-01-01T00:00:00Z",
            "not a time",
        ])
        .prop_map(|t| {
            let mut v = pool()[0].clone();
            v["time"] = t.into();
            v["mono_ns"] = 0.into();
            v.to_string().into_bytes()
        }),
        // Bytes, not text.
        prop::collection::vec(any::<u8>(), 0..300),
    ]
}

/// An output that collects what is written.
#[derive(Clone, Default)]
pub(super) struct Sink(pub(super) Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What replay made of the lines, its output, and how many lines it read
/// (a random line can hold newlines).
fn replay_lines(lines: &[Vec<u8>], format: Format) -> (replay::Replayed, Vec<u8>, usize) {
    let input = lines.join(&b'\n');
    let n = input.split(|&b| b == b'\n').count();
    let sink = Sink::default();
    let out = Output::new(Box::new(sink.clone()), format, Clock::fixed(0));
    let opts = PipeOpts {
        workers: 1,
        summary_only: false,
        level: nvprobe_model::render::Level::All,
        observers: Vec::new(),
        host_facts: false,
        all_processes: false,
    };
    let r = replay::run(Cursor::new(input), "fuzz", out, None, &opts).expect("replay runs");
    let bytes = sink.0.lock().expect("sink").clone();
    (r, bytes, n)
}

/// The bound on output: a rendered record is a few KiB at most.
fn output_bound(lines: usize) -> usize {
    64 * 1024 + lines * 16 * 1024
}

/// Cases each property runs (`PROPTEST_CASES` overrides).
const CASES: u32 = 1000;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(CASES),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn decode_json_survives_any_recording(
        start in any::<bool>(),
        lines in prop::collection::vec(line(), 0..40),
    ) {
        count_panics();
        let before = PANICS.load(Ordering::SeqCst);
        let mut all = Vec::new();
        if start {
            all.push(pool()[0].to_string().into_bytes());
        }
        all.extend(lines);
        let (r, out, n) = replay_lines(&all, Format::Json);
        prop_assert_eq!(PANICS.load(Ordering::SeqCst), before, "a thread panicked");
        prop_assert!(out.len() <= output_bound(n), "{} bytes out", out.len());
        let text = std::str::from_utf8(&out).expect("output is UTF-8");
        let mut last = Value::Null;
        for l in text.lines() {
            last = serde_json::from_str::<Value>(l)
                .map_err(|e| TestCaseError::fail(format!("{e}: {l}")))?;
        }
        prop_assert_eq!(&last["type"], "summary", "the summary comes last");
        // Each line is at most one bad line (its record, if any, at most
        // one decode error).
        prop_assert!(r.bad_lines <= 2 * n as u64, "{} bad of {n}", r.bad_lines);
    }

    #[test]
    fn decode_text_survives_any_recording(
        lines in prop::collection::vec(line(), 0..40),
    ) {
        count_panics();
        let before = PANICS.load(Ordering::SeqCst);
        let mut all = vec![pool()[0].to_string().into_bytes()];
        all.extend(lines);
        let (_, out, n) = replay_lines(&all, Format::Text);
        prop_assert_eq!(PANICS.load(Ordering::SeqCst), before, "a thread panicked");
        prop_assert!(out.len() <= output_bound(n), "{} bytes out", out.len());
        let text = std::str::from_utf8(&out).expect("output is UTF-8");
        prop_assert!(text.contains("--- nvprobe summary:"));
    }
}

/// A line over the 1 MiB cap in the middle of a recording: counted as one
/// bad line, the lines around it decoded.
#[test]
fn an_over_long_line_is_one_bad_line() {
    let mut lines = vec![pool()[0].to_string().into_bytes()];
    lines.push(vec![b'['; nvprobe_model::replay::MAX_LINE + 1]);
    lines.push(pool()[1].to_string().into_bytes());
    let (r, out, _) = replay_lines(&lines, Format::Json);
    assert_eq!(r.bad_lines, 1);
    assert!(out.len() < 1 << 20);
    assert_eq!(r.summary.events.values().sum::<u64>(), 1);
}
