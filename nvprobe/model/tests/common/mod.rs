//! Replay support shared by the fixture tests: read a recording made on the
//! GPU machine, decode its raw kernel records with the context its start
//! record describes, and run the correlator over the result.
//!
//! Each test file uses a part of this module; the rest is unused there.
#![allow(dead_code)]

use std::path::PathBuf;

use nvprobe_model::{
    correlate::{Correlator, CuInit, Record, SignalReport},
    decode::{self, Context, Event, version::DriverVersion, version::VersionCtx},
};
use serde_json::Value;

/// The recordings live with the test tiers (tests/fixtures; its README says
/// which script made each one, where, on which driver).
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures")).join(name)
}

pub struct Replay {
    pub records: Vec<Value>,
    pub events: Vec<Event>,
}

/// Decode every raw record of a recording with the context its start
/// record describes (or a forced driver version).
pub fn replay(name: &str, force: Option<DriverVersion>) -> Replay {
    let text = std::fs::read_to_string(fixture(name)).expect("fixture present");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("every recorded line is JSON"))
        .collect();
    let start = records
        .iter()
        .find(|r| r["type"] == "start")
        .expect("start record");
    let recorded: DriverVersion = start["decode_version"]
        .as_str()
        .expect("version")
        .parse()
        .expect("parses");
    let mut ctx = Context::new(VersionCtx::from_version(Some(force.unwrap_or(recorded))));
    // Null when nvidia_uvm is not loaded.
    ctx.uvm_major = start["uvm_major"].as_u64().unwrap_or(0) as u32;
    ctx.caps_major = start["caps_major"].as_u64().unwrap_or(0) as u32;
    for (k, v) in start["nodes"].as_object().expect("nodes") {
        let (ma, mi) = k.split_once(':').expect("major:minor");
        ctx.nodes.insert(
            nvprobe_common::kdev_make(ma.parse().expect("major"), mi.parse().expect("minor")),
            v.as_str().expect("path").into(),
        );
    }
    let events = records
        .iter()
        .filter_map(|r| r["raw"].as_str())
        .map(|raw| {
            let bytes = decode::hex_decode(raw).expect("raw is hex");
            decode::decode(&bytes, &ctx).expect("every recorded kernel record decodes")
        })
        .collect();
    Replay { records, events }
}

/// The recording's start record.
pub fn start_of(r: &Replay) -> &Value {
    r.records
        .iter()
        .find(|x| x["type"] == "start")
        .expect("start record")
}

pub fn ioctls(r: &Replay) -> Vec<&decode::Ioctl> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::Ioctl(i) => Some(i),
            _ => None,
        })
        .collect()
}

pub fn status(i: &decode::Ioctl) -> Option<&'static str> {
    i.status.as_ref().and_then(|s| s.name)
}

/// The correlator's view of a recording (driver calls only: these
/// recordings predate the process events).
pub fn verdicts(name: &str) -> (Vec<Record>, Vec<CuInit>) {
    let r = replay(name, None);
    let mut c = Correlator::default();
    let mut out = Vec::new();
    for ev in &r.events {
        c.observe(ev, &mut out);
    }
    c.finish(&mut out);
    let v = out
        .iter()
        .filter_map(|rec| match rec {
            Record::Cuinit(v) => Some((**v).clone()),
            _ => None,
        })
        .collect();
    (out, v)
}

pub fn stage_ids(v: &CuInit) -> Vec<&'static str> {
    v.stages.iter().map(|s| s.stage).collect()
}

pub fn signal_reports(records: &[Record]) -> Vec<&SignalReport> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Signal(s) => Some(&**s),
            _ => None,
        })
        .collect()
}
