//! Draining the ring buffer: decode each record, filter, render, count.
//! Lost-event counters are read every tick and reported as `lost` records;
//! nothing is dropped without being counted.

use std::{collections::HashSet, io, time::Duration};

use anyhow::Context as _;
use aya::maps::{MapData, PerCpuArray, RingBuf};
use nvprobe_common::LOST_SLOTS;
use tokio::{
    io::unix::AsyncFd,
    signal::unix::{SignalKind, signal},
    time::{Instant, interval},
};

use crate::{
    decode::{self, Context},
    output::{Clock, Note, Output},
    summary::{LostSummary, Stats, Summary},
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
        s if s == nvprobe_common::LOST_SLOT_COLLISION as usize => "slot_collision",
        _ => "other",
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

    /// Report every increase since the last poll.
    fn poll(&mut self, out: &mut Output) -> anyhow::Result<()> {
        let now = Clock::mono_now();
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
                    out.note(
                        now,
                        &Note::Lost {
                            cpu: cpu as u32,
                            kind: kind_name(slot),
                            count: delta,
                            total: self.total,
                        },
                    )?;
                }
            }
        }
        Ok(())
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
    /// How often the lost counters are read.
    pub lost_every: u32,
    /// Report each BPF program's run count and time (stats must have been
    /// enabled with BPF_ENABLE_STATS before the run).
    pub bpf_stats: bool,
}

fn prog_stats(ebpf: &aya::Ebpf) -> Vec<crate::summary::ProgStats> {
    let mut v: Vec<_> = ebpf
        .programs()
        .filter_map(|(name, prog)| {
            let info = prog.info().ok()?;
            let runs = info.run_count();
            let ns = info.run_time().as_nanos() as u64;
            Some(crate::summary::ProgStats {
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

fn handle(
    bytes: &[u8],
    ctx: &Context,
    filters: &Filters,
    out: &mut Output,
    stats: &mut Stats,
) -> anyhow::Result<()> {
    match decode::decode(bytes, ctx) {
        Ok(ev) => {
            if filters.keep(&ev) {
                stats.record(&ev);
                let t = decode::record_ktime(bytes).unwrap_or_default();
                out.event(t, &ev)?;
            }
        }
        Err(e) => {
            stats.decode_error();
            out.note(
                Clock::mono_now(),
                &Note::Warning {
                    id: "undecodable_record",
                    message: &format!("a kernel record could not be decoded: {e}"),
                },
            )?;
        }
    }
    Ok(())
}

/// Run until SIGINT/SIGTERM (or `--duration`), then drain what is left and
/// return the summary. Dropping the caller's `Ebpf` afterwards detaches
/// every probe.
pub async fn run(
    ebpf: &mut aya::Ebpf,
    ctx: &Context,
    filters: &Filters,
    out: &mut Output,
    opts: &RunOpts,
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
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut tick = interval(opts.tick);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks = 0u32;
    let mut stats = Stats::default();
    let started = Instant::now();
    let deadline = opts.duration.map(|d| started + d);

    loop {
        tokio::select! {
            guard = ring.readable_mut() => {
                let mut guard = guard.context("waiting on the ring buffer")?;
                let rb = guard.get_inner_mut();
                while let Some(item) = rb.next() {
                    handle(&item, ctx, filters, out, &mut stats)?;
                }
                guard.clear_ready();
                out.flush()?;
            }
            _ = tick.tick() => {
                let rb = ring.get_mut();
                while let Some(item) = rb.next() {
                    handle(&item, ctx, filters, out, &mut stats)?;
                }
                ticks += 1;
                if ticks.is_multiple_of(opts.lost_every.max(1)) {
                    lost.poll(out)?;
                }
                out.flush()?;
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
            }
            _ = sigint.recv() => break,
            _ = sigterm.recv() => break,
        }
    }
    // What arrived between the last wake-up and the stop.
    let rb = ring.get_mut();
    while let Some(item) = rb.next() {
        handle(&item, ctx, filters, out, &mut stats)?;
    }
    lost.poll(out)?;
    let mut summary = stats.finish(started.elapsed().as_secs_f64(), lost.summary());
    if opts.bpf_stats {
        summary.bpf = prog_stats(ebpf);
    }
    out.note(Clock::mono_now(), &Note::Summary(&summary))?;
    out.finish()?;
    Ok(summary)
}
