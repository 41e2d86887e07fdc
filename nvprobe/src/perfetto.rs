//! `nvprobe export --perfetto`: a recording as a Perfetto trace (the native
//! protobuf format, TrackEvent), written with the `perfetto_protos`
//! bindings of Perfetto's own .proto files.
//!
//! Tracks: one per process (its stages, signals and verdict as instants),
//! one per thread under it (driver calls as slices named by escape or UVM
//! command with control or class, the status, args and device in their
//! arguments; cuInit, from its uprobe, as the slice around its calls;
//! stalls as slices), and one per GPU, with a child track per thread that
//! called it (a GPU's calls from several threads overlap; one track per
//! thread keeps every track's slices nested).
//!
//! The input is the model's typed stream (`Exporter::item`: a recording
//! replayed by `nvprobe_model::replay`, as `nvprobe diff` reads one, with
//! or without --raw, or a live run through [`Timeline`]); packets are
//! sorted by time before they are written. `tests/scripts/perfetto-validate.py` reads the result
//! with Perfetto's own protobuf definitions.

use std::{
    collections::HashMap,
    io::{self, Write},
    sync::{Arc, Mutex},
};

use nvprobe_model::{
    correlate::Record,
    decode::{
        CudaPhase, DeviceKind, Event, ProcKind,
        args::{Arg, Args},
    },
    diff::typed,
    render::Note,
    replay::Item,
};

use perfetto_protos::{
    debug_annotation::DebugAnnotation,
    process_descriptor::ProcessDescriptor,
    thread_descriptor::ThreadDescriptor,
    trace_packet::TracePacket,
    track_descriptor::TrackDescriptor,
    track_event::{TrackEvent, track_event::Type},
};
use protobuf::{Message, MessageField};

use crate::pipeline::{EventSink, Observer};

/// Slices and instants exported at most (a longer recording is cut; the
/// counts say so).
pub const MAX_EVENTS: usize = 2_000_000;

/// The trusted packet sequence every packet is on.
const SEQUENCE: u32 = 1;

/// What the export made.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Exported {
    pub processes: usize,
    pub threads: usize,
    pub gpus: usize,
    pub slices: usize,
    pub instants: usize,
    /// Events past [`MAX_EVENTS`], not exported.
    pub cut: u64,
}

/// The Perfetto exporter a live run feeds (`watch --perfetto`), shared by
/// the decode threads and the output thread; it sorts by time at the end.
#[derive(Clone, Default)]
pub struct Timeline(pub Arc<Mutex<Exporter>>);

impl Timeline {
    /// The exporter, once the run has stopped.
    pub fn take(self) -> Exporter {
        match Arc::try_unwrap(self.0) {
            Ok(m) => m.into_inner().unwrap_or_else(|e| e.into_inner()),
            Err(shared) => std::mem::take(&mut *shared.lock().unwrap_or_else(|e| e.into_inner())),
        }
    }
    fn add(&self, mono_ns: u64, item: &Item<'_>) {
        if let Ok(mut e) = self.0.lock() {
            e.item(mono_ns, item);
        }
    }
}

/// One decode thread's events, handed over under one lock per batch.
struct TimelineSink(Timeline, Vec<(u64, Event)>);

impl EventSink for TimelineSink {
    fn event(&mut self, mono_ns: u64, ev: &Event) {
        self.1.push((mono_ns, ev.clone()));
    }
    fn batch_done(&mut self) {
        if self.1.is_empty() {
            return;
        }
        if let Ok(mut e) = (self.0).0.lock() {
            for (t, ev) in &self.1 {
                e.item(*t, &Item::Event(ev));
            }
        }
        self.1.clear();
    }
}

impl Observer for Timeline {
    fn event_sink(&self) -> Option<Box<dyn EventSink>> {
        Some(Box::new(TimelineSink(self.clone(), Vec::new())))
    }
    fn record(&self, mono_ns: u64, r: &Record) {
        self.add(mono_ns, &Item::Record(r));
    }
    fn note(&self, mono_ns: u64, n: &Note<'_>) {
        match n {
            Note::Stall(s) => self.add(mono_ns, &Item::Stall(s)),
            Note::Hang(h) => self.add(mono_ns, &Item::Hang(h)),
            Note::HangEnd(h) => self.add(mono_ns, &Item::HangEnd(h)),
            _ => {}
        }
    }
}

/// A GPU call's name, start, duration and annotations.
type GpuSliceAt = (String, u64, u64, Vec<DebugAnnotation>);

/// A call on a GPU's track, kept until [`Exporter::finish`].
struct GpuSlice {
    gpu: String,
    pid: u32,
    tid: u32,
    comm: String,
    name: String,
    start: u64,
    dur: u64,
    args: Vec<DebugAnnotation>,
}

#[derive(Default)]
pub struct Exporter {
    /// (timestamp, encoded TracePacket) of the events, sorted at the end.
    events: Vec<(u64, u64, Vec<u8>)>,
    /// Track descriptors, written first.
    tracks: Vec<Vec<u8>>,
    procs: HashMap<u32, u64>,
    threads: HashMap<(u32, u32), u64>,
    gpus: HashMap<String, u64>,
    gpu_threads: HashMap<(u64, u32), u64>,
    /// A GPU's calls, placed on its track at the end: a call names its GPU
    /// by node (/dev/nvidiaN) or by UUID (UVM_REGISTER_GPU), and only a
    /// verdict ties the two, after the calls.
    gpu_slices: Vec<GpuSlice>,
    /// UUID → node, from the verdicts' GPU lists.
    gpu_nodes: HashMap<String, String>,
    next_uuid: u64,
    seq: u64,
    pub stats: Exported,
}

fn named(name: &str) -> DebugAnnotation {
    let mut a = DebugAnnotation::new();
    a.set_name(name.to_owned());
    a
}

fn str_ann(name: &str, v: &str) -> DebugAnnotation {
    let mut a = named(name);
    a.set_string_value(v.to_owned());
    a
}

fn int_ann(name: &str, v: i64) -> DebugAnnotation {
    let mut a = named(name);
    a.set_int_value(v);
    a
}

fn bool_ann(name: &str, v: bool) -> DebugAnnotation {
    let mut a = named(name);
    a.set_bool_value(v);
    a
}

fn f64_ann(name: &str, v: f64) -> DebugAnnotation {
    let mut a = named(name);
    a.set_double_value(v);
    a
}

/// A call's arguments as `args.KEY` annotations, in their order (a key
/// given twice keeps its first place and its last value, as the JSON
/// object does).
fn arg_anns(args: &Args) -> Vec<DebugAnnotation> {
    let mut keys: Vec<(&str, &Arg)> = Vec::new();
    for (k, v) in args.iter() {
        match keys.iter_mut().find(|(x, _)| *x == k) {
            Some(slot) => slot.1 = v,
            None => keys.push((k, v)),
        }
    }
    keys.into_iter()
        .map(|(k, v)| {
            let name = format!("args.{k}");
            match v {
                Arg::Hex(_) | Arg::Str(_) | Arg::Text(_) => str_ann(&name, &v.text()),
                Arg::Int(i) => int_ann(&name, *i),
                Arg::Bool(b) => bool_ann(&name, *b),
                Arg::HexList(_) | Arg::StrList(_) => {
                    str_ann(&name, &serde_json::to_string(v).unwrap_or_default())
                }
            }
        })
        .collect()
}

impl Exporter {
    fn uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        // Away from 0 and from small numbers other writers use.
        0x6e76_0000_0000 + self.next_uuid
    }

    fn track(&mut self, td: TrackDescriptor) {
        let mut p = TracePacket::new();
        p.set_track_descriptor(td);
        p.set_trusted_packet_sequence_id(SEQUENCE);
        if let Ok(b) = p.write_to_bytes() {
            self.tracks.push(b);
        }
    }

    fn process(&mut self, pid: u32, name: &str) -> u64 {
        if let Some(u) = self.procs.get(&pid) {
            return *u;
        }
        let uuid = self.uuid();
        let mut td = TrackDescriptor::new();
        td.set_uuid(uuid);
        let mut pd = ProcessDescriptor::new();
        pd.pid = Some(pid as i32);
        pd.process_name = Some(name.to_owned());
        td.process = MessageField::some(pd);
        self.track(td);
        self.procs.insert(pid, uuid);
        self.stats.processes += 1;
        uuid
    }

    fn thread(&mut self, pid: u32, tid: u32, name: &str) -> u64 {
        if let Some(u) = self.threads.get(&(pid, tid)) {
            return *u;
        }
        let parent = self.process(pid, name);
        let uuid = self.uuid();
        let mut td = TrackDescriptor::new();
        td.set_uuid(uuid);
        td.set_parent_uuid(parent);
        let mut t = ThreadDescriptor::new();
        t.pid = Some(pid as i32);
        t.tid = Some(tid as i32);
        t.thread_name = Some(name.to_owned());
        td.thread = MessageField::some(t);
        self.track(td);
        self.threads.insert((pid, tid), uuid);
        self.stats.threads += 1;
        uuid
    }

    /// A call on `gpu` (a node or a UUID), for its track.
    fn gpu_slice(&mut self, gpu: String, (pid, tid, comm): (u32, u32, &str), s: GpuSliceAt) {
        if self.events.len() + 2 * self.gpu_slices.len() >= MAX_EVENTS {
            self.stats.cut += 2;
            return;
        }
        self.gpu_slices.push(GpuSlice {
            gpu,
            pid,
            tid,
            comm: comm.to_owned(),
            name: s.0,
            start: s.1,
            dur: s.2,
            args: s.3,
        });
    }

    /// A GPU's node and UUID, as a verdict's GPU list ties them.
    fn gpu_pair(&mut self, minor: Option<u64>, uuid: Option<&str>) {
        if let (Some(m), Some(u)) = (minor, uuid) {
            let node = format!("/dev/nvidia{m}");
            // A node already tied to another GPU is not tied again.
            if self.gpu_nodes.iter().any(|(k, n)| *n == node && k != u) {
                return;
            }
            self.gpu_nodes.entry(u.to_owned()).or_insert(node);
        }
    }

    /// The track of `gpu` for thread `tid` (under the GPU's own track).
    fn gpu_thread(&mut self, gpu: &str, pid: u32, tid: u32, comm: &str) -> u64 {
        let g = match self.gpus.get(gpu) {
            Some(u) => *u,
            None => {
                let uuid = self.uuid();
                let mut td = TrackDescriptor::new();
                td.set_uuid(uuid);
                // A node tied to its UUID is one track, named by both.
                let uuid_of = self
                    .gpu_nodes
                    .iter()
                    .filter(|(_, n)| n.as_str() == gpu)
                    .map(|(u, _)| u.as_str())
                    .min();
                td.set_name(match uuid_of {
                    Some(u) => format!("GPU {gpu} {u}"),
                    None => format!("GPU {gpu}"),
                });
                self.track(td);
                self.gpus.insert(gpu.to_owned(), uuid);
                self.stats.gpus += 1;
                uuid
            }
        };
        if let Some(u) = self.gpu_threads.get(&(g, tid)) {
            return *u;
        }
        let uuid = self.uuid();
        let mut td = TrackDescriptor::new();
        td.set_uuid(uuid);
        td.set_parent_uuid(g);
        td.set_name(format!("{comm}[{pid}/{tid}]"));
        self.track(td);
        self.gpu_threads.insert((g, tid), uuid);
        uuid
    }

    fn event(&mut self, ts: u64, te: TrackEvent) {
        if self.events.len() >= MAX_EVENTS {
            self.stats.cut += 1;
            return;
        }
        let mut p = TracePacket::new();
        p.set_timestamp(ts);
        p.set_trusted_packet_sequence_id(SEQUENCE);
        p.set_track_event(te);
        if let Ok(b) = p.write_to_bytes() {
            self.seq += 1;
            self.events.push((ts, self.seq, b));
        }
    }

    fn slice(&mut self, track: u64, name: &str, start: u64, dur: u64, args: Vec<DebugAnnotation>) {
        let mut b = TrackEvent::new();
        b.set_type(Type::TYPE_SLICE_BEGIN);
        b.set_track_uuid(track);
        b.set_name(name.to_owned());
        b.debug_annotations = args;
        self.event(start, b);
        let mut e = TrackEvent::new();
        e.set_type(Type::TYPE_SLICE_END);
        e.set_track_uuid(track);
        self.event(start.saturating_add(dur), e);
        self.stats.slices += 1;
    }

    fn instant(&mut self, track: u64, name: &str, ts: u64, args: Vec<DebugAnnotation>) {
        let mut i = TrackEvent::new();
        i.set_type(Type::TYPE_INSTANT);
        i.set_track_uuid(track);
        i.set_name(name.to_owned());
        i.debug_annotations = args;
        self.event(ts, i);
        self.stats.instants += 1;
    }

    /// One item of the replay's typed stream (a live run's events and
    /// records come the same way, through [`Timeline`]).
    pub fn item(&mut self, mono: u64, item: &Item<'_>) {
        if self.next_uuid == 0 {
            self.next_uuid = 1;
        }
        match item {
            Item::Event(ev) => self.decoded(mono, ev),
            Item::Record(r) => self.made(mono, r),
            Item::Stall(s) => {
                let track = self.thread(s.pid, s.tid, &s.comm);
                let mut a = vec![str_ann("text", &s.text), str_ann("state", &s.state)];
                a.extend(s.wchan.as_deref().map(|w| str_ann("wchan", w)));
                a.push(f64_ann("elapsed_s", s.elapsed_s));
                self.instant(track, &format!("stall: {}", s.call), mono, a);
            }
            Item::Hang(h) => {
                let track = self.thread(h.pid, h.tid, &h.comm);
                let mut a = vec![str_ann("text", &h.text), str_ann("state", &h.state)];
                a.extend(h.wchan.as_deref().map(|w| str_ann("wchan", w)));
                a.push(f64_ann("elapsed_s", h.elapsed_s));
                self.instant(track, &format!("hang: {}", h.call), mono, a);
            }
            Item::HangEnd(h) => {
                let track = self.thread(h.pid, h.tid, &h.comm);
                let a = vec![str_ann("text", &h.text), f64_ann("lasted_s", h.lasted_s)];
                self.instant(track, &format!("hang over: {}", h.call), mono, a);
            }
            Item::Process(_) | Item::Start(..) | Item::Undecodable(..) => {}
        }
    }

    fn decoded(&mut self, mono: u64, ev: &Event) {
        let p = ev.proc();
        let (pid, tid, comm) = (p.pid, p.tid, p.comm.as_str());
        match ev {
            Event::Cuda(c) => {
                // The return carries the call's start and duration.
                if c.phase != CudaPhase::Enter {
                    let track = self.thread(pid, tid, comm);
                    let mut a = Vec::new();
                    a.extend(c.result.map(|r| int_ann("result", r)));
                    a.extend(c.result_name.map(|r| str_ann("result_name", r)));
                    a.extend(c.value.map(|v| int_ann("value", v.into())));
                    a.extend(c.device.map(|v| int_ann("device", v.into())));
                    self.slice(track, c.func, c.start_ns, c.duration_ns.unwrap_or(0), a);
                }
            }
            Event::Proc(pc) => {
                let op = pc.op;
                if matches!(
                    op,
                    ProcKind::SignalDelivered | ProcKind::Exit | ProcKind::Exec | ProcKind::Fork
                ) {
                    let track = if op == ProcKind::SignalDelivered {
                        self.thread(pid, pc.target_tid.unwrap_or(tid), comm)
                    } else {
                        self.process(pid, comm)
                    };
                    let name = match op {
                        ProcKind::SignalDelivered => {
                            format!("{} delivered", pc.signal.as_deref().unwrap_or("signal"))
                        }
                        _ => op.to_string(),
                    };
                    let mut a = vec![int_ann("target_pid", pc.target_pid.into())];
                    a.extend(pc.exit.as_deref().map(|e| str_ann("exit", e)));
                    a.extend(pc.action.map(|x| str_ann("action", x.as_str())));
                    self.instant(track, &name, mono, a);
                }
            }
            _ => {
                let Some(name) = typed::call_label(ev) else {
                    return;
                };
                let (start, end) = ev.span();
                let ok = typed::ok(ev);
                let status = typed::status_name(ev)
                    .or_else(|| typed::errno(ev))
                    .unwrap_or(if ok { "ok" } else { "failed" });
                let mut a = vec![str_ann("result", status), bool_ann("ok", ok)];
                a.extend(
                    typed::device(ev)
                        .and_then(|d| d.node.as_deref())
                        .map(|n| str_ann("device", n)),
                );
                let fd = match ev {
                    Event::Ioctl(i) => Some(i.fd),
                    Event::Open(p) | Event::Stat(p) | Event::Access(p) | Event::Mknod(p) => p.fd,
                    Event::Mmap(m) => Some(m.fd),
                    _ => None,
                };
                a.extend(fd.map(|f| int_ann("fd", f.into())));
                if let Event::Ioctl(i) = ev {
                    a.extend(arg_anns(&i.args));
                }
                let track = self.thread(pid, tid, comm);
                self.slice(track, &name, start, end - start, a.clone());
                // A GPU by its minor (the node's path may be another in a
                // container), or by the UUID a call registers.
                let gpu = match typed::device(ev).filter(|d| d.kind == DeviceKind::Gpu) {
                    Some(d) => Some(format!("/dev/nvidia{}", d.minor)),
                    None => typed::gpu_uuid(ev).map(str::to_owned),
                };
                if let Some(gpu) = gpu {
                    self.gpu_slice(gpu, (pid, tid, comm), (name, start, end - start, a));
                }
            }
        }
    }

    /// A record the model made: stages, verdicts and signals as instants
    /// on the process's track.
    fn made(&mut self, mono: u64, r: &Record) {
        match r {
            Record::Stage { pid, comm, hit } => {
                let track = self.process(*pid, comm);
                let a = vec![
                    str_ann("stage", hit.stage),
                    str_ann("via", &hit.via),
                    f64_ann("at_ms", hit.at_ms),
                ];
                self.instant(track, hit.name, mono, a);
            }
            Record::Cuinit(v) => {
                for g in &v.gpus {
                    self.gpu_pair(g.minor.map(u64::from), g.uuid.as_deref());
                }
                // One node opened and one GPU registered with UVM: one GPU
                // (UVM registers only a GPU the process's RM client holds,
                // through that GPU's node).
                let mut minors = v.gpus.iter().filter_map(|g| g.minor);
                let mut uuids = v
                    .gpus
                    .iter()
                    .filter(|g| g.register_result.as_deref() == Some("NV_OK"))
                    .filter_map(|g| g.uuid.as_deref());
                if let (Some(m), None, Some(u), None) =
                    (minors.next(), minors.next(), uuids.next(), uuids.next())
                {
                    self.gpu_pair(Some(u64::from(m)), Some(u));
                }
                let track = self.process(v.pid, &v.comm);
                let mut a = vec![str_ann("text", &v.text), str_ann("class", v.class.as_str())];
                a.extend(v.curesult.as_deref().map(|c| str_ann("curesult", c)));
                a.push(f64_ann("total_ms", v.total_ms));
                self.instant(track, &format!("cuInit {}", v.result), mono, a);
            }
            Record::Signal(s) => {
                let track = self.process(s.pid, &s.comm);
                let mut a = vec![
                    str_ann("text", &s.text),
                    str_ann("in_flight", &s.in_flight),
                    str_ann("outcome", s.outcome.as_str()),
                ];
                a.extend(s.stage.as_deref().map(|x| str_ann("stage", x)));
                self.instant(track, &format!("{} from {}", s.signal, s.sender), mono, a);
            }
            Record::FirstContext(c) => {
                let track = self.process(c.pid, &c.comm);
                let a = vec![
                    str_ann("text", &c.text),
                    str_ann("result", &c.context.result),
                ];
                let name = if c.ok {
                    "first context made"
                } else {
                    "first context failed"
                };
                self.instant(track, name, mono, a);
            }
            Record::Fault(f) => {
                let track = self.process(f.pid, &f.comm);
                let a = vec![
                    str_ann("text", &f.text),
                    str_ann("class", f.class.as_str()),
                    str_ann("hint", &f.hint),
                ];
                self.instant(track, "fault", mono, a);
            }
            Record::KernelLog(k) => {
                if let (Some(pid), Some(comm)) = (k.pid, &k.comm) {
                    let track = self.process(pid, comm);
                    let a = vec![str_ann("message", &k.line.message)];
                    let name = k
                        .xid
                        .as_ref()
                        .map_or_else(|| "kernel log".to_owned(), |x| format!("Xid {}", x.number));
                    self.instant(track, &name, mono, a);
                }
            }
            Record::Breakdown(_) => {}
        }
    }

    /// Write the trace: the track descriptors, then every event in time
    /// order (an END before a BEGIN at the same time, so that back-to-back
    /// calls do not nest).
    pub fn finish(mut self, w: &mut impl Write) -> io::Result<Exported> {
        for s in std::mem::take(&mut self.gpu_slices) {
            let gpu = self.gpu_nodes.get(&s.gpu).cloned().unwrap_or(s.gpu);
            let g = self.gpu_thread(&gpu, s.pid, s.tid, &s.comm);
            self.slice(g, &s.name, s.start, s.dur, s.args);
        }
        self.events.sort_by_key(|(ts, seq, _)| (*ts, *seq));
        let field = |w: &mut dyn Write, b: &[u8]| -> io::Result<()> {
            // Trace.packet = 1, length-delimited.
            let mut head = vec![0x0a];
            let mut n = b.len() as u64;
            loop {
                let byte = (n & 0x7f) as u8;
                n >>= 7;
                if n == 0 {
                    head.push(byte);
                    break;
                }
                head.push(byte | 0x80);
            }
            w.write_all(&head)?;
            w.write_all(b)
        };
        for t in &self.tracks {
            field(w, t)?;
        }
        for (_, _, b) in &self.events {
            field(w, b)?;
        }
        w.flush()?;
        Ok(self.stats)
    }
}
