//! What one operation of a BPF program costs on this kernel, inside a
//! syscall tracepoint program (`nvbench unit-costs`): a program on
//! `syscalls/sys_enter_ioctl` repeats one operation (a helper call, a map
//! lookup, a ring-buffer record) [`REPEAT`] times, and a TCGETS loop on
//! /dev/null is timed under it; the same loop under the bare program
//! (`return 0`) is the baseline. (t_op - t_bare) / REPEAT is the
//! operation's cost, the tracepoint's own dispatch taken out. Rounds are
//! interleaved, each in another order.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use anyhow::{Context, bail};
use aya_obj::generated::bpf_insn;

/// Times the operation is repeated in its program.
pub const REPEAT: usize = 8;

/// (code, dst, src, off, imm)
type Raw = (u8, u8, u8, i16, i32);

const CALL: u8 = 0x85;
const MOV_IMM: u8 = 0xb7;
const MOV_REG: u8 = 0xbf;
const ADD_IMM: u8 = 0x07;
const LDX_DW: u8 = 0x79;
const ST_W: u8 = 0x62;
const JEQ_IMM: u8 = 0x15;
const LD_IMM64: u8 = 0x18;
const EXIT: u8 = 0x95;
const PSEUDO_MAP_FD: u8 = 1;

// Helper ids (include/uapi/linux/bpf.h).
const MAP_LOOKUP: i32 = 1;
const SMP_ID: i32 = 8;
const KTIME: i32 = 5;
const JIFFIES64: i32 = 118;
const PID_TGID: i32 = 14;
const UID_GID: i32 = 15;
const COMM: i32 = 16;
const CURRENT_TASK: i32 = 35;
const PROBE_READ_USER: i32 = 112;
const PROBE_READ_KERNEL: i32 = 113;
const RINGBUF_RESERVE: i32 = 131;
const RINGBUF_SUBMIT: i32 = 132;
const RINGBUF_QUERY: i32 = 134;
const BPF_RB_NO_WAKEUP: i32 = 1;

// Map types.
const HASH: u32 = 1;
const ARRAY: u32 = 2;
const PERCPU_ARRAY: u32 = 6;
const LRU_HASH: u32 = 9;
const RINGBUF: u32 = 27;

/// The operations measured, by name.
pub const OPS: &[&str] = &[
    "bare",
    "ktime_get_ns",
    "jiffies64",
    "get_current_pid_tgid",
    "get_smp_processor_id",
    "get_current_uid_gid",
    "get_current_comm",
    "probe_read_kernel_8",
    "probe_read_user_8",
    "probe_read_user_64",
    "array_lookup",
    "percpu_array_lookup",
    "hash_lookup_miss",
    "lru_hash_lookup_hit",
    "ringbuf_query",
    "ringbuf_reserve_submit_256",
];

fn bpf(cmd: u32, attr: &mut [u64; 16]) -> std::io::Result<i32> {
    // SAFETY: bpf(2) with an attribute buffer of 128 bytes, zero-padded.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr.as_mut_ptr(),
            std::mem::size_of_val(attr) as libc::c_long,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as i32)
    }
}

fn map_create(ty: u32, key: u32, value: u32, entries: u32) -> anyhow::Result<OwnedFd> {
    let mut a = [0u64; 16];
    a[0] = u64::from(ty) | (u64::from(key) << 32);
    a[1] = u64::from(value) | (u64::from(entries) << 32);
    let fd = bpf(0, &mut a).with_context(|| format!("BPF_MAP_CREATE type {ty}"))?;
    // SAFETY: a descriptor bpf(2) just returned, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn map_update(map: &OwnedFd, key: &u32, value: &[u8]) -> anyhow::Result<()> {
    let mut a = [0u64; 16];
    a[0] = map.as_raw_fd() as u64;
    a[1] = key as *const u32 as u64;
    a[2] = value.as_ptr() as u64;
    bpf(2, &mut a).context("BPF_MAP_UPDATE_ELEM")?;
    Ok(())
}

/// The maps the operations use, alive while their programs are.
pub struct Maps {
    array: OwnedFd,
    percpu: OwnedFd,
    hash: OwnedFd,
    lru: OwnedFd,
    pub ringbuf: OwnedFd,
}

impl Maps {
    pub fn new() -> anyhow::Result<Maps> {
        let lru = map_create(LRU_HASH, 4, 8, 1024)?;
        map_update(&lru, &7, &[1u8; 8])?;
        Ok(Maps {
            array: map_create(ARRAY, 4, 8, 1)?,
            percpu: map_create(PERCPU_ARRAY, 4, 8, 1)?,
            hash: map_create(HASH, 4, 8, 1024)?,
            lru,
            ringbuf: map_create(RINGBUF, 0, 0, 1 << 22)?,
        })
    }
}

fn ld_map(dst: u8, map: &OwnedFd) -> [Raw; 2] {
    [
        (LD_IMM64, dst, PSEUDO_MAP_FD, 0, map.as_raw_fd()),
        (0, 0, 0, 0, 0),
    ]
}

/// `r2 = &key` on the stack at r10-4, holding `key`.
fn key_on_stack(key: i32) -> [Raw; 3] {
    [
        (ST_W, 10, 0, -4, key),
        (MOV_REG, 2, 10, 0, 0),
        (ADD_IMM, 2, 0, 0, -4),
    ]
}

/// One repetition of `op`. Registers: r6 the context, r7 the current
/// task, r8 the ioctl's user pointer (its third argument).
fn body(op: &str, m: &Maps) -> anyhow::Result<Vec<Raw>> {
    let call = |id| vec![(CALL, 0, 0, 0, id)];
    let lookup = |map: &OwnedFd, key| {
        let mut v = ld_map(1, map).to_vec();
        v.extend(key_on_stack(key));
        v.push((CALL, 0, 0, 0, MAP_LOOKUP));
        v
    };
    let read = |id, src, len| {
        vec![
            (MOV_REG, 1, 10, 0, 0),
            (ADD_IMM, 1, 0, 0, -80),
            (MOV_IMM, 2, 0, 0, len),
            (MOV_REG, 3, src, 0, 0),
            (CALL, 0, 0, 0, id),
        ]
    };
    Ok(match op {
        "bare" => vec![],
        "ktime_get_ns" => call(KTIME),
        "jiffies64" => call(JIFFIES64),
        "get_current_pid_tgid" => call(PID_TGID),
        "get_smp_processor_id" => call(SMP_ID),
        "get_current_uid_gid" => call(UID_GID),
        "get_current_comm" => vec![
            (MOV_REG, 1, 10, 0, 0),
            (ADD_IMM, 1, 0, 0, -32),
            (MOV_IMM, 2, 0, 0, 16),
            (CALL, 0, 0, 0, COMM),
        ],
        "probe_read_kernel_8" => read(PROBE_READ_KERNEL, 7, 8),
        "probe_read_user_8" => read(PROBE_READ_USER, 8, 8),
        "probe_read_user_64" => read(PROBE_READ_USER, 8, 64),
        "array_lookup" => lookup(&m.array, 0),
        "percpu_array_lookup" => lookup(&m.percpu, 0),
        "hash_lookup_miss" => lookup(&m.hash, 7),
        "lru_hash_lookup_hit" => lookup(&m.lru, 7),
        "ringbuf_query" => {
            let mut v = ld_map(1, &m.ringbuf).to_vec();
            v.push((MOV_IMM, 2, 0, 0, 0));
            v.push((CALL, 0, 0, 0, RINGBUF_QUERY));
            v
        }
        "ringbuf_reserve_submit_256" => {
            let mut v = ld_map(1, &m.ringbuf).to_vec();
            v.push((MOV_IMM, 2, 0, 0, 256));
            v.push((MOV_IMM, 3, 0, 0, 0));
            v.push((CALL, 0, 0, 0, RINGBUF_RESERVE));
            v.push((JEQ_IMM, 0, 0, 3, 0));
            v.push((MOV_REG, 1, 0, 0, 0));
            v.push((MOV_IMM, 2, 0, 0, BPF_RB_NO_WAKEUP));
            v.push((CALL, 0, 0, 0, RINGBUF_SUBMIT));
            v
        }
        other => bail!("unknown operation {other}"),
    })
}

/// The program of `op`: prologue, the operation [`REPEAT`] times, return 0.
pub fn program(op: &str, m: &Maps) -> anyhow::Result<Vec<bpf_insn>> {
    let mut raw: Vec<Raw> = vec![
        (MOV_REG, 6, 1, 0, 0),
        (CALL, 0, 0, 0, CURRENT_TASK),
        (MOV_REG, 7, 0, 0, 0),
        (LDX_DW, 8, 6, 32, 0),
    ];
    let one = body(op, m)?;
    let reps = if op == "bare" { 0 } else { REPEAT };
    for _ in 0..reps {
        raw.extend(one.iter().copied());
    }
    raw.push((MOV_IMM, 0, 0, 0, 0));
    raw.push((EXIT, 0, 0, 0, 0));
    Ok(raw
        .iter()
        .map(|&(code, dst, src, off, imm)| bpf_insn {
            code,
            _bitfield_align_1: [],
            _bitfield_1: bpf_insn::new_bitfield_1(dst, src),
            off,
            imm,
        })
        .collect())
}

/// Keep the ring buffer drained (its consumer position at the producer's)
/// until `stop`, so that reserves never find it full.
pub fn drain(ringbuf: &OwnedFd, stop: &std::sync::atomic::AtomicBool) -> anyhow::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    // SAFETY: the ring buffer's consumer page (read-write) and producer
    // page (read-only), mapped as bpf(2) documents for BPF_MAP_TYPE_RINGBUF.
    let (cons, prod) = unsafe {
        let c = libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            ringbuf.as_fd().as_raw_fd(),
            0,
        );
        let p = libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_READ,
            libc::MAP_SHARED,
            ringbuf.as_fd().as_raw_fd(),
            page as libc::off_t,
        );
        if c == libc::MAP_FAILED || p == libc::MAP_FAILED {
            bail!(
                "mmap of the ring buffer: {}",
                std::io::Error::last_os_error()
            );
        }
        (&*(c as *const AtomicU64), &*(p as *const AtomicU64))
    };
    while !stop.load(Ordering::Relaxed) {
        cons.store(prod.load(Ordering::Acquire), Ordering::Release);
        std::thread::yield_now();
    }
    Ok(())
}
