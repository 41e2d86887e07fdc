//! The live source: drains the ring buffer into the pipeline on wake-ups
//! and on a tick, reads the lost counters, reports calls that stall, hooks
//! the libcuda of processes first seen while tracing, and stops on
//! SIGINT/SIGTERM or `--duration`.

use std::{
    collections::{HashMap, HashSet},
    io,
    sync::Arc,
    time::Duration,
};

use anyhow::Context as _;
use aya::maps::{MapData, PerCpuArray, RingBuf};
use nvprobe_common::{CudaEvent, EventKind, Header, ProcEvent, ProcOp, maps};
use nvprobe_model::{
    decode::{self, Context},
    render::{Clock, Note},
    summary::{ProgStats, Summary},
};
use tokio::{
    io::unix::AsyncFd,
    signal::unix::{SignalKind, signal},
    time::{Instant, interval},
};

use super::{BATCH_RECORDS, Filters, PipeOpts, Pipeline, lost::LostCounter};
use crate::output::Output;

pub struct RunOpts {
    pub duration: Option<Duration>,
    /// How often the ring buffer is drained without a wake-up (the BPF side
    /// wakes the collector only once a backlog builds up).
    pub tick: Duration,
    /// How often (in ticks) the lost counters are read.
    pub lost_every: u32,
    pub pipe: PipeOpts,
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

/// What the live source keeps beside the pipeline: the processes seen, and
/// what the stall detector needs (cuInit calls in flight, stop signals).
#[derive(Default)]
struct Seen {
    /// Tgids already put into NV_PROCS.
    known: HashSet<u32>,
    /// Tgids seen for the first time since the last look at their maps.
    new_tgids: Vec<u32>,
    /// cuInit calls in flight (from the uprobes): tid -> (tgid, start_ns).
    cuinit: HashMap<u32, (u32, u64)>,
    /// tgid -> the last stop signal sent to it, with its sender.
    stoppers: HashMap<u32, String>,
}

impl Seen {
    /// What the stall detector needs from a record, read through the
    /// contract's types: cuInit entries and returns, exits, stop signals.
    fn track(&mut self, rec: &[u8]) {
        let Some(h) = Header::peek(rec) else { return };
        match h.event_kind() {
            Some(EventKind::Cuda) => {
                let Some(c) = nvprobe_common::read::<CudaEvent>(rec) else {
                    return;
                };
                if c.func != 1 {
                    return;
                }
                if c.phase == nvprobe_common::CUDA_ENTER {
                    self.cuinit.insert(h.tid, (h.tgid, c.start_ns));
                } else {
                    self.cuinit.remove(&h.tid);
                }
            }
            Some(EventKind::Proc) => {
                let Some(p) = nvprobe_common::read::<ProcEvent>(rec) else {
                    return;
                };
                let target = p.target_tgid;
                if p.op == ProcOp::Exit as u32 {
                    self.cuinit.retain(|_, (g, _)| *g != target);
                    self.stoppers.remove(&target);
                } else if p.op == ProcOp::SignalGenerate as u32
                    // SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU
                    && (19..=22).contains(&p.sig)
                {
                    let end = h.comm.iter().position(|&b| b == 0).unwrap_or(h.comm.len());
                    self.stoppers.insert(
                        target,
                        format!(
                            "{} from {}[{}]",
                            nvprobe_model::decode::signal::name(p.sig),
                            decode::escape_bytes(&h.comm[..end]),
                            h.tgid
                        ),
                    );
                }
            }
            _ => {}
        }
    }
}

/// The live source's handles on the kernel side.
struct Live {
    seen: Seen,
    nv_procs: Option<aya::maps::HashMap<MapData, u32, u8>>,
    inflight: Option<aya::maps::Array<MapData, nvprobe_common::Inflight>>,
    stalls: crate::stall::Detector,
}

impl Live {
    /// Move everything the ring buffer holds into batches.
    fn drain<T: std::borrow::BorrowMut<MapData>>(
        &mut self,
        ring: &mut RingBuf<T>,
        pipe: &mut Pipeline,
    ) -> anyhow::Result<()> {
        loop {
            let mut b = pipe.batch();
            while b.len() < BATCH_RECORDS {
                let Some(item) = ring.next() else { break };
                if let Some(h) = Header::peek(&item) {
                    // A process first seen here (say, through an fd it
                    // inherited): have the kernel report its exit and
                    // signals too.
                    if self.seen.known.insert(h.tgid) {
                        self.seen.new_tgids.push(h.tgid);
                        if let Some(m) = self.nv_procs.as_mut() {
                            let _ = m.insert(h.tgid, 1, 0);
                        }
                    }
                    self.seen.track(&item);
                    b.push(&item, h.ktime_ns, 0);
                } else {
                    b.push(&item, Clock::mono_now(), 0);
                }
            }
            // An empty batch still takes its number: send it so the writer
            // does not wait for it.
            let full = b.len() == BATCH_RECORDS;
            pipe.send(b)?;
            if !full {
                return Ok(());
            }
        }
    }

    /// A new NVIDIA process may carry its own libcuda.
    fn hook_new_libcuda(
        &mut self,
        ebpf: &mut aya::Ebpf,
        libcuda: &mut crate::uprobes::Libcuda,
        pipe: &mut Pipeline,
    ) -> anyhow::Result<()> {
        for tgid in std::mem::take(&mut self.seen.new_tgids) {
            for path in crate::uprobes::mapped_by(tgid) {
                let now = Clock::mono_now();
                match libcuda.attach(ebpf, &path) {
                    Ok(Some(a)) => pipe.note(now, &Note::Warning {
                        id: "libcuda_late",
                        message: &format!(
                            "hooked libcuda at {} ({} functions) when pid {tgid} was first seen: its cuInit may have begun before, so its verdict can rest on driver calls alone",
                            a.path,
                            a.functions.len()
                        ),
                    })?,
                    Ok(None) => {}
                    Err(e) => pipe.note(now, &Note::Warning { id: "libcuda_refused", message: &e })?,
                }
            }
        }
        Ok(())
    }

    /// Report the calls (ioctls in flight in the kernel's table, cuInit
    /// from the uprobes) that have run longer than `after`.
    fn check_stalls(
        &mut self,
        after: Duration,
        version: &nvprobe_model::decode::version::VersionCtx,
        pipe: &mut Pipeline,
    ) -> anyhow::Result<()> {
        let mut calls = Vec::new();
        if let Some(arr) = self.inflight.as_ref() {
            for v in arr.iter().flatten() {
                if v.kind == EventKind::Ioctl as u32 && v.tid != 0 {
                    let xfer =
                        (v.flags & nvprobe_common::ioctl_flags::XFER != 0).then_some(v.xfer_cmd);
                    calls.push(crate::stall::InFlight {
                        tid: v.tid,
                        start_ns: v.start_ns,
                        call: decode::raw_call_name(
                            nvprobe_common::DevKind::from_u8(v.file.kind),
                            v.cmd,
                            xfer,
                            version,
                        ),
                        fd: (v.fd >= 0).then_some(v.fd),
                    });
                }
            }
        }
        for (tid, (_, start)) in &self.seen.cuinit {
            calls.push(crate::stall::InFlight {
                tid: *tid,
                start_ns: *start,
                call: "cuInit".into(),
                fd: None,
            });
        }
        self.stalls.stoppers = self.seen.stoppers.clone();
        self.stalls.stages = pipe.board.lock().map(|b| b.clone()).unwrap_or_default();
        let now = Clock::mono_now();
        for r in self.stalls.check(now, after.as_nanos() as u64, &calls) {
            pipe.note(now, &Note::Stall(&r))?;
        }
        Ok(())
    }
}

fn poll_lost(lost: &mut LostCounter, pipe: &mut Pipeline) -> anyhow::Result<()> {
    for n in lost.poll()? {
        pipe.note(Clock::mono_now(), &n.note())?;
    }
    Ok(())
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

fn take_map(ebpf: &mut aya::Ebpf, name: &str) -> anyhow::Result<aya::maps::Map> {
    ebpf.take_map(name)
        .with_context(|| format!("{name} map missing from the object"))
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
    let ring =
        RingBuf::try_from(take_map(ebpf, maps::EVENTS)?).context("opening the ring buffer")?;
    let mut lost = LostCounter::new(
        PerCpuArray::try_from(take_map(ebpf, maps::LOST)?).context("opening the LOST counters")?,
    );
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
    let mut live = Live {
        seen: Seen::default(),
        nv_procs: ebpf
            .take_map(maps::NV_PROCS)
            .and_then(|m| aya::maps::HashMap::try_from(m).ok()),
        inflight: ebpf
            .take_map(maps::INFLIGHT)
            .and_then(|m| aya::maps::Array::try_from(m).ok()),
        stalls: crate::stall::Detector::default(),
    };
    let version = ctx.version;
    let mut pipe = Pipeline::start(out, ctx, filters, &opts.pipe)?;
    loop {
        tokio::select! {
            guard = ring.readable_mut() => {
                let mut guard = guard.context("waiting on the ring buffer")?;
                live.drain(guard.get_inner_mut(), &mut pipe)?;
                guard.clear_ready();
            }
            _ = tick.tick() => {
                live.drain(ring.get_mut(), &mut pipe)?;
                ticks += 1;
                if opts.cuda_layer {
                    live.hook_new_libcuda(ebpf, libcuda, &mut pipe)?;
                } else {
                    live.seen.new_tgids.clear();
                }
                if let Some(after) = opts.stall_after
                    && ticks.is_multiple_of(opts.stall_every.max(1))
                    && !live.seen.known.is_empty()
                {
                    live.check_stalls(after, &version, &mut pipe)?;
                }
                if ticks.is_multiple_of(opts.lost_every.max(1)) {
                    poll_lost(&mut lost, &mut pipe)?;
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
    live.drain(ring.get_mut(), &mut pipe)?;
    poll_lost(&mut lost, &mut pipe)?;
    let (mut out, stats) = pipe.finish()?;
    let mut summary = stats.finish(started.elapsed().as_secs_f64(), lost.summary());
    if opts.bpf_stats {
        summary.bpf = prog_stats(ebpf);
    }
    out.note(Clock::mono_now(), &Note::Summary(&summary))?;
    out.finish()?;
    Ok(summary)
}
