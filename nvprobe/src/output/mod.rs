//! Rendering: human text (strace-like, with names and NV_STATUS) or NDJSON
//! in the versioned schema. Output never touches BPF maps; it gets decoded
//! events and plain records from the collector.

pub mod schema;
pub mod text;

use std::{
    io::{self, Write},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use bytes::{BufMut, BytesMut};
use serde::Serialize;

use crate::{decode::Event, summary::Summary};

/// Version of the NDJSON schema. Bump on any incompatible change; adding
/// optional fields is compatible.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// CLOCK_MONOTONIC (bpf_ktime_get_ns) to wall clock.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// realtime - monotonic, in ns, measured once at start.
    offset_ns: i128,
}

impl Clock {
    pub fn now() -> Self {
        let mono = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map(|t| t.tv_sec() as i128 * 1_000_000_000 + t.tv_nsec() as i128)
            .unwrap_or(0);
        let real = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        Self {
            offset_ns: real - mono,
        }
    }
    /// A fixed clock, for replays and tests.
    pub fn fixed(offset_ns: i128) -> Self {
        Self { offset_ns }
    }
    pub fn mono_now() -> u64 {
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
            .unwrap_or(0)
    }
    pub fn wall(&self, mono_ns: u64) -> SystemTime {
        let ns = (mono_ns as i128 + self.offset_ns).max(0) as u128;
        UNIX_EPOCH + Duration::new((ns / 1_000_000_000) as u64, (ns % 1_000_000_000) as u32)
    }
    pub fn rfc3339(&self, mono_ns: u64) -> String {
        humantime::format_rfc3339_micros(self.wall(mono_ns)).to_string()
    }
}

/// One record that is not a kernel event.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Note<'a> {
    Start(&'a serde_json::Value),
    Warning {
        id: &'a str,
        message: &'a str,
    },
    Lost {
        cpu: u32,
        kind: &'a str,
        count: u64,
        total: u64,
    },
    Summary(&'a Summary),
}

pub struct Output {
    w: Box<dyn Write + Send>,
    format: Format,
    clock: Clock,
    buf: BytesMut,
    scratch: Vec<u8>,
}

impl Output {
    pub fn new(w: Box<dyn Write + Send>, format: Format, clock: Clock) -> Self {
        Self {
            w,
            format,
            clock,
            buf: BytesMut::with_capacity(1 << 16),
            scratch: Vec::with_capacity(1024),
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Write `{"v":1,"time":…,"mono_ns":…,` + the body of `value`'s JSON
    /// object (which starts with its "type" tag).
    fn json_line<T: Serialize>(&mut self, mono_ns: u64, value: &T) -> io::Result<()> {
        self.scratch.clear();
        serde_json::to_writer(&mut self.scratch, value).map_err(io::Error::other)?;
        let time = self.clock.rfc3339(mono_ns);
        self.buf.put_slice(b"{\"v\":");
        self.buf.put_slice(SCHEMA_VERSION.to_string().as_bytes());
        self.buf.put_slice(b",\"time\":\"");
        self.buf.put_slice(time.as_bytes());
        self.buf.put_slice(b"\",\"mono_ns\":");
        self.buf.put_slice(mono_ns.to_string().as_bytes());
        // scratch is `{…}`; splice its body in.
        if self.scratch.len() > 2 {
            self.buf.put_u8(b',');
            self.buf.put_slice(&self.scratch[1..]);
        } else {
            self.buf.put_u8(b'}');
        }
        self.buf.put_u8(b'\n');
        Ok(())
    }

    pub fn event(&mut self, mono_ns: u64, ev: &Event) -> io::Result<()> {
        match self.format {
            Format::Json => self.json_line(mono_ns, ev)?,
            Format::Text => {
                let line = text::event_line(&self.clock, mono_ns, ev);
                self.buf.put_slice(line.as_bytes());
                self.buf.put_u8(b'\n');
            }
        }
        self.maybe_flush()
    }

    pub fn note(&mut self, mono_ns: u64, note: &Note<'_>) -> io::Result<()> {
        match self.format {
            Format::Json => self.json_line(mono_ns, note)?,
            Format::Text => {
                let s = text::note_text(&self.clock, mono_ns, note);
                if !s.is_empty() {
                    self.buf.put_slice(s.as_bytes());
                    if !s.ends_with('\n') {
                        self.buf.put_u8(b'\n');
                    }
                }
            }
        }
        self.maybe_flush()
    }

    fn maybe_flush(&mut self) -> io::Result<()> {
        if self.buf.len() >= 1 << 16 {
            self.flush()?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.w.write_all(&self.buf)?;
            self.buf.clear();
        }
        self.w.flush()
    }
}
