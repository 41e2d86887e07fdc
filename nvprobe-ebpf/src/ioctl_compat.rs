//! The ioctl exit for kernels whose verifier refuses the one in
//! `ioctl.rs` as too complex (Linux 6.1: it runs the verifier's budget out
//! after minutes): the exit as it was before the kernel side decided per
//! call at `--events failures|verdicts` and read the head once. Only a
//! quiet process's successes stay in the kernel here, counted in
//! `QUIETED` alone; every other call is sent, and in a process quiet since
//! nvprobe started (`nv_procs::HELD`) the call after a failure or a signal
//! too, as the counting exit sends it. The driver layer's ioctl records
//! are made here on every kernel. Kept as the 6.1 verifier takes it: a
//! change here must pass `cargo xtask vm-test --only 6.1`.

use aya_ebpf::helpers::{bpf_probe_read_user, generated};
use nvprobe_common::{
    EventKind, HEAD_LEN, Inflight, IoctlEvent, RM_PARAMS_LEN, RmControlEvent, TAIL_LEN, bench_skip,
    ioctl::{
        NV_ESC_RM_CONTROL, NVKMS_IOCTL_IOWR, NVKMS_PARAMS_SIZE, NVOS54_SIZE, ioc_nr, ioc_size,
        is_escape,
    },
    ioctl_flags, nv_procs, rm_params,
};

use crate::{
    config::{now, rm_params_on, tid},
    fdres::{fill_header, wakeup_bytes},
    ioctl::RmCopy,
    maps::{self, EVENTS, RM_PARAMS, STATUS_AT, UVM_SIZES, count_lost, take_slot, wakeup_flags},
};

/// The copy `RM_PARAMS` asks for, when this call is an `NV_ESC_RM_CONTROL`
/// (plain or XFER-wrapped) that returned 0 and left NV_OK in NVOS54, on a
/// control listed there. One 32-byte read of NVOS54 per RM control, and
/// nothing for any other call.
#[inline(always)]
fn rm_copy(inf: &Inflight, ret: i64, ptr: u64, size: u32) -> Option<RmCopy> {
    if ret != 0 || ptr == 0 || size != NVOS54_SIZE || !rm_params_on() {
        return None;
    }
    let rm_control = if inf.flags & ioctl_flags::XFER != 0 {
        ioc_nr(inf.xfer_cmd) == NV_ESC_RM_CONTROL
    } else {
        is_escape(inf.cmd) && ioc_nr(inf.cmd) == NV_ESC_RM_CONTROL
    };
    if !rm_control {
        return None;
    }
    // NVOS54: hClient @0, hObject @4, cmd @8, flags @12, params @16,
    // paramsSize @24, status @28 (nvos.h).
    // SAFETY: reading user memory through the helper, which handles faults.
    let w = unsafe { bpf_probe_read_user(ptr as *const [u32; 8]) }.ok()?;
    let params = (w[4] as u64) | ((w[5] as u64) << 32);
    if w[7] != 0 || params == 0 {
        return None;
    }
    // SAFETY: plain map lookup of a u32.
    let v = *unsafe { RM_PARAMS.get(&w[2]) }?;
    let mut len = rm_params::copy(v);
    if len > w[6] {
        len = w[6];
    }
    if len > RM_PARAMS_LEN as u32 {
        len = RM_PARAMS_LEN as u32;
    }
    Some(RmCopy {
        control: w[2],
        params,
        len,
        deref_off: rm_params::deref_off(v),
    })
}

/// The ioctl exit as it was before the per-call decision: kept for
/// kernels whose verifier refuses `ioctl::ioctl_finish` (Linux 6.1 runs
/// its budget out on it).
#[inline(always)]
pub(crate) fn ioctl_finish_compat(ret: i64) -> Result<(), i64> {
    let Some(inf) = take_slot(tid(), Some(EventKind::Ioctl as u32)) else {
        return Ok(());
    };
    let skip = crate::config::bench_skip();
    if skip & bench_skip::EXIT_STATE != 0 {
        return Ok(());
    }
    let end = now();

    // Where the parameter struct is and how big it is.
    let mut flags = inf.flags;
    let (ptr, size) = if flags & ioctl_flags::XFER != 0 {
        if flags & ioctl_flags::XFER_FAULT != 0 {
            (0u64, 0u32)
        } else if inf.xfer_size > nvprobe_common::ioctl::NV_MAX_IOCTL_SIZE {
            // The driver refuses a wrapper claiming more than this
            // (NV_ABSOLUTE_MAX_IOCTL_SIZE): copy nothing of what lies
            // behind the pointer, which is not a parameter struct.
            (0u64, inf.xfer_size)
        } else {
            (inf.xfer_ptr, inf.xfer_size)
        }
    } else if is_escape(inf.cmd) {
        (inf.a0, ioc_size(inf.cmd))
    } else if inf.cmd == NVKMS_IOCTL_IOWR {
        (inf.a0, NVKMS_PARAMS_SIZE)
    } else {
        // UVM commands carry no size; user space loads the driver version's
        // sizes into UVM_SIZES.
        // SAFETY: plain map lookup of a u32.
        match unsafe { UVM_SIZES.get(&inf.cmd) } {
            Some(s) => (inf.a0, *s),
            None => {
                flags |= ioctl_flags::SIZE_UNKNOWN;
                (inf.a0, 0)
            }
        }
    };

    // From now on this process's exit and signals are reported, even when
    // its first NVIDIA call is an ioctl on an inherited fd (the verdict then
    // comes at its exit, not when tracing stops).
    let tgid = (aya_ebpf::helpers::bpf_get_current_pid_tgid() >> 32) as u32;
    // SAFETY: plain lookup of a u8.
    match unsafe { maps::NV_PROCS.get(&tgid) }.copied() {
        None => {
            // Its descriptor's open was not seen: its start-up either.
            if maps::held_first(tgid) {
                flags |= ioctl_flags::FIRST_UNSEEN;
            }
        }
        // A quiet process (--events failures|verdicts): a success is
        // counted, nothing of it copied; but in one quiet since nvprobe
        // started (HELD), the call after a failure or a signal
        // (SHIP_NEXT) is sent, as the counting exit sends it.
        Some(v) if v & nv_procs::QUIET != 0 => {
            let ok = if ret == 0 {
                quiet_status(&inf, ptr, size)
            } else {
                Some(false)
            };
            let held = v & nv_procs::HELD != 0;
            if ok == Some(true) && (!held || v & nv_procs::SHIP_NEXT == 0) {
                maps::count_quieted();
                return Ok(());
            }
            if held {
                match ok {
                    Some(true) => maps::ship_next_done(
                        tgid,
                        v,
                        crate::config::start_at_least(inf.start_ns, inf.flags),
                    ),
                    Some(false) => maps::ship_next(tgid, v, true),
                    None => {}
                }
            }
            if v & nv_procs::CALLER == 0 {
                maps::caller(tgid);
            }
        }
        // Followed from its parent, and now an NVIDIA call of its own (an
        // inherited descriptor): its start-up's failed calls count.
        Some(v) if v & nv_procs::CALLER == 0 => {
            maps::caller(tgid);
        }
        Some(_) => {}
    }

    if let Some(rm) = rm_copy(&inf, ret, ptr, size) {
        if let Some(mut entry) = EVENTS.reserve::<RmControlEvent>(0) {
            let ev = entry.as_mut_ptr();
            // SAFETY: `ev` points at a reserved ring-buffer record of the
            // right size; every field is written before submit.
            unsafe {
                fill_ioctl(&raw mut (*ev).ioctl, &inf, ret, end, ptr, size, flags);
                (*ev).ioctl.hdr.kind = EventKind::RmControl as u32;
                crate::ioctl::fill_rm_params(ev, &rm);
            }
            entry.submit(wakeup_flags(
                wakeup_bytes(),
                core::mem::size_of::<RmControlEvent>(),
            ));
            return Ok(());
        }
        // No room for the parameters: the call itself may still fit.
        count_lost(EventKind::RmControl);
    }

    let Some(mut entry) = EVENTS.reserve::<IoctlEvent>(0) else {
        count_lost(EventKind::Ioctl);
        return Ok(());
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: `ev` points at a reserved ring-buffer record of the right size;
    // every field is written before submit.
    unsafe { fill_ioctl(ev, &inf, ret, end, ptr, size, flags) };
    entry.submit(wakeup_flags(
        wakeup_bytes(),
        core::mem::size_of::<IoctlEvent>(),
    ));
    Ok(())
}

/// Write every field of the ioctl record at `ev`, copying the head and the
/// tail of the `size`-byte parameter struct at `ptr`.
///
/// # Safety
/// `ev` points at reserved ring-buffer memory of an [`IoctlEvent`].
#[inline(always)]
unsafe fn fill_ioctl(
    ev: *mut IoctlEvent,
    inf: &Inflight,
    ret: i64,
    end: u64,
    ptr: u64,
    size: u32,
    flags: u32,
) {
    // An untimed call (its start not read) starts where it is seen to end.
    let (start, mut flags) = crate::config::record_start(inf.start_ns, end, flags);
    // SAFETY: per the function's contract.
    unsafe {
        fill_header(&raw mut (*ev).hdr, EventKind::Ioctl);
        (*ev).file = inf.file;
        (*ev).start_ns = start;
        (*ev).duration_ns = end.saturating_sub(start);
        (*ev).arg = inf.a0;
        (*ev).ret = ret;
        (*ev).fd = inf.fd;
        (*ev).cmd = inf.cmd;
        (*ev).xfer_cmd = inf.xfer_cmd;
        (*ev).xfer_size = inf.xfer_size;
        (*ev).xfer_ptr = inf.xfer_ptr;
        (*ev).param_size = size;
        (*ev)._pad = 0;

        let head_len = if size < HEAD_LEN as u32 {
            size
        } else {
            HEAD_LEN as u32
        };
        (*ev).head = [0u8; HEAD_LEN];
        (*ev).tail = [0u8; TAIL_LEN];
        (*ev).head_len = 0;
        if head_len > 0 && ptr != 0 {
            let rc = generated::bpf_probe_read_user(
                (*ev).head.as_mut_ptr().cast(),
                head_len,
                ptr as *const _,
            );
            if rc == 0 {
                (*ev).head_len = head_len;
            } else {
                flags |= ioctl_flags::HEAD_FAULT;
            }
        }
        (*ev).tail_off = 0;
        (*ev).tail_len = 0;
        if size > HEAD_LEN as u32 && ptr != 0 {
            let off = size - TAIL_LEN as u32;
            let rc = generated::bpf_probe_read_user(
                (*ev).tail.as_mut_ptr().cast(),
                TAIL_LEN as u32,
                (ptr + off as u64) as *const _,
            );
            if rc == 0 {
                (*ev).tail_off = off;
                (*ev).tail_len = TAIL_LEN as u32;
            } else {
                flags |= ioctl_flags::TAIL_FAULT;
            }
        }
        (*ev).flags = flags;
    }
}

/// Whether a call that returned 0 also left NV_STATUS 0 (NV_OK) in its
/// parameters, by the offset user space put into STATUS_AT; None when
/// that cannot be told (not in STATUS_AT, or unreadable).
#[inline(always)]
fn quiet_status(inf: &Inflight, ptr: u64, size: u32) -> Option<bool> {
    let key = if inf.flags & nvprobe_common::ioctl_flags::XFER != 0 {
        if inf.flags & nvprobe_common::ioctl_flags::XFER_FAULT != 0
            || inf.xfer_size > nvprobe_common::ioctl::NV_MAX_IOCTL_SIZE
        {
            return None;
        }
        nvprobe_common::status_at::xfer_key(inf.xfer_cmd, inf.xfer_size)
    } else {
        inf.cmd
    };
    // SAFETY: plain lookup of a u32.
    let off = (unsafe { STATUS_AT.get(&key) }).copied()?;
    if off == nvprobe_common::status_at::NO_STATUS {
        return Some(true);
    }
    if ptr == 0 || off.saturating_add(4) > size {
        return None;
    }
    // SAFETY: reading user memory through the helper, which handles faults.
    unsafe { aya_ebpf::helpers::bpf_probe_read_user((ptr + off as u64) as *const u32) }
        .ok()
        .map(|st| st == 0)
}
