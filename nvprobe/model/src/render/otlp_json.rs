//! `--format otlp-json`: each record one OTLP/JSON `LogsData` line
//! (`otlp.rs` says what a line holds and keeps the resources).

use super::{
    encode::{Encoder, Parts},
    level::Severity,
    note::Note,
    otlp::{LogRecord, logs_data},
    text,
};
use crate::{attribution::ProcessInfo, decode::Event};
use serde_json::Value;

/// The OTLP/JSON encoder: each record one `LogsData` line.
#[derive(Debug)]
pub struct Otlp;

impl Encoder for Otlp {
    fn event(
        &self,
        p: &mut Parts,
        buf: &mut bytes::BytesMut,
        mono_ns: u64,
        ev: &Event,
    ) -> std::io::Result<()> {
        let body = text::event_line(&p.clock, mono_ns, ev);
        let pr = ev.proc();
        line(
            p,
            buf,
            (mono_ns, Severity::of_event(ev)),
            ev,
            body,
            (Some(pr.pid), Some(&pr.comm), None),
        )
    }

    fn record(
        &self,
        p: &mut Parts,
        buf: &mut bytes::BytesMut,
        mono_ns: u64,
        rec: &crate::correlate::Record,
    ) -> std::io::Result<()> {
        use crate::correlate::Record;
        let (pid, comm, process) = match rec {
            Record::Stage { pid, comm, .. } => (Some(*pid), Some(comm.as_str()), None),
            Record::Cuinit(v) => (Some(v.pid), Some(v.comm.as_str()), v.process.as_ref()),
            Record::Signal(s) => (Some(s.pid), Some(s.comm.as_str()), None),
            Record::Breakdown(b) => (Some(b.pid), Some(b.comm.as_str()), None),
            Record::FirstContext(c) => (Some(c.pid), Some(c.comm.as_str()), None),
            Record::KernelLog(k) => (k.pid, k.comm.as_deref(), None),
            Record::Fault(f) => (Some(f.pid), Some(f.comm.as_str()), None),
        };
        let body = text::record_text(rec);
        line(
            p,
            buf,
            (mono_ns, Severity::of_record(rec)),
            rec,
            body,
            (pid, comm, process),
        )
    }

    fn note(
        &self,
        p: &mut Parts,
        buf: &mut bytes::BytesMut,
        mono_ns: u64,
        note: &Note<'_>,
    ) -> std::io::Result<()> {
        use Note;
        let who = match note {
            Note::Start(s) => {
                if let Some(h) = &s.host {
                    p.resources.set_host(h);
                }
                (None, None, None)
            }
            Note::Process(info) => {
                p.resources.learn(info, mono_ns);
                (Some(info.pid), None, Some(*info))
            }
            Note::Stall(r) => (Some(r.pid), Some(r.comm.as_str()), None),
            Note::Hang(r) => (Some(r.pid), Some(r.comm.as_str()), None),
            Note::HangEnd(r) => (Some(r.pid), Some(r.comm.as_str()), None),
            _ => (None, None, None),
        };
        let body = text::note_text(&p.clock, mono_ns, note);
        line(p, buf, (mono_ns, Severity::of_note(note)), note, body, who)
    }
}

/// One OTLP/JSON `LogsData` line: the record, its text as the body, and
/// the resource of the process it is about.
fn line<T: serde::Serialize>(
    p: &mut Parts,
    buf: &mut bytes::BytesMut,
    (mono_ns, severity): (u64, Severity),
    value: &T,
    body: String,
    (pid, comm, process): (Option<u32>, Option<&str>, Option<&ProcessInfo>),
) -> std::io::Result<()> {
    use super::otlp_fit::{LINE_MAX, shrink};
    use bytes::BufMut as _;
    let to_value = || serde_json::to_value(value).map_err(std::io::Error::other);
    let mut record = Value::Null;
    let mut body = body;
    let time_unix_ns = p
        .clock
        .wall(mono_ns)
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut cut: Vec<String> = Vec::new();
    // The resource's command_args go first (process.command_line keeps
    // the first 4 KiB of them), then the record's biggest parts.
    let mut slim = false;
    // Bounded: each step halves the biggest part.
    for step in 0..64 {
        // The record as it is first (most lines fit: no copy kept), then
        // as cut so far.
        let mut rec = if step == 0 {
            to_value()?
        } else {
            record.clone()
        };
        if !cut.is_empty()
            && let Value::Object(m) = &mut rec
        {
            m.insert("truncated".into(), Value::from(cut.clone()));
        }
        let mut out = logs_data(
            &p.resources,
            LogRecord {
                time_unix_ns,
                mono_ns,
                severity,
                body: body.clone(),
                record: rec,
                pid,
                comm,
                process,
            },
        );
        if slim {
            slim_resource(&mut out);
        }
        p.scratch.clear();
        serde_json::to_writer(&mut p.scratch, &out).map_err(std::io::Error::other)?;
        if p.scratch.len() < LINE_MAX {
            break;
        }
        if step == 0 {
            record = to_value()?;
        }
        if !slim && has_command_args(&out) {
            slim = true;
            continue;
        }
        if !shrink(&mut record, &mut body, &mut cut) {
            break;
        }
    }
    buf.put_slice(&p.scratch);
    buf.put_u8(b'\n');
    Ok(())
}

fn has_command_args(out: &Value) -> bool {
    out.pointer("/resourceLogs/0/resource/attributes")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|x| x["key"] == "process.command_args"))
}

/// Leave `process.command_args` out of a line's resource.
fn slim_resource(out: &mut Value) {
    if let Some(Value::Array(attrs)) = out.pointer_mut("/resourceLogs/0/resource/attributes") {
        attrs.retain(|a| a["key"] != "process.command_args");
    }
}
