//! The maps shared with user space. Names are part of the contract with
//! `nvprobe::attach` (looked up by name there).

use aya_ebpf::{
    macros::map,
    maps::{HashMap, LruHashMap, PerCpuArray, RingBuf},
};
use nvprobe_common::{EventKind, ExtraKey, Inflight, LOST_SLOTS};

/// The one ring buffer every record goes through. User space may resize it
/// (`--ringbuf-size`) before load.
#[map]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(16 * 1024 * 1024, 0);

/// Records that could not be reserved, per CPU, indexed by EventKind.
#[map]
pub static LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(LOST_SLOTS, 0);

/// Syscall state between entry and exit, keyed by thread id. LRU so that a
/// thread that dies inside a syscall cannot leak an entry for ever.
#[map]
pub static INFLIGHT: LruHashMap<u32, Inflight> = LruHashMap::with_max_entries(16384, 0);

/// Tgids to trace when Config::pid_filter is set.
#[map]
pub static PID_FILTER: HashMap<u32, u8> = HashMap::with_max_entries(1024, 0);

/// Files that `--device` declares to be NVIDIA devices: (s_dev, ino) -> DevKind.
#[map]
pub static EXTRA_FILES: HashMap<ExtraKey, u8> = HashMap::with_max_entries(256, 0);

/// Parameter struct size per UVM command for the running driver version
/// (UVM commands do not encode a size).
#[map]
pub static UVM_SIZES: HashMap<u32, u32> = HashMap::with_max_entries(512, 0);

#[inline(always)]
pub fn count_lost(kind: EventKind) {
    if let Some(p) = LOST.get_ptr_mut(kind as u32) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU.
        unsafe { *p += 1 };
    }
}
