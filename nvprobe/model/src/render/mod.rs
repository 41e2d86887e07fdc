//! Rendering: human text (strace-like, with names and NV_STATUS) or NDJSON
//! in the versioned schema. Output never touches BPF maps; it gets decoded
//! events and plain records from the collector.

mod clock;
mod encode;
mod fold;
mod json;
pub mod level;
mod note;
pub mod otlp;
mod otlp_fit;
mod otlp_json;
pub mod schema;
#[cfg(test)]
mod tests_safe;
#[cfg(test)]
mod tests_text;
pub mod text;
mod wrap;

use std::io;

use bytes::BytesMut;

pub use self::{
    clock::Clock,
    encode::{Encoder, Parts},
    fold::{Flushed, OpenRun},
    level::{Level, Severity},
    note::{Note, SCHEMA_VERSION},
};
use crate::{correlate::Record, decode::Event};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    /// OTLP/JSON `LogsData`, one per line ([`otlp`]).
    OtlpJson,
}

impl Format {
    pub const NAMES: [&'static str; 3] = ["text", "json", "otlp-json"];

    /// Machine-readable (every record written, the start record too).
    pub fn structured(self) -> bool {
        self != Format::Text
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(Format::Text),
            "json" | "ndjson" => Ok(Format::Json),
            "otlp-json" | "otlp" => Ok(Format::OtlpJson),
            _ => Err(format!(
                "unknown format {s:?} (use {})",
                Format::NAMES.join(", ")
            )),
        }
    }
}

/// Renders records into bytes. Cheap to clone: each pipeline worker has
/// its own.
#[derive(Clone, Debug)]
pub struct Renderer {
    format: Format,
    enc: &'static dyn Encoder,
    parts: Parts,
}

impl Renderer {
    pub fn new(format: Format, clock: Clock) -> Self {
        let enc: &'static dyn Encoder = match format {
            Format::Text => &text::Text,
            Format::Json => &json::Json,
            Format::OtlpJson => &otlp_json::Otlp,
        };
        Self {
            format,
            enc,
            parts: Parts {
                clock,
                scratch: Vec::with_capacity(1024),
                resources: Default::default(),
                last_failed_path: None,
                run: None,
                flushed: None,
                batch_start: false,
            },
        }
    }

    /// The identities behind OTLP resources, shared by this renderer's
    /// clones.
    pub fn resources(&self) -> &otlp::Resources {
        &self.parts.resources
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether lifecycle lines are shown only for NVIDIA processes
    /// ([`Encoder::selective`]).
    pub fn selective(&self) -> bool {
        self.enc.selective()
    }

    /// Use another wall clock from now on (replays use the recording's).
    pub fn set_clock(&mut self, clock: Clock) {
        self.parts.clock = clock;
    }

    pub fn record(&mut self, buf: &mut BytesMut, mono_ns: u64, rec: &Record) -> io::Result<()> {
        self.enc.record(&mut self.parts, buf, mono_ns, rec)
    }

    pub fn event(&mut self, buf: &mut BytesMut, mono_ns: u64, ev: &Event) -> io::Result<()> {
        self.enc.event(&mut self.parts, buf, mono_ns, ev)
    }

    pub fn note(&mut self, buf: &mut BytesMut, mono_ns: u64, note: &Note<'_>) -> io::Result<()> {
        self.enc.note(&mut self.parts, buf, mono_ns, note)
    }

    /// Write what the format holds back (text's run of lookups): before a
    /// record or note of the same stream, before an event the level does
    /// not write, at the end (a live batch's last run goes to the writer
    /// unwritten instead: [`Renderer::hold_run`]).
    pub fn flush(&mut self, buf: &mut BytesMut) {
        self.enc.flush(&mut self.parts, buf);
    }

    /// After a call that wrote a held run (text's search line): where
    /// its bytes end in that call's buffer, and its first call's time and
    /// event, so that the writer files the line as that call's (its
    /// process, its kind, its level).
    pub fn take_flushed(&mut self) -> Option<Flushed> {
        self.parts.flushed.take()
    }

    /// A live batch begins (the pipeline's workers render batches apart):
    /// text may begin it with a loader's look at a directory that the
    /// batch before ended its search in ([`OpenRun`]).
    pub fn begin_batch(&mut self) {
        self.parts.batch_start = true;
    }

    /// Whether a run of lookups is held (text).
    pub fn holds_run(&self) -> bool {
        self.parts.run.is_some()
    }

    /// The run of lookups held at the end of a batch, taken out unwritten
    /// (text): the writer joins it with the run the next batch begins
    /// with, when that one goes on with the same search.
    pub fn hold_run(&mut self) -> Option<OpenRun> {
        self.parts.run.take().map(|r| OpenRun(Box::new(r)))
    }
}
