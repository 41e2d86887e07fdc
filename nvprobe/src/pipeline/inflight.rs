//! The NVIDIA calls in flight, read from the kernel's table of ioctls and
//! the uprobes' record of cuInit: stall reports (`--stall-after`),
//! run-time hangs (`--hang-after`) and the view of `top`.

use std::time::Duration;

use aya::maps::MapData;
use nvprobe_common::EventKind;
use nvprobe_model::{
    decode::{self, version::VersionCtx},
    render::{Clock, Note},
};

use super::{Pipeline, seen::Seen};

/// What the checks of the calls in flight keep between ticks.
pub(super) struct InFlightCalls {
    pub(super) inflight: Option<aya::maps::Array<MapData, nvprobe_common::Inflight>>,
    /// When the untimed ioctls in flight were first seen.
    pub(super) untimed: crate::stall::FirstSeen,
    pub(super) stalls: crate::stall::Detector,
    /// Run-time hangs (`--hang-after`).
    pub(super) hangs: Option<super::hangs::Hangs>,
}

impl InFlightCalls {
    /// The calls in flight: ioctls in the kernel's table, cuInit from the
    /// uprobes (with its process).
    pub(super) fn in_flight(
        &mut self,
        seen: &Seen,
        version: &VersionCtx,
    ) -> Vec<(Option<u32>, crate::stall::InFlight)> {
        let mut calls = Vec::new();
        // Untimed calls (start not read) and coarse ones (a tick count for
        // a start) by their place in `calls`.
        let mut untimed = Vec::new();
        let no_start = nvprobe_common::ioctl_flags::UNTIMED | nvprobe_common::ioctl_flags::COARSE;
        if let Some(arr) = self.inflight.as_ref() {
            for v in arr.iter().flatten() {
                if v.kind == EventKind::Ioctl as u32 && v.tid != 0 {
                    if v.flags & no_start != 0 {
                        untimed.push((calls.len(), (v.tid, v.seq)));
                    }
                    let xfer =
                        (v.flags & nvprobe_common::ioctl_flags::XFER != 0).then_some(v.xfer_cmd);
                    calls.push((
                        None,
                        crate::stall::InFlight {
                            tid: v.tid,
                            start_ns: v.start_ns,
                            call: decode::raw_call_name(
                                nvprobe_common::DevKind::from_u8(v.file.kind),
                                v.cmd,
                                xfer,
                                version,
                            ),
                            fd: (v.fd >= 0).then_some(v.fd),
                        },
                    ));
                }
            }
        }
        let keys: Vec<(u32, u32)> = untimed.iter().map(|u| u.1).collect();
        let starts = self.untimed.starts(Clock::mono_now(), &keys);
        for ((i, _), start) in untimed.iter().zip(starts) {
            calls[*i].1.start_ns = start;
        }
        for (tid, (tgid, start)) in &seen.cuinit {
            calls.push((
                Some(*tgid),
                crate::stall::InFlight {
                    tid: *tid,
                    start_ns: *start,
                    call: "cuInit".into(),
                    fd: None,
                },
            ));
        }
        calls
    }

    /// Report the calls in flight that have run longer than `after`.
    pub(super) fn check_stalls(
        &mut self,
        seen: &Seen,
        after: Duration,
        version: &VersionCtx,
        pipe: &mut Pipeline,
    ) -> anyhow::Result<()> {
        let calls: Vec<_> = self
            .in_flight(seen, version)
            .into_iter()
            .map(|c| c.1)
            .collect();
        self.stalls.stoppers = seen.stoppers.clone();
        self.stalls.stages = pipe.board.lock().map(|b| b.clone()).unwrap_or_default();
        let now = Clock::mono_now();
        for r in self.stalls.check(now, after.as_nanos() as u64, &calls) {
            pipe.note(now, &Note::Stall(&r))?;
        }
        Ok(())
    }

    /// Hang records due now (`--hang-after`): libcuda calls of processes
    /// past their start-up, and their NVIDIA ioctls.
    pub(super) fn check_hangs(
        &mut self,
        seen: &mut Seen,
        nv_procs: Option<&aya::maps::HashMap<MapData, u32, u8>>,
        version: &VersionCtx,
        pipe: &mut Pipeline,
    ) -> anyhow::Result<()> {
        let Some(h) = self.hangs.as_mut() else {
            return Ok(());
        };
        for (pid, func, ret, at) in std::mem::take(&mut seen.cuda_failures) {
            h.cuda_failed(pid, func, ret, at);
        }
        h.ended_in_call(std::mem::take(&mut seen.unfinished));
        let started: Vec<u32> = nv_procs.map_or_else(Vec::new, |m| {
            m.iter()
                .filter_map(Result::ok)
                .filter(|(_, v)| v & nvprobe_common::nv_procs::STARTED != 0)
                .map(|(k, _)| k)
                .collect()
        });
        if started.is_empty() && !h.reporting() {
            return Ok(());
        }
        let mut calls = h.libcuda_calls(&started);
        for (_, c) in self.in_flight(seen, version) {
            let Some(t) = crate::stall::task_now(c.tid) else {
                continue;
            };
            if started.contains(&t.tgid) {
                calls.push(super::hangs::InFlight {
                    pid: t.tgid,
                    tid: c.tid,
                    start_ns: c.start_ns,
                    layer: nvprobe_model::hang::HangLayer::Driver,
                    call: c.call,
                    waits_for_gpu: false,
                    slot: None,
                });
            }
        }
        let Some(h) = self.hangs.as_mut() else {
            return Ok(());
        };
        let now = Clock::mono_now();
        for said in h.check(now, &calls, &seen.stoppers) {
            write_hang(pipe, now, said)?;
        }
        Ok(())
    }

    /// At the stop: the hangs still open end with the run.
    pub(super) fn end_hangs(&mut self, pipe: &mut Pipeline) -> anyhow::Result<()> {
        let now = Clock::mono_now();
        for said in self.hangs.as_mut().map_or_else(Vec::new, |h| h.stop(now)) {
            write_hang(pipe, now, said)?;
        }
        Ok(())
    }
}

fn write_hang(pipe: &mut Pipeline, now: u64, said: super::hangs::Said) -> anyhow::Result<()> {
    match said {
        super::hangs::Said::Hang(r) => pipe.note(now, &Note::Hang(&r)),
        super::hangs::Said::End(e) => pipe.note(now, &Note::HangEnd(&e)),
    }
}
