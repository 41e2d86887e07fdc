//! The records the correlator adds to the stream: below the handlers that
//! make them and the correlator that hands them on.

use serde::Serialize;

use super::{Breakdown, CuInit, SignalReport, StageHit};

/// Records the correlator adds to the stream.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Stage {
        pid: u32,
        comm: String,
        #[serde(flatten)]
        hit: StageHit,
    },
    Cuinit(Box<CuInit>),
    Signal(Box<SignalReport>),
    Breakdown(Box<Breakdown>),
}
