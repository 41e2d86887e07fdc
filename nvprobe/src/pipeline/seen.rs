//! What the live source keeps beside the pipeline, read off each record
//! through the contract's types as it is drained: the processes seen, the
//! cuInit calls in flight and the stop signals (for the stall detector),
//! the libcuda files the loader opened (hooked and checked), and the
//! start-ups that failed (read again at once).

use std::{
    collections::{HashMap, HashSet},
    path::PathBuf,
};

use nvprobe_common::{CudaEvent, DevKind, EventKind, Header, PathEvent, ProcEvent, ProcOp};
use nvprobe_model::decode;

/// What the live source keeps beside the pipeline: the processes seen, and
/// what the stall detector needs (cuInit calls in flight, stop signals).
#[derive(Default)]
pub(super) struct Seen {
    /// Tgids already put into NV_PROCS.
    pub(super) known: HashSet<u32>,
    /// Tgids seen for the first time since the last look at their maps.
    pub(super) new_tgids: Vec<u32>,
    /// libcuda files the dynamic loader opened since the last look:
    /// (tgid, path as that process named it, when the open returned).
    pub(super) lib_loads: Vec<(u32, PathBuf, u64)>,
    /// cuInit calls in flight (from the uprobes): tid -> (tgid, start_ns).
    pub(super) cuinit: HashMap<u32, (u32, u64)>,
    /// tgid -> the last stop signal sent to it, with its sender.
    pub(super) stoppers: HashMap<u32, String>,
    /// Processes whose cuInit or first context failed since the last
    /// look: (tgid, what failed). Their identity is read again at once
    /// (limits and filters installed after the first read; for a context,
    /// who holds the GPUs).
    pub(super) failed: Vec<(u32, &'static str)>,
    /// libcuda files the loader opened since the last look, checked at
    /// once (before the batch that holds the open goes to the correlator):
    /// (tgid, path as the process named it).
    pub(super) lib_checks: Vec<(u32, PathBuf)>,
    /// Processes seen sharing nvprobe's root and mount namespace, read
    /// with their identity (forgotten at their exit): a libcuda they open
    /// can be checked through nvprobe's root once they are gone.
    pub(super) same_view: HashSet<u32>,
    /// (process, reason) already read again at a failure.
    pub(super) reread: HashSet<(u32, &'static str)>,
    /// libcuda calls that returned an error since the last look (tgid,
    /// function, CUresult, when), for the hang records' "meanwhile".
    pub(super) cuda_failures: Vec<(u32, u32, i64, u64)>,
    /// Threads that ended inside a hooked call since the last look.
    pub(super) unfinished: Vec<u32>,
    /// Processes first seen at a call on a descriptor they were not seen
    /// opening (`ioctl_flags::FIRST_UNSEEN`) since the last look.
    pub(super) first_unseen: Vec<u32>,
}

impl Seen {
    /// What the stall detector needs from a record, read through the
    /// contract's types: cuInit entries and returns, exits, stop signals.
    pub(super) fn track(&mut self, rec: &[u8]) {
        let Some(h) = Header::peek(rec) else { return };
        match h.event_kind() {
            Some(EventKind::Ioctl | EventKind::RmControl)
                if nvprobe_common::read::<nvprobe_common::IoctlEvent>(rec)
                    .is_some_and(|e| e.flags & nvprobe_common::ioctl_flags::FIRST_UNSEEN != 0)
                    && self.first_unseen.len() < 1024 =>
            {
                self.first_unseen.push(h.tgid);
            }
            Some(EventKind::Cuda) => {
                let Some(c) = nvprobe_common::read::<CudaEvent>(rec) else {
                    return;
                };
                if c.phase == nvprobe_common::CUDA_UNFINISHED && self.unfinished.len() < 1024 {
                    self.unfinished.push(h.tid);
                }
                if c.phase == nvprobe_common::CUDA_RETURN
                    && c.ret != 0
                    && self.cuda_failures.len() < 64
                {
                    let func = c.func
                        & !(nvprobe_common::CUDA_INTERPOSER
                            | nvprobe_common::CUDA_FAULT_ONLY
                            | nvprobe_common::CUDA_LAUNCH);
                    let end = c.start_ns.saturating_add(c.duration_ns);
                    self.cuda_failures.push((h.tgid, func, c.ret, end));
                }
                if c.phase == nvprobe_common::CUDA_RETURN && c.ret != 0 && self.failed.len() < 64 {
                    let at = if c.func & !nvprobe_common::CUDA_INTERPOSER
                        == nvprobe_common::CUDA_CUINIT
                    {
                        Some("cuinit_failed")
                    } else if nvprobe_common::CUDA_CONTEXT_FUNCS.contains(&c.func) {
                        Some("context_failed")
                    } else {
                        None
                    };
                    // Once per process and reason: a loop of failing calls
                    // is not a loop of /proc walks.
                    if let Some(at) = at
                        && self.reread.len() < 65536
                        && self.reread.insert((h.tgid, at))
                    {
                        self.failed.push((h.tgid, at));
                    }
                }
                if c.func != nvprobe_common::CUDA_CUINIT {
                    return;
                }
                if c.phase == nvprobe_common::CUDA_ENTER {
                    self.cuinit.insert(h.tid, (h.tgid, c.start_ns));
                } else {
                    self.cuinit.remove(&h.tid);
                }
            }
            Some(EventKind::Path) => {
                let Some(p) = nvprobe_common::read::<PathEvent>(rec) else {
                    return;
                };
                let len = (p.path_len as usize).min(p.path.len());
                let path = &p.path[..len];
                let p_end = p.start_ns.saturating_add(p.duration_ns);
                // A libcuda the loader found: hook it now (its uprobes
                // reach the mapping the loader is about to make).
                if p.ret >= 0
                    && path.first() == Some(&b'/')
                    && len < p.path.len() - 1
                    && p.file.kind == DevKind::None as u8
                    && let Some(base) = path.rsplit(|&b| b == b'/').next()
                    && (base.starts_with(b"libcuda.so") || base.starts_with(b"libnccl.so"))
                    && self.lib_loads.len() < 256
                {
                    use std::os::unix::ffi::OsStrExt;
                    let p = PathBuf::from(std::ffi::OsStr::from_bytes(path));
                    // Whether a libcuda loads is a start-up's question; a
                    // libnccl is only hooked.
                    if self.lib_checks.len() < 64 && base.starts_with(b"libcuda.so") {
                        self.lib_checks.push((h.tgid, p.clone()));
                    }
                    self.lib_loads.push((h.tgid, p, p_end));
                }
            }
            Some(EventKind::Proc) => self.proc_record(&h, rec),
            _ => {}
        }
    }

    /// An exit, exec or stop signal: what is forgotten or said of the
    /// process.
    fn proc_record(&mut self, h: &Header, rec: &[u8]) {
        let Some(p) = nvprobe_common::read::<ProcEvent>(rec) else {
            return;
        };
        let target = p.target_tgid;
        if p.op == ProcOp::Exit as u32 {
            self.cuinit.retain(|_, (g, _)| *g != target);
            self.stoppers.remove(&target);
            self.same_view.remove(&target);
            self.reread.retain(|(p, _)| *p != target);
            // The kernel forgot it too (NV_PROCS): a process that
            // reuses the pid is followed again when first seen.
            self.known.remove(&target);
        } else if p.op == ProcOp::ThreadExit as u32 && p.target_tid != target {
            // A thread other than the main one ended in cuInit: its tid
            // may be another task's next (the main thread's stays, a
            // zombie while the process lives, and its stall report says
            // it ended).
            self.cuinit.remove(&p.target_tid);
        } else if p.op == ProcOp::Exec as u32 {
            // A new program in the same pid: its next record reads
            // who it is (its executable, command line, limits), as
            // for a process first seen; the old program's read
            // stays with the old program's verdict.
            self.known.remove(&target);
            self.same_view.remove(&target);
            self.reread.retain(|(p, _)| *p != target);
        } else if p.op == ProcOp::SignalGenerate as u32
            // SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU
            && (19..=22).contains(&p.sig)
        {
            let end = h.comm.iter().position(|&b| b == 0).unwrap_or(h.comm.len());
            self.stoppers.insert(
                target,
                format!(
                    "{} from {}[{}]",
                    nvprobe_model::decode::signal::name(p.sig),
                    decode::escape_bytes(&h.comm[..end]),
                    h.tgid
                ),
            );
        }
    }
}

/// Whether process `pid` has ended: no /proc entry, or a zombie (its exit
/// is over; its parent has not reaped it yet) with no thread left (a
/// leader that ended alone is a zombie while its threads run on).
#[cfg(test)]
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => ended_by(pid, &stat),
    }
}

/// [`ended`], from the process's /proc/PID/stat as read.
fn ended_by(pid: u32, stat: &str) -> bool {
    // "pid (comm) S …": the comm may hold spaces and parentheses.
    let state = stat
        .rfind(')')
        .and_then(|i| stat.get(i + 2..i + 3))
        .unwrap_or("");
    if !matches!(state, "Z" | "X") {
        return false;
    }
    // Threads still running: not ended.
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    !tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("stat")).is_ok_and(|s| {
            s.rfind(')')
                .and_then(|i| s.get(i + 2..i + 3))
                .is_some_and(|st| !matches!(st, "Z" | "X"))
        })
    })
}

/// Whether the process a record of `pid` at `mono_ns` came from is no
/// longer there: it ended, or the pid was taken again since ([`ended`],
/// [`started_after`]; /proc/PID/stat read once for both).
pub(super) fn not_the_one_seen(pid: u32, mono_ns: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => ended_by(pid, &stat) || started_after_by(&stat, mono_ns),
    }
}

/// Whether the process now at `pid` started after `mono_ns` (a record of
/// the pid's, CLOCK_MONOTONIC): the pid was taken again by another
/// process since. /proc's start time counts clock ticks since boot
/// (CLOCK_BOOTTIME, which goes on through a suspend); a tick of slack.
#[cfg(test)]
fn started_after(pid: u32, mono_ns: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| started_after_by(&stat, mono_ns))
}

/// A process's start time in clock ticks since boot: field 22 of its
/// /proc/PID/stat as read (after the command's closing parenthesis, which
/// a hostile name cannot fake).
pub(super) fn start_ticks(stat: &str) -> Option<u64> {
    stat.rfind(')')
        .and_then(|i| stat.get(i + 1..))
        .and_then(|r| r.split_whitespace().nth(19))
        .and_then(|t| t.parse::<u64>().ok())
}

/// [`started_after`], from the process's /proc/PID/stat as read.
fn started_after_by(stat: &str, mono_ns: u64) -> bool {
    use nix::time::{ClockId, clock_gettime};
    let Some(ticks) = start_ticks(stat) else {
        return false;
    };
    let ns = |c| {
        clock_gettime(c)
            .ok()
            .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
    };
    let (Some(boot), Some(mono)) = (ns(ClockId::CLOCK_BOOTTIME), ns(ClockId::CLOCK_MONOTONIC))
    else {
        return false;
    };
    // SAFETY: sysconf has no preconditions.
    let hz = match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        t if t > 0 => t as u64,
        _ => 100,
    };
    let tick = 1_000_000_000 / hz;
    let start_mono = (ticks.saturating_mul(tick)).saturating_sub(boot.saturating_sub(mono));
    start_mono > mono_ns.saturating_add(tick)
}

#[cfg(test)]
mod tests {
    use super::{ended, not_the_one_seen, started_after};

    /// A running process has not ended; one that exited has, whether its
    /// parent reaped it yet (no /proc entry) or not (a zombie).
    #[test]
    fn a_zombie_and_a_reaped_process_have_ended_a_running_one_has_not() {
        assert!(!ended(std::process::id()));
        let mut c = std::process::Command::new("true").spawn().expect("true");
        let pid = c.id();
        // Not reaped: a zombie once it has exited.
        let zombie = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, r)| r.starts_with(" Z")))
        });
        assert!(zombie, "`true` never became a zombie");
        assert!(ended(pid));
        c.wait().expect("wait");
        assert!(ended(pid));
    }

    /// A process that started after a record's time holds a pid taken
    /// again; one that started before it does not.
    #[test]
    fn a_process_started_after_a_records_time_is_another() {
        let now = nvprobe_model::render::Clock::mono_now();
        let me = std::process::id();
        assert!(!started_after(me, now));
        // This process started long before now, far after time 0.
        assert!(started_after(me, 0) || now < 1_000_000_000);
        let mut c = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        assert!(started_after(c.id(), 0) || now < 1_000_000_000);
        assert!(!started_after(
            c.id(),
            nvprobe_model::render::Clock::mono_now()
        ));
        let _ = c.kill();
        let _ = c.wait();
    }

    /// The collector's one read: this live process, seen now, is the one
    /// seen; a pid with no process is not.
    #[test]
    fn a_live_process_is_the_one_seen_and_a_missing_pid_is_not() {
        let now = nvprobe_model::render::Clock::mono_now();
        assert!(!not_the_one_seen(std::process::id(), now));
        assert!(not_the_one_seen(u32::MAX - 1, now));
    }
}
