//! The end of a live run: the pipeline's last records, the losses with
//! what the stop left unread, and the summary.

use nvprobe_model::{
    decode::version::VersionCtx,
    render::{Clock, Note},
    summary::Summary,
};
use tokio::time::Instant;

use super::{Pipeline, handles::prog_stats, lost::LostCounter, opts::Ending};

/// The lost-kind of records the stop read without decoding.
pub const UNREAD_AT_STOP: &str = "unread_at_stop";

/// The end of a run: the pipeline's last records, the losses (with what
/// the stop left unread), the summary last.
pub(super) fn end_of_run(
    ebpf: &mut aya::Ebpf,
    pipe: Pipeline,
    (health, version, (own_programs, gate)): (&crate::output::Health, &VersionCtx, Ending<'_>),
    lost: LostCounter,
    (unread, started, quieted): (u64, Instant, u64),
) -> anyhow::Result<Summary> {
    let finished = pipe.finish();
    if let Some(e) = health.error() {
        return Err(e.into());
    }
    let (mut out, mut stats) = finished?;
    super::unsent::fold(ebpf, &mut stats, version, Clock::mono_now());
    let mut lost = lost.summary();
    if unread > 0 {
        lost.total += unread;
        *lost.per_kind.entry(UNREAD_AT_STOP.to_owned()).or_insert(0) += unread;
    }
    let mut summary = stats.finish(started.elapsed().as_secs_f64(), lost);
    summary.quieted = quieted;
    if let Some(own) = own_programs {
        summary.bpf = prog_stats(ebpf, own);
    }
    summary.descriptor_gate = gate;
    out.note(Clock::mono_now(), &Note::Summary(&summary))?;
    if let Err(e) = out.finish() {
        return Err(match health.error() {
            Some(w) => w.into(),
            None => e.into(),
        });
    }
    Ok(summary)
}
