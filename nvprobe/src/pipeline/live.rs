//! The live source: drains the ring buffer into the pipeline on wake-ups
//! and on a tick, reads the lost counters, reports calls that stall, hooks
//! the libcuda of processes first seen while tracing, and stops on
//! SIGINT/SIGTERM or `--duration`.

use std::{
    collections::{HashMap, HashSet},
    path::PathBuf,
    sync::Arc,
    time::Duration,
};

use anyhow::Context as _;
use aya::maps::{MapData, PerCpuArray};
use nvprobe_common::{Header, maps};
use nvprobe_model::{
    decode::{self, Context, version::VersionCtx},
    render::{Clock, Note},
    summary::Summary,
};
use tokio::time::{Instant, interval};

pub use super::end::UNREAD_AT_STOP;
pub use super::handles::StopSignals;
pub use super::opts::RunOpts;
use super::{
    BATCH_RECORDS, Batch, Filters, Pipeline,
    end::end_of_run,
    handles::open_ring,
    lost::{LostCounter, poll_lost},
    ring::Ring,
    seen::Seen,
};
use crate::output::Output;

/// The live source's handles on the kernel side.
struct Live {
    seen: Seen,
    /// Set at the stop: records made after this time (the kernel's clock)
    /// are not the run's, and the last drain ends at the first of them.
    until_ns: Option<u64>,
    /// A record past `until_ns` was met.
    past_stop: bool,
    nv_procs: Option<aya::maps::HashMap<MapData, u32, u8>>,
    /// Successful calls of quiet processes the kernel left out, per CPU.
    quieted: Option<PerCpuArray<MapData, u64>>,
    /// The ring buffer's high-water mark since the last reset (--metrics).
    rb_fill: Option<aya::maps::Array<MapData, u64>>,
    /// Lost-counter polls since the metrics were last updated.
    polls: u32,
    /// The calls in flight: stalls, hangs, `top`'s view.
    calls: super::inflight::InFlightCalls,
    /// A batch the decode threads had no room for yet (sent first next time).
    held: Option<Batch>,
    /// Processes first seen in the batch being filled (tgid, comm): their
    /// identity is read from /proc and sent before that batch.
    idents: Vec<(u32, String)>,
    /// `--comm`: identities only of the processes it keeps.
    filters: Arc<Filters>,
    libs: crate::identity::LibCache,
    /// Keep command lines in `process` records (`--no-cmdline` clears it).
    cmdline: bool,
    /// Other nvprobe instances, whose own reads are not traced.
    peers: super::peers::Peers,
    /// The descriptor gate's scan: the processes it found holding an
    /// NVIDIA descriptor at the start, read as they go in.
    gate: Option<crate::attach::holders::Report>,
    /// Those processes (their identity says so).
    held_at_start: HashSet<u32>,
}

/// What a drain left behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Drained {
    /// The ring buffer is empty.
    All,
    /// The time budget ran out with records still waiting.
    Budget,
    /// The decode threads are full: a batch is held until they have room.
    Backlog,
}

impl Live {
    /// The gauges and totals read from the kernel side; the ring buffer's
    /// high-water mark over about a second (five polls).
    /// What the observers learn of the collector on its clock; the ring
    /// buffer's high-water mark is read (and reset) every fifth time.
    fn counts(&mut self) -> super::LiveCounts {
        self.polls += 1;
        let mut high = None;
        if self.polls >= 5 {
            self.polls = 0;
            if let Some(a) = self.rb_fill.as_mut() {
                high = Some(a.get(&0, 0).unwrap_or(0));
                let _ = a.set(0, 0, 0);
            }
        }
        super::LiveCounts {
            processes: self.seen.known.len(),
            quieted: self.quieted_total(),
            ringbuf_high_water: high,
        }
    }

    fn quieted_total(&self) -> u64 {
        self.quieted
            .as_ref()
            .and_then(|m| m.get(&0, 0).ok())
            .map_or(0, |v| v.iter().sum())
    }
    /// Move what the ring buffer holds into batches, for at most `budget`
    /// (a flood never empties it). Never waits on the decode threads: when
    /// they are full the batch is held, and the ring buffer fills up (the
    /// kernel counts what it then drops).
    fn drain(
        &mut self,
        ring: &mut Ring,
        pipe: &mut Pipeline,
        budget: Duration,
    ) -> anyhow::Result<Drained> {
        let t0 = std::time::Instant::now();
        if let Some(b) = self.held.take() {
            self.held = pipe.try_send(b)?;
            if self.held.is_some() {
                return Ok(Drained::Backlog);
            }
        }
        loop {
            let Some(first) = ring.next() else {
                ring.corrupt()?;
                return Ok(Drained::All);
            };
            let mut b = pipe.batch();
            self.push(&mut b, first);
            while b.len() < BATCH_RECORDS && !self.past_stop {
                let Some(item) = ring.next() else { break };
                self.push(&mut b, item);
            }
            // Copied: the batch's space goes back to the kernel at once.
            ring.publish();
            if b.is_empty() && self.past_stop {
                return Ok(Drained::All);
            }
            let full = b.len() == BATCH_RECORDS && !self.past_stop;
            self.send_identities(pipe)?;
            self.held = pipe.try_send(b)?;
            if self.held.is_some() {
                return Ok(Drained::Backlog);
            }
            if !full {
                return Ok(Drained::All);
            }
            if t0.elapsed() >= budget {
                return Ok(Drained::Budget);
            }
        }
    }

    /// Who the processes first seen in this batch are, read while they
    /// live and sent before the batch, so that their verdicts can name them.
    fn send_identities(&mut self, pipe: &mut Pipeline) -> anyhow::Result<()> {
        self.take_held();
        let mut opened: HashMap<u32, Vec<_>> = HashMap::new();
        // Who shares nvprobe's view of the files, first (a process first
        // seen at its loader's open may be gone a moment later).
        for (pid, _) in &self.idents {
            if crate::identity::same_view(*pid) == Some(true) && self.seen.same_view.len() < 65536 {
                self.seen.same_view.insert(*pid);
            }
        }
        // Who each new process is, next: its limits, its access and its
        // command line are gone with it, while a libcuda it opened can be
        // read afterwards (through nvprobe's own root when it shared it).
        let mut infos = Vec::new();
        for (pid, comm) in std::mem::take(&mut self.idents) {
            if !self.filters.keep_comm(&comm) {
                continue;
            }
            let mut info = crate::identity::read(pid, self.cmdline, &mut self.libs);
            info.comm = Some(comm);
            info.held_at_start = self.held_at_start.contains(&pid);
            infos.push(info);
        }
        for (pid, p) in std::mem::take(&mut self.seen.lib_checks) {
            let same = self.seen.same_view.contains(&pid);
            if let Some(f) = crate::identity::opened_libcuda(pid, &p, &mut self.libs, same) {
                opened.entry(pid).or_default().push(f);
            }
        }
        for mut info in infos {
            info.libcuda_opened = opened.remove(&info.pid).unwrap_or_default();
            pipe.process(Clock::mono_now(), info)?;
        }
        // A process seen before opened a libcuda: only what was learned of
        // the file (the correlator adds it to what it knows).
        for (pid, files) in opened {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok();
            let comm = comm.map(|c| decode::escape_bytes(c.trim_end_matches('\n').as_bytes()));
            if !comm
                .as_deref()
                .map_or(self.filters.keep_comm(""), |c| self.filters.keep_comm(c))
            {
                continue;
            }
            let info = nvprobe_model::attribution::ProcessInfo {
                comm,
                pid,
                libcuda_opened: files,
                read_at: Some("libcuda_opened".into()),
                ..Default::default()
            };
            pipe.process(Clock::mono_now(), info)?;
        }
        for (pid, at) in std::mem::take(&mut self.seen.failed) {
            // Gone already: what the first read learned stays.
            let Some(comm) = self.kept_comm(pid) else {
                continue;
            };
            let mut info = crate::identity::read(pid, self.cmdline, &mut self.libs);
            if info.exe.is_none() {
                continue;
            }
            info.comm = Some(comm);
            info.read_at = Some(at.to_owned());
            // A refused mapping's causes include the map count: read only
            // here (the maps file of a CUDA process is thousands of lines).
            if let Some(l) = info.limits.as_mut() {
                // A few past the host's limit say all a verdict needs.
                let cap = l.max_map_count.unwrap_or(65_530).saturating_add(2);
                l.map_count = crate::kernel_checks::map_count(
                    std::path::Path::new(&format!("/proc/{pid}")),
                    cap,
                );
            }
            if at == "context_failed" {
                info.gpu_holders = crate::identity::gpu_holders(pid);
            }
            pipe.process(Clock::mono_now(), info)?;
        }
        Ok(())
    }

    /// The processes the start's scan put into `NV_PROCS` since the last
    /// look: each is read now (its verdict, at its exit, says its start-up
    /// was not seen; a quiet one may send nothing before it), unless one
    /// of its records came first; and those the kernel side found at a
    /// call on a descriptor they were not seen opening.
    fn take_held(&mut self) {
        // Those the kernel side found first, at a call: already known.
        for pid in std::mem::take(&mut self.seen.first_unseen) {
            self.held_at_start.insert(pid);
        }
        let Some(g) = &self.gate else { return };
        for pid in g.take_held() {
            self.held_at_start.insert(pid);
            if self.seen.known.insert(pid) {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                let comm = decode::escape_bytes(comm.trim_end_matches('\n').as_bytes());
                self.idents.push((pid, comm));
            }
        }
    }

    /// A note for each nvprobe found running beside this one; the ended
    /// ones forgotten.
    fn peers_noted(&mut self, pipe: &mut Pipeline) -> anyhow::Result<()> {
        self.peers.refresh();
        for pid in std::mem::take(&mut self.peers.found) {
            let message = format!(
                "pid {pid} is another nvprobe: its own reads (libcuda files through /proc/PID/root, the driver's /proc files) are not traced and it is not followed"
            );
            pipe.note(
                Clock::mono_now(),
                &Note::Warning {
                    id: "another_nvprobe",
                    message: &message,
                },
            )?;
        }
        Ok(())
    }

    fn push(&mut self, b: &mut Batch, item: &[u8]) {
        if let Some(h) = Header::peek(item) {
            if self
                .until_ns
                .is_some_and(|u| h.ktime_ns > u + STOP_SLACK_NS)
            {
                self.past_stop = true;
                return;
            }
            if self.peers.skip(h.tgid, &h.comm, self.nv_procs.as_mut()) {
                return;
            }
            // A process first seen here (say, through an fd it inherited):
            // have the kernel report its exit and signals too.
            if self.seen.known.insert(h.tgid) {
                self.seen.new_tgids.push(h.tgid);
                let end = h.comm.iter().position(|&b| b == 0).unwrap_or(h.comm.len());
                self.idents
                    .push((h.tgid, decode::escape_bytes(&h.comm[..end])));
                if let Some(m) = self.nv_procs.as_mut() {
                    // Only if the kernel has no entry yet (BPF_NOEXIST): a
                    // collector that lags must not overwrite the quiet bit
                    // that cuInit's return set meanwhile (seen in CI under
                    // load: the process's successful calls then all came up).
                    const BPF_NOEXIST: u64 = 1;
                    // The kernel had none: it may have removed it at the
                    // exit (whose record comes later) of a process ended
                    // before the collector got here. A gone process keeps
                    // no entry, which a process reusing its pid would find;
                    // nor does one that took the pid since.
                    if m.insert(h.tgid, 1, BPF_NOEXIST).is_ok()
                        && super::seen::not_the_one_seen(h.tgid, h.ktime_ns)
                    {
                        let _ = m.remove(&h.tgid);
                    }
                }
            }
            self.seen.track(item);
            b.push(item, h.ktime_ns, 0);
        } else {
            b.push(item, Clock::mono_now(), 0);
        }
    }

    /// At the stop: what is waiting, decoded for at most `budget` in all
    /// (every batch sent), up to the first record made after the stop. A
    /// flood leaves more than that in the ring buffer: those records are
    /// read without being decoded and counted (returned), so that the stop
    /// stays short and nothing goes uncounted.
    fn drain_last(
        &mut self,
        ring: &mut Ring,
        pipe: &mut Pipeline,
        budget: Duration,
    ) -> anyhow::Result<u64> {
        let t0 = std::time::Instant::now();
        let mut done = false;
        loop {
            if let Some(b) = self.held.take() {
                pipe.send(b)?;
            }
            let left = budget.saturating_sub(t0.elapsed());
            match self.drain(ring, pipe, left)? {
                Drained::All => {
                    done = true;
                    break;
                }
                _ if t0.elapsed() >= budget => break,
                _ => {}
            }
        }
        if let Some(b) = self.held.take() {
            pipe.send(b)?;
        }
        let mut unread = 0u64;
        if !done {
            let until = self.until_ns.map_or(u64::MAX, |u| u + STOP_SLACK_NS);
            // What was made before the stop is bounded by the ring buffer's
            // size, and counting costs nanoseconds a record: the cap only
            // guards against a clock gone wrong.
            let t1 = std::time::Instant::now();
            while let Some(item) = ring.next() {
                if Header::peek(item).is_some_and(|h| h.ktime_ns > until) {
                    break;
                }
                unread += 1;
                if unread.is_multiple_of(4096) && t1.elapsed() >= Duration::from_secs(2) {
                    break;
                }
            }
            ring.publish();
        }
        Ok(unread)
    }

    /// Libcuda copies the loader just opened go to the hooking thread at
    /// once, not at the next tick: the process calls cuInit milliseconds
    /// after its load, and a copy hooked later is not seen starting.
    fn hand_loads(&mut self, attacher: Option<&crate::uprobes::attacher::Attacher>) {
        if let Some(a) = attacher
            && !self.seen.lib_loads.is_empty()
        {
            a.send(crate::uprobes::attacher::Job {
                opened: self.loads_opened(),
                ..Default::default()
            });
        }
    }

    /// The loaders' opens seen since the last hand-over, as paths through
    /// each process's root.
    fn loads_opened(&mut self) -> Vec<(u32, PathBuf, u64)> {
        std::mem::take(&mut self.seen.lib_loads)
            .into_iter()
            .map(|(tgid, p, at)| {
                let mut full = PathBuf::from(format!("/proc/{tgid}/root"));
                full.push(p.strip_prefix("/").unwrap_or(&p));
                (tgid, full, at)
            })
            .collect()
    }

    /// A new NVIDIA process may carry its own libcuda: hand what was seen
    /// to the hooking thread, and write what it has hooked since.
    fn hook_new_libcuda(
        &mut self,
        attacher: &crate::uprobes::attacher::Attacher,
        pipe: &mut Pipeline,
    ) -> anyhow::Result<()> {
        let opened = self.loads_opened();
        attacher.send(crate::uprobes::attacher::Job {
            opened,
            new_tgids: std::mem::take(&mut self.seen.new_tgids),
            preloads: std::mem::take(&mut self.libs.preload_files),
        });
        for done in attacher.done() {
            for h in done.hooked {
                let now = Clock::mono_now();
                let tgid = h.tgid;
                match h.result {
                    Ok(a) => {
                        let when = if let Some(at) = h.opened_ns {
                            format!(
                                "{:.1} ms after pid {tgid}'s loader opened it: calls it made before then are not seen",
                                h.hooked_ns.saturating_sub(at) as f64 / 1e6
                            )
                        } else if h.at_load {
                            format!(
                                "when pid {tgid} loaded it: calls made before the hooks were in place (milliseconds after the load) are not seen"
                            )
                        } else {
                            format!(
                                "when pid {tgid} was first seen: its cuInit may have begun before, so its verdict can rest on driver calls alone"
                            )
                        };
                        pipe.note(
                            now,
                            &Note::Warning {
                                id: "libcuda_late",
                                message: &format!(
                                    "hooked {} at {} ({} functions, {}) {when}",
                                    if a.interposer {
                                        "a preloaded library that exports the CUDA driver API"
                                    } else if a.nccl {
                                        "libnccl"
                                    } else {
                                        "libcuda"
                                    },
                                    a.path,
                                    a.functions.len(),
                                    a.via
                                ),
                            },
                        )?;
                    }
                    Err(e) => pipe.note(
                        now,
                        &Note::Warning {
                            id: "libcuda_refused",
                            message: &e,
                        },
                    )?,
                }
            }
            self.reread_loaders(&done.loaders, pipe)?;
        }
        Ok(())
    }

    /// The task name of a live process that `--comm` keeps (none: gone, or
    /// left out).
    fn kept_comm(&self, pid: u32) -> Option<String> {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        let comm = decode::escape_bytes(comm.trim_end_matches('\n').as_bytes());
        self.filters.keep_comm(&comm).then_some(comm)
    }

    /// A process first seen at the loader's open of its libcuda was read
    /// before the library was mapped: read it again now that it is (its
    /// libcuda's version and path, for the verdict; a second `process`
    /// record, which replaces the first unless the process is gone).
    fn reread_loaders(&mut self, loaders: &[u32], pipe: &mut Pipeline) -> anyhow::Result<()> {
        for &pid in loaders {
            let Some(comm) = self.kept_comm(pid) else {
                continue;
            };
            let mut info = crate::identity::read(pid, self.cmdline, &mut self.libs);
            if info.exe.is_some() && !info.libcuda.is_empty() {
                info.comm = Some(comm);
                pipe.process(Clock::mono_now(), info)?;
            }
        }
        Ok(())
    }
}

/// When the periodic work is next due, each on its own clock: a flood
/// that keeps the ring buffer busy delays none of it.
struct Schedule {
    lost: Instant,
    stall: Instant,
    /// `nvprobe top`'s calls in flight.
    view: Instant,
    deadline: Option<Instant>,
}

/// Run until SIGINT/SIGTERM (or `--duration`), then drain what is left and
/// return the summary. Dropping the caller's `Ebpf` afterwards detaches
/// every probe. A write error ends the run at once
/// ([`crate::output::WriteFailed`]): the caller tells a closed pipe from
/// the rest.
pub async fn run(
    ebpf: &mut aya::Ebpf,
    attacher: Option<&crate::uprobes::attacher::Attacher>,
    ctx: Arc<Context>,
    filters: Arc<Filters>,
    out: Output,
    opts: &RunOpts,
    stop: StopSignals,
) -> anyhow::Result<Summary> {
    let (mut ring, mut lost) = open_ring(ebpf)?;
    let StopSignals {
        int: mut sigint,
        term: mut sigterm,
        hup: mut sighup,
    } = stop;
    let reopener = out.reopener();
    let mut reopen_due = false;
    let mut tick = interval(opts.tick);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let started = Instant::now();
    let mut due = Schedule {
        lost: started + opts.lost_every,
        stall: started + opts.stall_every,
        view: started,
        deadline: opts.duration.map(|d| started + d),
    };
    let mut live = Live::new(ebpf, &ctx, &filters, opts);
    live.peers.scan(live.nv_procs.as_mut());
    let version = ctx.version;
    let health = out.health();
    let mut pipe = Pipeline::start(out, ctx, filters, &opts.pipe)?;
    let budget = opts.drain_budget;
    let mut left = Drained::All;
    loop {
        // Signals and the tick come first: a ring buffer that is never
        // empty must not keep them waiting.
        tokio::select! {
            biased;
            _ = sigint.recv() => break,
            _ = sigterm.recv() => break,
            // Without -o there is nothing to reopen: a hangup of the
            // terminal shows as a failed write, and a reload sent to a
            // service logging to stdout must not stop it.
            _ = sighup.recv() => {
                // `top` without -o: the terminal hung up, nobody sees it.
                if reopener.is_none() && opts.hangup_stops {
                    break;
                }
                reopen_due = reopener.is_some();
            }
            _ = tick.tick() => {
                left = live.on_tick(ring.get_mut(), &mut pipe, (opts, budget), attacher)?;
            }
            // More is waiting: go on after a yield to the runtime (signals,
            // timers), or after a millisecond when the decode threads are
            // full.
            _ = pause(left), if left != Drained::All => {
                left = live.drain(ring.get_mut(), &mut pipe, budget)?;
            }
            guard = ring.readable_mut(), if left == Drained::All => {
                let mut guard = guard.context("waiting on the ring buffer")?;
                left = live.drain(guard.get_inner_mut(), &mut pipe, budget)?;
                guard.clear_ready();
            }
        }
        live.hand_loads(attacher);
        if reopen_due && reopener.as_ref().is_none_or(|r| r.request()) {
            reopen_due = false;
        }
        if let Some(e) = health.error() {
            // Nothing more can be written: no last drain, no summary.
            drop(pipe.finish());
            return Err(e.into());
        }
        let now = Instant::now();
        live.on_schedule(now, &mut due, (opts, &version, left), &mut lost, &mut pipe)?;
        if due.deadline.is_some_and(|d| now >= d) {
            break;
        }
    }
    // What arrived between the last wake-up and the stop, and no more: under
    // a flood the ring buffer refills as fast as it is read, and what the
    // programs write after the stop is not this run's (the probes stay
    // until the kernel removes them after nvprobe's exit).
    live.until_ns = Some(Clock::mono_now());
    // The losses up to the stop: the ring buffer stays full while the stop
    // reads it, and what the probes drop after the stop is not the run's.
    poll_lost(&mut lost, &mut pipe)?;
    let logged = super::kmsg::take(opts.kernel_log.as_ref());
    let unread = live.drain_last(ring.get_mut(), &mut pipe, LAST_DRAIN)?;
    super::kmsg::hand(opts.kernel_log.as_ref(), logged, &mut pipe)?;
    live.calls.end_hangs(&mut pipe)?;
    end_of_run(
        ebpf,
        pipe,
        (&health, &version, opts.ending()),
        lost,
        (unread, started, live.quieted_total()),
    )
}

impl Live {
    /// The collector's state, with the maps it reads taken from the object.
    fn new(ebpf: &mut aya::Ebpf, ctx: &Context, filters: &Arc<Filters>, opts: &RunOpts) -> Self {
        Live {
            seen: Seen::default(),
            until_ns: None,
            past_stop: false,
            nv_procs: ebpf
                .take_map(maps::NV_PROCS)
                .and_then(|m| aya::maps::HashMap::try_from(m).ok()),
            quieted: ebpf
                .take_map(maps::QUIETED)
                .and_then(|m| PerCpuArray::try_from(m).ok()),
            rb_fill: ebpf
                .take_map(maps::RB_FILL)
                .and_then(|m| aya::maps::Array::try_from(m).ok()),
            polls: 0,
            calls: super::inflight::InFlightCalls {
                inflight: ebpf
                    .take_map(maps::INFLIGHT)
                    .and_then(|m| aya::maps::Array::try_from(m).ok()),
                untimed: crate::stall::FirstSeen::default(),
                stalls: crate::stall::Detector::default(),
                hangs: opts.hang_after.map(|after| {
                    super::hangs::Hangs::new(
                        after,
                        ebpf.take_map(maps::RT_INFLIGHT)
                            .and_then(|m| aya::maps::Array::try_from(m).ok()),
                        ebpf.take_map(maps::NCCL_COMMS)
                            .and_then(|m| aya::maps::HashMap::try_from(m).ok()),
                        opts.launches_hooked,
                    )
                }),
            },
            held: None,
            idents: Vec::new(),
            libs: crate::identity::LibCache::new(ctx.host_driver.clone()),
            cmdline: opts.cmdline,
            filters: filters.clone(),
            peers: super::peers::Peers::new(
                ebpf.take_map(maps::PEERS)
                    .and_then(|m| aya::maps::HashMap::try_from(m).ok()),
            ),
            gate: opts.gate.clone(),
            held_at_start: HashSet::new(),
        }
    }
}

impl Live {
    /// What the collector does on its clock: losses, the first-context
    /// clock, metrics, stall checks, `top`'s calls in flight.
    fn on_schedule(
        &mut self,
        now: Instant,
        due: &mut Schedule,
        (opts, version, left): (&RunOpts, &VersionCtx, Drained),
        lost: &mut LostCounter,
        pipe: &mut Pipeline,
    ) -> anyhow::Result<()> {
        if now >= due.lost {
            poll_lost(lost, pipe)?;
            // Start-ups waiting for a first context wait on this clock too,
            // once everything made before now has been handed on (a tick
            // ahead of held records would end a wait they would end).
            if left == Drained::All && self.held.is_none() {
                pipe.tick(Clock::mono_now())?;
            }
            due.lost = now + opts.lost_every;
            let counts = self.counts();
            for o in &opts.pipe.observers {
                o.counts(&counts);
            }
        }
        if now >= due.stall {
            if let Some(after) = opts.stall_after
                && !self.seen.known.is_empty()
            {
                self.calls.check_stalls(&self.seen, after, version, pipe)?;
            }
            self.calls
                .check_hangs(&mut self.seen, self.nv_procs.as_ref(), version, pipe)?;
            due.stall = now + opts.stall_every;
        }
        if now >= due.view && opts.pipe.observers.iter().any(|o| o.wants_flights()) {
            let calls: Vec<super::Flight> = self
                .calls
                .in_flight(&self.seen, version)
                .into_iter()
                .map(|(pid, c)| super::Flight {
                    tid: c.tid,
                    pid,
                    start_ns: c.start_ns,
                    call: c.call,
                })
                .collect();
            for o in opts.pipe.observers.iter().filter(|o| o.wants_flights()) {
                o.flights(calls.clone());
            }
            due.view = now + VIEW_EVERY;
        }
        Ok(())
    }
}

impl Live {
    /// The collector's tick: the ring buffer drained, the kernel log's
    /// lines after it, peers noted, new libcuda copies handed to the
    /// hooking thread.
    fn on_tick(
        &mut self,
        ring: &mut Ring,
        pipe: &mut Pipeline,
        (opts, budget): (&RunOpts, Duration),
        attacher: Option<&crate::uprobes::attacher::Attacher>,
    ) -> anyhow::Result<Drained> {
        let logged = super::kmsg::take(opts.kernel_log.as_ref());
        if let Some(h) = self.calls.hangs.as_mut() {
            for (at, l) in &logged {
                h.log_line(*at, &l.message);
            }
        }
        let left = self.drain(ring, pipe, budget)?;
        // The start's holders, read while they live even if they send
        // nothing (quiet ones may not before their exit).
        self.take_held();
        if !self.idents.is_empty() {
            self.send_identities(pipe)?;
        }
        super::kmsg::hand(opts.kernel_log.as_ref(), logged, pipe)?;
        self.peers_noted(pipe)?;
        match attacher {
            Some(a) => self.hook_new_libcuda(a, pipe)?,
            None => {
                self.seen.new_tgids.clear();
                self.seen.lib_loads.clear();
                self.libs.preload_files.clear();
            }
        }
        Ok(left)
    }
}

/// The ring buffer, polled by the runtime, and the counters of what did
/// not fit in it.
/// How often `nvprobe top` learns the calls in flight.
const VIEW_EVERY: Duration = Duration::from_millis(200);

/// The longest the stop decodes records still in the ring buffer (what is
/// left after it is counted, not decoded: `unread_at_stop`).
pub const LAST_DRAIN: Duration = Duration::from_millis(250);

/// Records are in the ring buffer in the order they were reserved, and each
/// takes its time just after: one made a moment before the stop may sit
/// behind one made a moment after. The stop reads this much past it.
const STOP_SLACK_NS: u64 = 1_000_000;

/// Between two drains of a ring buffer that still holds records.
async fn pause(left: Drained) {
    if left == Drained::Backlog {
        tokio::time::sleep(Duration::from_millis(1)).await;
    } else {
        tokio::task::yield_now().await;
    }
}
