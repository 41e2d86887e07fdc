//! Names of the maps in the BPF object (`nvprobe-ebpf/src/maps.rs`), for
//! the collector to take them by.

pub const EVENTS: &str = "EVENTS";
pub const LOST: &str = "LOST";
pub const INFLIGHT: &str = "INFLIGHT";
pub const NV_PROCS: &str = "NV_PROCS";
pub const PID_FILTER: &str = "PID_FILTER";
pub const EXTRA_FILES: &str = "EXTRA_FILES";
pub const UVM_SIZES: &str = "UVM_SIZES";
pub const CUDA_ENTRIES: &str = "CUDA_ENTRIES";
pub const SELFTEST_HITS: &str = "SELFTEST_HITS";
pub const WAKE_NEXT: &str = "WAKE_NEXT";
pub const STATUS_AT: &str = "STATUS_AT";
pub const QUIETED: &str = "QUIETED";
pub const RB_FILL: &str = "RB_FILL";
pub const RM_PARAMS: &str = "RM_PARAMS";
pub const PEERS: &str = "PEERS";
pub const FDCACHE: &str = "FDCACHE";
pub const FD_GEN: &str = "FD_GEN";
pub const FD_GATE: &str = "FD_GATE";
pub const CLEAN: &str = "CLEAN";
pub const SHIP_CALLS: &str = "SHIP_CALLS";
pub const SHIP_CONTROLS: &str = "SHIP_CONTROLS";
pub const STATUS_SLOTS: &str = "STATUS_SLOTS";
pub const UNSENT_CALLS: &str = "UNSENT_CALLS";
pub const UNSENT_PROCS: &str = "UNSENT_PROCS";
pub const RT_INFLIGHT: &str = "RT_INFLIGHT";
pub const RT_CAPPED: &str = "RT_CAPPED";
pub const FAILS: &str = "FAILS";
pub const FAILS_UNSENT: &str = "FAILS_UNSENT";
pub const NCCL_COMMS: &str = "NCCL_COMMS";
