//! Stall reports: an NVIDIA ioctl or a cuInit still running after
//! `--stall-after`, with what the thread is doing, read from /proc when the
//! report fires (not recorded at every context switch):
//! blocked in the kernel (D) with its kernel stack and wchan, sleeping (S)
//! with its wchan, running (R), or stopped (T) with the signal and sender.
//! Reports repeat with back-off (1×, 2×, 4×… the threshold).

use std::collections::HashMap;

pub use nvprobe_model::records::StallReport;

/// The innermost NVIDIA-module frame of a stack ("fn+0x1a/0x50 [nvidia_uvm]").
pub fn driver_frame(stack: &[String]) -> Option<String> {
    stack.iter().find_map(|f| {
        let (func, module) = f.split_once(" [")?;
        let module = module.strip_suffix(']')?;
        module
            .starts_with("nvidia")
            .then(|| format!("{} ({module})", func.split('+').next().unwrap_or(func)))
    })
}

/// A call in flight, as the collector knows it.
pub struct InFlight {
    pub tid: u32,
    pub start_ns: u64,
    pub call: String,
    pub fd: Option<i32>,
}

fn read_trim(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s != "0")
}

/// What a task is doing, read from /proc.
pub(crate) struct TaskNow {
    pub(crate) state: String,
    pub(crate) tgid: u32,
    pub(crate) comm: String,
    pub(crate) wchan: Option<String>,
    pub(crate) stack: Vec<String>,
}

pub(crate) fn task_now(tid: u32) -> Option<TaskNow> {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    // pid (comm) S ppid … ; comm may contain spaces and parentheses.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let state = stat.get(close + 2..close + 3)?.to_owned();
    let tgid = std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Tgid:")
                    .map(|v| v.trim().parse().unwrap_or(tid))
            })
        })
        .unwrap_or(tid);
    let wchan = read_trim(&format!("/proc/{tid}/wchan"));
    let stack = std::fs::read_to_string(format!("/proc/{tid}/stack"))
        .map(|s| {
            s.lines()
                .map(|l| {
                    // "[<0>] fn+0x1a/0x50 [module]" -> "fn+0x1a/0x50 [module]"
                    l.split_once(' ')
                        .map_or(l, |(_, rest)| rest)
                        .trim()
                        .to_owned()
                })
                .take(12)
                .collect()
        })
        .unwrap_or_default();
    Some(TaskNow {
        state,
        tgid,
        comm: crate::decode::escape_bytes(comm.as_bytes()),
        wchan,
        stack,
    })
}

/// When each untimed ioctl in flight (its start not read in the kernel:
/// `ioctl_flags::UNTIMED`, a quiet process's call) was first seen, by
/// thread and the slot's count of calls begun (`Inflight::seq`): a call
/// seen again with the same pair is the same call, still running.
#[derive(Default)]
pub struct FirstSeen {
    at: HashMap<(u32, u32), u64>,
}

impl FirstSeen {
    /// The starts to time `calls` (tid, seq) by, seen now: when each was
    /// first seen. Calls no longer in flight are forgotten.
    pub fn starts(&mut self, now_ns: u64, calls: &[(u32, u32)]) -> Vec<u64> {
        let mut next = HashMap::with_capacity(calls.len());
        let starts = calls
            .iter()
            .map(|k| {
                let at = self.at.get(k).copied().unwrap_or(now_ns);
                next.insert(*k, at);
                at
            })
            .collect();
        self.at = next;
        starts
    }
}

#[derive(Default)]
pub struct Detector {
    /// (tid, start_ns) -> how many reports so far.
    reported: HashMap<(u32, u64), u32>,
    /// tgid -> "SIGSTOP from bash[12]" for the last stop signal.
    pub stoppers: HashMap<u32, String>,
    /// tgid -> the last stage it reached.
    pub stages: HashMap<u32, String>,
}

impl Detector {
    /// Reports due now for the calls in flight.
    pub fn check(&mut self, now_ns: u64, after_ns: u64, calls: &[InFlight]) -> Vec<StallReport> {
        let mut out = Vec::new();
        let live: std::collections::HashSet<(u32, u64)> =
            calls.iter().map(|c| (c.tid, c.start_ns)).collect();
        self.reported.retain(|k, _| live.contains(k));
        for c in calls {
            let elapsed = now_ns.saturating_sub(c.start_ns);
            let n = self
                .reported
                .get(&(c.tid, c.start_ns))
                .copied()
                .unwrap_or(0);
            // Due at after, 2*after, 4*after, …
            let due = after_ns.saturating_mul(1u64 << n.min(20));
            if elapsed < due {
                continue;
            }
            self.reported.insert((c.tid, c.start_ns), n + 1);
            let Some(TaskNow {
                state,
                tgid: pid,
                comm,
                wchan,
                stack,
            }) = task_now(c.tid)
            else {
                continue;
            };
            let secs = elapsed as f64 / 1e9;
            let stopped_by = matches!(state.as_str(), "T" | "t")
                .then(|| self.stoppers.get(&pid).cloned())
                .flatten();
            let w = wchan.clone().unwrap_or_else(|| "?".into());
            let driver_function = driver_frame(&stack);
            let inside = driver_function
                .as_ref()
                .map_or(String::new(), |d| format!(", inside the driver in {d}"));
            let stage = self.stages.get(&pid).cloned();
            let call = match &stage {
                Some(st) => format!("{} (after {st})", c.call),
                None => format!("{} (before the first stage)", c.call),
            };
            // A task the cgroup freezer holds sleeps in get_signal (its
            // freezer trap): only the cgroup's events tell it apart.
            let frozen = matches!(state.as_str(), "S" | "I" | "D")
                .then(|| crate::kernel_checks::frozen_cgroup(c.tid))
                .flatten();
            let text = match state.as_str() {
                _ if frozen.is_some() => format!(
                    "{} has run {secs:.1} s: frozen with its cgroup ({}: the cgroup freezer, as docker pause or a \
checkpointer uses it), not stuck in the driver",
                    call,
                    frozen.as_deref().unwrap_or("?")
                ),
                "Z" | "X" => format!(
                    "{} has run {secs:.1} s: the thread has ended (task state {state}), so the call will never \
return; the process lives on without it",
                    call
                ),
                "D" => format!(
                    "{} has run {secs:.1} s: blocked in the kernel (D) in {w}{inside}{}",
                    call,
                    if stack.is_empty() {
                        String::new()
                    } else {
                        format!("; stack: {}", stack.join(" < "))
                    }
                ),
                "S" | "I" => format!("{} has run {secs:.1} s: sleeping (S) in {w}{inside}", call),
                "R" => format!(
                    "{} has run {secs:.1} s: running (R), in user space or in the kernel",
                    call
                ),
                // A ptrace stop (a tracer holding the thread at a call, as
                // strace's -e inject=…:delay_enter does).
                "t" => format!(
                    "{} has run {secs:.1} s: the thread is held in a ptrace stop (t) by its tracer{}, not stuck in \
the driver",
                    call,
                    crate::identity::tracer_of(std::path::Path::new(&format!("/proc/{}", c.tid)))
                        .map_or(String::new(), |t| format!(" {}[{}]", t.comm, t.pid))
                ),
                "T" => format!(
                    "{} has run {secs:.1} s: the process is stopped (T){}, not stuck in the driver",
                    call,
                    stopped_by
                        .as_ref()
                        .map_or(String::new(), |s| format!(" by {s}"))
                ),
                other => format!("{} has run {secs:.1} s: task state {other}", call),
            };
            out.push(StallReport {
                pid,
                tid: c.tid,
                comm,
                call: c.call.clone(),
                fd: c.fd,
                elapsed_s: (secs * 10.0).round() / 10.0,
                state,
                text,
                wchan,
                stack,
                stopped_by,
                frozen_cgroup: frozen,
                stage,
                driver_function,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_untimed_call_is_timed_from_when_it_was_first_seen() {
        let mut f = super::FirstSeen::default();
        assert_eq!(f.starts(100, &[(7, 1), (8, 4)]), vec![100, 100]);
        // Thread 7 still in the same call; thread 8 began another.
        assert_eq!(f.starts(200, &[(7, 1), (8, 5)]), vec![100, 200]);
        // Thread 7's call ended; the same pair later is timed afresh.
        assert_eq!(f.starts(300, &[(8, 5)]), vec![200]);
        assert_eq!(f.starts(400, &[(7, 1)]), vec![400]);
    }

    #[test]
    fn the_driver_frame_is_the_innermost_nvidia_one() {
        let st: Vec<String> = [
            "do_wait_intr+0x5e/0xa0",
            "uvm_gpu_retain_by_uuid+0x3a/0x90 [nvidia_uvm]",
            "uvm_va_space_register_gpu+0x20/0x80 [nvidia_uvm]",
            "uvm_unlocked_ioctl_entry+0x90/0x120 [nvidia_uvm]",
            "__x64_sys_ioctl+0x8d/0xc0",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(
            super::driver_frame(&st).as_deref(),
            Some("uvm_gpu_retain_by_uuid (nvidia_uvm)")
        );
        assert_eq!(super::driver_frame(&st[..1]), None);
        assert_eq!(super::driver_frame(&["x+0x1/0x2 [fuse]".to_owned()]), None);
    }
}
