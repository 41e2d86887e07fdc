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
    use bytes::BufMut as _;
    let record = serde_json::to_value(value).map_err(std::io::Error::other)?;
    let time_unix_ns = p
        .clock
        .wall(mono_ns)
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let out = logs_data(
        &p.resources,
        LogRecord {
            time_unix_ns,
            mono_ns,
            severity,
            body,
            record,
            pid,
            comm,
            process,
        },
    );
    p.scratch.clear();
    serde_json::to_writer(&mut p.scratch, &out).map_err(std::io::Error::other)?;
    buf.put_slice(&p.scratch);
    buf.put_u8(b'\n');
    Ok(())
}
