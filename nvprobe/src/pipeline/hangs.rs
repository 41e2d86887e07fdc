//! Run-time hangs (issue 39), on the stall clock: the calls of processes
//! past their start-up (`STARTED` in `NV_PROCS`) still in flight after
//! `--hang-after`. A libcuda synchronisation, copy, memset or free is in
//! its thread's `RT_INFLIGHT` slot from its entry to its return; an
//! NVIDIA ioctl is in `INFLIGHT`. Each gets one `hang` record once it
//! passes the threshold, with what /proc says its thread is doing, the
//! thread's last launch and last completed wait, what went wrong for its
//! process meanwhile (a failed CUDA call, an Xid), and, for a rank of an
//! NCCL communicator, where the communicator's other ranks on this node
//! are (`NCCL_COMMS`); and a `hang_end` once it returns, its thread ends,
//! or nvprobe stops.
//!
//! Nothing is read at the calls themselves: the kernel side writes the
//! slots, and the collector reads those of the processes it follows, two
//! times a second.

use std::collections::{HashMap, HashSet, VecDeque};

use aya::maps::{Array, HashMap as BpfHashMap, MapData};
use nvprobe_common::{NcclComm, NcclKey, RT_SLOTS, RtSlot};
use nvprobe_model::{
    decode::cudafn,
    hang::{
        CommView, HangEnd, HangEndHow, HangFacts, HangLayer, HangReport, Meanwhile, MeanwhileKind,
        RankView,
    },
};

/// What went wrong for a process (or the host) lately: kept 5 minutes.
struct Recent {
    pid: Option<u32>,
    at_ns: u64,
    what: Meanwhile,
}

const RECENT_NS: u64 = 300_000_000_000;
const RECENT_MAX: usize = 256;

/// A call in flight that may be hung.
pub(super) struct InFlight {
    pub(super) pid: u32,
    pub(super) tid: u32,
    pub(super) start_ns: u64,
    pub(super) layer: HangLayer,
    pub(super) call: String,
    pub(super) waits_for_gpu: bool,
    /// The thread's libcuda slot (last launch, last completed wait).
    pub(super) slot: Option<RtSlot>,
}

/// A record to write.
pub(super) enum Said {
    Hang(Box<HangReport>),
    End(Box<HangEnd>),
}

/// The shortest window a CPU share is measured over (ticks are 10 ms).
const MIN_CPU_WINDOW_NS: u64 = 200_000_000;
/// How long past `--hang-after` a report may wait for that window: one more
/// look (they are half a second apart), so a hang is said within a second.
const MAX_CPU_WAIT_NS: u64 = 500_000_000;

pub(super) struct Hangs {
    after_ns: u64,
    rt: Option<Array<MapData, RtSlot>>,
    nccl: Option<BpfHashMap<MapData, NcclKey, NcclComm>>,
    launches_hooked: bool,
    /// (tid, start_ns) -> the report made.
    open: HashMap<(u32, u64), HangReport>,
    /// (tid, start_ns) -> the thread's user and kernel time (ns) when it
    /// was first looked at, and when.
    cpu: HashMap<(u32, u64), (u64, u64, u64)>,
    recent: VecDeque<Recent>,
    /// Threads that ended inside a hooked call (the kernel side's
    /// `unfinished` records), kept a minute.
    unfinished: VecDeque<(u32, std::time::Instant)>,
    /// Calls no longer in flight whose thread is gone but whose end is
    /// not known yet: their end is said at the next look.
    undecided: HashSet<(u32, u64)>,
}

/// Clock ticks per second of /proc/PID/stat's times.
fn ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// (user, kernel) CPU time of a task, in ns.
fn cpu_of(tid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    // Fields after the comm's closing parenthesis: state is 3rd, utime the
    // 14th and stime the 15th of the whole line.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split(' ').collect();
    let (u, s): (u64, u64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
    let per = 1_000_000_000 / ticks();
    Some((u * per, s * per))
}

/// The threads of a process.
fn tasks(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn comm_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| nvprobe_model::decode::escape_bytes(c.trim_end().as_bytes()))
        .unwrap_or_else(|_| "?".into())
}

impl Hangs {
    pub(super) fn new(
        after: std::time::Duration,
        rt: Option<Array<MapData, RtSlot>>,
        nccl: Option<BpfHashMap<MapData, NcclKey, NcclComm>>,
        launches_hooked: bool,
    ) -> Self {
        Hangs {
            after_ns: after.as_nanos() as u64,
            rt,
            nccl,
            launches_hooked,
            open: HashMap::new(),
            cpu: HashMap::new(),
            recent: VecDeque::new(),
            unfinished: VecDeque::new(),
            undecided: HashSet::new(),
        }
    }

    /// Threads that ended inside a hooked call.
    pub(super) fn ended_in_call(&mut self, tids: Vec<u32>) {
        let now = std::time::Instant::now();
        while self
            .unfinished
            .front()
            .is_some_and(|(_, at)| now.duration_since(*at).as_secs() > 60)
        {
            self.unfinished.pop_front();
        }
        self.unfinished.extend(tids.into_iter().map(|t| (t, now)));
    }

    fn remember(&mut self, r: Recent) {
        let cutoff = r.at_ns.saturating_sub(RECENT_NS);
        while self
            .recent
            .front()
            .is_some_and(|x| x.at_ns < cutoff || self.recent.len() >= RECENT_MAX)
        {
            self.recent.pop_front();
        }
        self.recent.push_back(r);
    }

    /// A libcuda call of `pid` failed (a fault-only function's return).
    pub(super) fn cuda_failed(&mut self, pid: u32, func: u32, result: i64, at_ns: u64) {
        let name = nvprobe_model::decode::curesult::name(result).unwrap_or("CUresult");
        self.remember(Recent {
            pid: Some(pid),
            at_ns,
            what: Meanwhile {
                kind: MeanwhileKind::CudaError,
                code: result as u64,
                what: format!("{} returned {result} {name}", cudafn::name(func)),
                this_process: true,
            },
        });
    }

    /// A kernel-log line, at `at_ns`: an Xid is kept.
    pub(super) fn log_line(&mut self, at_ns: u64, message: &str) {
        let Some(x) = nvprobe_model::kmsg::parse_xid(message) else {
            return;
        };
        let meaning = nvprobe_model::kmsg::xid::info(x.number)
            .map_or(String::new(), |i| format!(": {}", i.meaning));
        self.remember(Recent {
            pid: x.pid,
            at_ns,
            what: Meanwhile {
                kind: MeanwhileKind::Xid,
                code: u64::from(x.number),
                what: format!("Xid {} on {}{meaning}", x.number, x.pci),
                this_process: false,
            },
        });
    }

    /// The libcuda calls in flight of the processes in `started`.
    pub(super) fn libcuda_calls(&self, started: &[u32]) -> Vec<InFlight> {
        let Some(rt) = self.rt.as_ref() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for &pid in started {
            for tid in tasks(pid) {
                let Ok(s) = rt.get(&(tid & (RT_SLOTS - 1)), 0) else {
                    continue;
                };
                if s.tid != tid || s.func == 0 {
                    continue;
                }
                out.push(InFlight {
                    pid,
                    tid,
                    start_ns: s.start_ns,
                    layer: HangLayer::Libcuda,
                    call: cudafn::name(s.func).to_owned(),
                    waits_for_gpu: cudafn::waits_for_gpu(s.func),
                    slot: Some(s),
                });
            }
        }
        out
    }

    /// Reports due now and ends seen, for the calls in flight `calls`.
    pub(super) fn check(
        &mut self,
        now: u64,
        calls: &[InFlight],
        stoppers: &HashMap<u32, String>,
    ) -> Vec<Said> {
        let mut out = Vec::new();
        let live: HashSet<(u32, u64)> = calls.iter().map(|c| (c.tid, c.start_ns)).collect();
        // Calls reported before that are in flight no longer.
        let gone: Vec<(u32, u64)> = self
            .open
            .keys()
            .filter(|k| !live.contains(k))
            .copied()
            .collect();
        for k in gone {
            // The thread ended in the call (its `unfinished` record), or
            // it returned: a thread that lives, or one gone without that
            // record by the next look (records come a moment later).
            let ended = self.unfinished.iter().any(|(t, _)| *t == k.0);
            let alive = std::path::Path::new(&format!("/proc/{}", k.0)).exists();
            if !ended && !alive && self.undecided.insert(k) {
                continue;
            }
            self.undecided.remove(&k);
            let Some(r) = self.open.remove(&k) else {
                continue;
            };
            let how = if ended {
                HangEndHow::Ended
            } else {
                HangEndHow::Returned
            };
            // How long it lasted, as of this look (half a second apart).
            out.push(Said::End(Box::new(HangEnd::new(
                &r,
                now.saturating_sub(k.1),
                how,
            ))));
        }
        self.cpu.retain(|k, _| live.contains(k));
        for c in calls {
            let key = (c.tid, c.start_ns);
            let elapsed = now.saturating_sub(c.start_ns);
            // The thread's CPU time from half the threshold on: its share
            // of a CPU since then says spinning or sleeping.
            if elapsed >= self.after_ns / 2
                && !self.cpu.contains_key(&key)
                && let Some((u, s)) = cpu_of(c.tid)
            {
                self.cpu.insert(key, (u, s, now));
            }
            if elapsed < self.after_ns || self.open.contains_key(&key) {
                continue;
            }
            // The share of a CPU needs a window: a look that came late
            // (a busy host, a collector starved by the spinning thread
            // itself) may take the first sample and be due at once. The
            // report waits for the next look then, a while at most.
            let window = self
                .cpu
                .get(&key)
                .map_or(0, |&(_, _, at)| now.saturating_sub(at));
            if window < MIN_CPU_WINDOW_NS && elapsed < self.after_ns + MAX_CPU_WAIT_NS {
                continue;
            }
            let Some(r) = self.report(now, c, stoppers) else {
                continue;
            };
            self.open.insert(key, r.clone());
            out.push(Said::Hang(Box::new(r)));
        }
        out
    }

    /// Some hang is open (its end is still to be said).
    pub(super) fn reporting(&self) -> bool {
        !self.open.is_empty()
    }

    /// At the stop: every hang still open ends.
    pub(super) fn stop(&mut self, now: u64) -> Vec<Said> {
        self.open
            .drain()
            .map(|(k, r)| {
                Said::End(Box::new(HangEnd::new(
                    &r,
                    now.saturating_sub(k.1),
                    HangEndHow::Stopped,
                )))
            })
            .collect()
    }

    fn report(
        &self,
        now: u64,
        c: &InFlight,
        stoppers: &HashMap<u32, String>,
    ) -> Option<HangReport> {
        let t = crate::stall::task_now(c.tid)?;
        let cpu = self
            .cpu
            .get(&(c.tid, c.start_ns))
            .and_then(|&(u0, s0, at)| {
                let (u, s) = cpu_of(c.tid)?;
                Some((
                    u.saturating_sub(u0),
                    s.saturating_sub(s0),
                    now.saturating_sub(at),
                ))
            });
        let ago = |func: u32, at: u64| {
            (func != 0 && at != 0 && at <= now).then(|| (cudafn::name(func).to_owned(), now - at))
        };
        let slot = c.slot.as_ref();
        let stopped_by = matches!(t.state.as_str(), "T" | "t")
            .then(|| stoppers.get(&c.pid).cloned())
            .flatten();
        let meanwhile = self
            .recent
            .iter()
            .filter(|r| r.at_ns >= c.start_ns && r.pid.is_none_or(|p| p == c.pid))
            .map(|r| Meanwhile {
                this_process: r.pid == Some(c.pid),
                ..r.what.clone()
            })
            .collect();
        let driver_function = crate::stall::driver_frame(&t.stack);
        let facts = HangFacts {
            pid: c.pid,
            tid: c.tid,
            comm: t.comm,
            call: c.call.clone(),
            waits_for_gpu: c.waits_for_gpu,
            elapsed_ns: now.saturating_sub(c.start_ns),
            after_ns: self.after_ns,
            state: t.state,
            cpu,
            wchan: t.wchan,
            stack: t.stack.into_iter().take(8).collect(),
            driver_function,
            stopped_by,
            last_launch: slot.and_then(|s| ago(s.launch_func, s.launch_ns)),
            last_completed: slot.and_then(|s| ago(s.done_func, s.done_ns)),
            launches_hooked: self.launches_hooked,
            meanwhile,
            nccl: self.comm_view(now, c.pid),
        };
        Some(facts.report(c.layer))
    }

    /// The communicator `pid` called last, and the ranks of it on this
    /// node (processes still alive).
    fn comm_view(&self, now: u64, pid: u32) -> Option<CommView> {
        let map = self.nccl.as_ref()?;
        let all: Vec<(NcclKey, NcclComm)> = map
            .iter()
            .filter_map(Result::ok)
            .filter(|(k, _)| std::path::Path::new(&format!("/proc/{}", k.tgid)).exists())
            .collect();
        let (_, mine) = all
            .iter()
            .filter(|(k, v)| k.tgid == pid && v.seq > 0)
            .max_by_key(|(_, v)| v.last_ns)?;
        let same = |v: &NcclComm| v.hash != 0 && v.hash == mine.hash;
        let mut ranks: Vec<RankView> = all
            .iter()
            .filter(|(k, v)| k.tgid == pid && v.last_ns == mine.last_ns || same(v))
            .map(|(k, v)| RankView {
                pid: k.tgid,
                comm: comm_of(k.tgid),
                rank: v.rank,
                seq: v.seq,
                op: nvprobe_common::nccl_fn(v.last_func).map(|f| f.name.to_owned()),
                since_s: (now.saturating_sub(v.last_ns) as f64 / 1e8).round() / 10.0,
                doing: (k.tgid != pid).then(|| self.doing(now, k.tgid)).flatten(),
            })
            .collect();
        ranks.sort_by_key(|r| (r.rank, r.pid));
        ranks.dedup_by_key(|r| (r.rank, r.pid));
        let behind = if ranks.iter().all(|r| r.seq == ranks[0].seq) {
            None
        } else {
            ranks.iter().min_by_key(|r| (r.seq, r.rank)).map(|r| r.rank)
        };
        Some(CommView {
            comm_hash: if mine.hash == 0 {
                "unknown".into()
            } else {
                format!("{:016x}", mine.hash)
            },
            nranks: mine.nranks,
            rank: mine.rank,
            seq: mine.seq,
            ranks,
            behind,
        })
    }

    /// What another rank's process is doing: a libcuda call in flight, or
    /// its main thread's state.
    fn doing(&self, now: u64, pid: u32) -> Option<String> {
        if let Some(c) = self
            .libcuda_calls(&[pid])
            .into_iter()
            .min_by_key(|c| c.start_ns)
        {
            return Some(format!(
                "in {} for {:.1} s",
                c.call,
                now.saturating_sub(c.start_ns) as f64 / 1e9
            ));
        }
        let t = crate::stall::task_now(pid)?;
        Some(match t.state.as_str() {
            "T" => "stopped (T)".into(),
            "t" => "held in a ptrace stop (t) by its tracer".into(),
            "D" => format!(
                "blocked in the kernel (D) in {}",
                t.wchan.as_deref().unwrap_or("?")
            ),
            "S" | "I" => format!("sleeping in {}", t.wchan.as_deref().unwrap_or("?")),
            "R" => "running, in no hooked call".into(),
            other => format!("task state {other}"),
        })
    }
}
