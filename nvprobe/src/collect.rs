//! Draining the ring buffer: decode each record, filter, render, count.
//! Lost-event counters are read every few ticks and reported as `lost`
//! records; nothing is dropped without being counted.
//!
//! The main thread only moves records from the ring buffer into batches.
//! Decoding and rendering run on worker threads, and one thread writes the
//! results in ring-buffer order. A consumer that cannot keep up fills the
//! ring buffer, and what does not fit is counted as lost in the kernel.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    io,
    sync::{
        Arc, Mutex,
        mpsc::{Receiver, sync_channel},
    },
    time::Duration,
};

use anyhow::Context as _;
use aya::maps::{MapData, PerCpuArray, RingBuf};
use bytes::BytesMut;
use nvprobe_common::LOST_SLOTS;
use tokio::{
    io::unix::AsyncFd,
    signal::unix::{SignalKind, signal},
    time::{Instant, interval},
};

use crate::{
    correlate::{Correlator, Record},
    decode::{self, Context},
    output::{Clock, Note, Output, Renderer},
    summary::{LostSummary, ProgStats, Stats, Summary},
};

pub struct Filters {
    pub comms: HashSet<String>,
}

impl Filters {
    fn keep(&self, ev: &decode::Event) -> bool {
        self.comms.is_empty() || self.comms.contains(&ev.proc().comm)
    }
}

fn kind_name(slot: usize) -> &'static str {
    match slot {
        1 => "ioctl",
        2 => "path",
        3 => "fd",
        4 => "mmap",
        5 => "proc",
        6 => "cuda",
        7 => "driver",
        s if s == nvprobe_common::LOST_SLOT_COLLISION as usize => "slot_collision",
        _ => "other",
    }
}

struct LostNote {
    cpu: u32,
    kind: &'static str,
    count: u64,
    total: u64,
}

impl LostNote {
    fn note(&self) -> Note<'static> {
        Note::Lost {
            cpu: self.cpu,
            kind: self.kind,
            count: self.count,
            total: self.total,
        }
    }
}

struct LostCounter {
    map: PerCpuArray<MapData, u64>,
    /// Last seen value per (slot, cpu).
    seen: Vec<Vec<u64>>,
    total: u64,
}

impl LostCounter {
    fn new(map: PerCpuArray<MapData, u64>) -> Self {
        Self {
            map,
            seen: vec![Vec::new(); LOST_SLOTS as usize],
            total: 0,
        }
    }

    /// Every increase since the last poll.
    fn poll(&mut self) -> anyhow::Result<Vec<LostNote>> {
        let mut notes = Vec::new();
        for slot in 0..LOST_SLOTS as usize {
            let values = self
                .map
                .get(&(slot as u32), 0)
                .context("reading the LOST counters")?;
            let seen = &mut self.seen[slot];
            seen.resize(values.len(), 0);
            for (cpu, v) in values.iter().enumerate() {
                let delta = v.saturating_sub(seen[cpu]);
                if delta > 0 {
                    seen[cpu] = *v;
                    self.total += delta;
                    notes.push(LostNote {
                        cpu: cpu as u32,
                        kind: kind_name(slot),
                        count: delta,
                        total: self.total,
                    });
                }
            }
        }
        Ok(notes)
    }

    fn summary(&self) -> LostSummary {
        let ncpu = self.seen.iter().map(Vec::len).max().unwrap_or(0);
        let mut per_cpu = vec![0u64; ncpu];
        let mut per_kind = std::collections::BTreeMap::new();
        for (slot, v) in self.seen.iter().enumerate() {
            let s: u64 = v.iter().sum();
            if s > 0 {
                *per_kind.entry(kind_name(slot).to_owned()).or_insert(0) += s;
            }
            for (cpu, n) in v.iter().enumerate() {
                per_cpu[cpu] += n;
            }
        }
        LostSummary {
            total: self.total,
            per_cpu,
            per_kind,
        }
    }
}

pub struct RunOpts {
    pub duration: Option<Duration>,
    /// How often the ring buffer is drained without a wake-up (the BPF side
    /// wakes the collector only once a backlog builds up).
    pub tick: Duration,
    /// How often (in ticks) the lost counters are read.
    pub lost_every: u32,
    /// Decode/render threads.
    pub workers: usize,
    /// Only the per-process verdicts and the summary.
    pub summary_only: bool,
    /// Report calls running longer than this (None: off).
    pub stall_after: Option<Duration>,
    /// How often (in ticks) in-flight calls are checked.
    pub stall_every: u32,
    /// Report each BPF program's run count and time (stats must have been
    /// enabled with BPF_ENABLE_STATS before the run).
    pub bpf_stats: bool,
    /// Hook the libcuda of processes first seen while tracing.
    pub cuda_layer: bool,
}

fn prog_stats(ebpf: &aya::Ebpf) -> Vec<ProgStats> {
    let mut v: Vec<_> = ebpf
        .programs()
        .filter_map(|(name, prog)| {
            let info = prog.info().ok()?;
            let runs = info.run_count();
            let ns = info.run_time().as_nanos() as u64;
            Some(ProgStats {
                program: name.to_owned(),
                run_count: runs,
                run_time_ns: ns,
                ns_per_run: if runs > 0 {
                    ns as f64 / runs as f64
                } else {
                    0.0
                },
            })
        })
        .filter(|p| p.run_count > 0)
        .collect();
    v.sort_by(|a, b| a.program.cmp(&b.program));
    v
}

const BATCH_RECORDS: usize = 512;

/// Records drained from the ring buffer, framed as `[u32 len][bytes]…`.
struct Batch {
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
    fn push(&mut self, rec: &[u8]) {
        self.data
            .extend_from_slice(&(rec.len() as u32).to_le_bytes());
        self.data.extend_from_slice(rec);
        self.count += 1;
    }
    fn records(&self) -> impl Iterator<Item = &[u8]> {
        let mut rest = &self.data[..];
        std::iter::from_fn(move || {
            let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
            let rec = rest.get(4..4 + len)?;
            rest = &rest[4 + len..];
            Some(rec)
        })
    }
}

/// A worker's output (or a note from the main thread), written in `seq`
/// order.
struct Rendered {
    seq: u64,
    bytes: bytes::Bytes,
    stats: Option<Stats>,
    /// What the per-process correlator needs of each event.
    events: Vec<crate::correlate::Obs>,
}

fn render_batch(
    b: &Batch,
    ctx: &Context,
    filters: &Filters,
    r: &mut Renderer,
    summary_only: bool,
) -> Rendered {
    let mut stats = Stats::default();
    let mut buf = BytesMut::with_capacity(if summary_only { 0 } else { b.count * 480 });
    let mut events = Vec::with_capacity(b.count);
    for rec in b.records() {
        match decode::decode(rec, ctx) {
            Ok(ev) => {
                if filters.keep(&ev) {
                    if !matches!(ev, decode::Event::Proc(_)) {
                        stats.record(&ev);
                    }
                    if !summary_only {
                        let t = decode::record_ktime(rec).unwrap_or_default();
                        // Rendering into memory cannot fail.
                        let _ = r.event(&mut buf, t, &ev);
                    }
                    if let Some(o) = crate::correlate::Obs::of(&ev) {
                        events.push(o);
                    }
                }
            }
            Err(e) => {
                stats.decode_error();
                let _ = r.note(
                    &mut buf,
                    Clock::mono_now(),
                    &Note::Warning {
                        id: "undecodable_record",
                        message: &format!("a kernel record could not be decoded: {e}"),
                    },
                );
            }
        }
    }
    Rendered {
        seq: b.seq,
        bytes: buf.freeze(),
        stats: Some(stats),
        events,
    }
}

type Finished = (Output, Stats, Correlator, io::Result<()>);

/// Write rendered chunks in sequence order, sum the workers' counts, and
/// follow each process's start-up in that order.
fn order_and_write(
    rx: Receiver<Rendered>,
    mut out: Output,
    summary_only: bool,
    board: crate::correlate::StageBoard,
) -> Finished {
    let mut stats = Stats::default();
    let mut corr = Correlator::with_board(board);
    let mut hmm = None;
    let mut recs = Vec::new();
    let mut next = 0u64;
    let mut pending: BTreeMap<u64, Rendered> = BTreeMap::new();
    let mut res = Ok(());
    for item in rx {
        pending.insert(item.seq, item);
        while let Some(item) = pending.remove(&next) {
            next += 1;
            if let Some(s) = item.stats {
                stats.merge(s);
            }
            if res.is_ok() {
                res = out.rendered(item.bytes);
            }
            for o in item.events {
                corr.observe_obs(o, &mut recs);
            }
            for mut r in recs.drain(..) {
                refine_for_host(&mut r, &mut hmm);
                if res.is_ok() && (!summary_only || matches!(r, Record::Cuinit(_))) {
                    res = out.record(&r);
                }
            }
        }
    }
    (out, stats, corr, res)
}

/// A live verdict's UVM diagnoses made specific to this host (HMM facts are
/// read once, the first time one is needed).
fn refine_for_host(r: &mut Record, hmm: &mut Option<crate::host::HmmFacts>) {
    if let Record::Cuinit(v) = r
        && v.diagnoses
            .iter()
            .any(|d| matches!(d.id, "uvm_step_failed" | "uvm_busy_retry"))
    {
        let f = hmm.get_or_insert_with(|| crate::host::hmm_facts(std::path::Path::new("/")));
        crate::correlate::apply_hmm_facts(v, f);
    }
}

/// The threads behind the main loop.
struct Pipeline {
    /// The last stage of each process, for stall reports.
    board: crate::correlate::StageBoard,
    seq: u64,
    /// Tgids already put into NV_PROCS.
    known: HashSet<u32>,
    /// Tgids seen for the first time since the last look at their maps.
    new_tgids: Vec<u32>,
    /// cuInit calls in flight (from the uprobes): tid -> (tgid, start_ns).
    cuinit: HashMap<u32, (u32, u64)>,
    /// tgid -> the last stop signal sent to it, with its sender.
    stoppers: HashMap<u32, String>,
    nv_procs: Option<aya::maps::HashMap<MapData, u32, u8>>,
    work_tx: Option<std::sync::mpsc::SyncSender<Batch>>,
    done_tx: Option<std::sync::mpsc::SyncSender<Rendered>>,
    workers: Vec<std::thread::JoinHandle<()>>,
    writer: Option<std::thread::JoinHandle<Finished>>,
    notes: Renderer,
}

impl Pipeline {
    fn start(
        out: Output,
        ctx: Arc<Context>,
        filters: Arc<Filters>,
        opts: &RunOpts,
        nv_procs: Option<aya::maps::HashMap<MapData, u32, u8>>,
    ) -> anyhow::Result<Self> {
        let (workers, summary_only) = (opts.workers, opts.summary_only);
        let notes = out.renderer();
        let (work_tx, work_rx) = sync_channel::<Batch>(64);
        let work_rx = Arc::new(Mutex::new(work_rx));
        let (done_tx, done_rx) = sync_channel::<Rendered>(256);
        let board = crate::correlate::StageBoard::default();
        let board2 = board.clone();
        let writer = std::thread::Builder::new()
            .name("nvprobe-output".into())
            .spawn(move || order_and_write(done_rx, out, summary_only, board2))
            .context("starting the output thread")?;
        let mut handles = Vec::new();
        for i in 0..workers.max(1) {
            let (rx, tx) = (work_rx.clone(), done_tx.clone());
            let (ctx, filters, mut r) = (ctx.clone(), filters.clone(), notes.clone());
            handles.push(
                std::thread::Builder::new()
                    .name(format!("nvprobe-decode-{i}"))
                    .spawn(move || {
                        loop {
                            let next = match rx.lock() {
                                Ok(g) => g.recv(),
                                Err(_) => break,
                            };
                            let Ok(batch) = next else { break };
                            if tx
                                .send(render_batch(&batch, &ctx, &filters, &mut r, summary_only))
                                .is_err()
                            {
                                break;
                            }
                        }
                    })
                    .context("starting a decode thread")?,
            );
        }
        Ok(Self {
            board,
            seq: 0,
            known: HashSet::new(),
            new_tgids: Vec::new(),
            cuinit: HashMap::new(),
            stoppers: HashMap::new(),
            nv_procs,
            work_tx: Some(work_tx),
            done_tx: Some(done_tx),
            workers: handles,
            writer: Some(writer),
            notes,
        })
    }

    /// Move everything the ring buffer holds into batches.
    fn drain<T: std::borrow::BorrowMut<MapData>>(
        &mut self,
        ring: &mut RingBuf<T>,
    ) -> anyhow::Result<()> {
        let tx = self.work_tx.clone().context("pipeline closed")?;
        loop {
            let mut b = Batch::new(self.seq);
            while b.count < BATCH_RECORDS {
                match ring.next() {
                    Some(item) => {
                        // A process first seen here (say, through an fd it
                        // inherited): have the kernel report its exit and
                        // signals too.
                        if let Some(tgid) = item
                            .get(16..20)
                            .map(|t| u32::from_le_bytes(t.try_into().unwrap_or_default()))
                            && self.known.insert(tgid)
                        {
                            self.new_tgids.push(tgid);
                            if let Some(m) = self.nv_procs.as_mut() {
                                let _ = m.insert(tgid, 1, 0);
                            }
                        }
                        self.track(&item);
                        b.push(&item)
                    }
                    None => break,
                }
            }
            if b.count == 0 {
                return Ok(());
            }
            self.seq += 1;
            let full = b.count == BATCH_RECORDS;
            tx.send(b)
                .map_err(|_| anyhow::anyhow!("the decode threads stopped"))?;
            if !full {
                return Ok(());
            }
        }
    }

    /// What the stall detector needs from the stream, read in place: cuInit
    /// entries and returns, process exits, stop signals.
    fn track(&mut self, rec: &[u8]) {
        let u32_at = |o: usize| {
            rec.get(o..o + 4)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
        };
        let u64_at = |o: usize| {
            rec.get(o..o + 8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        };
        // Header: kind @0, tgid @16, tid @20, comm @40.
        let (Some(kind), Some(tgid), Some(tid)) = (u32_at(0), u32_at(16), u32_at(20)) else {
            return;
        };
        if kind == nvprobe_common::EventKind::Cuda as u32 && u32_at(56) == Some(1) {
            match u32_at(60) {
                Some(nvprobe_common::CUDA_ENTER) => {
                    self.cuinit.insert(tid, (tgid, u64_at(64).unwrap_or(0)));
                }
                _ => {
                    self.cuinit.remove(&tid);
                }
            }
        } else if kind == nvprobe_common::EventKind::Proc as u32 {
            let (op, sig, target) = (u32_at(56), u32_at(60), u32_at(80).unwrap_or(0));
            if op == Some(nvprobe_common::ProcOp::Exit as u32) {
                self.cuinit.retain(|_, (g, _)| *g != target);
                self.stoppers.remove(&target);
            } else if op == Some(nvprobe_common::ProcOp::SignalGenerate as u32)
                // SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU
                && let Some(sig @ 19..=22) = sig
            {
                let comm = rec.get(40..56).map(|c| {
                    let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
                    decode::escape_bytes(&c[..end])
                });
                self.stoppers.insert(
                    target,
                    format!(
                        "{} from {}[{tgid}]",
                        crate::correlate::signal_name(sig as i32),
                        comm.unwrap_or_default()
                    ),
                );
            }
        }
    }

    fn note(&mut self, note: &Note<'_>) -> anyhow::Result<()> {
        let mut buf = BytesMut::new();
        self.notes.note(&mut buf, Clock::mono_now(), note)?;
        let item = Rendered {
            seq: self.seq,
            bytes: buf.freeze(),
            stats: None,
            events: Vec::new(),
        };
        self.seq += 1;
        self.done_tx
            .as_ref()
            .context("pipeline closed")?
            .send(item)
            .map_err(|_| anyhow::anyhow!("the output thread stopped"))
    }

    /// Wait for every batch to be written; give back the output and counts.
    fn finish(mut self) -> anyhow::Result<(Output, Stats, Correlator)> {
        drop(self.work_tx.take());
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        drop(self.done_tx.take());
        let (out, stats, corr, res) = self
            .writer
            .take()
            .context("output thread gone")?
            .join()
            .map_err(|_| anyhow::anyhow!("the output thread panicked"))?;
        res?;
        Ok((out, stats, corr))
    }
}

/// SIGINT and SIGTERM, caught from before the start record is written (a
/// signal sent as soon as the start record appears must stop nvprobe
/// cleanly, not kill it). Install inside the runtime (`Runtime::enter`).
pub struct StopSignals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl StopSignals {
    pub fn install() -> anyhow::Result<Self> {
        Ok(Self {
            int: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            term: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
        })
    }
}

/// Run until SIGINT/SIGTERM (or `--duration`), then drain what is left and
/// return the summary. Dropping the caller's `Ebpf` afterwards detaches
/// every probe.
pub async fn run(
    ebpf: &mut aya::Ebpf,
    libcuda: &mut crate::uprobes::Libcuda,
    ctx: Arc<Context>,
    filters: Arc<Filters>,
    out: Output,
    opts: &RunOpts,
    stop: StopSignals,
) -> anyhow::Result<Summary> {
    let ring = RingBuf::try_from(
        ebpf.take_map("EVENTS")
            .context("EVENTS map missing from the object")?,
    )
    .context("opening the ring buffer")?;
    let lost_map = PerCpuArray::try_from(
        ebpf.take_map("LOST")
            .context("LOST map missing from the object")?,
    )
    .context("opening the LOST counters")?;
    let mut lost = LostCounter::new(lost_map);
    // SAFETY: the ring buffer owns its map fd, which stays open and
    // unchanged for as long as the AsyncFd holds the RingBuf.
    let mut ring = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
        .map_err(io::Error::from)
        .context("polling the ring buffer")?;
    let StopSignals {
        int: mut sigint,
        term: mut sigterm,
    } = stop;
    let mut tick = interval(opts.tick);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks = 0u32;
    let started = Instant::now();
    let deadline = opts.duration.map(|d| started + d);
    let nv_procs = ebpf
        .take_map("NV_PROCS")
        .and_then(|m| aya::maps::HashMap::try_from(m).ok());
    let inflight: Option<aya::maps::Array<MapData, nvprobe_common::Inflight>> = ebpf
        .take_map("INFLIGHT")
        .and_then(|m| aya::maps::Array::try_from(m).ok());
    let mut stalls = crate::stall::Detector::default();
    let version = ctx.version;
    let mut pipe = Pipeline::start(out, ctx, filters, opts, nv_procs)?;

    loop {
        tokio::select! {
            guard = ring.readable_mut() => {
                let mut guard = guard.context("waiting on the ring buffer")?;
                pipe.drain(guard.get_inner_mut())?;
                guard.clear_ready();
            }
            _ = tick.tick() => {
                pipe.drain(ring.get_mut())?;
                ticks += 1;
                // A new NVIDIA process may carry its own libcuda.
                for tgid in std::mem::take(&mut pipe.new_tgids) {
                    if !opts.cuda_layer {
                        continue;
                    }
                    for path in crate::uprobes::mapped_by(tgid) {
                        match libcuda.attach(ebpf, &path) {
                            Ok(Some(a)) => pipe.note(&Note::Warning {
                                id: "libcuda_late",
                                message: &format!(
                                    "hooked libcuda at {} ({} functions) when pid {tgid} was first seen: its cuInit may have begun before, so its verdict can rest on driver calls alone",
                                    a.path,
                                    a.functions.len()
                                ),
                            })?,
                            Ok(None) => {}
                            Err(e) => pipe.note(&Note::Warning { id: "libcuda_refused", message: &e })?,
                        }
                    }
                }
                if let Some(after) = opts.stall_after
                    && ticks.is_multiple_of(opts.stall_every.max(1))
                    && !pipe.known.is_empty()
                {
                    let mut calls = Vec::new();
                    if let Some(arr) = inflight.as_ref() {
                        for v in arr.iter().flatten() {
                            if v.kind == nvprobe_common::EventKind::Ioctl as u32 && v.tid != 0 {
                                let xfer = (v.flags & nvprobe_common::ioctl_flags::XFER != 0).then_some(v.xfer_cmd);
                                calls.push(crate::stall::InFlight {
                                    tid: v.tid,
                                    start_ns: v.start_ns,
                                    call: decode::raw_call_name(nvprobe_common::DevKind::from_u8(v.file.kind), v.cmd, xfer, &version),
                                    fd: (v.fd >= 0).then_some(v.fd),
                                });
                            }
                        }
                    }
                    for (tid, (_, start)) in &pipe.cuinit {
                        calls.push(crate::stall::InFlight { tid: *tid, start_ns: *start, call: "cuInit".into(), fd: None });
                    }
                    stalls.stoppers = pipe.stoppers.clone();
                    stalls.stages = pipe.board.lock().map(|b| b.clone()).unwrap_or_default();
                    let now = Clock::mono_now();
                    for r in stalls.check(now, after.as_nanos() as u64, &calls) {
                        pipe.note(&Note::Stall(&r))?;
                    }
                }
                if ticks.is_multiple_of(opts.lost_every.max(1)) {
                    for n in lost.poll()? {
                        pipe.note(&n.note())?;
                    }
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
            }
            _ = sigint.recv() => break,
            _ = sigterm.recv() => break,
        }
    }
    // What arrived between the last wake-up and the stop.
    pipe.drain(ring.get_mut())?;
    for n in lost.poll()? {
        pipe.note(&n.note())?;
    }
    let (mut out, stats, mut corr) = pipe.finish()?;
    // Verdicts for the processes still running.
    let mut recs = Vec::new();
    corr.finish(&mut recs);
    let mut hmm = None;
    for r in &mut recs {
        refine_for_host(r, &mut hmm);
        out.record(r)?;
    }
    let mut summary = stats.finish(started.elapsed().as_secs_f64(), lost.summary());
    if opts.bpf_stats {
        summary.bpf = prog_stats(ebpf);
    }
    out.note(Clock::mono_now(), &Note::Summary(&summary))?;
    out.finish()?;
    Ok(summary)
}
