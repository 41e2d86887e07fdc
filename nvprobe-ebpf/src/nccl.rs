//! libnccl uprobes (issue 39), reached through the libcuda programs with
//! [`CUDA_NCCL`] in the cookie: a collective's or point-to-point call's
//! entry numbers it in its communicator ([`NCCL_COMMS`]) and sends it; a
//! communicator's init is kept at its entry (the unique id's hash, rank,
//! size) and sent at its return, with the communicator its first argument
//! then points to. No return is hooked but an init's.
//!
//! Prototypes: see `nvprobe_common::nccl` (nccl.h 2.18-2.28).

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_user},
    macros::map,
    maps::LruHashMap,
    programs::{ProbeContext, RetProbeContext},
};
use nvprobe_common::{
    EventKind, NCCL_UNIQUE_ID_BYTES, NO_ARG, NcclComm, NcclEvent, NcclInit, NcclKey, NcclKind,
    nccl_cookie_parts, nccl_hash,
};

use crate::{
    fdres::{fill_header, wakeup_bytes},
    maps::{EVENTS, count_lost, wakeup_flags},
};

/// The communicators seen: (tgid, address) -> hash, rank, size, sequence
/// number. LRU: the entry of a process that ended without destroying its
/// communicators goes when room is needed (the collector skips processes
/// that are gone).
#[map]
pub static NCCL_COMMS: LruHashMap<NcclKey, NcclComm> = LruHashMap::with_max_entries(4096, 0);

/// Inits in flight: tid -> what the entry read.
#[map]
static NCCL_INIT: LruHashMap<u32, NcclInit> = LruHashMap::with_max_entries(1024, 0);

/// The registers that carry arguments: read each at its constant offset
/// (the verifier refuses a load from the context at a computed one).
#[cfg(not(bpf_target_arch = "aarch64"))]
const IN_REGS: usize = 6;
#[cfg(bpf_target_arch = "aarch64")]
const IN_REGS: usize = 8;

#[inline(always)]
fn regs(ctx: &ProbeContext) -> [u64; IN_REGS] {
    let r = |n| ctx.arg::<u64>(n).unwrap_or(0);
    #[cfg(not(bpf_target_arch = "aarch64"))]
    return [r(0), r(1), r(2), r(3), r(4), r(5)];
    #[cfg(bpf_target_arch = "aarch64")]
    return [r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7)];
}

/// Argument `n` of a call (from 0), None for [`NO_ARG`]. x86-64 passes six
/// in registers and the rest on the stack, above the return address;
/// arm64 eight in registers.
#[inline(always)]
fn arg(ctx: &ProbeContext, r: &[u64; IN_REGS], n: u8) -> Option<u64> {
    let n = n as usize;
    if n < IN_REGS {
        return Some(r[n]);
    }
    if n == NO_ARG as usize {
        return None;
    }
    #[cfg(not(bpf_target_arch = "aarch64"))]
    {
        // SAFETY: the stack pointer of the traced task, read through the
        // helper.
        let sp = unsafe { (*ctx.regs).rsp };
        let at = sp + 8 * (n as u64 - 5);
        // SAFETY: user read through the helper.
        return unsafe { bpf_probe_read_user(at as *const u64) }.ok();
    }
    #[cfg(bpf_target_arch = "aarch64")]
    {
        let _ = ctx;
        None
    }
}

/// Where an init's unique id is: x86-64 passes the 128-byte struct in
/// memory above the return address, arm64 by reference in the third
/// register; ncclCommInitRankScalable takes an array of them (the first
/// names the communicator, as NCCL hashes it).
#[inline(always)]
fn unique_id_at(ctx: &ProbeContext, scalable: bool) -> Option<u64> {
    if scalable {
        return ctx.arg::<u64>(4);
    }
    #[cfg(bpf_target_arch = "aarch64")]
    return ctx.arg::<u64>(2);
    #[cfg(not(bpf_target_arch = "aarch64"))]
    {
        // SAFETY: the stack pointer of the traced task.
        let sp = unsafe { (*ctx.regs).rsp };
        Some(sp + 8)
    }
}

/// The rank argument of an init: after the id on x86-64 (the struct takes
/// no register), after the id's pointer on arm64, third for the scalable.
#[inline(always)]
fn init_rank(ctx: &ProbeContext, scalable: bool) -> i32 {
    #[cfg(bpf_target_arch = "aarch64")]
    let n = if scalable { 2 } else { 3 };
    #[cfg(not(bpf_target_arch = "aarch64"))]
    let n = 2;
    let _ = scalable;
    ctx.arg::<u64>(n).unwrap_or(u64::MAX) as i32
}

/// ncclCommInitRankScalable's number in `NCCL_FUNCS`.
const SCALABLE: u32 = 3;

pub fn enter(ctx: &ProbeContext, cookie: u64, now: u64) {
    let (func, kind, [comm, count, dtype, a, stream]) = nccl_cookie_parts(cookie);
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    match NcclKind::from_repr(kind) {
        Some(NcclKind::Init) => {
            let scalable = func == SCALABLE;
            let mut id = [0u8; NCCL_UNIQUE_ID_BYTES];
            let hash = match unique_id_at(ctx, scalable) {
                // SAFETY: user read through the helper.
                Some(at)
                    if unsafe {
                        aya_ebpf::helpers::generated::bpf_probe_read_user(
                            id.as_mut_ptr().cast(),
                            NCCL_UNIQUE_ID_BYTES as u32,
                            at as *const _,
                        )
                    } == 0 =>
                {
                    nccl_hash(&id)
                }
                _ => 0,
            };
            let init = NcclInit {
                out: ctx.arg::<u64>(0).unwrap_or(0),
                hash,
                rank: init_rank(ctx, scalable),
                nranks: ctx.arg::<u64>(1).unwrap_or(0) as i32,
            };
            let _ = NCCL_INIT.insert(&(pid_tgid as u32), &init, 0);
        }
        Some(k @ (NcclKind::Collective | NcclKind::P2p)) => {
            let r = regs(ctx);
            let c = arg(ctx, &r, comm).unwrap_or(0);
            let key = NcclKey {
                tgid,
                _pad: 0,
                comm: c,
            };
            let mut state = match NCCL_COMMS.get_ptr_mut(&key) {
                // SAFETY: pointer into the map's value; the number is
                // the communicator's own (its calls are made in one
                // order by one thread at a time, as NCCL requires).
                Some(p) => unsafe {
                    (*p).seq += 1;
                    (*p).last_ns = now;
                    (*p).last_func = func;
                    *p
                },
                None => {
                    // Made before the hooks, or by a call nvprobe does not
                    // hook (ncclCommSplit, ncclCommInitAll): numbered from
                    // here, its hash and rank unknown.
                    let s = NcclComm {
                        hash: 0,
                        seq: 1,
                        last_ns: now,
                        rank: -1,
                        nranks: -1,
                        last_func: func,
                        _pad: 0,
                    };
                    let _ = NCCL_COMMS.insert(&key, &s, 0);
                    s
                }
            };
            state.last_ns = now;
            let int = |n: u8| arg(ctx, &r, n).map_or(-1, |v| v as i32);
            send(
                func,
                k,
                c,
                &state,
                [
                    arg(ctx, &r, count).unwrap_or(0),
                    arg(ctx, &r, stream).unwrap_or(0),
                ],
                [int(dtype), int(a)],
                0,
                now,
            );
        }
        Some(k @ (NcclKind::GroupStart | NcclKind::GroupEnd)) => {
            send(func, k, 0, &NcclComm::default(), [0; 2], [-1; 2], 0, now);
        }
        Some(NcclKind::End) => {
            let c = arg(ctx, &regs(ctx), comm).unwrap_or(0);
            let key = NcclKey {
                tgid,
                _pad: 0,
                comm: c,
            };
            // SAFETY: value copied out before removal.
            let state = unsafe { NCCL_COMMS.get(&key) }
                .copied()
                .unwrap_or(NcclComm {
                    rank: -1,
                    nranks: -1,
                    ..NcclComm::default()
                });
            let _ = NCCL_COMMS.remove(&key);
            send(func, NcclKind::End, c, &state, [0; 2], [-1; 2], 0, now);
        }
        None => {}
    }
}

/// An init's return: the communicator it made, numbered from 0.
pub fn init_return(ctx: &RetProbeContext, cookie: u64, now: u64) {
    let (func, _, _) = nccl_cookie_parts(cookie);
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    // SAFETY: value copied out before removal.
    let Some(init) = (unsafe { NCCL_INIT.get(&tid) }).copied() else {
        return;
    };
    let _ = NCCL_INIT.remove(&tid);
    let ret = ctx.ret::<u64>() as i32;
    let comm = if ret == 0 && init.out != 0 {
        // SAFETY: user read through the helper.
        unsafe { bpf_probe_read_user(init.out as *const u64) }.unwrap_or(0)
    } else {
        0
    };
    let state = NcclComm {
        hash: init.hash,
        seq: 0,
        last_ns: now,
        rank: init.rank,
        nranks: init.nranks,
        last_func: func,
        _pad: 0,
    };
    if comm != 0 {
        let key = NcclKey {
            tgid: (pid_tgid >> 32) as u32,
            _pad: 0,
            comm,
        };
        let _ = NCCL_COMMS.insert(&key, &state, 0);
    }
    send(
        func,
        NcclKind::Init,
        comm,
        &state,
        [0; 2],
        [-1; 2],
        ret,
        now,
    );
}

#[inline(always)]
#[expect(clippy::too_many_arguments, reason = "one record's fields")]
fn send(
    func: u32,
    kind: NcclKind,
    comm: u64,
    s: &NcclComm,
    [count, stream]: [u64; 2],
    [dtype, a]: [i32; 2],
    result: i32,
    now: u64,
) {
    let Some(mut entry) = EVENTS.reserve::<NcclEvent>(0) else {
        count_lost(EventKind::Nccl);
        return;
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: reserved record; every field written before submit.
    unsafe {
        fill_header(&raw mut (*ev).hdr, EventKind::Nccl);
        (*ev).func = func;
        (*ev).kind = kind as u32;
        (*ev).comm = comm;
        (*ev).hash = s.hash;
        (*ev).seq = s.seq;
        (*ev).count = count;
        (*ev).stream = stream;
        (*ev).start_ns = now;
        (*ev).dtype = dtype;
        (*ev).a = a;
        (*ev).rank = s.rank;
        (*ev).nranks = s.nranks;
        (*ev).result = result;
        (*ev)._pad = 0;
    }
    entry.submit(wakeup_flags(
        wakeup_bytes(),
        core::mem::size_of::<NcclEvent>(),
    ));
}
