//! Empty library target: lets `nvprobe/build.rs` depend on this crate so
//! cargo rebuilds the collector when the eBPF programs change (the programs
//! themselves are the `nvprobe` binary target, built for the bpf target).
#![no_std]
