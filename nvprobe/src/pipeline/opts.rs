//! What a live run is given: its clocks, limits and the handles the start
//! made (the kernel log, the descriptor gate's report).

use std::time::Duration;

use nvprobe_model::summary::DescriptorGate;

use super::PipeOpts;

/// What the summary adds from the run's options: nvprobe's own BPF
/// programs, by name and id, when `--bpf-stats` measures them; the
/// descriptor gate's report.
pub type Ending<'a> = (Option<&'a [(String, u32)]>, Option<DescriptorGate>);

pub struct RunOpts {
    pub duration: Option<Duration>,
    /// How often the ring buffer is drained without a wake-up (the BPF side
    /// wakes the collector only once a backlog builds up).
    pub tick: Duration,
    /// The longest one drain of the ring buffer runs before the loop looks
    /// at signals, the timers and the output again (under a flood the ring
    /// buffer is never empty).
    pub drain_budget: Duration,
    /// How often the lost counters are read (whatever the ring buffer does).
    pub lost_every: Duration,
    pub pipe: PipeOpts,
    /// A hangup without -o ends the run (`top` drawing on a terminal that
    /// went away: nobody sees it).
    pub hangup_stops: bool,
    /// Report calls running longer than this (None: off).
    pub stall_after: Option<Duration>,
    /// How often in-flight calls are checked.
    pub stall_every: Duration,
    /// Report a call of a process past its start-up still in flight after
    /// this long (`--hang-after`; None: off), and whether kernel launches
    /// are hooked (else a hang cannot name the last one).
    pub hang_after: Option<Duration>,
    pub launches_hooked: bool,
    /// Report each BPF program's run count and time (stats must have been
    /// enabled with BPF_ENABLE_STATS before the run).
    pub bpf_stats: bool,
    /// Keep command lines in `process` records.
    pub cmdline: bool,
    /// Programs nvprobe loaded itself (the libcuda layer's): (name, id).
    pub own_programs: Vec<(String, u32)>,
    /// The kernel log, followed (None where it cannot be read).
    pub kernel_log: Option<super::kmsg::Followed>,
    /// The descriptor programs' gate, as its scan reports it (None: not
    /// tried, a probe it needs is missing).
    pub gate: Option<crate::attach::holders::Report>,
}

impl RunOpts {
    /// What the summary adds from these options.
    pub(super) fn ending(&self) -> Ending<'_> {
        (
            self.bpf_stats.then_some(&self.own_programs[..]),
            self.gate.as_ref().map(crate::attach::holders::summary_of),
        )
    }
}
