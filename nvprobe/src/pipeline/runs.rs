//! Text's search lines across batches. A worker folds a run of one
//! thread's failed lookups into one line (`nvprobe_model::render`), but
//! workers render batches apart, and a start-up's search often spans two
//! (the collector wakes at a new process's first records). So a batch
//! hands its writer the run it ended in, unwritten, and the run it began
//! with; the writer, which sees the batches in order, joins the two when
//! the second goes on with the first's search.

use nvprobe_model::render::OpenRun;

/// How long a run stays open while nothing but the clock and other
/// line-less items come: a search's calls are microseconds apart.
const HOLD_NS: u64 = 100_000_000;

/// What a batch says of its runs.
#[derive(Debug, Default)]
pub(super) struct Runs {
    /// The run the batch began with (its first kept event), written as
    /// its step `.0`.
    pub(super) lead: Option<(usize, OpenRun)>,
    /// The run the batch ended in, not written.
    pub(super) open: Option<OpenRun>,
    /// `open` began with the batch's first kept event: the batch is that
    /// run alone.
    pub(super) open_leads: bool,
}

/// What the writer does with the run it holds when an item comes.
#[derive(Debug, Default)]
pub(super) struct Meeting {
    /// Written before the item.
    pub(super) first: Option<OpenRun>,
    /// The item's step whose line this joined run's replaces.
    pub(super) replaces: Option<(usize, OpenRun)>,
    /// Held on: for a batch, the run it ended in (after its steps); for
    /// another item, the run held before it (written before any record
    /// the item's steps make).
    pub(super) hold: Option<OpenRun>,
}

/// The run `held` meets an item: a batch (`runs`), or another item
/// (`runs` None) with or without lines of its own, made at `at`.
pub(super) fn meet(
    held: Option<OpenRun>,
    runs: Option<&mut Runs>,
    lines: bool,
    at: Option<u64>,
) -> Meeting {
    let Some(mut held) = held else {
        return Meeting {
            hold: runs.and_then(|r| r.open.take()),
            ..Meeting::default()
        };
    };
    let Some(runs) = runs else {
        // The clock, an identity: the search may go on in the next batch.
        if !lines && at.is_some_and(|t| t.saturating_sub(held.last_ns()) < HOLD_NS) {
            return Meeting {
                hold: Some(held),
                ..Meeting::default()
            };
        }
        return Meeting {
            first: Some(held),
            ..Meeting::default()
        };
    };
    if runs.lead.is_none() && runs.open.is_none() && !lines && at.is_none() {
        // A batch whose every event was filtered out: nothing came between.
        return Meeting {
            hold: Some(held),
            ..Meeting::default()
        };
    }
    if let Some((at, next)) = runs.lead.take() {
        return match held.join(next) {
            Ok(()) => Meeting {
                replaces: Some((at, held)),
                hold: runs.open.take(),
                ..Meeting::default()
            },
            Err(_) => Meeting {
                first: Some(held),
                hold: runs.open.take(),
                ..Meeting::default()
            },
        };
    }
    match runs.open.take() {
        Some(next) if runs.open_leads => match held.join(next) {
            Ok(()) => Meeting {
                hold: Some(held),
                ..Meeting::default()
            },
            Err(next) => Meeting {
                first: Some(held),
                hold: Some(next),
                ..Meeting::default()
            },
        },
        open => Meeting {
            first: Some(held),
            hold: open,
            ..Meeting::default()
        },
    }
}
