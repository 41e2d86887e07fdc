//! One pipeline behind `watch` and `decode`: raw kernel records in batches
//! → decode and render on worker threads → one thread that writes in
//! order, counts, and follows each process's start-up (the correlator's
//! records follow the event that produced them). Two sources feed it:
//! [`live`] (the ring buffer, lost counters, stall checks) and [`replay`]
//! (a `watch --json --raw` recording), so the two cannot differ.

mod end;
#[cfg(test)]
mod fuzz;
mod handles;
mod hangs;
mod inflight;
pub mod kmsg;
mod lifelines;
pub mod live;
mod lost;
pub mod observe;
mod opts;
mod peers;
mod pipe_opts;
pub mod replay;
mod ring;
mod runs;
#[cfg(test)]
mod runs_tests;
mod seen;
mod unsent;

use std::{
    collections::{BTreeMap, HashSet},
    io,
    sync::{
        Arc, Mutex,
        mpsc::{Receiver, SyncSender, sync_channel},
    },
};

use anyhow::Context as _;
use bytes::BytesMut;
use nvprobe_model::{
    correlate::{Correlator, DiagId, Obs, Record, StageBoard},
    decode::{self, Context},
    render::{Level, Note, Renderer},
    summary::Stats,
};

pub use self::observe::{EventSink, Flight, LiveCounts, Observer, Observers};
pub use self::pipe_opts::PipeOpts;
use crate::output::Output;

/// Records per batch handed to a worker.
pub const BATCH_RECORDS: usize = 512;

/// The kernel keeps a task's name (comm) in 16 bytes, NUL included.
pub const COMM_BYTES: usize = 15;

/// `--comm` names: processes whose events are kept.
#[derive(Default)]
pub struct Filters {
    /// Each name as the kernel keeps it (its first 15 bytes), written as
    /// decoded events write a comm.
    comms: HashSet<String>,
}

impl Filters {
    /// Match each name the way the kernel stores it: its first 15 bytes
    /// (`nvidia-persistenced` is `nvidia-persiste` in the kernel).
    pub fn by_comm<'a>(names: impl IntoIterator<Item = &'a String>) -> Self {
        Self {
            comms: names.into_iter().map(|n| Self::kernel_comm(n)).collect(),
        }
    }

    /// A name as events show the kernel's comm of a process named so.
    pub fn kernel_comm(name: &str) -> String {
        let b = name.as_bytes();
        decode::escape_bytes(&b[..b.len().min(COMM_BYTES)])
    }

    /// Whether a process of this (kernel) comm is kept.
    pub fn keep_comm(&self, comm: &str) -> bool {
        self.comms.is_empty() || self.comms.contains(comm)
    }

    fn keep(&self, ev: &decode::Event) -> bool {
        self.comms.is_empty() || self.comms.contains(&ev.proc().comm)
    }
}

/// Raw records framed as `[u32 len][u64 mono_ns][u64 origin][bytes]…`;
/// `origin` is the recording's line number (0 when live).
pub struct Batch {
    seq: u64,
    data: Vec<u8>,
    count: usize,
}

impl Batch {
    fn new(seq: u64) -> Self {
        Self {
            seq,
            data: Vec::with_capacity(BATCH_RECORDS * 256),
            count: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn push(&mut self, rec: &[u8], mono_ns: u64, origin: u64) {
        self.data
            .extend_from_slice(&(rec.len() as u32).to_le_bytes());
        self.data.extend_from_slice(&mono_ns.to_le_bytes());
        self.data.extend_from_slice(&origin.to_le_bytes());
        self.data.extend_from_slice(rec);
        self.count += 1;
    }

    fn records(&self) -> impl Iterator<Item = (u64, u64, &[u8])> {
        let mut rest = &self.data[..];
        std::iter::from_fn(move || {
            let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
            let t = u64::from_le_bytes(rest.get(4..12)?.try_into().ok()?);
            let origin = u64::from_le_bytes(rest.get(12..20)?.try_into().ok()?);
            let rec = rest.get(20..20 + len)?;
            rest = &rest[20 + len..];
            Some((t, origin, rec))
        })
    }
}

/// One event as the writer needs it: where its rendered bytes end, its
/// time, and what the correlator keeps of it.
struct Step {
    end: usize,
    mono_ns: u64,
    obs: Option<Obs>,
    life: lifelines::Step,
}

/// A worker's output (or a note), written in `seq` order.
struct Rendered {
    seq: u64,
    bytes: bytes::Bytes,
    stats: Option<Stats>,
    steps: Vec<Step>,
    /// A batch's search lines that may go on in the next (`runs`); None
    /// for another item.
    runs: Option<runs::Runs>,
}

fn render_batch(
    b: &Batch,
    ctx: &Context,
    filters: &Filters,
    r: &mut Renderer,
    how: &Rendering,
    sinks: &mut observe::Sinks,
) -> Rendered {
    let mut stats = Stats::default();
    let mut buf = BytesMut::with_capacity(if how.summary_only { 0 } else { b.count * 480 });
    let mut steps = Vec::with_capacity(b.count);
    let mut runs = runs::Runs::default();
    // Whether the first kept event began a run (known after it).
    let mut leads = None;
    r.begin_batch();
    for (t, origin, rec) in b.records() {
        let s = match decode::decode(rec, ctx) {
            Ok(ev) if filters.keep(&ev) => {
                render_event(&ev, t, r, how, &mut stats, sinks, &mut buf)
            }
            Ok(_) => continue,
            Err(e) => undecodable(t, origin, &e, r, &mut stats, &mut buf),
        };
        flushed_step(r, &mut steps, &mut runs, leads == Some(true));
        leads.get_or_insert(r.holds_run());
        steps.push(s);
    }
    // The run the batch ends in goes to the writer unwritten: the next
    // batch, rendered by another worker, may go on with it.
    runs.open = r.hold_run();
    runs.open_leads = leads == Some(true) && runs.lead.is_none();
    sinks.batch_done();
    Rendered {
        seq: b.seq,
        bytes: buf.freeze(),
        stats: Some(stats),
        steps,
        runs: Some(runs),
    }
}

/// One decoded event: counted, shown to the sinks, rendered into `buf`
/// when `--events` ships it; its step.
fn render_event(
    ev: &decode::Event,
    t: u64,
    r: &mut Renderer,
    how: &Rendering,
    stats: &mut Stats,
    sinks: &mut observe::Sinks,
    buf: &mut BytesMut,
) -> Step {
    sinks.event(t, ev);
    if matches!(ev, decode::Event::Proc(_)) {
        // Not an event of the table; an exit ends a process.
        stats.process(ev, t);
    } else {
        stats.record(ev, t);
    }
    if !how.summary_only {
        if how.level.event(ev) {
            // Rendering into memory cannot fail.
            let _ = r.event(buf, t, ev);
        } else {
            // What this event makes (its records) comes after the run of
            // lookups text holds back.
            r.flush(buf);
        }
    }
    Step {
        end: buf.len(),
        mono_ns: t,
        obs: Obs::of(ev),
        life: lifelines::Step::of(ev),
    }
}

/// The step of a run of lookups the renderer has just written (text folds
/// a search into one line, held until the run ends): filed as its first
/// call's, so the writer's filters treat the line as that call's. The run
/// the batch began with (`leads`) is the batch's lead.
fn flushed_step(r: &mut Renderer, steps: &mut Vec<Step>, runs: &mut runs::Runs, leads: bool) {
    let Some(f) = r.take_flushed() else { return };
    if let Some(run) = f.lead.filter(|_| leads && runs.lead.is_none()) {
        runs.lead = Some((steps.len(), run));
    }
    steps.push(Step {
        end: f.end,
        mono_ns: f.mono_ns,
        obs: None,
        life: lifelines::Step::of(&f.first),
    });
}

/// [`flushed_step`] where one renderer renders every event in order (the
/// replay's): no run goes on in another batch.
fn flushed_steps(r: &mut Renderer) -> Vec<Step> {
    let mut steps = Vec::new();
    flushed_step(r, &mut steps, &mut runs::Runs::default(), false);
    steps
}

/// A kernel record that did not decode (`origin`: its recording's line,
/// 0 when live): counted, and said in-band.
fn undecodable(
    t: u64,
    origin: u64,
    e: &decode::DecodeError,
    r: &mut Renderer,
    stats: &mut Stats,
    buf: &mut BytesMut,
) -> Step {
    stats.decode_error();
    let at = if origin > 0 {
        format!(" (line {origin})")
    } else {
        String::new()
    };
    let _ = r.note(
        buf,
        t,
        &Note::Warning {
            id: "undecodable_record",
            message: &format!("a kernel record could not be decoded{at}: {e}"),
        },
    );
    Step {
        end: buf.len(),
        mono_ns: t,
        obs: None,
        life: lifelines::Step::Other,
    }
}

/// The writer thread's state: output, counts, the correlator (none when
/// the records come made, from the model's replay).
struct Writer {
    out: Output,
    stats: Stats,
    corr: Option<Correlator>,
    summary_only: bool,
    level: Level,
    observers: Observers,
    host_facts: bool,
    hmm: Option<crate::host::HmmFacts>,
    recs: Vec<Record>,
    last_ns: u64,
    res: io::Result<()>,
    /// Text's choice of lifecycle lines (None: every line is written).
    lines: Option<lifelines::LifeLines>,
    /// Text: a line another record already wrote is left out, whatever
    /// `--all-processes` says (JSON keeps every record).
    text: bool,
    /// Each thread's last failed NVIDIA ioctl, whose call_failed record
    /// repeats it (at most 4096 threads).
    echoes: std::collections::HashMap<u32, lifelines::Echo>,
    /// Text: the search the last batch ended in, not written yet (`runs`).
    open: Option<nvprobe_model::render::OpenRun>,
}

type Finished = (Output, Stats, io::Result<()>);

impl Writer {
    fn new(out: Output, corr: Option<Correlator>, opts: &PipeOpts) -> Self {
        // Text leaves out the lifecycle lines of processes that made no
        // NVIDIA call ([`lifelines`]).
        let text = out.selective();
        let lines =
            (text && !opts.summary_only && !opts.all_processes).then(lifelines::LifeLines::default);
        Writer {
            out,
            stats: Stats::default(),
            corr,
            summary_only: opts.summary_only,
            level: opts.level,
            observers: opts.observers.clone(),
            host_facts: opts.host_facts,
            hmm: None,
            recs: Vec::new(),
            last_ns: 0,
            res: Ok(()),
            lines,
            text,
            echoes: std::collections::HashMap::new(),
            open: None,
        }
    }

    fn emit(&mut self, mono_ns: u64) {
        if !self.recs.is_empty()
            && let Some(run) = self.open.take()
        {
            // The search came before what its process's records say.
            self.put_run(run);
        }
        for mut r in std::mem::take(&mut self.recs) {
            if self.host_facts {
                refine_for_host(&mut r, &mut self.hmm);
            }
            for o in &self.observers {
                o.record(mono_ns, &r);
            }
            if self.res.is_ok()
                // (A start-up's verdicts: the first context that came
                // after the verdict is the start-up's end too.)
                && (!self.summary_only || matches!(r, Record::Cuinit(_) | Record::FirstContext(_)))
                && self.level.record(&r)
            {
                self.res = self.out.record(mono_ns, &r);
            }
        }
    }

    fn write(&mut self, mut item: Rendered) {
        if let Some(s) = item.stats {
            self.stats.merge(s);
        }
        let batch = item.runs.is_some();
        let m = runs::meet(
            self.open.take(),
            item.runs.as_mut(),
            !item.bytes.is_empty(),
            item.steps.first().map(|s| s.mono_ns),
        );
        if let Some(run) = m.first {
            self.put_run(run);
        }
        // A batch's own open run comes after its steps.
        let (during, after) = if batch {
            (None, m.hold)
        } else {
            (m.hold, None)
        };
        self.open = during;
        let mut replaces = m.replaces;
        let mut from = 0;
        for (i, step) in item.steps.into_iter().enumerate() {
            match replaces.take_if(|(at, _)| *at == i) {
                // The search the batch before ended in, gone on with here.
                Some((_, run)) => self.put_run(run),
                None => self.put(step.life, item.bytes.slice(from..step.end)),
            }
            from = step.end;
            self.last_ns = self.last_ns.max(step.mono_ns);
            if let Some(o) = step.obs {
                let exited = o.exited();
                if let Some(c) = self.corr.as_mut() {
                    c.observe_obs(o, &mut self.recs);
                }
                self.emit(step.mono_ns);
                if let Some(pid) = exited {
                    self.out.forget_process(pid, step.mono_ns);
                }
            }
        }
        if self.res.is_ok() && item.bytes.len() > from {
            self.res = self.out.rendered(item.bytes.slice(from..));
        }
        if after.is_some() {
            self.open = after;
        }
        // The correlator's records wait in the output's buffer: hand them
        // to the writer now, so a verdict is written when its process ends,
        // not with the next burst of events (or at the stop).
        if self.res.is_ok() {
            self.res = self.out.flush();
        }
    }

    /// A search's line (text), filed as its first call's.
    fn put_run(&mut self, run: nvprobe_model::render::OpenRun) {
        let (line, mono_ns, first) = run.into_line();
        self.last_ns = self.last_ns.max(mono_ns);
        self.put(lifelines::Step::of(&first), bytes::Bytes::from(line));
    }

    /// One step's rendered bytes, unless text leaves its line out.
    fn put(&mut self, step: lifelines::Step, line: bytes::Bytes) {
        let write = |out: &mut Output, res: &mut io::Result<()>, b: bytes::Bytes| {
            if res.is_ok() && !b.is_empty() {
                *res = out.rendered(b);
            }
        };
        // Text at `--events verdicts`: a start-up's failed calls are its
        // verdict's evidence (`failed_syscalls`, the rule that names one),
        // not lines of their own (JSON keeps the records).
        let evidence_only = self.text && self.level == Level::Verdicts;
        let step = match step {
            lifelines::Step::IoctlFailed(..)
            | lifelines::Step::Life(lifelines::Life::Failed(_))
            | lifelines::Step::Lookup(_)
                if evidence_only =>
            {
                return;
            }
            lifelines::Step::Lookup(pid) => lifelines::Step::Call(pid),
            lifelines::Step::FailedIoctl(pid, e) => {
                if self.echoes.len() >= 4096 {
                    self.echoes.clear();
                }
                self.echoes.insert(e.0, e);
                lifelines::Step::Call(pid)
            }
            // The kernel's exit programs run the ioctl's own first, so its
            // record comes before the call_failed one.
            lifelines::Step::IoctlFailed(_, e) if self.echoes.get(&e.0) == Some(&e) => {
                self.echoes.remove(&e.0);
                lifelines::Step::Repeat
            }
            lifelines::Step::IoctlFailed(pid, _) => {
                lifelines::Step::Life(lifelines::Life::Failed(pid))
            }
            s => s,
        };
        match (self.lines.as_mut(), step) {
            (Some(f), lifelines::Step::Call(pid)) => {
                for held in f.call(pid) {
                    write(&mut self.out, &mut self.res, held);
                }
                write(&mut self.out, &mut self.res, line);
            }
            (Some(f), lifelines::Step::Life(l)) => {
                if let Some(b) = f.life(l, line) {
                    write(&mut self.out, &mut self.res, b);
                }
            }
            (_, lifelines::Step::Repeat) if self.text => {}
            _ => write(&mut self.out, &mut self.res, line),
        }
    }

    /// Verdicts for the processes still running, then hand everything back.
    fn finish(mut self) -> Finished {
        if let Some(run) = self.open.take() {
            self.put_run(run);
        }
        if let Some(c) = self.corr.as_mut() {
            c.finish(&mut self.recs);
        }
        self.emit(self.last_ns);
        if let Some(f) = self.lines.as_mut() {
            f.finish();
            self.stats.left_out(f.lines, f.processes);
        }
        (self.out, self.stats, self.res)
    }
}

/// Write rendered chunks in sequence order.
fn order_and_write(rx: Receiver<Rendered>, mut w: Writer) -> Finished {
    let mut next = 0u64;
    let mut pending: BTreeMap<u64, Rendered> = BTreeMap::new();
    for item in rx {
        pending.insert(item.seq, item);
        while let Some(item) = pending.remove(&next) {
            next += 1;
            w.write(item);
        }
    }
    w.finish()
}

/// A live verdict's UVM diagnoses made specific to this host (HMM facts are
/// read once, the first time one is needed).
fn refine_for_host(r: &mut Record, hmm: &mut Option<crate::host::HmmFacts>) {
    if let Record::Cuinit(v) = r
        && v.diagnoses
            .iter()
            .any(|d| matches!(d.id, DiagId::UvmStepFailed | DiagId::UvmBusyRetry))
    {
        let f = hmm.get_or_insert_with(|| crate::host::hmm_facts(std::path::Path::new("/")));
        nvprobe_model::correlate::apply_hmm_facts(&mut v.diagnoses, f);
    }
}

/// The threads behind a source.
pub struct Pipeline {
    /// The last stage of each process, for stall reports.
    pub board: StageBoard,
    seq: u64,
    work_tx: Option<SyncSender<Batch>>,
    done_tx: Option<SyncSender<Rendered>>,
    workers: Vec<std::thread::JoinHandle<()>>,
    writer: Option<std::thread::JoinHandle<Finished>>,
    notes: Renderer,
    level: Level,
    observers: Observers,
}

impl Pipeline {
    pub fn start(
        out: Output,
        ctx: Arc<Context>,
        filters: Arc<Filters>,
        opts: &PipeOpts,
    ) -> anyhow::Result<Self> {
        let notes = out.renderer();
        // Short queues: what is queued must still be written after a stop,
        // and under a flood to a slow disk every queue is full. The ring
        // buffer is the buffer; these only smooth.
        let (work_tx, work_rx) = sync_channel::<Batch>(16);
        let work_rx = Arc::new(Mutex::new(work_rx));
        let (done_tx, done_rx) = sync_channel::<Rendered>(32);
        let board = StageBoard::default();
        let mut corr = Correlator::with_board(board.clone());
        corr.set_host_gpus(ctx.host_gpus.clone());
        corr.set_host_driver(ctx.host_driver.clone());
        let w = Writer::new(out, Some(corr), opts);
        let writer = std::thread::Builder::new()
            .name("nvprobe-output".into())
            .spawn(move || order_and_write(done_rx, w))
            .context("starting the output thread")?;
        let mut handles = Vec::new();
        for i in 0..opts.workers.max(1) {
            let (rx, tx) = (work_rx.clone(), done_tx.clone());
            let (ctx, filters, r) = (ctx.clone(), filters.clone(), notes.clone());
            let how = Rendering {
                summary_only: opts.summary_only,
                level: opts.level,
            };
            let sinks = observe::Sinks::of(&opts.observers);
            handles.push(
                std::thread::Builder::new()
                    .name(format!("nvprobe-decode-{i}"))
                    .spawn(move || worker(&rx, &tx, &ctx, &filters, r, how, sinks))
                    .context("starting a decode thread")?,
            );
        }
        Ok(Self {
            board,
            seq: 0,
            work_tx: Some(work_tx),
            done_tx: Some(done_tx),
            workers: handles,
            writer: Some(writer),
            notes,
            level: opts.level,
            observers: opts.observers.clone(),
        })
    }

    /// An empty batch; it is numbered when it is sent, to be written after
    /// what was sent (or noted) before it.
    pub fn batch(&mut self) -> Batch {
        Batch::new(0)
    }

    pub fn send(&mut self, mut b: Batch) -> anyhow::Result<()> {
        b.seq = self.seq;
        self.seq += 1;
        self.work_tx
            .as_ref()
            .context("pipeline closed")?
            .send(b)
            .map_err(|_| anyhow::anyhow!("the decode threads stopped"))
    }

    /// Send without waiting: the batch comes back when the decode threads
    /// have no room for it.
    pub fn try_send(&mut self, mut b: Batch) -> anyhow::Result<Option<Batch>> {
        b.seq = self.seq;
        match self
            .work_tx
            .as_ref()
            .context("pipeline closed")?
            .try_send(b)
        {
            Ok(()) => {
                self.seq += 1;
                Ok(None)
            }
            Err(std::sync::mpsc::TrySendError::Full(b)) => Ok(Some(b)),
            Err(std::sync::mpsc::TrySendError::Disconnected(_)) => {
                Err(anyhow::anyhow!("the decode threads stopped"))
            }
        }
    }

    /// A record that is not a kernel event, in order after the batches
    /// sent before it.
    pub fn note(&mut self, mono_ns: u64, note: &Note<'_>) -> anyhow::Result<()> {
        for o in &self.observers {
            o.note(mono_ns, note);
        }
        let mut buf = BytesMut::new();
        if self.level.note(note) {
            self.notes.note(&mut buf, mono_ns, note)?;
        }
        // A stall goes to the correlator too (what the thread was doing
        // goes into its verdict), in order with the batches around it.
        let steps = match note {
            Note::Stall(r) => vec![Step {
                end: buf.len(),
                mono_ns,
                obs: Some(Obs::stall((*r).clone(), mono_ns)),
                life: lifelines::Step::Other,
            }],
            _ => Vec::new(),
        };
        let item = Rendered {
            seq: self.seq,
            bytes: buf.freeze(),
            stats: None,
            steps,
            runs: None,
        };
        self.hand(item)
    }

    /// A process's identity: written as a `process` record and given to
    /// the correlator, in order with the batches around it.
    pub fn process(
        &mut self,
        mono_ns: u64,
        info: nvprobe_model::attribution::ProcessInfo,
    ) -> anyhow::Result<()> {
        // A format that keeps identities (OTLP's resources) learns it
        // whether or not the level writes the record itself.
        self.notes.resources().learn(&info, mono_ns);
        let mut buf = BytesMut::new();
        let note = Note::Process(&info);
        if self.level.note(&note) {
            self.notes.note(&mut buf, mono_ns, &note)?;
        }
        let item = Rendered {
            seq: self.seq,
            steps: vec![Step {
                end: buf.len(),
                mono_ns,
                obs: Some(Obs::identity(info, mono_ns)),
                life: lifelines::Step::Other,
            }],
            bytes: buf.freeze(),
            stats: None,
            runs: None,
        };
        self.hand(item)
    }

    /// A kernel-log line (read from /dev/kmsg, or a recording's): the
    /// correlator makes its `kernel_log` record, in order with the
    /// batches around it.
    pub fn kernel_log(
        &mut self,
        mono_ns: u64,
        line: nvprobe_model::correlate::faults::LogLine,
    ) -> anyhow::Result<()> {
        let item = Rendered {
            seq: self.seq,
            steps: vec![Step {
                end: 0,
                mono_ns,
                obs: Some(Obs::kernel_log(line, mono_ns)),
                life: lifelines::Step::Other,
            }],
            bytes: bytes::Bytes::new(),
            stats: None,
            runs: None,
        };
        self.hand(item)
    }

    /// The collector's clock, in order with the batches: a start-up whose
    /// wait for a first context ran out gets its verdict without another
    /// event.
    pub fn tick(&mut self, mono_ns: u64) -> anyhow::Result<()> {
        let item = Rendered {
            seq: self.seq,
            steps: vec![Step {
                end: 0,
                mono_ns,
                obs: Some(Obs::tick(mono_ns)),
                life: lifelines::Step::Other,
            }],
            bytes: bytes::Bytes::new(),
            stats: None,
            runs: None,
        };
        self.hand(item)
    }

    /// Hand a made item (a note, an identity, the clock) to the output
    /// thread, in sequence after what was sent before it.
    fn hand(&mut self, item: Rendered) -> anyhow::Result<()> {
        self.seq += 1;
        self.done_tx
            .as_ref()
            .context("pipeline closed")?
            .send(item)
            .map_err(|_| anyhow::anyhow!("the output thread stopped"))
    }

    /// Wait for every batch to be written and the last verdicts; give back
    /// the output and the counts.
    pub fn finish(mut self) -> anyhow::Result<(Output, Stats)> {
        drop(self.work_tx.take());
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        drop(self.done_tx.take());
        let (out, stats, res) = self
            .writer
            .take()
            .context("output thread gone")?
            .join()
            .map_err(|_| anyhow::anyhow!("the output thread panicked"))?;
        res?;
        Ok((out, stats))
    }
}

/// How a decode thread renders and counts.
#[derive(Clone, Copy)]
struct Rendering {
    summary_only: bool,
    level: Level,
}

fn worker(
    rx: &Mutex<Receiver<Batch>>,
    tx: &SyncSender<Rendered>,
    ctx: &Context,
    filters: &Filters,
    mut r: Renderer,
    how: Rendering,
    mut sinks: observe::Sinks,
) {
    loop {
        let next = match rx.lock() {
            Ok(g) => g.recv(),
            Err(_) => break,
        };
        let Ok(batch) = next else { break };
        if tx
            .send(render_batch(&batch, ctx, filters, &mut r, &how, &mut sinks))
            .is_err()
        {
            break;
        }
    }
}
