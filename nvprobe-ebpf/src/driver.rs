//! The driver layer: kprobe/kretprobe pairs on functions inside nvidia,
//! nvidia_uvm and the kernel's HMM code (the hook table is
//! `nvprobe_common::hooks::HOOKS`, each hook numbered by its place there).
//! aya 0.14 has no kprobe attach cookies, so each hook has its own pair of
//! programs, made by `hook!`.
//!
//! Entry keeps (start, the six argument registers) per (tid, hook); return
//! emits one DriverEvent. rm_ioctl's parameters are the kernel's copy, read
//! at return with bpf_probe_read_kernel: the RM status without touching user
//! memory. vmlinux hooks (HMM, mmu notifiers) fire for every caller in the
//! system, so they report only threads that are inside a UVM ioctl.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel_buf},
    macros::{fentry, fexit, kprobe, kretprobe, map},
    maps::LruHashMap,
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext},
};
use nvprobe_common::{
    DriverEvent, DrvEntry, EventKind, HEAD_LEN, HOOK_FIRST_VMLINUX, HOOK_NV_FRONTEND_IOCTL,
    HOOK_NV_IOCTL, HOOK_RM_IOCTL, HOOK_UVM_IOCTL, TAIL_LEN,
};

use crate::{
    fdres::{drv_ioctls, file_id, file_rdev, fill_header, pid_allowed, wakeup_bytes},
    maps::{EVENTS, count_lost, wakeup_flags},
};

#[inline(always)]
fn is_ioctl_hook(hook: u32) -> bool {
    hook == HOOK_NV_IOCTL || hook == HOOK_NV_FRONTEND_IOCTL || hook == HOOK_UVM_IOCTL
}

/// (tid << 32 | hook) -> entry state.
#[map]
static DRV_INFLIGHT: LruHashMap<u64, DrvEntry> = LruHashMap::with_max_entries(16384, 0);

#[inline(always)]
fn key(hook: u32) -> u64 {
    ((bpf_get_current_pid_tgid() as u32 as u64) << 32) | u64::from(hook)
}

#[inline(always)]
fn enter(ctx: &ProbeContext, hook: u32) {
    enter_args(
        hook,
        [
            ctx.arg::<u64>(0).unwrap_or(0),
            ctx.arg::<u64>(1).unwrap_or(0),
            ctx.arg::<u64>(2).unwrap_or(0),
            ctx.arg::<u64>(3).unwrap_or(0),
            ctx.arg::<u64>(4).unwrap_or(0),
            ctx.arg::<u64>(5).unwrap_or(0),
        ],
    );
}

#[inline(always)]
fn enter_args(hook: u32, args: [u64; 6]) {
    if hook >= HOOK_FIRST_VMLINUX {
        // SAFETY: map lookup.
        if unsafe { DRV_INFLIGHT.get(&key(HOOK_UVM_IOCTL)) }.is_none() {
            return;
        }
    }
    let e = DrvEntry {
        // SAFETY: helper without arguments.
        start_ns: unsafe { bpf_ktime_get_ns() },
        args,
    };
    let _ = DRV_INFLIGHT.insert(&key(hook), &e, 0);
    // Without the ioctl syscall tracepoints, the module's ioctl entry point
    // makes the ioctl record itself: (struct file *, cmd, arg).
    if is_ioctl_hook(hook) && drv_ioctls() && pid_allowed() {
        if let Some(file) = file_id(e.args[0]) {
            let _ = crate::ioctl::ioctl_begin(
                -1,
                file,
                e.args[1] as u32,
                e.args[2],
                nvprobe_common::ioctl_flags::FROM_DRIVER,
            );
        }
    }
}

#[inline(always)]
fn exit(ctx: &RetProbeContext, hook: u32) {
    exit_ret(hook, ctx.ret::<i64>());
}

#[inline(always)]
fn exit_ret(hook: u32, ret: i64) {
    let k = key(hook);
    // SAFETY: map lookup; the value is copied out before the delete.
    let Some(e) = (unsafe { DRV_INFLIGHT.get(&k) }).copied() else {
        return;
    };
    let _ = DRV_INFLIGHT.remove(&k);
    if is_ioctl_hook(hook) && drv_ioctls() {
        // The ioctl record stands for the entry point's own span.
        let _ = crate::ioctl_compat::ioctl_finish_compat(ret);
        return;
    }
    let Some(mut entry) = EVENTS.reserve::<DriverEvent>(0) else {
        count_lost(EventKind::Driver);
        return;
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: reserved record; every field written before submit.
    unsafe {
        fill_header(&raw mut (*ev).hdr, EventKind::Driver);
        (*ev).hook = hook;
        (*ev).data_len = 0;
        (*ev).start_ns = e.start_ns;
        (*ev).end_ns = bpf_ktime_get_ns();
        (*ev).ret = ret;
        (*ev).head = [0u8; HEAD_LEN];
        (*ev).tail = [0u8; TAIL_LEN];
        if hook == HOOK_NV_IOCTL || hook == HOOK_NV_FRONTEND_IOCTL || hook == HOOK_UVM_IOCTL {
            // (struct file *, unsigned int cmd, unsigned long arg)
            (*ev).args = [
                e.args[1],
                e.args[2],
                u64::from(file_rdev(e.args[0]).unwrap_or(0)),
                0,
            ];
        } else if hook == HOOK_RM_IOCTL {
            // (sp, nv, nvfp, NvU32 Command, void *pData, NvU32 dataSize)
            let data = e.args[4];
            let size = e.args[5] as u32;
            (*ev).args = [e.args[3] & 0xffff_ffff, u64::from(size), 0, 0];
            if data != 0 {
                if bpf_probe_read_kernel_buf(data as *const u8, &mut (*ev).head).is_ok() {
                    (*ev).data_len = size.min(HEAD_LEN as u32);
                }
                if size as usize > HEAD_LEN {
                    let at = data + u64::from(size) - TAIL_LEN as u64;
                    let _ = bpf_probe_read_kernel_buf(at as *const u8, &mut (*ev).tail);
                }
            }
        } else {
            (*ev).args = [e.args[0], e.args[1], e.args[2], e.args[3]];
        }
    }
    entry.submit(wakeup_flags(
        wakeup_bytes(),
        core::mem::size_of::<DriverEvent>(),
    ));
}

macro_rules! hook {
    ($enter:ident, $exit:ident, $n:expr) => {
        #[kprobe]
        pub fn $enter(ctx: ProbeContext) -> u32 {
            enter(&ctx, $n);
            0
        }

        #[kretprobe]
        pub fn $exit(ctx: RetProbeContext) -> u32 {
            exit(&ctx, $n);
            0
        }
    };
}

hook!(nvprobe_drv_enter_0, nvprobe_drv_exit_0, 0);
hook!(nvprobe_drv_enter_1, nvprobe_drv_exit_1, 1);
hook!(nvprobe_drv_enter_2, nvprobe_drv_exit_2, 2);
hook!(nvprobe_drv_enter_3, nvprobe_drv_exit_3, 3);
hook!(nvprobe_drv_enter_4, nvprobe_drv_exit_4, 4);
hook!(nvprobe_drv_enter_5, nvprobe_drv_exit_5, 5);
hook!(nvprobe_drv_enter_6, nvprobe_drv_exit_6, 6);
hook!(nvprobe_drv_enter_7, nvprobe_drv_exit_7, 7);
hook!(nvprobe_drv_enter_8, nvprobe_drv_exit_8, 8);
hook!(nvprobe_drv_enter_9, nvprobe_drv_exit_9, 9);
hook!(nvprobe_drv_enter_10, nvprobe_drv_exit_10, 10);
hook!(nvprobe_drv_enter_11, nvprobe_drv_exit_11, 11);
hook!(nvprobe_drv_enter_12, nvprobe_drv_exit_12, 12);
hook!(nvprobe_drv_enter_13, nvprobe_drv_exit_13, 13);
hook!(nvprobe_drv_enter_14, nvprobe_drv_exit_14, 14);
hook!(nvprobe_drv_enter_15, nvprobe_drv_exit_15, 15);
hook!(nvprobe_drv_enter_16, nvprobe_drv_exit_16, 16);

/// vmlinux hooks as fentry/fexit, where the kernel allows TRACING programs
/// (user space falls back to the kprobe pair above otherwise). Only the
/// first argument is read: every one of these functions has at least one,
/// and the verifier refuses reads past a function's last argument.
macro_rules! vmlinux_hook {
    ($enter:ident, $exit:ident, $n:expr, $f:literal) => {
        #[fentry(function = $f)]
        pub fn $enter(ctx: FEntryContext) -> u32 {
            let a0: u64 = ctx.arg(0);
            enter_args($n, [a0, 0, 0, 0, 0, 0]);
            0
        }

        #[fexit(function = $f)]
        pub fn $exit(ctx: FExitContext) -> u32 {
            exit_ret($n, ctx.ret::<i64>().unwrap_or(0));
            0
        }
    };
}

vmlinux_hook!(
    nvprobe_drvf_enter_13,
    nvprobe_drvf_exit_13,
    13,
    "__mmu_notifier_register"
);
vmlinux_hook!(
    nvprobe_drvf_enter_14,
    nvprobe_drvf_exit_14,
    14,
    "memremap_pages"
);
vmlinux_hook!(
    nvprobe_drvf_enter_15,
    nvprobe_drvf_exit_15,
    15,
    "request_free_mem_region"
);
vmlinux_hook!(
    nvprobe_drvf_enter_16,
    nvprobe_drvf_exit_16,
    16,
    "hmm_range_fault"
);
