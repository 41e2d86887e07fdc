//! The records that are not kernel events nor the correlator's: the
//! start, stalls, warnings, losses, the summary, a process's identity;
//! and the schema's version, which every record carries.

use serde::Serialize;

use crate::records::StallReport;
use crate::summary::Summary;

/// Version of the NDJSON schema. Bump on any incompatible change; adding
/// optional fields is compatible.
pub const SCHEMA_VERSION: u32 = 1;

/// One record that is not a kernel event.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Note<'a> {
    Start(&'a crate::records::StartRecord),
    Stall(&'a StallReport),
    /// A call past its start-up still in flight after `--hang-after`.
    Hang(&'a crate::hang::HangReport),
    /// A hung call came back (or its thread ended).
    HangEnd(&'a crate::hang::HangEnd),
    Warning {
        id: &'a str,
        message: &'a str,
    },
    Lost {
        cpu: u32,
        kind: &'a str,
        count: u64,
        total: u64,
    },
    Summary(&'a Summary),
    /// Who a followed process is (read from /proc when it is first seen).
    Process(&'a crate::attribution::ProcessInfo),
}
