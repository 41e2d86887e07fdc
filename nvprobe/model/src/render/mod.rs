//! Rendering: human text (strace-like, with names and NV_STATUS) or NDJSON
//! in the versioned schema. Output never touches BPF maps; it gets decoded
//! events and plain records from the collector.

mod clock;
pub mod level;
mod note;
pub mod otlp;
pub mod schema;
#[cfg(test)]
mod tests_safe;
pub mod text;

use std::{io, time::UNIX_EPOCH};

use bytes::{BufMut, BytesMut};
use serde::Serialize;

pub use self::{
    clock::Clock,
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
    clock: Clock,
    scratch: Vec<u8>,
    /// Shared by the clones of one output's renderer (OTLP resources).
    resources: std::sync::Arc<otlp::Resources>,
}

impl Renderer {
    pub fn new(format: Format, clock: Clock) -> Self {
        Self {
            format,
            clock,
            scratch: Vec::with_capacity(1024),
            resources: Default::default(),
        }
    }

    /// The identities behind OTLP resources, shared by this renderer's
    /// clones.
    pub fn resources(&self) -> &otlp::Resources {
        &self.resources
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Use another wall clock from now on (replays use the recording's).
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// A record of the per-process correlator, at the time of the event
    /// that produced it.
    pub fn record(&mut self, buf: &mut BytesMut, mono_ns: u64, rec: &Record) -> io::Result<()> {
        match self.format {
            Format::Json => self.json_line(buf, mono_ns, Severity::of_record(rec), rec),
            Format::OtlpJson => {
                let (pid, comm, process) = match rec {
                    Record::Stage { pid, comm, .. } => (Some(*pid), Some(comm.as_str()), None),
                    Record::Cuinit(v) => (Some(v.pid), Some(v.comm.as_str()), v.process.as_ref()),
                    Record::Signal(s) => (Some(s.pid), Some(s.comm.as_str()), None),
                    Record::Breakdown(b) => (Some(b.pid), Some(b.comm.as_str()), None),
                    Record::FirstContext(c) => (Some(c.pid), Some(c.comm.as_str()), None),
                    Record::KernelLog(k) => (k.pid, k.comm.as_deref(), None),
                    Record::Fault(f) => (Some(f.pid), Some(f.comm.as_str()), None),
                };
                self.otlp_line(
                    buf,
                    mono_ns,
                    Severity::of_record(rec),
                    rec,
                    text::record_text(rec),
                    (pid, comm, process),
                )
            }
            Format::Text => {
                buf.put_slice(text::record_text(rec).as_bytes());
                Ok(())
            }
        }
    }

    /// Write `{"v":1,"time":…,"mono_ns":…,"severity":…,"severity_number":…,`
    /// + the body of `value`'s JSON object (which starts with its "type" tag).
    fn json_line<T: Serialize>(
        &mut self,
        buf: &mut BytesMut,
        mono_ns: u64,
        sev: Severity,
        value: &T,
    ) -> io::Result<()> {
        self.scratch.clear();
        serde_json::to_writer(&mut self.scratch, value).map_err(io::Error::other)?;
        let time = self.clock.rfc3339(mono_ns);
        use std::fmt::Write as _;
        let mut head = String::with_capacity(80);
        let _ = write!(
            head,
            "{{\"v\":{SCHEMA_VERSION},\"time\":\"{time}\",\"mono_ns\":{mono_ns},\"severity\":\"{}\",\"severity_number\":{}",
            sev.text(),
            sev.number()
        );
        buf.put_slice(head.as_bytes());
        // scratch is `{…}`; splice its body in.
        if self.scratch.len() > 2 {
            buf.put_u8(b',');
            buf.put_slice(&self.scratch[1..]);
        } else {
            buf.put_u8(b'}');
        }
        buf.put_u8(b'\n');
        Ok(())
    }

    /// One OTLP/JSON `LogsData` line: the record, its text as the body,
    /// and the resource of the process it is about.
    fn otlp_line<T: Serialize>(
        &mut self,
        buf: &mut BytesMut,
        mono_ns: u64,
        sev: Severity,
        value: &T,
        body: String,
        (pid, comm, process): (
            Option<u32>,
            Option<&str>,
            Option<&crate::attribution::ProcessInfo>,
        ),
    ) -> io::Result<()> {
        let record = serde_json::to_value(value).map_err(io::Error::other)?;
        let time_unix_ns = self
            .clock
            .wall(mono_ns)
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let line = otlp::logs_data(
            &self.resources,
            otlp::LogRecord {
                time_unix_ns,
                mono_ns,
                severity: sev,
                body,
                record,
                pid,
                comm,
                process,
            },
        );
        self.scratch.clear();
        serde_json::to_writer(&mut self.scratch, &line).map_err(io::Error::other)?;
        buf.put_slice(&self.scratch);
        buf.put_u8(b'\n');
        Ok(())
    }

    pub fn event(&mut self, buf: &mut BytesMut, mono_ns: u64, ev: &Event) -> io::Result<()> {
        match self.format {
            Format::Json => self.json_line(buf, mono_ns, Severity::of_event(ev), ev),
            Format::OtlpJson => {
                let body = text::event_line(&self.clock, mono_ns, ev);
                let p = ev.proc();
                self.otlp_line(
                    buf,
                    mono_ns,
                    Severity::of_event(ev),
                    ev,
                    body,
                    (Some(p.pid), Some(&p.comm), None),
                )
            }
            Format::Text => {
                let line = text::event_line(&self.clock, mono_ns, ev);
                buf.put_slice(line.as_bytes());
                buf.put_u8(b'\n');
                Ok(())
            }
        }
    }

    pub fn note(&mut self, buf: &mut BytesMut, mono_ns: u64, note: &Note<'_>) -> io::Result<()> {
        match self.format {
            Format::Json => self.json_line(buf, mono_ns, Severity::of_note(note), note),
            Format::OtlpJson => {
                let who = match note {
                    Note::Start(s) => {
                        if let Some(h) = &s.host {
                            self.resources.set_host(h);
                        }
                        (None, None, None)
                    }
                    Note::Process(p) => {
                        self.resources.learn(p, mono_ns);
                        (Some(p.pid), None, Some(*p))
                    }
                    Note::Stall(r) => (Some(r.pid), Some(r.comm.as_str()), None),
                    _ => (None, None, None),
                };
                let body = text::note_text(&self.clock, mono_ns, note);
                self.otlp_line(buf, mono_ns, Severity::of_note(note), note, body, who)
            }
            Format::Text => {
                let s = text::note_text(&self.clock, mono_ns, note);
                if !s.is_empty() {
                    buf.put_slice(s.as_bytes());
                    if !s.ends_with('\n') {
                        buf.put_u8(b'\n');
                    }
                }
                Ok(())
            }
        }
    }
}
