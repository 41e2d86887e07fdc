//! Run-time hangs (issue 39): a call of a process past its start-up (a
//! libcuda synchronisation, copy, memset or free, or an NVIDIA driver
//! call) still in flight after `--hang-after`. The collector finds them
//! (it reads the per-thread slots of the processes it follows) and
//! gathers the facts, what the thread is doing from /proc included; this
//! module turns the facts into the `hang` record, its one-line verdict and
//! its hint, and the `hang_end` record that says when the call came back.
//!
//! The facts are numbers, enums and flags; the text is made here, once.

use serde::{Deserialize, Serialize};

/// Where the call in flight was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HangLayer {
    /// A libcuda function of the fault-only set (uprobes).
    Libcuda,
    /// An ioctl on an NVIDIA device node.
    Driver,
}

/// What the thread was doing when the verdict was made, read from /proc.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Waiting {
    /// Running in user space most of the time: libcuda polling for the
    /// GPU's work (the default spin or yield synchronisation).
    SpinningUser,
    /// Running, most of the time inside the kernel.
    RunningKernel,
    /// Running, split between user space and the kernel (or too little
    /// time to tell).
    Running,
    /// Sleeping (S): waiting for an event, in the kernel function `wchan`.
    Sleeping,
    /// Blocked in the kernel (D), uninterruptibly.
    Blocked,
    /// Stopped (T) by a signal or a debugger.
    Stopped,
    /// The task could not be read (it ended as the scan ran).
    Unknown,
}

impl Waiting {
    /// From /proc's state letter and the CPU time the task used since the
    /// collector's earlier look (user and system nanoseconds over `wall`).
    pub fn of(state: &str, cpu: Option<(u64, u64, u64)>) -> Self {
        match state {
            "D" => Self::Blocked,
            "S" | "I" => Self::Sleeping,
            "T" | "t" => Self::Stopped,
            "R" => match cpu {
                Some((user, _, wall)) if wall > 0 && user * 2 >= wall => Self::SpinningUser,
                Some((user, sys, wall)) if wall > 0 && sys * 2 >= wall && sys > user => {
                    Self::RunningKernel
                }
                _ => Self::Running,
            },
            _ => Self::Unknown,
        }
    }
}

/// A call that came before the one in flight, and how long before the
/// verdict it was.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PastCall {
    pub call: String,
    pub ago_s: f64,
}

/// What came while a call waited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MeanwhileKind {
    /// A kernel-log Xid naming the process, or tied to no process.
    Xid,
    /// A hooked libcuda call of the process failed.
    CudaError,
}

/// Something that went wrong for the process (or the host) while the
/// call was in flight.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Meanwhile {
    pub kind: MeanwhileKind,
    /// The Xid's number or the CUresult.
    pub code: u64,
    /// One line: the Xid's message, or the call and its CUresult's name.
    pub what: String,
    /// Whether it names this process (an Xid not tied to any process is
    /// the host's).
    pub this_process: bool,
}

/// One rank of an NCCL communicator on this node, as the hang verdict
/// shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RankView {
    pub pid: u32,
    pub comm: String,
    pub rank: i32,
    /// The last collective or point-to-point call the rank entered.
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// Seconds since it entered it.
    pub since_s: f64,
    /// What the rank's process is doing now, in words (a call in flight,
    /// stopped, in user space).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doing: Option<String>,
}

/// The communicator the hung process is a rank of, and the ranks this
/// node sees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommView {
    /// A hash of the communicator's unique id: the same on every rank of
    /// every node.
    pub comm_hash: String,
    pub nranks: i32,
    pub rank: i32,
    /// This rank's last call entered.
    pub seq: u64,
    pub ranks: Vec<RankView>,
    /// The rank behind the others on this node, when they disagree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind: Option<i32>,
}

/// A hang verdict: the record `hang`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HangReport {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub layer: HangLayer,
    pub call: String,
    /// How long the call has been in flight.
    pub elapsed_s: f64,
    /// `--hang-after`, in seconds.
    pub after_s: f64,
    /// D, S, R, T, … as /proc/<tid>/stat says.
    pub state: String,
    pub waiting: Waiting,
    /// The share of one CPU the thread used in user space and in the
    /// kernel over the last look (percent), when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_user_pct: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_kernel_pct: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wchan: Option<String>,
    /// The top frames of the thread's kernel stack (where the kernel
    /// lets it be read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_function: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// The thread's last kernel launch (`--libcuda-hooks launches`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_launch: Option<PastCall>,
    /// The thread's last synchronisation, copy, memset or free that
    /// returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_completed: Option<PastCall>,
    /// Whether launches were hooked (else `last_launch` cannot be known).
    pub launches_hooked: bool,
    /// Xids and CUDA errors since the call began.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub meanwhile: Vec<Meanwhile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl: Option<CommView>,
    pub text: String,
    pub hint: String,
}

/// How a hung call's wait ended: the record `hang_end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HangEndHow {
    /// The call returned (its result is in a fault record if it failed).
    Returned,
    /// The thread (or its process) ended with the call still in flight.
    Ended,
    /// nvprobe stopped while the call was still in flight.
    Stopped,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HangEnd {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub layer: HangLayer,
    pub call: String,
    /// How long it had been in flight when its end was seen (within the
    /// collector's half-second look).
    pub lasted_s: f64,
    pub how: HangEndHow,
    pub text: String,
}

/// What the collector found about one call in flight past the threshold.
#[derive(Clone, Debug, Default)]
pub struct HangFacts {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub call: String,
    /// The call waits for the GPU's work (a synchronisation, or a copy or
    /// memset that synchronises), as opposed to a free or a driver call.
    pub waits_for_gpu: bool,
    pub elapsed_ns: u64,
    pub after_ns: u64,
    pub state: String,
    /// (user ns, kernel ns, wall ns) since the collector's earlier look.
    pub cpu: Option<(u64, u64, u64)>,
    pub wchan: Option<String>,
    pub stack: Vec<String>,
    pub driver_function: Option<String>,
    pub stopped_by: Option<String>,
    /// (call, ns before now).
    pub last_launch: Option<(String, u64)>,
    pub last_completed: Option<(String, u64)>,
    pub launches_hooked: bool,
    pub meanwhile: Vec<Meanwhile>,
    pub nccl: Option<CommView>,
}

fn secs(ns: u64) -> f64 {
    (ns as f64 / 1e8).round() / 10.0
}

fn pct(part: u64, wall: u64) -> u32 {
    part.saturating_mul(100)
        .checked_div(wall)
        .map_or(0, |p| p.min(100) as u32)
}

impl HangFacts {
    /// The record, with its one-line verdict and its hint.
    pub fn report(self, layer: HangLayer) -> HangReport {
        let waiting = Waiting::of(&self.state, self.cpu);
        let (cpu_user_pct, cpu_kernel_pct) = match self.cpu {
            Some((u, s, w)) if w > 0 => (Some(pct(u, w)), Some(pct(s, w))),
            _ => (None, None),
        };
        let elapsed = secs(self.elapsed_ns);
        let after = secs(self.after_ns);
        let wchan = self.wchan.clone().unwrap_or_else(|| "?".into());
        let inside = self
            .driver_function
            .as_ref()
            .map_or(String::new(), |d| format!(", inside the driver in {d}"));
        let how = match waiting {
            Waiting::SpinningUser => format!(
                "spinning in user space ({}% of a CPU): libcuda is polling for work on the GPU that has not finished",
                cpu_user_pct.unwrap_or(0)
            ),
            Waiting::RunningKernel => format!(
                "running in the kernel ({}% of a CPU){inside}",
                cpu_kernel_pct.unwrap_or(0)
            ),
            Waiting::Running => "running".to_owned(),
            Waiting::Sleeping => format!("sleeping (S) in {wchan}{inside}"),
            Waiting::Blocked => format!("blocked in the kernel (D) in {wchan}{inside}"),
            Waiting::Stopped => format!(
                "the process is stopped (T){}",
                self.stopped_by
                    .as_ref()
                    .map_or(String::new(), |s| format!(" by {s}"))
            ),
            Waiting::Unknown => format!("task state {}", self.state),
        };
        let mut text = format!(
            "{} has not returned for {elapsed:.1} s (--hang-after {after} s): {how}",
            self.call
        );
        if let Some(n) = &self.nccl
            && let Some(b) = n.behind
            && let Some(r) = n.ranks.iter().find(|r| r.rank == b)
        {
            text.push_str(&format!(
                "; rank {b} of communicator {} ({}[{}]) is behind, at call {} against {}",
                n.comm_hash, r.comm, r.pid, r.seq, n.seq
            ));
        }
        let mine: Vec<&Meanwhile> = self.meanwhile.iter().filter(|m| m.this_process).collect();
        if let Some(m) = mine.first() {
            text.push_str(&format!("; meanwhile {}", m.what));
        }
        let hint = self.hint(waiting, &mine);
        HangReport {
            pid: self.pid,
            tid: self.tid,
            comm: self.comm,
            layer,
            call: self.call,
            elapsed_s: elapsed,
            after_s: after,
            state: self.state,
            waiting,
            cpu_user_pct,
            cpu_kernel_pct,
            wchan: self.wchan,
            stack: self.stack,
            driver_function: self.driver_function,
            stopped_by: self.stopped_by,
            last_launch: self.last_launch.map(|(call, ns)| PastCall {
                call,
                ago_s: secs(ns),
            }),
            last_completed: self.last_completed.map(|(call, ns)| PastCall {
                call,
                ago_s: secs(ns),
            }),
            launches_hooked: self.launches_hooked,
            meanwhile: self.meanwhile,
            nccl: self.nccl,
            text,
            hint,
        }
    }

    /// What to do, from what was seen only.
    fn hint(&self, waiting: Waiting, mine: &[&Meanwhile]) -> String {
        if waiting == Waiting::Stopped {
            return "The process is stopped, not waiting for the GPU: the call resumes when it is continued (kill -CONT, or the debugger or job control that stopped it lets it go).".into();
        }
        if let Some(m) = mine.iter().find(|m| m.kind == MeanwhileKind::Xid) {
            return format!(
                "An Xid came for this process while the call waited ({}): the GPU stopped its work; the kernel-log record says what the Xid means and whether the node needs a reset.",
                m.what
            );
        }
        if let Some(m) = mine.first() {
            return format!(
                "A CUDA call of this process failed while this one waited ({}): a sticky error fails every later call; the fault record has its cause.",
                m.what
            );
        }
        if let Some(n) = &self.nccl
            && let Some(b) = n.behind
        {
            let r = n.ranks.iter().find(|r| r.rank == b);
            return format!(
                "The collective waits for rank {b}{}: look at what that process does instead (its own hang or stall record, a host-side wait, a data loader), not at this one.",
                r.map_or(String::new(), |r| format!(
                    " ({}[{}]{})",
                    r.comm,
                    r.pid,
                    r.doing.as_ref().map_or(String::new(), |d| format!(", {d}"))
                ))
            );
        }
        let gpu = "The work this call waits for has not finished on the GPU and no error came: a kernel that does not end (a spin on memory that the host or another process must write, a deadlock between streams), or a collective whose peers never arrived. nvidia-smi shows whether the GPU is busy; cuda-gdb can attach to the process to show the kernel running.";
        if let Some(n) = &self.nccl {
            let here: std::collections::BTreeSet<i32> = n.ranks.iter().map(|r| r.rank).collect();
            if n.nranks > 0 && here.len() >= n.nranks as usize {
                return match n.nranks {
                    1 => format!(
                        "The communicator's one rank is on this node and has entered the call: no rank is behind. {gpu}"
                    ),
                    k => format!(
                        "All {k} ranks of this communicator are on this node and have entered the same call: no rank \
is behind. {gpu}"
                    ),
                };
            }
            if n.nranks <= 0 {
                return format!(
                    "The ranks of this communicator that this node sees have entered the same call; its size is not known (its ncclCommInitRank was not seen: libnccl was hooked after it began). If it has ranks on other nodes, compare nvprobe_nccl_seq across the fleet (the NcclRankBehind alert rule) to name the one behind; if not, no rank is behind. {gpu}"
                );
            }
            return "Every rank of this communicator that this node sees has entered the same call: the rank holding it back is on another node; compare nvprobe_nccl_seq across the fleet (the NcclRankBehind alert rule) to name it.".into();
        }
        match waiting {
            Waiting::Blocked => format!(
                "Blocked in the driver ({}): read the kernel log (dmesg) for an NVIDIA error at that time; if nothing is there, nvidia-bug-report.sh while it is stuck captures the driver's state.",
                self.driver_function
                    .as_deref()
                    .or(self.wchan.as_deref())
                    .unwrap_or("no driver frame in its stack")
            ),
            _ if self.waits_for_gpu => gpu.into(),
            _ => "The call has not returned and no error came: read the kernel log (dmesg) for an NVIDIA error at that time; the stack above says where the thread waits.".into(),
        }
    }
}

impl HangEnd {
    pub fn new(r: &HangReport, lasted_ns: u64, how: HangEndHow) -> HangEnd {
        let lasted = secs(lasted_ns);
        let text = match how {
            HangEndHow::Returned => format!("{} returned after {lasted:.1} s", r.call),
            HangEndHow::Ended => format!(
                "the thread ended after {lasted:.1} s with {} still in flight",
                r.call
            ),
            HangEndHow::Stopped => format!(
                "nvprobe stopped with {} still in flight after {lasted:.1} s",
                r.call
            ),
        };
        HangEnd {
            pid: r.pid,
            tid: r.tid,
            comm: r.comm.clone(),
            layer: r.layer,
            call: r.call.clone(),
            lasted_s: lasted,
            how,
            text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(state: &str, cpu: Option<(u64, u64, u64)>) -> HangFacts {
        HangFacts {
            pid: 10,
            tid: 11,
            comm: "python3".into(),
            call: "cuCtxSynchronize".into(),
            waits_for_gpu: true,
            elapsed_ns: 63_240_000_000,
            after_ns: 60_000_000_000,
            state: state.into(),
            cpu,
            launches_hooked: false,
            last_completed: Some(("cuMemcpyHtoD_v2".into(), 64_000_000_000)),
            ..HangFacts::default()
        }
    }

    #[test]
    fn a_spinning_synchronisation_says_the_gpu_work_has_not_finished() {
        let r = facts("R", Some((990, 10, 1000))).report(HangLayer::Libcuda);
        assert_eq!(r.waiting, Waiting::SpinningUser);
        assert_eq!(r.cpu_user_pct, Some(99));
        assert_eq!(
            r.text,
            "cuCtxSynchronize has not returned for 63.2 s (--hang-after 60 s): spinning in user space (99% of a CPU): libcuda is polling for work on the GPU that has not finished"
        );
        assert!(
            r.hint
                .starts_with("The work this call waits for has not finished")
        );
        assert_eq!(r.last_completed.as_ref().unwrap().ago_s, 64.0);
        assert!(r.text.len() < 200);
    }

    #[test]
    fn a_stopped_process_gets_no_gpu_hint() {
        let mut f = facts("T", None);
        f.stopped_by = Some("SIGSTOP from bash[77]".into());
        let r = f.report(HangLayer::Libcuda);
        assert_eq!(r.waiting, Waiting::Stopped);
        assert!(
            r.text
                .ends_with("the process is stopped (T) by SIGSTOP from bash[77]")
        );
        assert!(r.hint.contains("kill -CONT"));
        assert!(!r.hint.contains("cuda-gdb"));
    }

    #[test]
    fn an_xid_for_the_process_outranks_the_rest() {
        let mut f = facts("R", Some((900, 100, 1000)));
        f.meanwhile = vec![
            Meanwhile {
                kind: MeanwhileKind::Xid,
                code: 79,
                what: "Xid 79 on 0000:18:00.0: GPU has fallen off the bus".into(),
                this_process: false,
            },
            Meanwhile {
                kind: MeanwhileKind::Xid,
                code: 43,
                what: "Xid 43 on 0000:18:00.0: GPU stopped processing".into(),
                this_process: true,
            },
        ];
        let r = f.report(HangLayer::Libcuda);
        assert!(
            r.text
                .ends_with("; meanwhile Xid 43 on 0000:18:00.0: GPU stopped processing")
        );
        assert!(r.hint.starts_with("An Xid came for this process"));
    }

    #[test]
    fn the_rank_behind_is_named_in_the_verdict_and_the_hint() {
        let mut f = facts("R", Some((1000, 0, 1000)));
        f.nccl = Some(CommView {
            comm_hash: "3f2a9c01".into(),
            nranks: 2,
            rank: 0,
            seq: 12,
            ranks: vec![
                RankView {
                    pid: 10,
                    comm: "python3".into(),
                    rank: 0,
                    seq: 12,
                    op: Some("AllReduce".into()),
                    since_s: 63.0,
                    doing: None,
                },
                RankView {
                    pid: 20,
                    comm: "python3".into(),
                    rank: 1,
                    seq: 11,
                    op: Some("AllReduce".into()),
                    since_s: 64.0,
                    doing: Some("sleeping in hrtimer_nanosleep".into()),
                },
            ],
            behind: Some(1),
        });
        let r = f.report(HangLayer::Libcuda);
        assert!(
            r.text.ends_with(
                "; rank 1 of communicator 3f2a9c01 (python3[20]) is behind, at call 11 against 12"
            ),
            "{}",
            r.text
        );
        assert!(r.hint.starts_with(
            "The collective waits for rank 1 (python3[20], sleeping in hrtimer_nanosleep)"
        ));
    }

    /// Ranks that agree: where the one behind may be follows from the
    /// communicator's size (the real single-rank case of the H100
    /// recording, its init seen or not).
    #[test]
    fn ranks_that_agree_point_off_the_node_only_where_the_size_says_so() {
        let view = |nranks: i32| CommView {
            comm_hash: if nranks > 0 {
                "f1822ad0cb564066"
            } else {
                "unknown"
            }
            .into(),
            nranks,
            rank: if nranks > 0 { 0 } else { -1 },
            seq: 23,
            ranks: vec![RankView {
                pid: 579,
                comm: "python3".into(),
                rank: if nranks > 0 { 0 } else { -1 },
                seq: 23,
                op: Some("ncclAllReduce".into()),
                since_s: 3.3,
                doing: None,
            }],
            behind: None,
        };
        let hint = |nranks: i32| {
            let mut f = facts("R", Some((1000, 0, 1000)));
            f.nccl = Some(view(nranks));
            f.report(HangLayer::Libcuda).hint
        };
        let one = hint(1);
        assert!(
            one.starts_with("The communicator's one rank is on this node and has entered the call: no rank is behind. The work this call waits for has not finished on the GPU"),
            "{one}"
        );
        assert!(!one.contains("another node"), "{one}");
        let unknown = hint(-1);
        assert!(
            unknown.contains("its size is not known (its ncclCommInitRank was not seen")
                && unknown.contains("if not, no rank is behind"),
            "{unknown}"
        );
        assert!(
            hint(8).starts_with("Every rank of this communicator that this node sees has entered the same call: the rank holding it back is on another node")
        );
    }

    #[test]
    fn blocked_in_the_driver_names_the_function() {
        let mut f = facts("D", None);
        f.call = "UVM_MAP_EXTERNAL_ALLOCATION".into();
        f.waits_for_gpu = false;
        f.driver_function = Some("uvm_va_block_make_resident (nvidia_uvm)".into());
        f.wchan = Some("uvm_tracker_wait".into());
        let r = f.report(HangLayer::Driver);
        assert_eq!(r.waiting, Waiting::Blocked);
        assert!(r.text.contains(
            "blocked in the kernel (D) in uvm_tracker_wait, inside the driver in uvm_va_block_make_resident (nvidia_uvm)"
        ));
        assert!(
            r.hint
                .starts_with("Blocked in the driver (uvm_va_block_make_resident")
        );
    }

    #[test]
    fn the_end_says_how_it_ended() {
        let r = facts("R", None).report(HangLayer::Libcuda);
        assert_eq!(r.waiting, Waiting::Running);
        let e = HangEnd::new(&r, 70_050_000_000, HangEndHow::Returned);
        assert_eq!(e.text, "cuCtxSynchronize returned after 70.1 s");
        let e = HangEnd::new(&r, 70_000_000_000, HangEndHow::Ended);
        assert_eq!(
            e.text,
            "the thread ended after 70.0 s with cuCtxSynchronize still in flight"
        );
    }
}
