//! The self-test object: probes that `nvprobe doctor` loads to ask this
//! kernel what it allows, one program of each kind nvprobe uses, each
//! counting its own hits. A small object of its own (not the tracer's), so
//! that doctor does not depend on the tracer's programs loading.
#![no_std]
#![no_main]

use aya_ebpf::{
    macros::{fentry, kprobe, map, raw_tracepoint, tracepoint, uprobe},
    maps::Array,
    programs::{FEntryContext, ProbeContext, RawTracePointContext, TracePointContext},
};

/// Hits per probe kind (nvprobe_common::SELFTEST_* slots).
#[map]
static SELFTEST_HITS: Array<u64> = Array::with_max_entries(8, 0);

#[inline(always)]
fn hit(slot: u32) {
    if let Some(p) = SELFTEST_HITS.get_ptr_mut(slot) {
        // SAFETY: pointer into the array value; a lost increment under a
        // race only lowers a count that is compared with zero.
        unsafe { *p += 1 };
    }
}

#[tracepoint]
pub fn doctor_tracepoint(_ctx: TracePointContext) -> u32 {
    hit(nvprobe_common::SELFTEST_TRACEPOINT);
    0
}

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn doctor_raw_tracepoint(_ctx: RawTracePointContext) -> i32 {
    hit(nvprobe_common::SELFTEST_RAW_TRACEPOINT);
    0
}

#[uprobe]
pub fn doctor_uprobe(_ctx: ProbeContext) -> u32 {
    hit(nvprobe_common::SELFTEST_UPROBE);
    0
}

#[kprobe]
pub fn doctor_kprobe(_ctx: ProbeContext) -> u32 {
    hit(nvprobe_common::SELFTEST_KPROBE);
    0
}

/// The attach target is chosen at load time (a syscall entry function of
/// this architecture); the name here is only the section's default.
#[fentry(function = "__x64_sys_ioctl")]
pub fn doctor_fentry(_ctx: FEntryContext) -> u32 {
    hit(nvprobe_common::SELFTEST_FENTRY);
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
