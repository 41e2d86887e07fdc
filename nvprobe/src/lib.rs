//! nvprobe: an eBPF tracer for NVIDIA GPU driver calls.
//!
//! Data flows one way: kernel probes -> one ring buffer -> the model
//! (`nvprobe_model`: decode -> correlate -> render) -> [`output`].
//! [`attach`] decides which probes run, [`collect`] drains the ring buffer,
//! [`host`] reads what the host says about its driver.

#![recursion_limit = "256"]

pub use nvprobe_model::{correlate, decode, records, render, summary};

pub mod attach;
pub mod btf;
pub mod doctor;
pub mod hooks;
pub mod host;
pub mod identity;
pub mod metrics;
pub mod output;
pub mod perfetto;
pub mod pipeline;
pub mod safefs;
pub mod stall;
pub mod top;
pub mod uprobes;
