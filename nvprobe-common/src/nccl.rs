//! NCCL seen from outside (issue 39): the libnccl functions hooked, where
//! each keeps its arguments, the record of each call, and the map of
//! communicators the kernel side keeps (their hash, rank, size and
//! sequence number), which the collector reads when a call hangs.
//!
//! Prototypes assumed (nccl.h, 2.18 to 2.28): `ncclCommInitRank(ncclComm_t*
//! comm, int nranks, ncclUniqueId commId, int rank)` and
//! `ncclCommInitRankConfig(…, int rank, ncclConfig_t*)`, where the 128-byte
//! `ncclUniqueId` is passed by value (on x86-64 in memory after the return
//! address; on arm64 by reference, in the third register);
//! `ncclCommInitRankScalable(ncclComm_t*, int nranks, int myrank, int nId,
//! ncclUniqueId* commIds, ncclConfig_t*)`; the collectives and
//! point-to-point calls as [`NCCL_FUNCS`] lists their arguments;
//! `ncclGroupStart(void)`, `ncclGroupEnd(void)`; `ncclCommAbort`,
//! `ncclCommDestroy`, `ncclCommFinalize(ncclComm_t)`.

use crate::Header;

/// Set in the cookie of a libnccl function (the low 32 bits hold the
/// function's number and this flag, the high ones where its arguments
/// are: [`nccl_cookie`]).
pub const CUDA_NCCL: u32 = 1 << 28;

/// No such argument.
pub const NO_ARG: u8 = 0xf;

wire_enum! {
    /// What a libnccl call is.
    pub enum NcclKind: u32 {
        /// A communicator made from a unique id (its return is hooked: the
        /// communicator's address is written through the first argument).
        Init = 1,
        /// A collective: all ranks of the communicator call it, in the
        /// same order.
        Collective = 2,
        /// ncclSend, ncclRecv.
        P2p = 3,
        GroupStart = 4,
        GroupEnd = 5,
        /// ncclCommAbort, ncclCommDestroy, ncclCommFinalize.
        End = 6,
    }
}

wire_enum! {
    /// What the argument [`NcclFn::a`] is.
    pub enum NcclArg: u32 {
        None = 0,
        /// The reduction (ncclRedOp_t).
        Op = 1,
        /// The root rank.
        Root = 2,
        /// The peer rank.
        Peer = 3,
    }
}

/// A hooked libnccl function: its number (the cookie's), name, kind, and
/// the index of each argument ([`NO_ARG`] where it has none).
#[derive(Clone, Copy, Debug)]
pub struct NcclFn {
    pub id: u32,
    pub name: &'static str,
    pub kind: NcclKind,
    pub comm: u8,
    pub count: u8,
    pub dtype: u8,
    /// The op, the root or the peer ([`NcclFn::a_is`]).
    pub a: u8,
    pub a_is: NcclArg,
    pub stream: u8,
}

const fn f(
    id: u32,
    name: &'static str,
    kind: NcclKind,
    [comm, count, dtype, a, stream]: [u8; 5],
    a_is: NcclArg,
) -> NcclFn {
    NcclFn {
        id,
        name,
        kind,
        comm,
        count,
        dtype,
        a,
        a_is,
        stream,
    }
}

use NcclArg as A;
use NcclKind as K;
const N: u8 = NO_ARG;

/// Every hooked libnccl function, by number; arguments as
/// [comm, count, datatype, a, stream] (nccl.h).
#[rustfmt::skip]
pub const NCCL_FUNCS: &[NcclFn] = &[
    f(1, "ncclCommInitRank", K::Init, [N, N, N, N, N], A::None),
    f(2, "ncclCommInitRankConfig", K::Init, [N, N, N, N, N], A::None),
    f(3, "ncclCommInitRankScalable", K::Init, [N, N, N, N, N], A::None),
    f(10, "ncclAllReduce", K::Collective, [5, 2, 3, 4, 6], A::Op),
    f(11, "ncclBroadcast", K::Collective, [5, 2, 3, 4, 6], A::Root),
    f(12, "ncclBcast", K::Collective, [4, 1, 2, 3, 5], A::Root),
    f(13, "ncclReduce", K::Collective, [6, 2, 3, 4, 7], A::Op),
    f(14, "ncclAllGather", K::Collective, [4, 2, 3, N, 5], A::None),
    f(15, "ncclReduceScatter", K::Collective, [5, 2, 3, 4, 6], A::Op),
    f(16, "ncclAlltoAll", K::Collective, [4, 2, 3, N, 5], A::None),
    f(17, "ncclGather", K::Collective, [5, 2, 3, 4, 6], A::Root),
    f(18, "ncclScatter", K::Collective, [5, 2, 3, 4, 6], A::Root),
    f(20, "ncclSend", K::P2p, [4, 1, 2, 3, 5], A::Peer),
    f(21, "ncclRecv", K::P2p, [4, 1, 2, 3, 5], A::Peer),
    f(30, "ncclGroupStart", K::GroupStart, [N, N, N, N, N], A::None),
    f(31, "ncclGroupEnd", K::GroupEnd, [N, N, N, N, N], A::None),
    f(40, "ncclCommAbort", K::End, [0, N, N, N, N], A::None),
    f(41, "ncclCommDestroy", K::End, [0, N, N, N, N], A::None),
    f(42, "ncclCommFinalize", K::End, [0, N, N, N, N], A::None),
];

/// The function of number `id`.
pub fn nccl_fn(id: u32) -> Option<&'static NcclFn> {
    NCCL_FUNCS.iter().find(|f| f.id == id)
}

/// The function named `name` (an export of a libnccl).
pub fn nccl_fn_named(name: &str) -> Option<&'static NcclFn> {
    NCCL_FUNCS
        .iter()
        .find(|f| f.name.as_bytes() == name.as_bytes())
}

/// The attach cookie of `f`: the low 32 bits its number with
/// [`CUDA_NCCL`], then four bits each for the index of the communicator,
/// count, datatype, `a` and stream arguments, and its kind.
pub const fn nccl_cookie(f: &NcclFn) -> u64 {
    (f.id | CUDA_NCCL) as u64
        | (f.comm as u64) << 32
        | (f.count as u64) << 36
        | (f.dtype as u64) << 40
        | (f.a as u64) << 44
        | (f.stream as u64) << 48
        | (f.kind as u64) << 52
}

/// A cookie's parts: (number, kind, [comm, count, dtype, a, stream]).
pub const fn nccl_cookie_parts(cookie: u64) -> (u32, u32, [u8; 5]) {
    let idx = cookie >> 32;
    (
        cookie as u32 & 0xff,
        ((cookie >> 52) & 0xf) as u32,
        [
            (idx & 0xf) as u8,
            ((idx >> 4) & 0xf) as u8,
            ((idx >> 8) & 0xf) as u8,
            ((idx >> 12) & 0xf) as u8,
            ((idx >> 16) & 0xf) as u8,
        ],
    )
}

/// Bytes of an `ncclUniqueId`.
pub const NCCL_UNIQUE_ID_BYTES: usize = 128;

/// The hash NCCL 2.26 and later give a communicator made from a unique
/// id (`getHash` in src/include/bitops.h over its 128 bytes): the
/// `commId 0x…` of NCCL_DEBUG=INFO's "Init START" line, the same on every
/// rank. Earlier NCCL versions printed another hash; this one is still
/// the same on every rank of a communicator.
pub const fn nccl_hash(id: &[u8; NCCL_UNIQUE_ID_BYTES]) -> u64 {
    let mut acc0: u64 = 1 ^ NCCL_UNIQUE_ID_BYTES as u64;
    let mut acc1: u64 = 1;
    let mut i = 0;
    while i < NCCL_UNIQUE_ID_BYTES / 8 {
        acc0 = acc0.wrapping_add(acc1);
        acc1 ^= acc0;
        acc0 ^= acc0 >> 31;
        acc0 = acc0.wrapping_mul(0x9de6_2bbc_8cef_3ce3);
        acc1 ^= acc1 >> 32;
        acc1 = acc1.wrapping_mul(0x485c_d631_1b59_9e79);
        let b = i * 8;
        let x = u64::from_le_bytes([
            id[b],
            id[b + 1],
            id[b + 2],
            id[b + 3],
            id[b + 4],
            id[b + 5],
            id[b + 6],
            id[b + 7],
        ]);
        acc0 = acc0.wrapping_add(x);
        i += 1;
    }
    let mut h = acc0;
    h ^= h >> 31;
    h = h.wrapping_mul(0xbac3_bd56_2846_de6b);
    h = h.wrapping_add(acc1);
    h ^= h >> 32;
    h.wrapping_mul(0x995a_187a_14e7_b445)
}

/// One libnccl call (an entry; for an init, its return).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NcclEvent {
    pub hdr: Header,
    /// The function's number ([`NCCL_FUNCS`]).
    pub func: u32,
    /// [`NcclKind`].
    pub kind: u32,
    /// The communicator (its address in the process); 0 for a group call.
    pub comm: u64,
    /// The communicator's hash ([`nccl_hash`]); 0 when nvprobe did not see
    /// it made (made before the hooks, by ncclCommSplit or ncclCommInitAll).
    pub hash: u64,
    /// This call's number among the communicator's collective and
    /// point-to-point calls, from 1 (counted from when nvprobe first saw
    /// the communicator).
    pub seq: u64,
    pub count: u64,
    pub stream: u64,
    /// When the call was entered (for an init: when it was).
    pub start_ns: u64,
    /// ncclDataType_t, or -1.
    pub dtype: i32,
    /// The op, root or peer ([`NcclFn::a_is`]), or -1.
    pub a: i32,
    /// The communicator's rank and size, or -1 when not known.
    pub rank: i32,
    pub nranks: i32,
    /// An init's ncclResult_t (its return); 0 for entries.
    pub result: i32,
    pub _pad: u32,
}

/// The key of [`crate::maps::NCCL_COMMS`]: a communicator of a process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NcclKey {
    pub tgid: u32,
    pub _pad: u32,
    pub comm: u64,
}

/// What the kernel side keeps of a communicator.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NcclComm {
    pub hash: u64,
    /// Its last collective or point-to-point call's number.
    pub seq: u64,
    /// When that call was entered.
    pub last_ns: u64,
    pub rank: i32,
    pub nranks: i32,
    /// That call's function number.
    pub last_func: u32,
    pub _pad: u32,
}

/// An init in flight on a thread, until its return.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NcclInit {
    /// Where the communicator is written (the first argument).
    pub out: u64,
    pub hash: u64,
    pub rank: i32,
    pub nranks: i32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_are_unique_and_cookies_round_trip() {
        for (i, a) in NCCL_FUNCS.iter().enumerate() {
            assert!(a.id > 0 && a.id < 256, "{}", a.name);
            for b in &NCCL_FUNCS[i + 1..] {
                assert!(a.id != b.id && a.name != b.name, "{} {}", a.name, b.name);
            }
            let (id, kind, idx) = nccl_cookie_parts(nccl_cookie(a));
            assert_eq!(id, a.id);
            assert_eq!(NcclKind::from_repr(kind), Some(a.kind));
            assert_eq!(idx, [a.comm, a.count, a.dtype, a.a, a.stream]);
            assert_eq!(nccl_fn_named(a.name).map(|f| f.id), Some(a.id));
            assert!(nccl_cookie(a) as u32 & CUDA_NCCL != 0);
        }
    }

    /// NCCL's own getHash, computed by hand for two ids: all zeros, and
    /// bytes 0..128.
    #[test]
    fn the_hash_is_nccls() {
        let zero = [0u8; 128];
        let mut ramp = [0u8; 128];
        for (i, b) in ramp.iter_mut().enumerate() {
            *b = i as u8;
        }
        assert_eq!(nccl_hash(&zero), reference(&zero));
        assert_eq!(nccl_hash(&ramp), reference(&ramp));
        assert_ne!(nccl_hash(&zero), nccl_hash(&ramp));
    }

    /// bitops.h's eatHash/digestHash, written again as NCCL writes them
    /// (a chunk at a time, `memcpy` into a u64 on a little-endian host).
    fn reference(bytes: &[u8]) -> u64 {
        let mut acc = [1u64, 1u64];
        acc[0] ^= bytes.len() as u64;
        for chunk in bytes.chunks(8) {
            acc[0] = acc[0].wrapping_add(acc[1]);
            acc[1] ^= acc[0];
            acc[0] ^= acc[0] >> 31;
            acc[0] = acc[0].wrapping_mul(0x9de62bbc8cef3ce3);
            acc[1] ^= acc[1] >> 32;
            acc[1] = acc[1].wrapping_mul(0x485cd6311b599e79);
            let mut x = [0u8; 8];
            x[..chunk.len()].copy_from_slice(chunk);
            acc[0] = acc[0].wrapping_add(u64::from_le_bytes(x));
        }
        let mut h = acc[0];
        h ^= h >> 31;
        h = h.wrapping_mul(0xbac3bd562846de6b);
        h = h.wrapping_add(acc[1]);
        h ^= h >> 32;
        h.wrapping_mul(0x995a187a14e7b445)
    }
}
