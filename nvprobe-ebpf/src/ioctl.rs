//! The ioctl record: entry state kept at the ioctl's entry (syscall
//! tracepoint, or the driver layer's kprobe), the record made at its exit
//! with the head and tail of the parameter struct, and, for the
//! `NV_ESC_RM_CONTROL` controls user space listed in `RM_PARAMS`, the
//! control's own parameters behind NVOS54.params.

use aya_ebpf::helpers::{bpf_probe_read_user, generated};
use nvprobe_common::{
    EventKind, HEAD_LEN, Inflight, IoctlEvent, RM_DEREF_LEN, RM_PARAMS_LEN, RmControlEvent,
    TAIL_LEN, bench_skip,
    fastpath::CALL_SLOTS,
    ioctl::{
        NV_ESC_RM_CONTROL, NVKMS_IOCTL_IOWR, NVKMS_PARAMS_SIZE, NVOS54_SIZE, ioc_nr, ioc_size,
        is_escape, is_xfer,
    },
    ioctl_flags, nv_procs, rm_params,
};

use crate::{
    config::{now, rm_params_on},
    fdres::{fill_header_at, wakeup_bytes},
    maps::{
        self, EVENTS, RM_PARAMS, SHIP_CALLS, SHIP_CONTROLS, STATUS_AT, STATUS_SLOTS, UVM_SIZES,
        count_lost, take_slot, wakeup_flags,
    },
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
    let mut flags = flags;
    let (mut xfer_cmd, mut xfer_size, mut xfer_ptr) = (0u32, 0u32, 0u64);
    if is_xfer(cmd) {
        // nv_ioctl_xfer_t { NvU32 cmd; NvU32 size; NvP64 ptr; } (nv-ioctl.h)
        flags |= ioctl_flags::XFER;
        // SAFETY: reading user memory through the helper, which handles faults.
        match unsafe { bpf_probe_read_user(argp as *const [u64; 2]) } {
            Ok(x) => {
                xfer_cmd = x[0] as u32;
                xfer_size = (x[0] >> 32) as u32;
                xfer_ptr = x[1];
            }
            Err(_) => flags |= ioctl_flags::XFER_FAULT,
        }
    }
    let start_ns = crate::config::start_for(flags);
    // Written in place: every NVIDIA ioctl passes here, and a copy through
    // the stack is twice the stores.
    let tid = crate::config::tid();
    let p = maps::claim_slot(tid).ok_or(0i64)?;
    // SAFETY: pointer into the INFLIGHT array's value; every field is set.
    unsafe {
        (*p).seq = (*p).seq.wrapping_add(1);
        (*p).op = 0;
        (*p).start_ns = start_ns;
        (*p).a0 = argp;
        (*p).a1 = 0;
        (*p).a2 = 0;
        (*p).a3 = 0;
        (*p).fd = fd;
        (*p).cmd = cmd;
        (*p).xfer_cmd = xfer_cmd;
        (*p).xfer_size = xfer_size;
        (*p).xfer_ptr = xfer_ptr;
        (*p).flags = flags;
        (*p).tid = tid;
        (*p).file = file;
        (*p)._pad = 0;
        (*p).kind = EventKind::Ioctl as u32;
    }
    Ok(())
}

/// What to copy of an RM control's parameters.
pub(crate) struct RmCopy {
    pub(crate) control: u32,
    pub(crate) params: u64,
    pub(crate) len: u32,
    pub(crate) deref_off: u32,
}

/// The copy `RM_PARAMS` asks for, when this call is an `NV_ESC_RM_CONTROL`
/// (plain or XFER-wrapped) that returned 0 and left NV_OK in NVOS54, on a
/// control listed there. NVOS54 is the parameter head already read.
#[inline(always)]
fn rm_copy(inf: &Inflight, ret: i64, size: u32, head: &Head) -> Option<RmCopy> {
    if ret != 0 || size != NVOS54_SIZE || head.len < NVOS54_SIZE || !rm_params_on() {
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
    let w = |i: usize| head.word(i);
    let params = (w(4) as u64) | ((w(5) as u64) << 32);
    if w(7) != 0 || params == 0 {
        return None;
    }
    let control = w(2);
    // Most controls are in no listed bucket: no lookup for them.
    let b = maps::SHIP_CONTROLS.get(nvprobe_common::fastpath::control_bucket(control))?;
    if b & nvprobe_common::fastpath::COPY == 0 {
        return None;
    }
    // SAFETY: plain map lookup of a u32.
    let v = *unsafe { RM_PARAMS.get(&control) }?;
    let mut len = rm_params::copy(v);
    if len > w(6) {
        len = w(6);
    }
    if len > RM_PARAMS_LEN as u32 {
        len = RM_PARAMS_LEN as u32;
    }
    Some(RmCopy {
        control,
        params,
        len,
        deref_off: rm_params::deref_off(v),
    })
}

/// The head of the parameter struct, read once at the exit into the stack:
/// the record, the RM control's NVOS54 and the status check all use it.
/// Kept as words: copied into the record word by word (a byte-array copy
/// would be a call to memmove, a global subprogram to which the 6.1
/// verifier refuses ring-buffer memory as an argument).
pub(crate) struct Head {
    pub(crate) words: [u64; HEAD_LEN / 8],
    /// Bytes read (0: none, or the read faulted).
    pub(crate) len: u32,
}

impl Head {
    #[inline(always)]
    fn read(ptr: u64, size: u32, flags: &mut u32) -> Head {
        let mut h = Head {
            words: [0u64; HEAD_LEN / 8],
            len: 0,
        };
        let want = if size < HEAD_LEN as u32 {
            size
        } else {
            HEAD_LEN as u32
        };
        if want > 0 && ptr != 0 {
            // SAFETY: user read through the helper into a stack buffer of
            // HEAD_LEN bytes; `want` is at most HEAD_LEN.
            let rc = unsafe {
                generated::bpf_probe_read_user(h.words.as_mut_ptr().cast(), want, ptr as *const _)
            };
            if rc == 0 {
                h.len = want;
            } else {
                *flags |= ioctl_flags::HEAD_FAULT;
            }
        }
        h
    }

    /// NVOS54.cmd, the RM control's number, when the head holds NVOS54.
    #[inline(always)]
    fn control(&self) -> Option<u32> {
        (self.len >= NVOS54_SIZE).then(|| self.word(2))
    }

    /// The little-endian u32 at word `i` (0 when not read).
    #[inline(always)]
    pub(crate) fn word(&self, i: usize) -> u32 {
        let w = self.words[(i / 2) & (HEAD_LEN / 8 - 1)];
        (w >> (32 * (i % 2))) as u32
    }

    /// Write the head into `dst` (8-aligned: a record's `head`).
    ///
    /// # Safety
    /// `dst` points at HEAD_LEN writable bytes, 8-aligned.
    #[inline(always)]
    unsafe fn copy_to(&self, dst: *mut u8) {
        let d = dst.cast::<u64>();
        for (i, w) in self.words.iter().enumerate() {
            // SAFETY: per the function's contract; volatile, so that the
            // words stay stores and do not become a memmove call.
            unsafe { core::ptr::write_volatile(d.add(i), *w) };
        }
    }
}

/// Emit the ioctl record of this thread's pending NVIDIA ioctl: at
/// `--events failures|verdicts` the kernel decides for every call whether
/// it is sent or counted (`nvprobe_common::fastpath`), and the header's ids
/// come from the thread's cache. (A kernel whose verifier refuses this as
/// too complex, as Linux 6.1's does, gets `ioctl_compat.rs`'s.)
#[inline(always)]
pub(crate) fn ioctl_finish(ret: i64) -> Result<(), i64> {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    let Some(inf) = take_slot(pid_tgid as u32, Some(EventKind::Ioctl as u32)) else {
        return Ok(());
    };
    let skip = crate::config::bench_skip();
    if skip & bench_skip::EXIT_STATE != 0 {
        return Ok(());
    }
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
    let tgid = (pid_tgid >> 32) as u32;
    // A raw pointer, null for none (an Option of one would leave its
    // payload register undefined on the None path, which the verifier
    // refuses to read).
    let cache = crate::fdres::cache_slot(pid_tgid, false).unwrap_or(core::ptr::null_mut());
    let (v, first) = procs_value(tgid, cache);
    if first {
        flags |= ioctl_flags::FIRST_UNSEEN;
    }
    // --events failures|verdicts, a quiet process: a success is counted,
    // and only its 4 status bytes are read to know it is one.
    if crate::config::quiet_levels()
        && !first
        && v & (nv_procs::QUIET | nv_procs::SHIP_NEXT) == nv_procs::QUIET
        && ret == 0
        && status_alone(&inf, ptr, size) == Status::Ok
    {
        maps::count_unsent(slot_of(&inf), cache, tgid);
        return Ok(());
    }
    // --events failures|verdicts, a process not yet quiet (a driver client,
    // a start-up before its first context): a success the ship tables
    // leave out is counted from its status and, for an RM control, its
    // number (the head is read only for what may be sent).
    if crate::config::quiet_levels()
        && !first
        && v & (nv_procs::QUIET | nv_procs::HELD | nv_procs::SHIP_NEXT) == 0
        && ret == 0
        && left_out(&inf, ptr, size)
    {
        maps::count_unsent(slot_of(&inf), cache, tgid);
        return Ok(());
    }
    let head = Head::read(ptr, size, &mut flags);
    if crate::config::quiet_levels() && !first {
        // --events failures|verdicts: a successful call is counted, not
        // sent, when the process is past its first context (quiet), or when
        // nothing a verdict reads is in it (docs/SCHEMA.md).
        let st = if ret == 0 {
            status_of(&inf, ptr, size, &head)
        } else {
            Status::Failed
        };
        if v & (nv_procs::QUIET | nv_procs::HELD) == nv_procs::QUIET {
            if st == Status::Ok {
                maps::count_unsent(slot_of(&inf), cache, tgid);
                return Ok(());
            }
        } else {
            // Not yet quiet, or quiet since nvprobe started (whose calls
            // after a failure or a signal are sent as a start-up's are).
            match st {
                Status::Ok
                    if v & nv_procs::SHIP_NEXT == 0
                        && (v & nv_procs::QUIET != 0
                            || !shipped(&inf, size, || head.control())) =>
                {
                    maps::count_unsent(slot_of(&inf), cache, tgid);
                    return Ok(());
                }
                Status::Ok if v & nv_procs::SHIP_NEXT != 0 => maps::ship_next_done(
                    tgid,
                    v,
                    crate::config::start_at_least(inf.start_ns, inf.flags),
                ),
                Status::Ok => {}
                Status::Failed => maps::ship_next(tgid, v, true),
                Status::Unknown => {}
            }
        }
    }

    // The end, read only for a call that is sent (and its header's time).
    let end = now();
    let (start, flags) = maps::record_timing(tgid, inf.start_ns, end, flags);
    if let Some(rm) = rm_copy(&inf, ret, size, &head) {
        if let Some(mut entry) = EVENTS.reserve::<RmControlEvent>(0) {
            let ev = entry.as_mut_ptr();
            // SAFETY: `ev` points at a reserved ring-buffer record of the
            // right size; every field is written before submit.
            unsafe {
                fill_ioctl(
                    &raw mut (*ev).ioctl,
                    &inf,
                    ret,
                    (start, end),
                    pid_tgid,
                    ptr,
                    size,
                    flags,
                    &head,
                );
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
    unsafe {
        fill_ioctl(
            ev,
            &inf,
            ret,
            (start, end),
            pid_tgid,
            ptr,
            size,
            flags,
            &head,
        )
    };
    entry.submit(wakeup_flags(
        wakeup_bytes(),
        core::mem::size_of::<IoctlEvent>(),
    ));
    Ok(())
}

/// The call slot of the call in `inf` (`nvprobe_common::fastpath`).
#[inline(always)]
fn slot_of(inf: &Inflight) -> u32 {
    nvprobe_common::fastpath::call_slot(inf.cmd, inf.flags & ioctl_flags::XFER != 0, inf.xfer_cmd)
}

/// The process's `NV_PROCS` value, from the thread's cache when it holds
/// it; a process seen for the first time (at a call on a descriptor it
/// was not seen opening) is followed from now on as one whose start-up
/// was not seen (and its call sent: `true`).
#[inline(always)]
fn procs_value(tgid: u32, cache: *mut nvprobe_common::fastpath::FdCache) -> (u8, bool) {
    use nvprobe_common::fastpath::PROCS_VALID;
    if !cache.is_null() {
        // SAFETY: the thread's own cache slot.
        let (p, of) = unsafe { ((*cache).procs, (*cache).procs_tgid) };
        if p & PROCS_VALID != 0 && of == tgid {
            return (p as u8, false);
        }
    }
    // SAFETY: plain lookup of a u8.
    match unsafe { maps::NV_PROCS.get(&tgid) }.copied() {
        None => (nv_procs::FOLLOWED | nv_procs::HELD, maps::held_first(tgid)),
        Some(v) => {
            if v & nv_procs::CALLER == 0 {
                // Followed from its parent, and now an NVIDIA call of its
                // own (an inherited descriptor).
                maps::caller(tgid);
            }
            if !cache.is_null() {
                // SAFETY: the thread's own cache slot.
                unsafe {
                    (*cache).procs = 0;
                    (*cache).procs_tgid = tgid;
                    (*cache).procs = v as u32 | PROCS_VALID;
                }
            }
            (v, false)
        }
    }
}

/// Write every field of the ioctl record at `ev`: the head already read,
/// and the tail of the `size`-byte parameter struct at `ptr`.
///
/// # Safety
/// `ev` points at reserved ring-buffer memory of an [`IoctlEvent`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn fill_ioctl(
    ev: *mut IoctlEvent,
    inf: &Inflight,
    ret: i64,
    (start, end): (u64, u64),
    pid_tgid: u64,
    ptr: u64,
    size: u32,
    mut flags: u32,
    head: &Head,
) {
    // SAFETY: per the function's contract.
    unsafe {
        fill_header_at(&raw mut (*ev).hdr, EventKind::Ioctl, end, pid_tgid);
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
        head.copy_to((*ev).head.as_mut_ptr());
        (*ev).head_len = head.len;
        (*ev).tail = [0u8; TAIL_LEN];
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
pub(crate) unsafe fn fill_rm_params(ev: *mut RmControlEvent, rm: &RmCopy) {
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

/// What a call that returned 0 left as its NV_STATUS.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// NV_OK, or the call has no status field.
    Ok,
    /// Another status.
    Failed,
    /// Not in STATUS_AT, or unreadable: the call is sent.
    Unknown,
}

/// The NV_STATUS of a call that returned 0, by the offset user space put
/// into STATUS_AT; from the head already read when it lies there.
#[inline(always)]
pub fn status_of(inf: &Inflight, ptr: u64, size: u32, head: &Head) -> Status {
    let off = match status_off(inf, ptr, size) {
        Ok(off) => off,
        Err(st) => return st,
    };
    let v = if off.saturating_add(4) <= head.len && off % 4 == 0 {
        head.word(off as usize / 4)
    } else {
        match read_u32(ptr, off) {
            Some(v) => v,
            None => return Status::Unknown,
        }
    };
    if v == 0 { Status::Ok } else { Status::Failed }
}

/// [`status_of`] without the head: the 4 bytes of the status alone (a
/// quiet process's call, whose head nothing reads).
#[inline(always)]
fn status_alone(inf: &Inflight, ptr: u64, size: u32) -> Status {
    match status_off(inf, ptr, size).map(|off| read_u32(ptr, off)) {
        Ok(Some(0)) => Status::Ok,
        Ok(Some(_)) => Status::Failed,
        Ok(None) => Status::Unknown,
        Err(st) => st,
    }
}

#[inline(always)]
fn read_u32(ptr: u64, off: u32) -> Option<u32> {
    // SAFETY: reading user memory through the helper, which handles faults.
    unsafe { aya_ebpf::helpers::bpf_probe_read_user((ptr + off as u64) as *const u32) }.ok()
}

/// Where the call's NV_STATUS is in its parameters; Err: the status
/// there is none to read (`Ok`: the call has none; `Unknown`).
#[inline(always)]
fn status_off(inf: &Inflight, ptr: u64, size: u32) -> Result<u32, Status> {
    let key = if inf.flags & nvprobe_common::ioctl_flags::XFER != 0 {
        if inf.flags & nvprobe_common::ioctl_flags::XFER_FAULT != 0
            || inf.xfer_size > nvprobe_common::ioctl::NV_MAX_IOCTL_SIZE
        {
            return Err(Status::Unknown);
        }
        nvprobe_common::status_at::xfer_key(inf.xfer_cmd, inf.xfer_size)
    } else {
        inf.cmd
    };
    use nvprobe_common::fastpath::{call_slot, status_slot_off};
    let slot = call_slot(
        inf.cmd,
        inf.flags & nvprobe_common::ioctl_flags::XFER != 0,
        inf.xfer_cmd,
    );
    let by_slot = STATUS_SLOTS
        .get(slot & (CALL_SLOTS - 1))
        .copied()
        .and_then(|v| status_slot_off(v, size));
    let off = match by_slot {
        Some(o) => o,
        None => {
            // SAFETY: plain lookup of a u32.
            let Some(off) = (unsafe { STATUS_AT.get(&key) }).copied() else {
                return Err(Status::Unknown);
            };
            off
        }
    };
    if off == nvprobe_common::status_at::NO_STATUS {
        return Err(Status::Ok);
    }
    if ptr == 0 || off.saturating_add(4) > size {
        return Err(Status::Unknown);
    }
    Ok(off)
}

/// A successful call of a process not yet quiet that the ship tables
/// leave out, with NV_OK: for an RM control (NVOS54) whose status the
/// driver version's tables put at 28, its number (cmd @8) and its status
/// in one read of user memory; else the status alone. The path a quiet
/// process's call takes, nearly: measured on the no-GPU VM, this exit
/// costs what a quiet process's does, 40-80 ns less than the path through
/// the head. False sends the call down that path.
#[inline(always)]
fn left_out(inf: &Inflight, ptr: u64, size: u32) -> bool {
    if slot_of(inf) == nvprobe_common::ioctl::NV_ESC_RM_CONTROL && size == NVOS54_SIZE {
        if status_off(inf, ptr, size) != Ok(NVOS54_STATUS) {
            return false;
        }
        // SAFETY: reading user memory through the helper, which handles faults.
        let Ok(w) = (unsafe { bpf_probe_read_user((ptr + 8) as *const [u32; 6]) }) else {
            return false;
        };
        return w[(NVOS54_STATUS as usize - 8) / 4] == 0 && !shipped(inf, size, || Some(w[0]));
    }
    // The ship tables first: a call they send needs no read here.
    !shipped(inf, size, || None) && status_alone(inf, ptr, size) == Status::Ok
}

/// NVOS54.status's offset (nvos.h: hClient, hObject, cmd, flags, params,
/// paramsSize, status).
const NVOS54_STATUS: u32 = 28;

/// Whether a successful call is one `--events failures|verdicts` sends:
/// its slot is marked SHIP (or it has none), or it is an RM control whose
/// bucket is. `control` reads the control's number (NVOS54.cmd, at 8),
/// only for an RM control; None when it cannot be read (sent).
#[inline(always)]
pub fn shipped(inf: &Inflight, size: u32, control: impl FnOnce() -> Option<u32>) -> bool {
    use nvprobe_common::fastpath::{NO_SLOT, SHIP, call_slot, control_bucket};
    let xfer = inf.flags & nvprobe_common::ioctl_flags::XFER != 0;
    let slot = call_slot(inf.cmd, xfer, inf.xfer_cmd);
    if slot == NO_SLOT {
        return true;
    }
    if slot == nvprobe_common::ioctl::NV_ESC_RM_CONTROL {
        if size != nvprobe_common::ioctl::NVOS54_SIZE {
            return true;
        }
        let Some(c) = control() else {
            return true;
        };
        return SHIP_CONTROLS
            .get(control_bucket(c))
            .is_some_and(|b| b & SHIP != 0);
    }
    SHIP_CALLS
        .get(slot & (CALL_SLOTS - 1))
        .is_none_or(|b| b & SHIP != 0)
}
