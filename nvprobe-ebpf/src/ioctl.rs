//! The ioctl record: entry state kept at the ioctl's entry (syscall
//! tracepoint, or the driver layer's kprobe), the record made at its exit
//! with the head and tail of the parameter struct, and, for the
//! `NV_ESC_RM_CONTROL` controls user space listed in `RM_PARAMS`, the
//! control's own parameters behind NVOS54.params.

use aya_ebpf::helpers::{bpf_probe_read_user, generated};
use nvprobe_common::{
    EventKind, HEAD_LEN, Inflight, IoctlEvent, RM_DEREF_LEN, RM_PARAMS_LEN, RmControlEvent,
    TAIL_LEN, bench_skip,
    ioctl::{
        NV_ESC_RM_CONTROL, NVKMS_IOCTL_IOWR, NVKMS_PARAMS_SIZE, NVOS54_SIZE, ioc_nr, ioc_size,
        is_escape, is_xfer,
    },
    ioctl_flags, nv_procs, rm_params,
};

use crate::{
    fdres::{fill_header, rm_params_on, wakeup_bytes},
    maps::{self, EVENTS, RM_PARAMS, UVM_SIZES, count_lost, take_slot, wakeup_flags},
    now, store, tid, zeroed_inflight,
};

/// Keep an NVIDIA ioctl's entry state (the syscall tracepoint, or the
/// driver layer's kprobe on the module's ioctl entry point with fd -1).
#[inline(always)]
pub(crate) fn ioctl_begin(
    fd: i32,
    file: nvprobe_common::FileId,
    cmd: u32,
    argp: u64,
    flags: u32,
) -> Result<(), i64> {
    let mut inf = zeroed_inflight();
    inf.flags = flags;
    inf.kind = EventKind::Ioctl as u32;
    inf.start_ns = now();
    inf.fd = fd;
    inf.cmd = cmd;
    inf.a0 = argp;
    inf.file = file;
    if is_xfer(cmd) {
        // nv_ioctl_xfer_t { NvU32 cmd; NvU32 size; NvP64 ptr; } (nv-ioctl.h)
        inf.flags |= ioctl_flags::XFER;
        // SAFETY: reading user memory through the helper, which handles faults.
        match unsafe { bpf_probe_read_user(argp as *const [u64; 2]) } {
            Ok(x) => {
                inf.xfer_cmd = x[0] as u32;
                inf.xfer_size = (x[0] >> 32) as u32;
                inf.xfer_ptr = x[1];
            }
            Err(_) => inf.flags |= ioctl_flags::XFER_FAULT,
        }
    }
    store(inf)
}

/// What to copy of an RM control's parameters.
struct RmCopy {
    control: u32,
    params: u64,
    len: u32,
    deref_off: u32,
}

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

/// Emit the ioctl record of this thread's pending NVIDIA ioctl.
#[inline(always)]
pub(crate) fn ioctl_finish(ret: i64) -> Result<(), i64> {
    let Some(inf) = take_slot(tid(), Some(EventKind::Ioctl as u32)) else {
        return Ok(());
    };
    let skip = crate::fdres::bench_skip();
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
            maps::first_sight(tgid);
        }
        // A process past its verdict whose call succeeded: nothing of it
        // is shipped (--events failures|verdicts), so nothing is copied.
        Some(v) if v & nv_procs::QUIET != 0 && ret == 0 && maps::quiet_success(&inf, ptr, size) => {
            maps::count_quieted();
            return Ok(());
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
                fill_rm_params(ev, &rm);
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
    mut flags: u32,
) {
    // SAFETY: per the function's contract.
    unsafe {
        fill_header(&raw mut (*ev).hdr, EventKind::Ioctl);
        (*ev).file = inf.file;
        (*ev).start_ns = inf.start_ns;
        (*ev).duration_ns = end.saturating_sub(inf.start_ns);
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

/// Whether a control with a pointer to follow filled the buffer behind it.
/// SYSTEM_GET_BUILD_VERSION (the one such control) answers a call with
/// any of its three buffer pointers NULL with the strings' size only
/// (`sizeOfStrings` @0), writing no string: the buffer then holds whatever
/// the caller had there, which is not the driver's answer and may be
/// private. Follow it only when all three pointers are set.
#[inline(always)]
fn deref_answered(p: &[u8; RM_PARAMS_LEN]) -> bool {
    let word = |o: usize| {
        let mut v = 0u64;
        for i in 0..8 {
            v |= (p[o + i] as u64) << (8 * i);
        }
        v
    };
    p[0] | p[1] | p[2] | p[3] != 0 && word(8) != 0 && word(16) != 0 && word(24) != 0
}

/// Copy the control's parameters (and the string a pointer in them leads
/// to) into the record. Unread bytes stay zero: nothing of the ring
/// buffer's previous contents leaves the kernel.
///
/// # Safety
/// `ev` points at reserved ring-buffer memory of an [`RmControlEvent`].
#[inline(always)]
unsafe fn fill_rm_params(ev: *mut RmControlEvent, rm: &RmCopy) {
    // SAFETY: per the function's contract.
    unsafe {
        (*ev).control = rm.control;
        (*ev)._pad = 0;
        (*ev).params = [0u8; RM_PARAMS_LEN];
        (*ev).deref = [0u8; RM_DEREF_LEN];
        (*ev).params_len = 0;
        (*ev).deref_len = 0;
        let len = rm.len & 0x1ff;
        if len == 0 || len > RM_PARAMS_LEN as u32 {
            return;
        }
        let rc = generated::bpf_probe_read_user(
            (*ev).params.as_mut_ptr().cast(),
            len,
            rm.params as *const _,
        );
        if rc != 0 {
            return;
        }
        (*ev).params_len = len;
        let off = rm.deref_off;
        if off == rm_params::NO_DEREF || off > (RM_PARAMS_LEN - 8) as u32 || off + 8 > len {
            return;
        }
        // The pointer as the driver left it in the bytes just copied (no
        // second read of user memory that could differ).
        let mut b = [0u8; 8];
        for (i, x) in b.iter_mut().enumerate() {
            *x = (*ev).params[(off as usize + i) & (RM_PARAMS_LEN - 1)];
        }
        let p = u64::from_le_bytes(b);
        if p == 0 || !deref_answered(&(*ev).params) {
            return;
        }
        let n = generated::bpf_probe_read_user_str(
            (*ev).deref.as_mut_ptr().cast(),
            RM_DEREF_LEN as u32,
            p as *const _,
        );
        if n > 1 && n <= RM_DEREF_LEN as i64 {
            (*ev).deref_len = (n - 1) as u32;
        }
    }
}
