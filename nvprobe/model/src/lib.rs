//! nvprobe's model: everything between a raw kernel record and a rendered
//! line, with no BPF, no async runtime and no host I/O, so that replays and
//! fixture tests depend on this crate alone.
//!
//! Data flows one way: [`decode`] (raw record → typed [`decode::Event`]) →
//! [`correlate`] (per-process cuInit tracking → stage, signal, breakdown
//! and verdict [`correlate::Record`]s) → [`render`] (text or NDJSON).
//! [`summary`] counts what went by; [`records`] holds the non-kernel
//! records the collector adds; [`replay`] reads a recording back through
//! all of it.

#![recursion_limit = "256"]

pub mod attribution;
pub mod correlate;
pub mod decode;
pub mod diff;
pub mod hang;
pub mod hints;
pub mod kmsg;
pub mod records;
pub mod render;
pub mod replay;
pub mod summary;
pub mod visible;
