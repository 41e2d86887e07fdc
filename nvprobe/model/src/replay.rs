//! Reading a recording (`nvprobe watch --json --raw`): the one place a
//! recorded line is read. [`Line::parse`] says what a line is (a kernel
//! record to decode again, the start record, a process's identity, what
//! only the live run could know, a line that is not nvprobe's) and
//! [`read_line`] reads one with bounded memory. [`replay`] runs the model
//! over a whole recording in stream order, as `nvprobe decode` does on its
//! threads, and hands each typed event and record on: the fixture tests,
//! `diff` and `export` use it, and `decode` shares [`Line::parse`].

use std::io::BufRead;

use serde_json::Value;

use crate::{
    attribution::ProcessInfo,
    correlate::{Correlator, Obs, Record},
    decode::{self, Context, Event, version::DriverVersion},
    records::{StallReport, StartRecord},
    summary::LostSummary,
};

/// The longest line read (a recorded line is a few KiB): a longer one is
/// a bad line, skipped without being held in memory.
pub const MAX_LINE: usize = 1 << 20;

/// The end of the year 9999 in ns since the epoch (RFC 3339's last).
const LAST_RFC3339_NS: i128 = 253_402_300_800 * 1_000_000_000;

/// What one recorded line is.
#[derive(Debug)]
pub enum Line {
    /// Empty or blank.
    Blank,
    /// Not a record this nvprobe can read: why.
    Bad(String),
    /// The start record: the decoding context, and the offset of the
    /// recording's wall clock from its monotonic clock (None when the
    /// record has no usable time; `Err` says why the time was refused).
    Start {
        record: Box<StartRecord>,
        clock: Result<Option<i128>, String>,
    },
    /// A start record that does not parse.
    BadStart {
        why: String,
        clock: Result<Option<i128>, String>,
    },
    /// What only the live run could know: how long it ran, what it lost.
    Summary {
        duration_s: Option<f64>,
        lost: Option<LostSummary>,
    },
    /// A stall report or a hang's record or end (read from /proc and the
    /// kernel's per-thread slots while the call was in flight).
    Report { mono_ns: u64, report: Report },
    /// A process's identity, read while it lived.
    Process {
        mono_ns: u64,
        info: Box<ProcessInfo>,
    },
    /// A kernel-log line, read while the run lived (the record is made
    /// again from it).
    KernelLog {
        mono_ns: u64,
        line: Box<crate::correlate::faults::LogLine>,
    },
    /// A kernel record to decode again.
    Kernel { mono_ns: u64, bytes: Vec<u8> },
    /// A kernel event recorded without `--raw`: its decoded fields, read
    /// back into the event decoding made.
    Recorded { mono_ns: u64, event: Box<Event> },
    /// A start-up's verdict (`cuinit`, `first_context`) as the live run
    /// made it: shown as recorded where the recording does not hold the
    /// events it rests on (written at an `--events` level below all).
    /// It is read back only then ([`verdict_of`]).
    Verdict(Box<VerdictLine>),
    /// A record nvprobe makes again (a stage, a verdict, a note).
    Made,
    /// A record of a newer nvprobe (its envelope, a type unknown here).
    Newer,
}

/// A stall report, a hang or a hang's end read back (`t` its type).
fn report_line(t: &'static str, v: Value, mono_ns: u64) -> Line {
    let report = |report| Line::Report { mono_ns, report };
    match t {
        "stall" => typed(v, t, |r| report(Report::Stall(Box::new(r)))),
        "hang" => typed(v, t, |r| report(Report::Hang(Box::new(r)))),
        _ => typed(v, t, |r| report(Report::HangEnd(Box::new(r)))),
    }
}

/// A `cuinit` (else `first_context`) record read back; one that does not
/// read back (a newer nvprobe's diagnosis id, a field of the wrong type)
/// says why.
pub fn verdict_of(cuinit: bool, v: Value) -> Result<Record, String> {
    let (t, record) = if cuinit {
        (
            "cuinit",
            serde_json::from_value::<crate::correlate::CuInit>(v).map(|mut c| {
                // The text view names cuInit where the outcome is its own
                // (as `verdict.rs` decides): cuInit's result was seen, and
                // it failed or the start-up ended well.
                c.cuinit_seen = c.curesult.as_deref().is_some_and(|r| {
                    c.result == crate::correlate::Outcome::Ok || !r.starts_with("CUDA_SUCCESS ")
                });
                Record::Cuinit(Box::new(c))
            }),
        )
    } else {
        (
            "first_context",
            serde_json::from_value::<crate::correlate::FirstContext>(v)
                .map(|c| Record::FirstContext(Box::new(c))),
        )
    };
    record.map_err(|e| format!("a {t} record this nvprobe cannot read back ({e}): not shown"))
}

/// A verdict line as read: its time, its kind, its fields.
#[derive(Debug)]
pub struct VerdictLine {
    pub mono_ns: u64,
    /// `cuinit`, else `first_context`.
    pub cuinit: bool,
    pub value: Value,
}

/// What only the live run could read while a call was in flight.
#[derive(Debug)]
pub enum Report {
    Stall(Box<StallReport>),
    Hang(Box<crate::hang::HangReport>),
    HangEnd(Box<crate::hang::HangEnd>),
}

impl Report {
    fn item(&self) -> Item<'_> {
        match self {
            Report::Stall(r) => Item::Stall(r),
            Report::Hang(r) => Item::Hang(r),
            Report::HangEnd(r) => Item::HangEnd(r),
        }
    }
}

/// `v` as a `T`, made into a line by `make`; a record that does not
/// read as one is a bad line that says which record it was.
fn typed<T: serde::de::DeserializeOwned>(
    v: Value,
    what: &str,
    make: impl FnOnce(T) -> Line,
) -> Line {
    match serde_json::from_value::<T>(v) {
        Ok(r) => make(r),
        Err(e) => Line::Bad(format!("bad {what} record: {e}")),
    }
}

impl Line {
    /// What `line` (without its newline) is.
    pub fn parse(line: &str) -> Line {
        if line.trim().is_empty() {
            return Line::Blank;
        }
        let v: Value = match serde_json::from_str(line) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => return Line::Bad("not a record (a JSON object)".into()),
            Err(e) => return Line::Bad(format!("not a JSON record: {e}")),
        };
        let mono = v["mono_ns"].as_u64();
        match v["type"].as_str() {
            Some("start") => {
                let clock = clock_of(&v);
                return match serde_json::from_value::<StartRecord>(v) {
                    Ok(s) => Line::Start {
                        record: Box::new(s),
                        clock,
                    },
                    Err(e) => Line::BadStart {
                        why: format!("bad start record: {e}"),
                        clock,
                    },
                };
            }
            Some("summary") => {
                return Line::Summary {
                    duration_s: v["duration_s"].as_f64(),
                    lost: serde_json::from_value(v["lost"].clone()).ok(),
                };
            }
            Some(t @ ("stall" | "hang" | "hang_end")) => {
                let t: &'static str = match t {
                    "stall" => "stall",
                    "hang" => "hang",
                    _ => "hang_end",
                };
                return report_line(t, v, mono.unwrap_or(0));
            }
            Some("process") => {
                return typed(v, "process", |info| Line::Process {
                    mono_ns: mono.unwrap_or(0),
                    info: Box::new(info),
                });
            }
            Some("kernel_log") => {
                return typed(v, "kernel_log", |line| Line::KernelLog {
                    mono_ns: mono.unwrap_or(0),
                    line: Box::new(line),
                });
            }
            Some(t @ ("cuinit" | "first_context")) => {
                return Line::Verdict(Box::new(VerdictLine {
                    mono_ns: mono.unwrap_or(0),
                    cuinit: t == "cuinit",
                    value: v,
                }));
            }
            Some(t) if !crate::render::schema::record_types().contains(t) => {
                return if v["v"].as_u64().is_some() {
                    Line::Newer
                } else {
                    Line::Bad(format!("not an nvprobe record: unknown type {t:?}"))
                };
            }
            Some(_) => {}
            None => return Line::Bad("not an nvprobe record: no \"type\"".into()),
        }
        let raw = match v.get("raw") {
            Some(Value::String(s)) => s,
            Some(_) => return Line::Bad("raw field is not a hex string".into()),
            None if v["type"]
                .as_str()
                .is_some_and(|t| crate::render::schema::kernel_types().contains(t)) =>
            {
                return match decode::recorded(v) {
                    Ok(ev) => Line::Recorded {
                        mono_ns: mono.unwrap_or_else(|| ev.span().0),
                        event: Box::new(ev),
                    },
                    Err(why) => Line::Bad(why),
                };
            }
            None => return Line::Made,
        };
        let Some(bytes) = decode::hex_decode(raw) else {
            return Line::Bad("raw field is not hex".into());
        };
        if let Err(e) = decode::check_shape(&bytes) {
            return Line::Bad(e.to_string());
        }
        if !times_fit(&bytes) {
            return Line::Bad("the call's start and duration pass the end of time".into());
        }
        let mono_ns = mono.or_else(|| decode::record_ktime(&bytes)).unwrap_or(0);
        Line::Kernel { mono_ns, bytes }
    }
}

/// The recording's wall clock against its monotonic one, from the start
/// record's `time` and `mono_ns`: any event time (a u64 of ns) must stay a
/// date RFC 3339 can write (up to the year 9999).
fn clock_of(v: &Value) -> Result<Option<i128>, String> {
    let (Some(t), Some(m)) = (v["time"].as_str(), v["mono_ns"].as_u64()) else {
        return Ok(None);
    };
    let Ok(d) = humantime::parse_rfc3339(t).map(|w| w.duration_since(std::time::UNIX_EPOCH)) else {
        return Ok(None);
    };
    let Ok(d) = d else { return Ok(None) };
    let offset = d.as_nanos() as i128 - i128::from(m);
    if offset + i128::from(u64::MAX) < LAST_RFC3339_NS {
        Ok(Some(offset))
    } else {
        Err(format!("start record time {t:?} is too late"))
    }
}

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

/// One line read by [`read_line`].
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// A line is in the buffer (without its newline).
    Text,
    /// A line longer than [`MAX_LINE`], of this many bytes: skipped.
    TooLong(usize),
    End,
}

/// Read up to the next newline into `buf` (without it), keeping at most
/// [`MAX_LINE`] bytes of it: memory stays bounded whatever the input.
pub fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Read> {
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
        (false, _) => Read::End,
        (true, true) => {
            buf.clear();
            Read::TooLong(len)
        }
        (true, false) => Read::Text,
    })
}

/// What a replay hands on, in stream order, each with its time.
#[derive(Debug)]
pub enum Item<'a> {
    /// A kernel record, decoded again.
    Event(&'a Event),
    /// A record the correlator made again, right after the event that
    /// caused it (or at the end, for processes still running).
    Record(&'a Record),
    /// A process's identity, as recorded.
    Process(&'a ProcessInfo),
    /// A stall report, as recorded.
    Stall(&'a StallReport),
    /// A hang verdict and its end, as recorded.
    Hang(&'a crate::hang::HangReport),
    HangEnd(&'a crate::hang::HangEnd),
    /// The recording's start record (the first, before any other record):
    /// its wall clock against its monotonic one, when it has a usable time.
    Start(&'a StartRecord, Option<i128>),
    /// A kernel record that did not decode (its line, why).
    Undecodable(u64, &'a decode::DecodeError),
}

impl Item<'_> {
    /// The item as the NDJSON record nvprobe writes for it (its fields and
    /// the envelope's `mono_ns`): what a recording made without --raw holds.
    pub fn recorded(&self, mono_ns: u64) -> Value {
        use crate::render::Note;
        let v = match self {
            Item::Event(e) => serde_json::to_value(e),
            Item::Record(r) => serde_json::to_value(r),
            Item::Process(p) => serde_json::to_value(Note::Process(p)),
            Item::Stall(s) => serde_json::to_value(Note::Stall(s)),
            Item::Hang(h) => serde_json::to_value(Note::Hang(h)),
            Item::HangEnd(h) => serde_json::to_value(Note::HangEnd(h)),
            Item::Start(..) | Item::Undecodable(..) => return Value::Null,
        };
        match v {
            Ok(Value::Object(mut m)) => {
                m.insert("mono_ns".into(), mono_ns.into());
                Value::Object(m)
            }
            _ => Value::Null,
        }
    }
}

/// Bad lines whose reasons a replay keeps (the rest are counted).
pub const BAD_KEPT: usize = 100;

/// How a replay went.
#[derive(Debug, Default)]
pub struct Replayed {
    /// The start record the decoding used: the recording's first, when it
    /// came before any other record.
    pub start: Option<StartRecord>,
    /// Lines that were not a record nvprobe could read, or kernel records
    /// that did not decode.
    pub bad_count: u64,
    /// (line number, why) of the first [`BAD_KEPT`] of them.
    pub bad: Vec<(u64, String)>,
    /// Kernel events recorded without `--raw`, read as recorded.
    pub without_raw: u64,
    /// Records of a newer nvprobe, skipped.
    pub newer: u64,
    /// A record came before any start record: decoded with the default
    /// layouts (or `force`'s).
    pub default_layouts: bool,
    /// The line of a start record after the decoding had begun (recordings
    /// joined?): decoding went on with the first one's layouts.
    pub second_start: Option<u64>,
    /// Kernel records that did not decode (each an [`Item::Undecodable`]).
    pub undecodable: u64,
    /// What only the live run knew, from the recording's summary: how long
    /// it ran, what the ring buffer lost.
    pub duration_s: Option<f64>,
    pub lost: Option<LostSummary>,
}

impl Replayed {
    fn bad(&mut self, lineno: u64, why: String) {
        self.bad_count += 1;
        if self.bad.len() < BAD_KEPT {
            self.bad.push((lineno, why));
        }
    }
}

/// The decoding state: the context (chosen by the first record, as the
/// pipeline's replay chooses it) and the correlator.
struct Model {
    ctx: Option<Context>,
    corr: Correlator,
    force: Option<DriverVersion>,
    /// The recording was written at an `--events` level below all: its
    /// start-up verdicts are handed on as recorded, the correlator's made
    /// again from what is left are not.
    as_recorded: bool,
}

impl Model {
    /// A record beside the kernel's (an identity, a stall report, a kernel
    /// log line) given to the correlator at `mono_ns`, and what it made
    /// handed on; false once `on` said stop.
    fn observe(
        &mut self,
        obs: Obs,
        mono_ns: u64,
        last_ns: &mut u64,
        recs: &mut Vec<Record>,
        on: &mut impl FnMut(u64, Item<'_>) -> bool,
    ) -> bool {
        *last_ns = (*last_ns).max(mono_ns);
        self.corr.observe_obs(obs, recs);
        emit(mono_ns, recs, self.as_recorded, on)
    }

    /// The context, begun with `start`'s (or the default layouts when the
    /// first record is not a start record).
    fn begin(&mut self, start: Option<&StartRecord>, done: &mut Replayed) -> &Context {
        if self.ctx.is_none() {
            let c = match start {
                Some(s) => s.context(self.force),
                None => {
                    done.default_layouts = true;
                    let mut c = Context::new(decode::version::VersionCtx::from_version(self.force));
                    c.keep_raw = true;
                    c
                }
            };
            self.corr.set_host_gpus(c.host_gpus.to_vec());
            self.corr
                .set_host_driver(c.host_driver.as_deref().map(str::to_owned));
            self.ctx = Some(c);
        }
        let force = self.force;
        self.ctx
            .get_or_insert_with(|| Context::new(decode::version::VersionCtx::from_version(force)))
    }

    /// A kernel record: decoded again, then as [`Model::event`].
    fn kernel(
        &mut self,
        (mono_ns, lineno): (u64, u64),
        bytes: &[u8],
        done: &mut Replayed,
        keep: &mut impl FnMut(&mut decode::Event) -> bool,
        on: &mut impl FnMut(u64, Item<'_>) -> bool,
        last_ns: &mut u64,
    ) -> bool {
        let c = self.begin(None, done);
        match decode::decode(bytes, c) {
            Ok(ev) => self.event(mono_ns, ev, keep, on, last_ns),
            Err(e) => {
                done.undecodable += 1;
                on(mono_ns, Item::Undecodable(lineno, &e))
            }
        }
    }

    /// An event (decoded again, or read as recorded): kept or left out by
    /// `keep`, handed on with the records it makes; false once `on` said
    /// stop.
    fn event(
        &mut self,
        mono_ns: u64,
        mut ev: Event,
        keep: &mut impl FnMut(&mut decode::Event) -> bool,
        on: &mut impl FnMut(u64, Item<'_>) -> bool,
        last_ns: &mut u64,
    ) -> bool {
        if !keep(&mut ev) {
            return true;
        }
        *last_ns = (*last_ns).max(mono_ns);
        let mut going = on(mono_ns, Item::Event(&ev));
        let mut recs = Vec::new();
        self.corr.observe(&ev, &mut recs);
        going &= emit(mono_ns, &mut recs, self.as_recorded, on);
        going
    }
}

/// Run the model over a recording in stream order, as the pipeline's
/// replay does on its threads: each kernel record is decoded with the
/// context of the start record (or `force`'s driver version; the default
/// layouts when the first record is not a start record), process records
/// reach the correlator where they stand, and every event and record goes
/// to `on`. Bad lines are counted and the rest is still read; only an I/O
/// error stops it.
pub fn replay(
    r: impl BufRead,
    force: Option<DriverVersion>,
    on: impl FnMut(u64, Item<'_>),
) -> std::io::Result<Replayed> {
    replay_filtered(r, force, |_| true, on)
}

/// [`replay`] with the kernel events `keep` refuses left out (it may also
/// change them): what a recording would have been had the kernel side sent
/// less (`correlate::needs::KernelLevel`).
pub fn replay_filtered(
    r: impl BufRead,
    force: Option<DriverVersion>,
    keep: impl FnMut(&mut decode::Event) -> bool,
    mut on: impl FnMut(u64, Item<'_>),
) -> std::io::Result<Replayed> {
    replay_until(r, force, keep, |t, item| {
        on(t, item);
        true
    })
}

/// [`replay_filtered`], stopped as soon as `on` returns false (its
/// reader went away): what was read by then is counted.
pub fn replay_until(
    mut r: impl BufRead,
    force: Option<DriverVersion>,
    mut keep: impl FnMut(&mut decode::Event) -> bool,
    mut on: impl FnMut(u64, Item<'_>) -> bool,
) -> std::io::Result<Replayed> {
    let mut done = Replayed::default();
    let mut m = Model {
        ctx: None,
        corr: Correlator::default(),
        force,
        as_recorded: false,
    };
    let mut recs = Vec::new();
    let mut last_ns = 0u64;
    let mut buf = Vec::new();
    let mut lineno = 0u64;
    let mut going = true;
    while going {
        lineno += 1;
        let Some(line) = next_line(&mut r, &mut buf, lineno, &mut done)? else {
            break;
        };
        match line {
            Line::Verdict(v) if m.as_recorded => {
                going = as_recorded(*v, lineno, &mut done, &mut last_ns, &mut on);
            }
            Line::Blank | Line::Made | Line::Verdict(_) => {}
            Line::Summary { duration_s, lost } => {
                done.duration_s = duration_s;
                done.lost = lost;
            }
            Line::Bad(why) => done.bad(lineno, why),
            Line::Newer => done.newer += 1,
            Line::Recorded { mono_ns, event } => {
                done.without_raw += 1;
                m.begin(None, &mut done);
                going = m.event(mono_ns, *event, &mut keep, &mut on, &mut last_ns);
            }
            Line::Start { .. } | Line::BadStart { .. } if m.ctx.is_some() => {
                done.second_start.get_or_insert(lineno);
            }
            Line::Start { record, clock } => {
                let clock = clock.unwrap_or_else(|why| {
                    done.bad(lineno, why);
                    None
                });
                m.begin(Some(&record), &mut done);
                m.as_recorded = matches!(record.events.as_str(), "failures" | "verdicts");
                going = on(0, Item::Start(&record, clock));
                done.start = Some(*record);
            }
            Line::BadStart { why, clock } => {
                if let Err(why) = clock {
                    done.bad(lineno, why);
                }
                done.bad(lineno, why);
            }
            Line::Process { mono_ns, info } => {
                m.begin(None, &mut done);
                going = on(mono_ns, Item::Process(&info));
                let obs = Obs::identity(*info, mono_ns);
                going &= m.observe(obs, mono_ns, &mut last_ns, &mut recs, &mut on);
            }
            Line::Report { mono_ns, report } => {
                m.begin(None, &mut done);
                going = on(mono_ns, report.item());
                // What a stall report found goes into its process's verdict.
                if let Report::Stall(r) = report {
                    let obs = Obs::stall(*r, mono_ns);
                    going &= m.observe(obs, mono_ns, &mut last_ns, &mut recs, &mut on);
                }
            }
            Line::KernelLog { mono_ns, line } => {
                m.begin(None, &mut done);
                let obs = Obs::kernel_log(*line, mono_ns);
                going &= m.observe(obs, mono_ns, &mut last_ns, &mut recs, &mut on);
            }
            Line::Kernel { mono_ns, bytes } => {
                going = m.kernel(
                    (mono_ns, lineno),
                    &bytes,
                    &mut done,
                    &mut keep,
                    &mut on,
                    &mut last_ns,
                );
            }
        }
    }
    if going {
        m.corr.finish(&mut recs);
        emit(last_ns, &mut recs, m.as_recorded, &mut on);
    }
    Ok(done)
}

/// The next line, parsed (None: the input ended); one too long is
/// counted as bad and read as a blank one.
fn next_line(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    lineno: u64,
    done: &mut Replayed,
) -> std::io::Result<Option<Line>> {
    Ok(Some(match read_line(r, buf)? {
        Read::End => return Ok(None),
        Read::TooLong(n) => {
            done.bad(
                lineno,
                format!("a line of {n} bytes, longer than {MAX_LINE}: skipped"),
            );
            Line::Blank
        }
        Read::Text => match std::str::from_utf8(buf) {
            Ok(l) => Line::parse(l),
            Err(_) => Line::Bad("not UTF-8 text".into()),
        },
    }))
}

/// A start-up's verdict as the recording holds it, read back and handed
/// on at its time (one that does not read back is a bad line); false once
/// `on` said stop.
fn as_recorded(
    VerdictLine {
        mono_ns,
        cuinit,
        value,
    }: VerdictLine,
    lineno: u64,
    done: &mut Replayed,
    last_ns: &mut u64,
    on: &mut impl FnMut(u64, Item<'_>) -> bool,
) -> bool {
    match verdict_of(cuinit, value) {
        Ok(r) => {
            *last_ns = (*last_ns).max(mono_ns);
            on(mono_ns, Item::Record(&r))
        }
        Err(why) => {
            done.bad(lineno, why);
            true
        }
    }
}

/// Hand on the records made, in order (a start-up's verdicts left out
/// where the recording's are handed on as recorded); false once `on` said
/// stop.
fn emit(
    mono_ns: u64,
    recs: &mut Vec<Record>,
    as_recorded: bool,
    on: &mut impl FnMut(u64, Item<'_>) -> bool,
) -> bool {
    let mut going = true;
    for r in recs.drain(..) {
        if as_recorded && matches!(r, Record::Cuinit(_) | Record::FirstContext(_)) {
            continue;
        }
        going = going && on(mono_ns, Item::Record(&r));
    }
    going
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Junk lines are counted; only the first reasons are kept, so a
    /// hostile file cannot grow the replay's memory.
    #[test]
    fn bad_lines_are_counted_and_their_reasons_bounded() {
        let junk = "not json\n".repeat(5000);
        let done = replay(junk.as_bytes(), None, |_, _| {}).expect("read");
        assert_eq!(done.bad_count, 5000);
        assert_eq!(done.bad.len(), BAD_KEPT);
        assert_eq!(done.bad[0].0, 1);
    }

    /// A start record with a time past what RFC 3339 can write is a bad
    /// line, as `decode` counts it; a second start record is noted.
    #[test]
    fn a_late_clock_is_a_bad_line_and_a_second_start_is_noted() {
        let start = |t: &str| {
            format!(
                "{{\"v\":1,\"type\":\"start\",\"time\":\"{t}\",\"mono_ns\":0,\"tool_version\":\"x\",\"kernel\":\"k\",\"decode_version\":\"580.159.04\",\"layers\":[],\"probes\":[],\"nodes\":{{}}}}\n"
            )
        };
        let text = start("9999-12-31T23:59:59Z") + &start("2026-01-01T00:00:00Z");
        let done = replay(text.as_bytes(), None, |_, _| {}).expect("read");
        assert_eq!(done.second_start, Some(2), "{done:?}");
        assert!(
            done.bad
                .iter()
                .any(|(l, why)| *l == 1 && why.contains("too late")),
            "{done:?}"
        );
    }
}
