//! The interface every output format implements ([`Encoder`]) and what
//! encoders write with ([`Parts`]): below the formats and the renderer.

use std::io;

use bytes::BytesMut;

use super::{clock::Clock, note::Note, otlp};
use crate::{correlate::Record, decode::Event};

/// What a format writes of each record: one implementation per format,
/// in its own file (`text.rs`, `json.rs`, `otlp.rs`), chosen once by
/// [`Renderer::new`]. A new format is one more.
pub trait Encoder: Send + Sync + std::fmt::Debug {
    fn event(&self, p: &mut Parts, buf: &mut BytesMut, mono_ns: u64, ev: &Event) -> io::Result<()>;
    /// A record of the per-process correlator, at the time of the event
    /// that produced it.
    fn record(
        &self,
        p: &mut Parts,
        buf: &mut BytesMut,
        mono_ns: u64,
        rec: &Record,
    ) -> io::Result<()>;
    fn note(
        &self,
        p: &mut Parts,
        buf: &mut BytesMut,
        mono_ns: u64,
        note: &Note<'_>,
    ) -> io::Result<()>;
    /// It shows the lifecycle lines (fork, exec, exit, signal) only of
    /// processes that made an NVIDIA call (text, for people); structured
    /// formats hold every record.
    fn selective(&self) -> bool {
        false
    }
    /// Write what was held back (text folds a run of lookups); most
    /// formats hold nothing.
    fn flush(&self, _: &mut Parts, _: &mut BytesMut) {}
}

/// What an encoder writes with: the wall clock, a scratch buffer, and the
/// identities behind OTLP's resources (shared by the clones of one
/// output's renderer).
#[derive(Clone, Debug)]
pub struct Parts {
    pub clock: Clock,
    pub(crate) scratch: Vec<u8>,
    pub(crate) resources: std::sync::Arc<otlp::Resources>,
    /// Text: the failed path call just written (tid, system call, path,
    /// errno), whose failed-call record (the same call, seen again by the
    /// start-up's failed-call program) is not written a second time.
    pub(crate) last_failed_path: Option<(u32, &'static str, String, Option<String>)>,
    /// Text: the run of failed lookups not written yet.
    pub(crate) run: Option<super::fold::Run>,
    /// Text: the run just written (the writer files the line as its first
    /// call's).
    pub(crate) flushed: Option<super::fold::Flushed>,
    /// Text: nothing of a live batch has been written yet
    /// ([`super::Renderer::begin_batch`]; never in a replay, which renders
    /// every event in order).
    pub(crate) batch_start: bool,
}
