//! NDJSON in the versioned schema: each record's fields after the
//! envelope (`v`, `time`, `mono_ns`, `severity`, `severity_number`).

use std::io;

use bytes::{BufMut, BytesMut};
use serde::Serialize;

use super::{
    encode::{Encoder, Parts},
    level::Severity,
    note::{Note, SCHEMA_VERSION},
};
use crate::{correlate::Record, decode::Event};

#[derive(Debug)]
pub struct Json;

impl Encoder for Json {
    fn event(&self, p: &mut Parts, buf: &mut BytesMut, mono_ns: u64, ev: &Event) -> io::Result<()> {
        line(p, buf, mono_ns, Severity::of_event(ev), ev)
    }
    fn record(
        &self,
        p: &mut Parts,
        buf: &mut BytesMut,
        mono_ns: u64,
        rec: &Record,
    ) -> io::Result<()> {
        line(p, buf, mono_ns, Severity::of_record(rec), rec)
    }
    fn note(
        &self,
        p: &mut Parts,
        buf: &mut BytesMut,
        mono_ns: u64,
        note: &Note<'_>,
    ) -> io::Result<()> {
        line(p, buf, mono_ns, Severity::of_note(note), note)
    }
}

/// Write `{"v":1,"time":…,"mono_ns":…,"severity":…,"severity_number":…,`
/// + the body of `value`'s JSON object (which starts with its "type" tag).
fn line<T: Serialize>(
    p: &mut Parts,
    buf: &mut BytesMut,
    mono_ns: u64,
    sev: Severity,
    value: &T,
) -> io::Result<()> {
    p.scratch.clear();
    serde_json::to_writer(&mut p.scratch, value).map_err(io::Error::other)?;
    let time = p.clock.rfc3339(mono_ns);
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
    if p.scratch.len() > 2 {
        buf.put_u8(b',');
        buf.put_slice(&p.scratch[1..]);
    } else {
        buf.put_u8(b'}');
    }
    buf.put_u8(b'\n');
    Ok(())
}
