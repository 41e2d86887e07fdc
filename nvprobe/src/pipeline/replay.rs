//! The replay source: a `watch --json --raw` recording read line by line
//! into the same pipeline as a live run. Kernel records are decoded again
//! from their `raw` hex; stall reports, the recorded duration and losses
//! (what only the live run could know) are carried over; the correlator's
//! records are made again. Malformed lines are counted and reported, and
//! the rest of the recording is still decoded.

use std::{io::BufRead, sync::Arc};

use nvprobe_model::{
    decode::{self, Context, version::DriverVersion},
    records::{StallReport, StartRecord},
    render::{Clock, Note},
    summary::{LostSummary, Summary},
};
use serde_json::Value;

use super::{BATCH_RECORDS, Batch, Filters, PipeOpts, Pipeline};
use crate::output::Output;

/// How a replay went.
pub struct Replayed {
    pub summary: Summary,
    /// Lines that were not a record nvprobe could read.
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
        if line.trim().is_empty() {
            return Ok(());
        }
        let v: Value = match serde_json::from_str(line) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                self.complain(lineno, "not a record (a JSON object)");
                return Ok(());
            }
            Err(e) => {
                self.complain(lineno, &format!("not a JSON record: {e}"));
                return Ok(());
            }
        };
        match v["type"].as_str() {
            Some("start") => return self.start(lineno, v),
            // What only the live run could know: how long it ran, what the
            // ring buffer lost, the stall reports read from /proc.
            Some("summary") => {
                self.recorded_duration = v["duration_s"].as_f64();
                self.recorded_lost = serde_json::from_value(v["lost"].clone()).ok();
                return Ok(());
            }
            Some("stall") => return self.stall(lineno, &v),
            Some("process") => return self.process(lineno, &v),
            // A record of a newer nvprobe: its envelope, a type unknown here.
            Some(t) if !record_types().contains(t) && v["v"].as_u64().is_some() => {
                self.unknown_types += 1;
                return Ok(());
            }
            Some(t) if !record_types().contains(t) => {
                self.complain(
                    lineno,
                    &format!("not an nvprobe record: unknown type {t:?}"),
                );
                return Ok(());
            }
            Some(_) => {}
            None => {
                self.complain(lineno, "not an nvprobe record: no \"type\"");
                return Ok(());
            }
        }
        let raw = match v.get("raw") {
            Some(Value::String(s)) => s,
            Some(_) => {
                self.complain(lineno, "raw field is not a hex string");
                return Ok(());
            }
            None => {
                // Kernel events need their raw record; the correlator's
                // records are made again here.
                let kernel_event = matches!(
                    v["type"].as_str(),
                    Some(
                        "ioctl"
                            | "open"
                            | "stat"
                            | "access"
                            | "close"
                            | "dup"
                            | "mmap"
                            | "proc"
                            | "cuda"
                            | "driver"
                            | "mknod"
                    )
                );
                if kernel_event {
                    self.without_raw += 1;
                }
                return Ok(());
            }
        };
        let Some(bytes) = decode::hex_decode(raw) else {
            self.complain(lineno, "raw field is not hex");
            return Ok(());
        };
        if let Err(e) = decode::check_shape(&bytes) {
            self.complain(lineno, &e.to_string());
            return Ok(());
        }
        if !times_fit(&bytes) {
            self.complain(lineno, "the call's start and duration pass the end of time");
            return Ok(());
        }
        let t = v["mono_ns"]
            .as_u64()
            .or_else(|| decode::record_ktime(&bytes))
            .unwrap_or(0);
        if self.batch.is_none() {
            let b = self.pipe(None)?.batch();
            self.batch = Some(b);
        }
        if let Some(b) = self.batch.as_mut() {
            b.push(&bytes, t, lineno);
            if b.len() >= BATCH_RECORDS {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn start(&mut self, lineno: u64, v: Value) -> anyhow::Result<()> {
        if self.pipe.is_some() {
            eprintln!(
                "nvprobe: {}:{lineno}: a second start record (recordings joined?): decoding goes on with the first one's layouts",
                self.name
            );
            return Ok(());
        }
        // Show the recording's wall clock, not this machine's.
        if let (Some(t), Some(m)) = (v["time"].as_str(), v["mono_ns"].as_u64())
            && let Ok(wall) = humantime::parse_rfc3339(t)
            && let Ok(d) = wall.duration_since(std::time::UNIX_EPOCH)
        {
            let offset = d.as_nanos() as i128 - i128::from(m);
            // Any event time (a u64 of ns) must stay a date RFC 3339 can
            // write (up to the year 9999).
            if offset + i128::from(u64::MAX) < LAST_RFC3339_NS {
                self.clock = Some(Clock::fixed(offset));
            } else {
                self.complain(lineno, &format!("start record time {t:?} is too late"));
            }
        }
        match serde_json::from_value::<StartRecord>(v) {
            Ok(s) => {
                self.pipe(Some(&s))?;
            }
            Err(e) => self.complain(lineno, &format!("bad start record: {e}")),
        }
        Ok(())
    }

    /// A process's identity, recorded when it was first seen: to the
    /// correlator (verdicts name it) and to the output.
    fn process(&mut self, lineno: u64, v: &Value) -> anyhow::Result<()> {
        match serde_json::from_value::<nvprobe_model::attribution::ProcessInfo>(v.clone()) {
            Ok(info) => {
                self.flush()?;
                let t = v["mono_ns"].as_u64().unwrap_or(0);
                self.pipe(None)?.process(t, info)?;
            }
            Err(e) => self.complain(lineno, &format!("bad process record: {e}")),
        }
        Ok(())
    }

    fn stall(&mut self, lineno: u64, v: &Value) -> anyhow::Result<()> {
        match serde_json::from_value::<StallReport>(v.clone()) {
            Ok(r) => {
                self.flush()?;
                let t = v["mono_ns"].as_u64().unwrap_or(0);
                self.pipe(None)?.note(t, &Note::Stall(&r))?;
            }
            Err(e) => self.complain(lineno, &format!("bad stall record: {e}")),
        }
        Ok(())
    }
}

/// The longest line read (a recorded line is a few KiB): a longer one is
/// a bad line, skipped without being held in memory.
pub const MAX_LINE: usize = 1 << 20;

/// Bad lines said one by one on stderr; the rest are counted.
const BAD_LINES_SAID: u64 = 100;

/// The end of the year 9999 in ns since the epoch (RFC 3339's last).
const LAST_RFC3339_NS: i128 = 253_402_300_800 * 1_000_000_000;

/// Whether a call's start plus its duration is a time (the kernel's
/// records always are; a mangled recording's need not be).
fn times_fit(bytes: &[u8]) -> bool {
    use nvprobe_common::{
        CudaEvent, EventKind, FdEvent, Header, IoctlEvent, MmapEvent, PathEvent, RmControlEvent,
        read,
    };
    let span = match Header::peek(bytes).and_then(|h| h.event_kind()) {
        Some(EventKind::Ioctl) => read::<IoctlEvent>(bytes).map(|e| (e.start_ns, e.duration_ns)),
        Some(EventKind::RmControl) => {
            read::<RmControlEvent>(bytes).map(|e| (e.ioctl.start_ns, e.ioctl.duration_ns))
        }
        Some(EventKind::Path) => read::<PathEvent>(bytes).map(|e| (e.start_ns, e.duration_ns)),
        Some(EventKind::Fd) => read::<FdEvent>(bytes).map(|e| (e.start_ns, e.duration_ns)),
        Some(EventKind::Mmap) => read::<MmapEvent>(bytes).map(|e| (e.start_ns, e.duration_ns)),
        Some(EventKind::Cuda) => read::<CudaEvent>(bytes).map(|e| (e.start_ns, e.duration_ns)),
        _ => None,
    };
    span.is_none_or(|(s, d)| s.checked_add(d).is_some())
}

/// The record types nvprobe writes (from the schema).
fn record_types() -> &'static std::collections::HashSet<String> {
    static TYPES: std::sync::OnceLock<std::collections::HashSet<String>> =
        std::sync::OnceLock::new();
    TYPES.get_or_init(|| {
        nvprobe_model::render::schema::schema()["oneOf"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["properties"]["type"]["const"].as_str())
            .map(str::to_owned)
            .collect()
    })
}

/// One line, or how long it was when it was longer than `MAX_LINE`.
enum Line {
    Text,
    TooLong(usize),
    End,
}

/// Read up to the next newline into `buf` (without it), keeping at most
/// `MAX_LINE` bytes of it: memory stays bounded whatever the input.
fn next_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Line> {
    buf.clear();
    let mut len = 0usize;
    let mut any = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        any = true;
        let (part, done) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        len += part.len();
        if len <= MAX_LINE {
            buf.extend_from_slice(part);
        }
        let used = done.unwrap_or(chunk.len());
        r.consume(used);
        if done.is_some() {
            break;
        }
    }
    Ok(match (any, len > MAX_LINE) {
        (false, _) => Line::End,
        (true, true) => {
            buf.clear();
            Line::TooLong(len)
        }
        (true, false) => Line::Text,
    })
}

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
        let got = next_line(&mut reader, &mut line)
            .map_err(|e| anyhow::anyhow!("reading {name} at line {}: {e}", lineno + 1))?;
        lineno += 1;
        match got {
            Line::End => break,
            Line::TooLong(n) => r.complain(
                lineno,
                &format!("a line of {n} bytes, longer than {MAX_LINE}: skipped"),
            ),
            Line::Text => match std::str::from_utf8(&line) {
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
    let summary = stats.finish(
        r.recorded_duration.unwrap_or(0.0),
        r.recorded_lost.take().unwrap_or_default(),
    );
    out.note(0, &Note::Summary(&summary))?;
    if let Err(e) = out.finish() {
        return Err(match health.error() {
            Some(w) => w.into(),
            None => e.into(),
        });
    }
    Ok(Replayed {
        bad_lines: r.bad + summary.decode_errors,
        summary,
        without_raw: r.without_raw,
        unknown_types: r.unknown_types,
    })
}
