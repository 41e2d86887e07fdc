//! The replay source: a `watch --json --raw` recording read line by line
//! into the same pipeline as a live run. Kernel records are decoded again
//! from their `raw` hex; stall reports, the recorded duration and losses
//! (what only the live run could know) are carried over; the correlator's
//! records are made again. Malformed lines are counted and reported, and
//! the rest of the recording is still decoded.

use std::{io::BufRead, sync::Arc};

use nvprobe_model::{
    decode::{self, Context, version::DriverVersion},
    records::StartRecord,
    render::{Clock, Note},
    replay::{Line, Read, read_line},
    summary::{LostSummary, Summary},
};

use super::{BATCH_RECORDS, Batch, Filters, PipeOpts, Pipeline};
use crate::output::Output;

/// How a replay went.
pub struct Replayed {
    pub summary: Summary,
    /// Lines that could not be decoded: not a record nvprobe could read,
    /// or a kernel record that did not decode (the summary's
    /// `decode_errors`).
    pub bad_lines: u64,
    /// Kernel events recorded without `--raw`.
    pub without_raw: u64,
    /// nvprobe records (with the envelope's `v`) of a type this nvprobe
    /// does not know: a newer nvprobe's, skipped.
    pub unknown_types: u64,
}

/// The replay's state between lines.
struct Replay<'a> {
    name: &'a str,
    opts: &'a PipeOpts,
    version: Option<DriverVersion>,
    out: Option<Output>,
    pipe: Option<Pipeline>,
    batch: Option<Batch>,
    recorded_duration: Option<f64>,
    recorded_lost: Option<LostSummary>,
    /// The recording's wall clock, from its start record.
    clock: Option<Clock>,
    bad: u64,
    without_raw: u64,
    unknown_types: u64,
}

impl Replay<'_> {
    /// One bad line: counted, and said (the first [`BAD_LINES_SAID`]).
    fn complain(&mut self, lineno: u64, what: &str) {
        self.bad += 1;
        if self.bad <= BAD_LINES_SAID {
            eprintln!("nvprobe: {}:{lineno}: {what}", self.name);
        } else if self.bad == BAD_LINES_SAID + 1 {
            eprintln!(
                "nvprobe: {}: more than {BAD_LINES_SAID} bad lines: the rest are counted, not shown",
                self.name
            );
        }
    }

    /// The pipeline, started with the context of the recording's start
    /// record (or, lacking one, default layouts).
    fn pipe(&mut self, start: Option<&StartRecord>) -> anyhow::Result<&mut Pipeline> {
        if self.pipe.is_none() {
            let mut out = self
                .out
                .take()
                .ok_or_else(|| anyhow::anyhow!("no output"))?;
            if let Some(c) = self.clock.take() {
                out.set_clock(c);
            }
            let ctx = match start {
                Some(s) => s.context(self.version),
                None => {
                    eprintln!(
                        "nvprobe: {}: no start record before the first event; decoding with default layouts",
                        self.name
                    );
                    let mut c =
                        Context::new(decode::version::VersionCtx::from_version(self.version));
                    c.keep_raw = true;
                    c
                }
            };
            self.pipe = Some(Pipeline::start(
                out,
                Arc::new(ctx),
                Arc::new(Filters::default()),
                self.opts,
            )?);
        }
        self.pipe
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("pipeline closed"))
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        if let Some(b) = self.batch.take() {
            self.pipe(None)?.send(b)?;
        }
        Ok(())
    }

    fn line(&mut self, lineno: u64, line: &str) -> anyhow::Result<()> {
        match Line::parse(line) {
            Line::Blank | Line::Made => {}
            Line::Bad(why) => self.complain(lineno, &why),
            Line::Newer => self.unknown_types += 1,
            Line::KernelWithoutRaw => self.without_raw += 1,
            Line::Start { record, clock } => {
                self.clock_of(lineno, clock);
                self.start(lineno, Ok(&record))?;
            }
            Line::BadStart { why, clock } => {
                self.clock_of(lineno, clock);
                self.start(lineno, Err(why))?;
            }
            // What only the live run could know: how long it ran, what the
            // ring buffer lost.
            Line::Summary { duration_s, lost } => {
                self.recorded_duration = duration_s;
                self.recorded_lost = lost;
            }
            Line::Stall { mono_ns, report } => {
                self.flush()?;
                self.pipe(None)?.note(mono_ns, &Note::Stall(&report))?;
            }
            // A process's identity, recorded when it was first seen: to the
            // correlator (verdicts name it) and to the output.
            Line::Process { mono_ns, info } => {
                self.flush()?;
                self.pipe(None)?.process(mono_ns, *info)?;
            }
            // A kernel-log line: its record is made again (the Xid table
            // and the ties of this nvprobe).
            Line::KernelLog { mono_ns, line } => {
                self.flush()?;
                self.pipe(None)?.kernel_log(mono_ns, *line)?;
            }
            Line::Kernel { mono_ns, bytes } => {
                if self.batch.is_none() {
                    let b = self.pipe(None)?.batch();
                    self.batch = Some(b);
                }
                if let Some(b) = self.batch.as_mut() {
                    b.push(&bytes, mono_ns, lineno);
                    if b.len() >= BATCH_RECORDS {
                        self.flush()?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Show the recording's wall clock, not this machine's (only the first
    /// start record's).
    fn clock_of(&mut self, lineno: u64, clock: Result<Option<i128>, String>) {
        if self.pipe.is_some() {
            return;
        }
        match clock {
            Ok(Some(offset)) => self.clock = Some(Clock::fixed(offset)),
            Ok(None) => {}
            Err(why) => self.complain(lineno, &why),
        }
    }

    fn start(&mut self, lineno: u64, s: Result<&StartRecord, String>) -> anyhow::Result<()> {
        if self.pipe.is_some() {
            eprintln!(
                "nvprobe: {}:{lineno}: a second start record (recordings joined?): decoding goes on with the first one's layouts",
                self.name
            );
            return Ok(());
        }
        match s {
            Ok(s) => {
                self.pipe(Some(s))?;
            }
            Err(why) => self.complain(lineno, &why),
        }
        Ok(())
    }
}

/// Bad lines said one by one on stderr; the rest are counted.
const BAD_LINES_SAID: u64 = 10;

/// Decode a recording through the pipeline; the summary is written last.
/// A write error stops it at once ([`crate::output::WriteFailed`]).
pub fn run(
    mut reader: impl BufRead,
    name: &str,
    out: Output,
    version: Option<DriverVersion>,
    opts: &PipeOpts,
) -> anyhow::Result<Replayed> {
    let health = out.health();
    let mut r = Replay {
        name,
        opts,
        version,
        out: Some(out),
        pipe: None,
        batch: None,
        recorded_duration: None,
        recorded_lost: None,
        clock: None,
        bad: 0,
        without_raw: 0,
        unknown_types: 0,
    };
    let mut lineno = 0u64;
    let mut line = Vec::new();
    loop {
        let got = read_line(&mut reader, &mut line)
            .map_err(|e| anyhow::anyhow!("reading {name} at line {}: {e}", lineno + 1))?;
        lineno += 1;
        match got {
            Read::End => break,
            Read::TooLong(n) => r.complain(
                lineno,
                &format!(
                    "a line of {n} bytes, longer than {}: skipped",
                    nvprobe_model::replay::MAX_LINE
                ),
            ),
            Read::Text => match std::str::from_utf8(&line) {
                Ok(l) => r.line(lineno, l)?,
                Err(_) => r.complain(lineno, "not UTF-8 text"),
            },
        }
        if lineno.is_multiple_of(1024)
            && let Some(e) = health.error()
        {
            return Err(e.into());
        }
    }
    r.flush()?;
    let finished = match r.pipe.take() {
        Some(p) => p.finish(),
        None => Ok((
            r.out.take().ok_or_else(|| anyhow::anyhow!("no output"))?,
            Default::default(),
        )),
    };
    if let Some(e) = health.error() {
        return Err(e.into());
    }
    let (mut out, stats) = finished?;
    let mut summary = stats.finish(
        r.recorded_duration.unwrap_or(0.0),
        r.recorded_lost.take().unwrap_or_default(),
    );
    // What could not be decoded: the kernel records (counted by the
    // pipeline) and the lines that were no record at all (named on
    // stderr), the count `decode` ends with.
    summary.decode_errors += r.bad;
    out.note(0, &Note::Summary(&summary))?;
    if let Err(e) = out.finish() {
        return Err(match health.error() {
            Some(w) => w.into(),
            None => e.into(),
        });
    }
    Ok(Replayed {
        bad_lines: summary.decode_errors,
        summary,
        without_raw: r.without_raw,
        unknown_types: r.unknown_types,
    })
}

#[cfg(test)]
mod tests {
    use std::{
        io::Write,
        sync::{Arc, Mutex},
    };

    use nvprobe_model::{render::Level, replay::Item};
    use serde_json::Value;

    use super::*;
    use crate::output::Format;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The records the model makes (stages, verdicts, signals, breakdowns),
    /// without the envelope.
    fn made(v: &Value) -> Option<Value> {
        let t = v["type"].as_str()?;
        if !matches!(t, "stage" | "cuinit" | "signal" | "breakdown") {
            return None;
        }
        let mut m = v.as_object()?.clone();
        for k in ["v", "time", "mono_ns", "severity", "severity_number"] {
            m.remove(k);
        }
        Some(Value::Object(m))
    }

    /// Issue 23, item 8: the summary said `decode_errors: 0` after stderr
    /// had named the recording's bad lines. It counts them now, with the
    /// kernel records that do not decode: the count `decode` ends with.
    #[test]
    fn the_summary_counts_the_lines_that_could_not_be_decoded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        let mut text = b"not a record\n\xff\xfe\n".to_vec();
        text.extend(std::fs::read(dir.join("h200-580.159.04-uvm-masked.ndjson")).expect("fixture"));
        let buf = Buf::default();
        let out = Output::new(Box::new(buf.clone()), Format::Json, Clock::fixed(0));
        let opts = PipeOpts {
            workers: 1,
            summary_only: true,
            level: Level::All,
            observers: Vec::new(),
            host_facts: false,
            all_processes: false,
        };
        let r = run(&text[..], "bad", out, None, &opts).expect("replay");
        assert_eq!((r.bad_lines, r.summary.decode_errors), (2, 2));
        let written = buf.0.lock().expect("lock").clone();
        let summary = written
            .split(|&b| b == b'\n')
            .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
            .find(|v| v["type"] == "summary")
            .expect("a summary");
        assert_eq!(summary["decode_errors"], 2, "{summary}");
    }

    /// `decode`'s threaded replay and the model's sequential one (what
    /// `diff`, `export` and the fixture tests use) make the same records,
    /// in the same order, from every fixture.
    #[test]
    fn the_pipeline_and_the_model_replay_make_the_same_records() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        let mut compared = 0;
        for e in std::fs::read_dir(&dir).expect("fixtures") {
            let path = e.expect("entry").path();
            if path.extension().is_none_or(|x| x != "ndjson") {
                continue;
            }
            let text = std::fs::read(&path).expect("read");
            let buf = Buf::default();
            let out = Output::new(Box::new(buf.clone()), Format::Json, Clock::fixed(0));
            let opts = PipeOpts {
                workers: 3,
                summary_only: false,
                level: Level::All,
                observers: Vec::new(),
                host_facts: false,
                all_processes: false,
            };
            run(&text[..], "fixture", out, None, &opts).expect("replay");
            let written = buf.0.lock().expect("lock").clone();
            let piped: Vec<Value> = written
                .split(|&b| b == b'\n')
                .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
                .filter_map(|v| made(&v))
                .collect();
            let mut model = Vec::new();
            nvprobe_model::replay::replay(&text[..], None, |t, item| {
                if let Item::Record(_) = item {
                    model.extend(made(&item.recorded(t)));
                }
            })
            .expect("read");
            assert_eq!(piped, model, "{}", path.display());
            compared += piped.len();
        }
        assert!(compared > 100, "{compared} records compared");
    }
}
