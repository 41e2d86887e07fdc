//! What the diff keeps of one item of the replay.

use super::typed;
use crate::{
    correlate::{Class, Record},
    decode::Event,
    replay::Item,
};

/// What the collector keeps of one item of the replay's typed stream
/// ([`Fact::of_item`]), whether the recording was made with --raw or not.
#[derive(Debug, PartialEq)]
pub enum Fact {
    /// A record of the process that is none of the below (its identity, a
    /// signal report, a close): the process exists.
    Seen,
    Stage {
        stage: String,
        name: String,
        at_ms: f64,
    },
    Verdict {
        result: String,
        text: String,
        cuda: bool,
    },
    Call(CallFact),
}

/// A call as a step.
#[derive(Debug, PartialEq)]
pub struct CallFact {
    pub call: String,
    pub result: String,
    pub ok: bool,
    pub start_ns: u64,
    pub duration_ns: u64,
    /// An ioctl: its GPU node, and the UUID of a UVM_REGISTER_GPU that
    /// succeeded.
    pub ioctl: Option<(Option<String>, Option<String>)>,
    /// (the GPU UUID or node it was about, whether a node).
    pub detail: Option<(String, bool)>,
}

impl Fact {
    /// An item of the replay: (pid, comm, what it is).
    pub fn of_item(item: &Item<'_>) -> Option<(u32, String, Fact)> {
        Some(match item {
            Item::Event(ev) => {
                let p = ev.proc();
                let fact = match typed::call_name(ev) {
                    None => Fact::Seen,
                    Some(call) => {
                        let (start, end) = ev.span();
                        Fact::Call(CallFact {
                            call,
                            result: typed::result(ev),
                            ok: typed::ok(ev),
                            start_ns: start,
                            duration_ns: end - start,
                            ioctl: match ev {
                                Event::Ioctl(i) => Some((
                                    typed::gpu_node(ev),
                                    (i.name == Some("UVM_REGISTER_GPU") && i.ok)
                                        .then(|| i.args.known().gpu_uuid.clone())
                                        .flatten(),
                                )),
                                _ => None,
                            },
                            detail: typed::detail(ev),
                        })
                    }
                };
                (p.pid, p.comm.clone(), fact)
            }
            Item::Record(r) => match r {
                Record::Stage { pid, comm, hit } => (
                    *pid,
                    comm.clone(),
                    Fact::Stage {
                        stage: hit.stage.to_owned(),
                        name: hit.name.to_owned(),
                        at_ms: hit.at_ms,
                    },
                ),
                Record::Cuinit(v) => (
                    v.pid,
                    v.comm.clone(),
                    Fact::Verdict {
                        result: v.result.as_str().to_owned(),
                        text: v.text.clone(),
                        cuda: v.class == Class::Cuda,
                    },
                ),
                Record::Signal(s) => (s.pid, s.comm.clone(), Fact::Seen),
                Record::Breakdown(b) => (b.pid, b.comm.clone(), Fact::Seen),
                Record::FirstContext(c) => (c.pid, c.comm.clone(), Fact::Seen),
                Record::KernelLog(k) => (
                    k.pid.unwrap_or(0),
                    k.comm.clone().unwrap_or_default(),
                    Fact::Seen,
                ),
                Record::Fault(f) => (f.pid, f.comm.clone(), Fact::Seen),
            },
            Item::Process(p) => (
                p.pid,
                p.comm.clone().unwrap_or_else(|| "?".into()),
                Fact::Seen,
            ),
            Item::Stall(s) => (s.pid, s.comm.clone(), Fact::Seen),
            Item::Hang(h) => (h.pid, h.comm.clone(), Fact::Seen),
            Item::HangEnd(h) => (h.pid, h.comm.clone(), Fact::Seen),
            Item::Start(..) | Item::Undecodable(..) => return None,
        })
    }
}
