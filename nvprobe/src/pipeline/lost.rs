//! The kernel's per-CPU lost-event counters, read on a schedule and turned
//! into `lost` records: nothing is dropped without being counted.

use anyhow::Context as _;
use aya::maps::{MapData, PerCpuArray};
use nvprobe_common::LOST_SLOTS;
use nvprobe_model::{render::Note, summary::LostSummary};

pub struct LostNote {
    cpu: u32,
    kind: &'static str,
    count: u64,
    total: u64,
}

impl LostNote {
    pub fn note(&self) -> Note<'static> {
        Note::Lost {
            cpu: self.cpu,
            kind: self.kind,
            count: self.count,
            total: self.total,
        }
    }
}

pub struct LostCounter {
    map: PerCpuArray<MapData, u64>,
    /// Last seen value per (slot, cpu).
    seen: Vec<Vec<u64>>,
    total: u64,
}

impl LostCounter {
    pub fn new(map: PerCpuArray<MapData, u64>) -> Self {
        Self {
            map,
            seen: vec![Vec::new(); LOST_SLOTS as usize],
            total: 0,
        }
    }

    /// Every increase since the last poll.
    pub fn poll(&mut self) -> anyhow::Result<Vec<LostNote>> {
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
                        kind: nvprobe_common::lost_slot_name(slot as u32),
                        count: delta,
                        total: self.total,
                    });
                }
            }
        }
        Ok(notes)
    }

    pub fn summary(&self) -> LostSummary {
        let ncpu = self.seen.iter().map(Vec::len).max().unwrap_or(0);
        let mut per_cpu = vec![0u64; ncpu];
        let mut per_kind = std::collections::BTreeMap::new();
        for (slot, v) in self.seen.iter().enumerate() {
            let s: u64 = v.iter().sum();
            if s > 0 {
                *per_kind
                    .entry(nvprobe_common::lost_slot_name(slot as u32).to_owned())
                    .or_insert(0) += s;
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

/// The losses since the last poll, each as a `lost` record.
pub(super) fn poll_lost(lost: &mut LostCounter, pipe: &mut super::Pipeline) -> anyhow::Result<()> {
    for n in lost.poll()? {
        pipe.note(nvprobe_model::render::Clock::mono_now(), &n.note())?;
    }
    Ok(())
}
