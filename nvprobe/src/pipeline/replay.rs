//! `decode`'s replay: the model's one reader of recordings
//! ([`nvprobe_model::replay`]: which lines are records, bad lines and
//! their bounds, the start record's layouts and clock, each kernel record
//! decoded again and the correlator's records made again) written through
//! the same writer as a live run's: levels, lifecycle lines, observers,
//! counts, the summary last.

use std::io::BufRead;

use bytes::BytesMut;
use nvprobe_model::{
    decode::version::DriverVersion,
    render::{Clock, Note, Renderer},
    replay::{self, Item},
    summary::Summary,
};

use super::{
    PipeOpts, Rendered, Rendering, Writer, flushed_steps, observe, render_event, undecodable,
};
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
    /// The `--events` level the recording was written at, where its start
    /// record says one below all: its start-up verdicts were shown as
    /// recorded.
    pub as_recorded: Option<String>,
}

/// Bad lines said one by one on stderr; the rest are counted.
const BAD_LINES_SAID: usize = 10;

/// The writer and what feeds it, between items.
struct Feed {
    w: Writer,
    /// Made once the clock is known (the start record's, when it comes
    /// first).
    r: Option<Renderer>,
    how: Rendering,
    sinks: observe::Sinks,
    /// A process that exited: its OTLP identity goes after its verdict.
    forget: Option<(u32, u64)>,
    /// The newest time of an item: the summary's, written after them all.
    last_t: u64,
}

impl Feed {
    fn renderer(&mut self) -> &mut Renderer {
        let out = &self.w.out;
        self.r.get_or_insert_with(|| out.renderer())
    }

    /// Rendered bytes and what the writer does with them, in order.
    fn hand(
        &mut self,
        bytes: BytesMut,
        steps: Vec<super::Step>,
        stats: Option<nvprobe_model::summary::Stats>,
    ) {
        self.w.write(Rendered {
            seq: 0,
            bytes: bytes.freeze(),
            stats,
            steps,
            runs: None,
        });
    }

    fn note(&mut self, t: u64, note: &Note<'_>) {
        for o in &self.w.observers {
            o.note(t, note);
        }
        let mut buf = BytesMut::new();
        if self.how.level.note(note) {
            let _ = self.renderer().note(&mut buf, t, note);
        }
        self.hand(buf, Vec::new(), None);
    }

    /// What the renderer holds back (text's run of lookups), written
    /// before anything but another event.
    fn flush_held(&mut self) {
        let Some(r) = self.r.as_mut() else { return };
        let mut buf = BytesMut::new();
        r.flush(&mut buf);
        let steps: Vec<_> = flushed_steps(r);
        if !buf.is_empty() {
            self.hand(buf, steps, None);
        }
    }

    /// One item of the model's replay; false once the output failed.
    fn item(&mut self, t: u64, item: Item<'_>) -> bool {
        self.last_t = self.last_t.max(t);
        if !matches!(item, Item::Event(_)) {
            self.flush_held();
        }
        if let Some((pid, at)) = self.forget.take()
            && !matches!(item, Item::Record(_))
        {
            self.w.out.forget_process(pid, at);
        }
        match item {
            Item::Start(_, clock) => {
                if let Some(offset) = clock
                    && self.r.is_none()
                {
                    self.w.out.set_clock(Clock::fixed(offset));
                }
            }
            Item::Event(ev) => {
                let mut buf = BytesMut::new();
                let mut stats = nvprobe_model::summary::Stats::default();
                let how = self.how;
                let r = self.r.get_or_insert_with(|| self.w.out.renderer());
                let mut step = render_event(ev, t, r, &how, &mut stats, &mut self.sinks, &mut buf);
                let mut steps: Vec<_> = flushed_steps(r);
                self.sinks.batch_done();
                // The model made its records already.
                self.forget = step.obs.take().and_then(|o| o.exited()).map(|p| (p, t));
                steps.push(step);
                self.hand(buf, steps, Some(stats));
            }
            Item::Record(rec) => {
                self.w.recs.push(rec.clone());
                self.w.emit(t);
            }
            Item::Process(p) => {
                // A format that keeps identities (OTLP's resources) learns
                // it whether or not the level writes the record; no
                // observer wants it.
                self.renderer().resources().learn(p, t);
                let mut buf = BytesMut::new();
                let note = Note::Process(p);
                if self.how.level.note(&note) {
                    let _ = self.renderer().note(&mut buf, t, &note);
                }
                self.hand(buf, Vec::new(), None);
            }
            Item::Stall(s) => self.note(t, &Note::Stall(s)),
            Item::Hang(h) => self.note(t, &Note::Hang(h)),
            Item::HangEnd(h) => self.note(t, &Note::HangEnd(h)),
            Item::Undecodable(line, e) => {
                let mut buf = BytesMut::new();
                let mut stats = nvprobe_model::summary::Stats::default();
                let r = self.r.get_or_insert_with(|| self.w.out.renderer());
                let step = undecodable(t, line, e, r, &mut stats, &mut buf);
                let mut steps: Vec<_> = flushed_steps(r);
                steps.push(step);
                self.hand(buf, steps, Some(stats));
            }
        }
        self.w.res.is_ok() && self.w.out.health().error().is_none()
    }
}

/// Decode a recording through the writer; the summary is written last.
/// A write error stops it at once ([`crate::output::WriteFailed`]).
pub fn run(
    reader: impl BufRead,
    name: &str,
    out: Output,
    version: Option<DriverVersion>,
    opts: &PipeOpts,
) -> anyhow::Result<Replayed> {
    let health = out.health();
    let mut feed = Feed {
        w: Writer::new(out, None, opts),
        r: None,
        how: Rendering {
            summary_only: opts.summary_only,
            level: opts.level,
        },
        sinks: observe::Sinks::of(&opts.observers),
        forget: None,
        last_t: 0,
    };
    let done = replay::replay_until(reader, version, |_| true, |t, item| feed.item(t, item))
        .map_err(|e| anyhow::anyhow!("reading {name}: {e}"))?;
    feed.flush_held();
    if let Some((pid, at)) = feed.forget.take() {
        feed.w.out.forget_process(pid, at);
    }
    if let Some(e) = health.error() {
        return Err(e.into());
    }
    say_bad_lines(name, &done, BAD_LINES_SAID);
    let last_t = feed.last_t;
    let (mut out, stats, res) = feed.w.finish();
    res?;
    let mut summary = stats.finish(
        done.duration_s.unwrap_or(0.0),
        done.lost.clone().unwrap_or_default(),
    );
    // What could not be decoded: the kernel records (counted as they were
    // written) and the lines that were no record at all (named on
    // stderr), the count `decode` ends with.
    summary.decode_errors += done.bad_count;
    // (At the recording's newest time: a pipeline sorting by time keeps
    // it last.)
    out.note(last_t, &Note::Summary(&summary))?;
    if let Err(e) = out.finish() {
        return Err(match health.error() {
            Some(w) => w.into(),
            None => e.into(),
        });
    }
    Ok(Replayed {
        bad_lines: summary.decode_errors,
        summary,
        without_raw: done.without_raw,
        unknown_types: done.newer,
        as_recorded: done
            .start
            .as_ref()
            .map(|s| s.events.clone())
            .filter(|l| matches!(l.as_str(), "failures" | "verdicts")),
    })
}

/// What of the recording could not be read, on stderr: the first `said`
/// bad lines by number (at most the replay's kept ones), the layouts
/// assumed, a second start record.
pub fn say_bad_lines(name: &str, done: &replay::Replayed, said: usize) {
    if done.default_layouts {
        eprintln!(
            "nvprobe: {name}: no start record before the first event; decoding with default layouts"
        );
    }
    if let Some(line) = done.second_start {
        eprintln!(
            "nvprobe: {name}:{line}: a second start record (recordings joined?): decoding goes on with the first one's layouts"
        );
    }
    let said = said.min(done.bad.len());
    for (line, why) in done.bad.iter().take(said) {
        eprintln!("nvprobe: {name}:{line}: {why}");
    }
    if done.bad_count > said as u64 {
        eprintln!("nvprobe: {name}: more than {said} bad lines: the rest are counted, not shown");
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::Write,
        sync::{Arc, Mutex},
    };

    use nvprobe_model::render::Level;
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
}
