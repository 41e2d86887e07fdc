//! The live source's handles on the kernel side: the ring buffer and its
//! lost counters, the programs' run statistics (`--bpf-stats`), and the
//! signals that stop a run.

use std::io;

use anyhow::Context as _;
use aya::maps::{Map, PerCpuArray};
use nvprobe_common::maps;
use nvprobe_model::summary::ProgStats;
use tokio::{
    io::unix::AsyncFd,
    signal::unix::{SignalKind, signal},
};

use super::{lost::LostCounter, ring::Ring};

/// Each program's runs: the object's, and `own` (name, id): the libcuda
/// programs nvprobe loads itself.
pub(super) fn prog_stats(ebpf: &aya::Ebpf, own: &[(String, u32)]) -> Vec<ProgStats> {
    let stat = |name: String, info: aya::programs::ProgramInfo| {
        let runs = info.run_count();
        let ns = info.run_time().as_nanos() as u64;
        ProgStats {
            program: name,
            run_count: runs,
            run_time_ns: ns,
            ns_per_run: if runs > 0 {
                ns as f64 / runs as f64
            } else {
                0.0
            },
        }
    };
    let mut v: Vec<_> = ebpf
        .programs()
        .filter_map(|(name, prog)| Some(stat(name.to_owned(), prog.info().ok()?)))
        .collect();
    if !own.is_empty() {
        for info in aya::programs::loaded_programs().flatten() {
            if let Some((name, _)) = own.iter().find(|(_, id)| *id == info.id()) {
                v.push(stat(name.clone(), info));
            }
        }
    }
    v.retain(|p| p.run_count > 0);
    v.sort_by(|a, b| a.program.cmp(&b.program));
    v
}

/// SIGINT and SIGTERM, caught from before the start record is written (a
/// signal sent as soon as the start record appears must stop nvprobe
/// cleanly, not kill it), and SIGHUP: reopen the `-o` file (logrotate);
/// without -o, `watch` ignores it (a reload of a service logging to
/// stdout) and `top` stops (its terminal went away). Install inside the
/// runtime (`Runtime::enter`).
pub struct StopSignals {
    pub(super) int: tokio::signal::unix::Signal,
    pub(super) term: tokio::signal::unix::Signal,
    pub(super) hup: tokio::signal::unix::Signal,
}

impl StopSignals {
    pub fn install() -> anyhow::Result<Self> {
        Ok(Self {
            int: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            term: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            hup: signal(SignalKind::hangup()).context("installing the SIGHUP handler")?,
        })
    }
}

pub(super) fn take_map(ebpf: &mut aya::Ebpf, name: &str) -> anyhow::Result<aya::maps::Map> {
    ebpf.take_map(name)
        .with_context(|| format!("{name} map missing from the object"))
}

pub(super) fn open_ring(ebpf: &mut aya::Ebpf) -> anyhow::Result<(AsyncFd<Ring>, LostCounter)> {
    let Map::RingBuf(data) = take_map(ebpf, maps::EVENTS)? else {
        anyhow::bail!("{} is not a ring buffer in the object", maps::EVENTS);
    };
    let ring = Ring::new(data).context("opening the ring buffer")?;
    let lost = LostCounter::new(
        PerCpuArray::try_from(take_map(ebpf, maps::LOST)?).context("opening the LOST counters")?,
    );
    // SAFETY: the ring owns its map fd, which stays open and unchanged for
    // as long as the AsyncFd holds the ring.
    let ring = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
        .map_err(io::Error::from)
        .context("polling the ring buffer")?;
    Ok((ring, lost))
}
