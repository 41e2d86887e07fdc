//! libnccl calls (issue 39): a communicator made, each collective and
//! point-to-point call with its number in its communicator, groups and
//! ends. Numbers stay numbers (the communicator's address and hash, the
//! datatype, the op); names are beside them (nccl.h's enums).

use nvprobe_common::{NcclArg, NcclEvent, NcclKind, nccl_fn};

use super::{
    context::proc_of,
    event::{Event, NcclCall, NcclCallKind},
};

/// ncclDataType_t (nccl.h).
#[rustfmt::skip]
const DATATYPES: &[(i32, &str)] = &[
    (0, "int8"), (1, "uint8"), (2, "int32"), (3, "uint32"), (4, "int64"), (5, "uint64"),
    (6, "float16"), (7, "float32"), (8, "float64"), (9, "bfloat16"), (10, "float8e4m3"),
    (11, "float8e5m2"),
];

/// ncclRedOp_t's built-in values (nccl.h); others are made by
/// ncclRedOpCreatePreMulSum.
const OPS: &[(i32, &str)] = &[(0, "sum"), (1, "prod"), (2, "max"), (3, "min"), (4, "avg")];

/// ncclResult_t (nccl.h).
#[rustfmt::skip]
const RESULTS: &[(i32, &str)] = &[
    (0, "ncclSuccess"), (1, "ncclUnhandledCudaError"), (2, "ncclSystemError"),
    (3, "ncclInternalError"), (4, "ncclInvalidArgument"), (5, "ncclInvalidUsage"),
    (6, "ncclRemoteError"), (7, "ncclInProgress"),
];

fn named(table: &[(i32, &'static str)], v: i32) -> Option<&'static str> {
    table.iter().find(|e| e.0 == v).map(|e| e.1)
}

pub(super) fn decode_nccl(ev: &NcclEvent, raw: Option<String>) -> Event {
    let f = nccl_fn(ev.func);
    let kind = match NcclKind::from_repr(ev.kind) {
        Some(NcclKind::Init) => NcclCallKind::Init,
        Some(NcclKind::Collective) => NcclCallKind::Collective,
        Some(NcclKind::P2p) => NcclCallKind::P2p,
        Some(NcclKind::GroupStart) => NcclCallKind::GroupStart,
        Some(NcclKind::GroupEnd) => NcclCallKind::GroupEnd,
        Some(NcclKind::End) | None => NcclCallKind::End,
    };
    let numbered = matches!(
        kind,
        NcclCallKind::Collective | NcclCallKind::P2p | NcclCallKind::End
    );
    let known = |v: i32| (v >= 0).then_some(v);
    let a_is = f.map_or(NcclArg::None, |f| f.a_is);
    let a = known(ev.a);
    let init = kind == NcclCallKind::Init;
    let grouped = matches!(kind, NcclCallKind::GroupStart | NcclCallKind::GroupEnd);
    Event::Nccl(NcclCall {
        proc: proc_of(&ev.hdr),
        func: f.map_or("ncclUnknown", |f| f.name),
        kind,
        communicator: ev.comm,
        comm_hash: (ev.hash != 0).then_some(ev.hash),
        rank: known(ev.rank).filter(|_| !grouped),
        nranks: known(ev.nranks).filter(|_| !grouped),
        seq: numbered.then_some(ev.seq),
        count: matches!(kind, NcclCallKind::Collective | NcclCallKind::P2p).then_some(ev.count),
        datatype: known(ev.dtype),
        datatype_name: known(ev.dtype).and_then(|d| named(DATATYPES, d)),
        op: a.filter(|_| a_is == NcclArg::Op),
        op_name: a
            .filter(|_| a_is == NcclArg::Op)
            .and_then(|o| named(OPS, o)),
        root: a.filter(|_| a_is == NcclArg::Root),
        peer: a.filter(|_| a_is == NcclArg::Peer),
        stream: matches!(kind, NcclCallKind::Collective | NcclCallKind::P2p).then_some(ev.stream),
        start_ns: ev.start_ns,
        result: init.then_some(ev.result),
        result_name: init.then(|| named(RESULTS, ev.result)).flatten(),
        ok: !init || ev.result == 0,
        raw,
    })
}
