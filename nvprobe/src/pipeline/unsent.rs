//! The calls the kernel side counted instead of sending
//! (`--events failures|verdicts`, `nvprobe_model::correlate::needs`), read
//! from its maps when tracing stops, for the summary: per call (the
//! per-CPU `UNSENT_CALLS`), and per process still running (`UNSENT_PROCS`,
//! and what each thread's `FDCACHE` slot holds not yet added there). An
//! ended process's count came in its exit record. Also the failed returns
//! of fault-only libcuda calls the kernel counted past its cap
//! (`RT_CAPPED`), and the failed system calls of start-ups past the 64
//! sent per program (`FAILS_UNSENT`).

use aya::{
    Ebpf,
    maps::{Array, HashMap as BpfHashMap, PerCpuArray},
};
use nvprobe_common::{
    fastpath::{CALL_SLOTS, FdCache},
    maps,
};
use nvprobe_model::{correlate::needs::ShipTables, decode::version::VersionCtx, summary::Stats};

/// Add the kernel's counts to `stats` (a process is counted under the name
/// it was last listed with; at `now_ns` when it is not listed).
pub fn fold(ebpf: &Ebpf, stats: &mut Stats, version: &VersionCtx, now_ns: u64) {
    if let Some(m) = ebpf.map(maps::UNSENT_CALLS)
        && let Ok(a) = PerCpuArray::<_, u64>::try_from(m)
    {
        for slot in 0..CALL_SLOTS {
            let Ok(per_cpu) = a.get(&slot, 0) else {
                continue;
            };
            let n: u64 = per_cpu.iter().sum();
            if n > 0 {
                let name = ShipTables::slot_name(slot, version).unwrap_or("unknown call");
                stats.add_unsent_calls(name, n);
            }
        }
    }
    // Failed returns of fault-only libcuda calls past the eight sent per
    // process (a sticky error fails every later call), and failed system
    // calls of start-ups past the 64 sent per program.
    for (map, what) in [
        (maps::RT_CAPPED, "libcuda failures past 8 per process"),
        (
            maps::FAILS_UNSENT,
            "failed system calls past 128 per start-up",
        ),
    ] {
        if let Some(m) = ebpf.map(map)
            && let Ok(a) = PerCpuArray::<_, u64>::try_from(m)
            && let Ok(per_cpu) = a.get(&0, 0)
        {
            let n: u64 = per_cpu.iter().sum();
            if n > 0 {
                stats.add_unsent_calls(what, n);
            }
        }
    }
    let mut per_proc: std::collections::BTreeMap<u32, u64> = Default::default();
    if let Some(m) = ebpf.map(maps::UNSENT_PROCS)
        && let Ok(h) = BpfHashMap::<_, u32, u64>::try_from(m)
    {
        for (pid, n) in h.iter().flatten() {
            *per_proc.entry(pid).or_default() += n;
        }
    }
    if let Some(m) = ebpf.map(maps::FDCACHE)
        && let Ok(a) = Array::<_, FdCache>::try_from(m)
    {
        for c in a.iter().flatten() {
            if c.tid != 0 && c.unsent != 0 {
                *per_proc.entry(c.tgid).or_default() += u64::from(c.unsent);
            }
        }
    }
    for (pid, n) in per_proc {
        stats.add_unsent_process(pid, "", n, now_ns);
    }
}
