//! nvprobe: an eBPF tracer for NVIDIA GPU driver calls.
//!
//! Data flows one way: kernel probes -> one ring buffer -> the model
//! (`nvprobe_model`: decode -> correlate -> render) -> [`output`].
//! [`attach`] decides which probes run and attaches them, [`pipeline`]
//! drains the ring buffer (or replays a recording) into the model and the
//! [`pipeline::Observer`]s ([`metrics`], [`perfetto`], [`top`]),
//! [`uprobes`] hooks each libcuda copy, [`host`] and [`identity`] read what
//! the host and each process say, [`doctor`] checks a host, [`safefs`] reads
//! host trees without following links out of them.

#![recursion_limit = "256"]

pub use nvprobe_model::{correlate, decode, records, render, summary};

pub mod attach;
pub mod btf;
pub mod doctor;
pub mod hooks;
pub mod host;
pub mod identity;
pub mod kernel_checks;
pub mod klog;
pub mod libcheck;
pub mod metrics;
pub mod output;
pub mod perfetto;
pub mod pipeline;
pub mod safefs;
pub mod stall;
pub mod top;
pub mod uprobes;
pub mod uretprobe_gate;
