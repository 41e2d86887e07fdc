//! nvprobe: an eBPF tracer for NVIDIA GPU driver calls.
//!
//! Data flows one way: kernel probes -> one ring buffer -> [`decode`] ->
//! [`output`]. [`attach`] decides which probes run, [`collect`] drains the
//! ring buffer, [`host`] reads what the host says about its driver.

#![recursion_limit = "256"]

pub mod attach;
pub mod btf;
pub mod collect;
pub mod correlate;
pub mod decode;
pub mod doctor;
pub mod hooks;
pub mod host;
pub mod output;
pub mod stall;
pub mod summary;
pub mod uprobes;
