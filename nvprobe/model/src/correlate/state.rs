//! The per-process start-up state the handlers (`tracker`, `signals`)
//! update and the rules and the verdict read: below all of them, so that
//! state, handlers and judgement form no cycle.

use serde::Serialize;

use super::{
    facts::{CallRef, CallResult, DevNo, PathWhy},
    stages::StageHit,
};
use crate::decode::SigAction;

#[derive(Default)]
pub(crate) struct ProcInit {
    pub(crate) comm: String,
    /// A SIGKILL the kernel delivered to one of its threads that no one
    /// sent (no signal was generated for it): another of its threads ended
    /// the process (exit_group, or an exec's de_thread), which kills every
    /// other thread so. (Each thread, when; the first 16.)
    pub(crate) zapped: Vec<(u32, u64)>,
    /// The failed driver call that end cut short, taken out of
    /// `last_failure` when the process ended itself (a status or an exec):
    /// the call returned because its thread was being killed, not because
    /// the driver failed ([`ProcInit::take_cut_short`]).
    pub(crate) cut: Option<Failure>,
    pub(crate) first_ns: u64,
    pub(crate) last_ns: u64,
    pub(crate) reached: [bool; 9],
    pub(crate) stages: Vec<StageHit>,
    pub(crate) calls: u64,
    pub(crate) last_failure: Option<Failure>,
    /// (start_ns, end_ns, name) of recent calls, for "during which call".
    pub(crate) last_call: Option<(u64, u64, CallRef)>,
    /// Signals generated for the process (the last 16).
    pub(crate) signals: Vec<SignalInfo>,
    /// (signal, time) of the signals delivered to a handler of the
    /// process's (the last 8).
    pub(crate) handled: Vec<(i32, u64)>,
    /// The kernel's OOM killer chose it (oom/mark_victim).
    pub(crate) oom_victim: bool,
    /// The calls a ptrace tracer skipped, kept apart from the newest failed
    /// calls (which push older ones out).
    pub(crate) skipped: Option<Skipped>,
    /// The stall check's reports of calls of its start-up still running,
    /// and when each was made (the newest 4); one goes once its thread is
    /// seen to move on (a record of it that ends later).
    pub(crate) stalls: Vec<(u64, crate::records::StallReport)>,
    /// The newest of those its thread went on from: a start-up that got
    /// past it says what held it.
    pub(crate) past_stall: Option<(u64, crate::records::StallReport)>,
    /// The thread in cuInit ended alone, the process living on:
    /// (when, its tid, its exit code as the kernel keeps it).
    pub(crate) cuinit_thread_ended: Option<(u64, u32, i32)>,
    /// The kernel's seccomp audit lines of a kill action at one of its
    /// calls (the newest 4), and when each was logged.
    pub(crate) seccomp_kills: Vec<(u64, crate::kmsg::audit::SeccompAudit)>,
    /// The thread that entered cuInit last.
    pub(crate) cuinit_tid: Option<u32>,
    pub(crate) path_problems: Vec<(String, PathWhy)>,
    /// The first NVIDIA call was an ioctl on an fd this process was never
    /// seen opening: (call, fd).
    pub(crate) inherited: Option<(CallRef, i32)>,
    pub(crate) opened_any: bool,
    /// It held an NVIDIA descriptor when nvprobe started, and has begun a
    /// start-up since ([`ProcInit::held_begins`]).
    pub(crate) began: bool,
    /// A failed version check: (call, result).
    pub(crate) version_check: Option<(CallRef, CallResult)>,
    /// The build version the driver told the process
    /// (NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION).
    pub(crate) told_version: Option<String>,
    /// (parent pid, whether the parent had finished cuInit) for a process
    /// seen forking.
    pub(crate) parent: Option<(u32, bool)>,
    /// The helpers it ran: ("nvidia-modprobe (pid N) exited with status
    /// S", whether it exited with status 0).
    pub(crate) modprobe: Vec<(String, bool)>,
    /// cuInit's uprobe: entry seen, and its CUresult.
    pub(crate) cuinit_entered: bool,
    pub(crate) curesult: Option<(i64, Option<&'static str>)>,
    pub(crate) done: bool,
    /// Signals whose call has not yet returned (at most 4).
    pub(crate) pending: Vec<PendingSig>,
    /// UVM's answers to UVM_PAGEABLE_MEM_ACCESS, per uvm fd (its
    /// va_space; a new UVM_INITIALIZE on the fd forgets it): at most 16.
    pub(crate) pageable: Vec<(i32, bool)>,
    /// What UVM_PAGEABLE_MEM_ACCESS had answered on the last failed call's
    /// fd (its va_space) when that call failed.
    pub(crate) pageable_at_failure: Option<bool>,
    /// UVM_INITIALIZEs seen without an fd (the driver layer's records
    /// carry none): with more than one, answers cannot be told apart.
    pub(crate) fdless_va_spaces: u32,
    /// The in-driver breakdown of the last failed call (driver layer).
    pub(crate) last_breakdown: Option<String>,
    /// Who the process is (the live collector's `process` record).
    pub(crate) info: Option<crate::attribution::ProcessInfo>,
    /// When the last identity was read (ns): one read after an exec is
    /// the new program's.
    pub(crate) info_ns: u64,
    /// Per GPU: opened, registered with UVM.
    pub(crate) gpus: Vec<GpuProgress>,
    /// Paths that failed and later succeeded (start-up got past them).
    pub(crate) fixed_paths: Vec<String>,
    /// mknods of NVIDIA nodes: (path, device, why if it failed).
    pub(crate) mknods: Vec<(String, Option<DevNo>, Option<PathWhy>)>,
    /// NVIDIA path lookups and opens, successful device opens.
    pub(crate) lookups: u64,
    /// Successful opens of /dev/nvidiactl.
    pub(crate) ctl_opens: u32,
    /// It opened /dev/nvidia-uvm or made a UVM call: only CUDA does.
    pub(crate) uvm_touched: bool,
    /// libcuda calls seen by the uprobes (any function).
    pub(crate) cuda_calls: u64,
    /// The dynamic loader's opens of a libcuda: (path, why if it failed);
    /// the successful ones all, failures up to a bound.
    pub(crate) lib_opens: Vec<(String, Option<CallResult>)>,
    /// How many opens the loader made in all.
    pub(crate) lib_open_count: u32,
    /// The first libcuda call other than cuInit that returned
    /// CUDA_ERROR_NOT_INITIALIZED (3).
    pub(crate) not_initialized: Option<u32>,
    /// The host's GPUs (minor, UUID), shared by every process.
    pub(crate) host_gpus: std::sync::Arc<Vec<crate::attribution::HostGpu>>,
    /// The kernel module's version, when the host said.
    pub(crate) host_driver: Option<std::sync::Arc<str>>,
    /// cuInit returned CUDA_SUCCESS and the verdict waits for the first
    /// context until this time (ns): the start-up ends there.
    pub(crate) context_due: Option<u64>,
    /// The wait ran out with no context made.
    pub(crate) context_waited: bool,
    /// The first context call's return, or the device or context call that
    /// failed before one was made.
    pub(crate) context: Option<ContextStep>,
    /// The first driver call that failed after cuInit returned
    /// CUDA_SUCCESS (what the driver refused the first context).
    pub(crate) after_init_failure: Option<Failure>,
    /// Successful RM allocations of memory classes.
    pub(crate) mem_allocs: u32,
    /// The last stage reached when cuInit returned.
    pub(crate) cuinit_stage: Option<String>,
    /// The signal that ended the process (its exit, 0: none or not yet).
    pub(crate) exit_sig: i32,
    /// How many devices cuDeviceGetCount said were visible.
    pub(crate) visible: Option<i32>,
    /// The first device lookup that failed while waiting for a context
    /// (it decides the verdict only if no context comes).
    pub(crate) lookup_failure: Option<ContextStep>,
    /// libcuda's own cuInit answer, when a wrapper gave the program
    /// another (`curesult` is then the wrapper's).
    pub(crate) wrapped_from: Option<(i64, Option<&'static str>)>,
    /// A context call is running (entered, not returned).
    pub(crate) ctx_in_flight: bool,
    /// A preloaded library's cuInit (an interposer's) is running, and
    /// whether libcuda's own cuInit was entered meanwhile.
    pub(crate) interposer_in: Option<bool>,
    /// What the interposer's cuInit returned, and whether it called
    /// libcuda's (false: it answered in libcuda's place).
    pub(crate) interposed: Option<(i64, Option<&'static str>, bool)>,
    /// Calls the start-up needs besides the NVIDIA ones that failed (the
    /// kernel side's `call_failed` records): at most 8 kinds.
    pub(crate) start_calls: Vec<StartCallFailure>,
    /// Its NVIDIA descriptors, those taken from under it, and the first
    /// call that then failed on one.
    pub(crate) fds: super::fds::NvFds,
    /// Every failed system call of the start-up the kernel side sent, the
    /// newest last: at most [`FAILED_KEPT`].
    pub(crate) failed_syscalls: Vec<FailedSyscall>,
    /// How many were sent in all; whether the kernel side sent its last
    /// (`nvprobe_common::call_failed::SENT_MAX`) and counted the rest.
    pub(crate) failed_sent: u32,
    pub(crate) failed_capped: bool,
    /// call_failed records without a number ([`crate::decode::ProcCall::seq`]).
    pub(crate) failed_legacy: u32,
    /// NVIDIA escapes (ioctl type 'F') the kernel side saw fail at the
    /// system call's exit (call_failed): how many, and the first's errno
    /// and request. When no ioctl of the process reached the
    /// tracing, these were answered before they ran (a seccomp filter).
    pub(crate) escapes_failed: Option<EscapesFailed>,
    /// The first NVIDIA command (an escape, or a UVM command by its
    /// number) the kernel side saw fail with EPERM or EACCES at the system
    /// call's exit: when no ioctl record of it failed so, it was answered
    /// before the kernel traced its entry (a seccomp filter on that
    /// command), though other ioctls of the process were traced.
    pub(crate) command_refused: Option<EscapesFailed>,
    /// NVIDIA commands whose ioctl record failed with EPERM or EACCES
    /// (traced: the driver's or a security module's answer; 8 at most).
    pub(crate) traced_refusals: Vec<crate::decode::Call>,
    /// An ioctl record came from the driver layer (fd -1): refusals
    /// before the driver (a security module's too) are not traced there.
    pub(crate) ioctls_in_driver: bool,
    /// When cuInit was entered (its uprobe), the first time.
    pub(crate) cuinit_at: Option<u64>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct EscapesFailed {
    pub(crate) count: u32,
    pub(crate) errno: i32,
    pub(crate) request: u64,
}

/// The failed system calls a start-up keeps (the newest).
pub(crate) const FAILED_KEPT: usize = 16;

/// A failed system call of a start-up, as a verdict shows it (what strace
/// would show failing, without ptrace).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema, PartialEq)]
pub struct FailedSyscall {
    /// The call's name ("syscall N" for a number nvprobe has no name for).
    pub call: String,
    /// Its errno, written as its name ("EN" for a number without one).
    #[serde(serialize_with = "errno_name_of", deserialize_with = "errno_of_name")]
    #[schemars(with = "String")]
    pub errno: i32,
    /// The path it named (its path argument; an AF_UNIX socket's for connect).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// When, in ms from the start-up's first call.
    pub at_ms: f64,
    #[serde(skip)]
    pub(crate) at_ns: u64,
    /// An ioctl's EBADF on a negative descriptor: that descriptor (what a
    /// failed open returned, kept by a caller that did not check it).
    #[serde(skip)]
    pub(crate) bad_fd: Option<i32>,
}

/// The calls of a start-up a ptrace tracer skipped (number -1 at the
/// system call's exit: it answered them itself): how many, the first two
/// arguments of the last, and whether one had an escape's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Skipped {
    pub(crate) count: u32,
    pub(crate) last: (u64, u64),
    pub(crate) escape: bool,
}

impl Skipped {
    /// The escape whose request a skipped call's second argument is:
    /// _IOWR('F', nr, size), a number nothing else passes there by chance
    /// (UVM's commands are small plain numbers, which other calls'
    /// arguments are too: not named).
    pub(crate) fn escape(request: u64) -> Option<&'static str> {
        (request >> 32 == 0
            && request >> 30 != 0
            && (request >> 16) & 0x3fff != 0
            && (request >> 8) & 0xff == u64::from(b'F'))
        .then(|| crate::decode::escape::lookup((request & 0xff) as u32))
        .flatten()
        .map(|e| e.name)
    }
}

/// An errno's name read back ("EACCES"; "E123" for a number without
/// one); 0 for a name this nvprobe does not know.
fn errno_of_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    let name = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
    if let Some(n) = name.strip_prefix('E').and_then(|n| n.parse::<i32>().ok()) {
        return Ok(n);
    }
    static NAMES: std::sync::OnceLock<std::collections::HashMap<String, i32>> =
        std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        (1..4096)
            .map(|e| (super::facts::CallResult::Errno(e).text(), e))
            .collect()
    });
    Ok(names.get(name.as_ref()).copied().unwrap_or(0))
}

fn errno_name_of<S: serde::Serializer>(e: &i32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&super::facts::CallResult::Errno(*e).text())
}

impl std::fmt::Display for FailedSyscall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let errno = super::facts::CallResult::Errno(self.errno).text();
        match &self.path {
            Some(p) => write!(f, "{} {p} {errno}", self.call),
            None => write!(f, "{} {errno}", self.call),
        }
    }
}

/// A failed call of the start-up's own (a thread, a mapping, a
/// descriptor), counted by (call, errno).
#[derive(Clone, Debug)]
pub(crate) struct StartCallFailure {
    /// The call's name (for display; `kind` says what it is).
    pub(crate) call: String,
    pub(crate) kind: crate::decode::SysKind,
    pub(crate) errno: i32,
    pub(crate) count: u32,
    /// It failed after cuInit had returned CUDA_SUCCESS (while the first
    /// context was made).
    pub(crate) after_init: bool,
    /// What its first failure asked for (mmap, mprotect: the length,
    /// protection and flags; mlock, mlock2: the length).
    pub(crate) ask: crate::decode::MemAsk,
    /// Its first failure's first argument (a socket's family).
    pub(crate) arg0: Option<u64>,
}

impl ProcInit {
    pub(crate) fn last_stage(&self) -> Option<String> {
        super::stages::latest(&self.stages).map(|s| s.name.to_owned())
    }

    /// cuInit returned an error, or the first context's call did: the
    /// start-up is over, and what the process does next is not part of it.
    pub(crate) fn startup_failed(&self) -> bool {
        self.curesult.is_some_and(|(r, _)| r != 0)
            || self.context.as_ref().is_some_and(|c| c.code != 0)
    }

    /// A stall report of one of its calls (one made at time 0, from a
    /// recording that lacks its time, cannot be placed: left out).
    pub(crate) fn on_stall(&mut self, at_ns: u64, r: crate::records::StallReport) {
        if at_ns == 0 {
            return;
        }
        if self.stalls.len() == 4 {
            self.stalls.remove(0);
        }
        self.stalls.push((at_ns, r));
    }

    /// Thread `tid` did something that ended at `end_ns`: a stall report of
    /// it made before is past (its call returned or it went on).
    pub(crate) fn moved_on(&mut self, tid: u32, end_ns: u64) {
        while let Some(i) = self
            .stalls
            .iter()
            .position(|(at, r)| r.tid == tid && end_ns > *at)
        {
            let past = self.stalls.remove(i);
            if self.past_stall.as_ref().is_none_or(|(at, _)| *at <= past.0) {
                self.past_stall = Some(past);
            }
        }
    }

    pub(crate) fn cuinit_running(&self) -> bool {
        self.cuinit_entered && self.curesult.is_none()
    }

    /// A `call_failed` record: kept in [`Self::failed_syscalls`] (the
    /// newest [`FAILED_KEPT`]).
    pub(crate) fn on_failed_syscall(&mut self, p: &crate::decode::ProcCall) {
        self.failed_sent = self.failed_sent.saturating_add(1);
        match p.seq {
            Some(n) => self.failed_capped |= n >= nvprobe_common::call_failed::SENT_MAX,
            None => {
                self.failed_legacy = self.failed_legacy.saturating_add(1);
                self.failed_capped |= self.failed_legacy >= crate::decode::LEGACY_FAILS_SENT;
            }
        }
        if self.failed_syscalls.len() >= FAILED_KEPT {
            self.failed_syscalls.remove(0);
        }
        // An NVIDIA escape or UVM command on a descriptor (its first
        // argument): what libcuda calls on its own descriptors. (A
        // program's own ioctl on a number it redirected is not this.)
        let fd = match (p.failed, p.arg(1)) {
            (Some((crate::decode::SysKind::Ioctl, _)), Some(request))
                if (request >> 8) & 0xff == u64::from(b'F')
                    || crate::decode::uvm::lookup(request as u32).is_some() =>
            {
                p.arg(0)
            }
            _ => None,
        };
        if let (Some(fd), Some((_, errno))) = (fd, p.failed) {
            // The escape or command by name, where the tables know it.
            let request = p.arg(1).unwrap_or(0);
            let name = Skipped::escape(request)
                .or_else(|| crate::decode::uvm::lookup(request as u32).map(|c| c.name))
                .unwrap_or("ioctl");
            self.fds.failed_on(
                i64::from(fd as u32 as i32),
                name,
                errno,
                (p.proc.tid, p.time_ns),
            );
            if let Some(u) = self.fds.used.as_mut().filter(|u| u.at_ns == p.time_ns) {
                u.after_init = matches!(self.curesult, Some((0, _)));
            }
        }
        if let (
            Some((crate::decode::SysKind::Ioctl, errno @ (libc::EPERM | libc::EACCES))),
            Some(request),
        ) = (p.failed, p.arg(1))
            && ((request >> 8) & 0xff == u64::from(b'F')
                || crate::decode::uvm::lookup(request as u32).is_some())
        {
            let e = self.command_refused.get_or_insert(EscapesFailed {
                count: 0,
                errno,
                request,
            });
            if e.request == request {
                e.count = e.count.saturating_add(1);
            }
        }
        if let (Some((crate::decode::SysKind::Ioctl, errno)), Some(request)) = (p.failed, p.arg(1))
            && (request >> 8) & 0xff == u64::from(b'F')
        {
            let e = self.escapes_failed.get_or_insert(EscapesFailed {
                count: 0,
                errno,
                request,
            });
            e.count = e.count.saturating_add(1);
        }
        self.failed_syscalls.push(FailedSyscall {
            call: p.call.clone().unwrap_or_else(|| "?".to_owned()),
            errno: p.failed.map_or(0, |f| f.1),
            path: p.path.clone(),
            at_ms: 0.0,
            at_ns: p.time_ns,
            bad_fd: match (p.failed, p.arg(0)) {
                (Some((crate::decode::SysKind::Ioctl, libc::EBADF)), Some(fd)) => {
                    Some(fd as u32 as i32).filter(|fd| *fd < 0)
                }
                _ => None,
            },
        });
        if let Some((crate::decode::SysKind::Skipped, _)) = p.failed {
            let last = (p.arg(0).unwrap_or(0), p.arg(1).unwrap_or(0));
            let s = self.skipped.get_or_insert_default();
            s.count = s.count.saturating_add(1);
            s.last = last;
            s.escape |= Skipped::escape(last.1).is_some();
        }
    }

    /// The failed system calls, the newest first, with their times from
    /// the start-up's first call.
    pub(crate) fn failed_newest_first(&self) -> Vec<FailedSyscall> {
        self.failed_syscalls
            .iter()
            .rev()
            .map(|f| FailedSyscall {
                at_ms: ms(f.at_ns, self.first_ns),
                ..f.clone()
            })
            .collect()
    }

    /// "N system calls failed in the start-up, the newest first: …" (None:
    /// none did).
    pub(crate) fn failed_text(&self) -> Option<String> {
        /// Failed system calls a verdict's text names (the newest).
        const SHOWN: usize = 6;
        if self.failed_syscalls.is_empty() {
            return None;
        }
        let shown: Vec<String> = self
            .failed_newest_first()
            .iter()
            .take(SHOWN)
            .map(|f| format!("{f} at {:.1} ms", f.at_ms))
            .collect();
        let before = (self.failed_sent as usize).saturating_sub(shown.len());
        let more = match (before, self.failed_capped) {
            (0, false) => String::new(),
            (n, false) => format!(" (and {n} before them)"),
            (n, true) => format!(
                " (and {n} before them; the kernel side sends {} per start-up and counted the rest)",
                nvprobe_common::call_failed::SENT_MAX
            ),
        };
        Some(format!(
            "{} system call{} failed in the start-up, the newest first: {}{more}",
            self.failed_sent,
            if self.failed_sent == 1 { "" } else { "s" },
            shown.join("; ")
        ))
    }

    /// A `call_failed` record: counted by (call, errno), 8 kinds at most.
    pub(crate) fn on_call_failed(
        &mut self,
        call: String,
        (kind, errno): (crate::decode::SysKind, i32),
        ask: crate::decode::MemAsk,
        arg0: Option<u64>,
    ) {
        let after_init = matches!(self.curesult, Some((0, _)));
        if let Some(f) = self
            .start_calls
            .iter_mut()
            .find(|f| f.call == call && f.errno == errno && f.after_init == after_init)
        {
            f.count = f.count.saturating_add(1);
        } else if self.start_calls.len() < 8 {
            self.start_calls.push(StartCallFailure {
                call,
                kind,
                errno,
                count: 1,
                after_init,
                ask,
                arg0,
            });
        }
    }
}

pub(crate) fn ms(ns: u64, since: u64) -> f64 {
    (ns.saturating_sub(since) as f64 / 1e4).round() / 100.0
}

impl ProcInit {
    /// A process that already held an NVIDIA descriptor when nvprobe
    /// started and was not seen starting anything since (no NVIDIA open, no
    /// libcuda loaded, no cuInit): its start-up is not judged.
    pub(crate) fn held_unseen(&self) -> bool {
        self.info.as_ref().is_some_and(|i| i.held_at_start)
            && !self.began
            && !self.opened_any
            && !self.cuinit_entered
            && self.curesult.is_none()
            && self.lib_opens.is_empty()
    }

    /// Such a process now begins something nvprobe sees from its start (an
    /// open of an NVIDIA node, the loader's open of a libcuda, cuInit's
    /// entry: what ends the kernel side's `HELD`), at `at_ns`. That
    /// start-up is judged on what it does from here: the calls made on
    /// the descriptor it held before (their stages, failures, signals) are
    /// not its own. Who the process is stays.
    pub(crate) fn held_begins(&mut self, at_ns: u64) {
        if !self.held_unseen() {
            return;
        }
        *self = ProcInit {
            comm: std::mem::take(&mut self.comm),
            first_ns: at_ns,
            last_ns: self.last_ns,
            info: self.info.take(),
            info_ns: self.info_ns,
            parent: self.parent,
            oom_victim: self.oom_victim,
            pending: std::mem::take(&mut self.pending),
            host_gpus: self.host_gpus.clone(),
            host_driver: self.host_driver.take(),
            began: true,
            ..ProcInit::default()
        };
    }

    /// Whether the process did anything NVIDIA-related itself (a forked
    /// child that only inherited the map entry did not): only those get a
    /// verdict.
    pub(crate) fn has_activity(&self) -> bool {
        // nvprobe itself (a `doctor` run reads the nodes and the driver's
        // files) is never a start-up.
        if self.is_nvprobe() {
            return false;
        }
        self.calls > 0
            || self.lookups > 0
            || self.cuda_calls > 0
            || !self.lib_opens.is_empty()
            || self.cuinit_entered
            || !self.stages.is_empty()
            || self.info.as_ref().is_some_and(|i| !i.libcuda.is_empty())
    }

    /// An nvprobe process: its task name, and its executable when known.
    pub(crate) fn is_nvprobe(&self) -> bool {
        let exe = self.info.as_ref().and_then(|i| i.exe.as_deref());
        crate::decode::is_nvprobe(&self.comm, exe)
    }

    /// Killed by a fault (SIGBUS, SIGSEGV) after the loader opened a
    /// libcuda and before any CUDA or driver call: the load itself faulted.
    pub(crate) fn fault_at_load(&self) -> Option<(&str, i32)> {
        let p = self.lib_loaded()?;
        (matches!(self.exit_sig, 7 | 11)
            && self.calls == 0
            && self.cuda_calls == 0
            && !self.cuinit_entered
            && self.info.as_ref().is_none_or(|i| i.libcuda.is_empty()))
        .then_some((p, self.exit_sig))
    }

    /// The libcuda the loader opened, when one open succeeded.
    pub(crate) fn lib_loaded(&self) -> Option<&str> {
        self.lib_opens
            .iter()
            .find(|(_, f)| f.is_none())
            .map(|(p, _)| p.as_str())
    }

    /// The minor of a GPU UUID, from the host's GPU list.
    pub(crate) fn host_minor(&self, uuid: &str) -> Option<u32> {
        self.host_gpus
            .iter()
            .find(|g| {
                g.uuid
                    .as_deref()
                    .is_some_and(|x| x.eq_ignore_ascii_case(uuid))
            })
            .map(|g| g.minor)
    }

    /// The progress entry of a GPU, found by minor or UUID (the host's GPU
    /// list ties the two when it is known).
    pub(crate) fn gpu(&mut self, key: GpuKey) -> &mut GpuProgress {
        let i = self.gpus.iter().position(|g| match &key {
            GpuKey::Minor(m) => g.minor == Some(*m),
            GpuKey::Uuid(u) => g.uuid.as_deref() == Some(u.as_str()),
            GpuKey::Both(m, u) => g.minor == Some(*m) || g.uuid.as_deref() == Some(u.as_str()),
        });
        let i = i.unwrap_or_else(|| {
            self.gpus.push(GpuProgress::default());
            self.gpus.len() - 1
        });
        let g = &mut self.gpus[i];
        match key {
            GpuKey::Minor(m) => g.minor = Some(m),
            GpuKey::Uuid(u) => g.uuid = Some(u),
            GpuKey::Both(m, u) => {
                g.minor = Some(m);
                g.uuid = Some(u);
            }
        }
        g
    }
}

/// How a call names a GPU.
pub(crate) enum GpuKey {
    Minor(u32),
    Uuid(String),
    Both(u32, String),
}

/// One GPU's start-up in one process.
#[derive(
    Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct GpuProgress {
    /// The /dev/nvidiaN minor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minor: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// When /dev/nvidiaN was opened (ms since the first NVIDIA call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opened_ms: Option<f64>,
    /// When UVM_REGISTER_GPU returned for it, and what.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registered_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub register_result: Option<String>,
    /// Its UVM_REGISTER_GPU failed (`register_result` names how).
    #[serde(skip)]
    pub register_failed: bool,
}

/// How long a start-up whose cuInit succeeded waits for its first
/// context before its verdict is given without one (event time: a later
/// event or the collector's tick ends the wait).
pub const CONTEXT_WAIT_NS: u64 = 10_000_000_000;

/// The step after cuInit: the first context made, or the device lookup or
/// context call that failed before one was.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema, PartialEq)]
pub struct ContextStep {
    /// The libcuda function (cuDevicePrimaryCtxRetain, cuCtxCreate_v2,
    /// cuDeviceGet, …).
    pub call: String,
    /// The device it named (the ordinal for cuDeviceGet), when the
    /// function's prototype puts it where the uprobe reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<i32>,
    /// Its CUresult: "NAME (code)".
    pub result: String,
    /// The CUresult's number (0: the context was made).
    pub code: i64,
    pub at_ms: f64,
}

/// A driver call that failed, as the model keeps it; the verdict shows
/// it as a [`FailedCall`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Failure {
    pub(crate) call: CallRef,
    pub(crate) result: CallResult,
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// The thread that made it.
    pub(crate) tid: u32,
}

impl Failure {
    /// The call as a verdict shows it (`first_ns`: the process's first
    /// NVIDIA call).
    pub(crate) fn shown(&self, first_ns: u64) -> FailedCall {
        FailedCall {
            call: self.call.text(),
            result: self.result.text(),
            at_ms: ms(self.start, first_ns),
            duration_ms: self.end.saturating_sub(self.start) as f64 / 1e6,
        }
    }
}

#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema, PartialEq)]
pub struct FailedCall {
    pub call: String,
    /// The NV_STATUS name or errno.
    pub result: String,
    pub at_ms: f64,
    pub duration_ms: f64,
}

#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema, PartialEq)]
pub struct SignalInfo {
    #[serde(skip)]
    pub at_ns: u64,
    pub sig: i32,
    pub name: String,
    /// Who sent it: a task, or the kernel and why (a timer, a limit, the
    /// OOM killer).
    pub sender: String,
    pub sender_pid: Option<u32>,
    pub at_ms: f64,
    /// The NVIDIA call that was running when the signal came, if any.
    pub during: Option<String>,
    /// That call, as numbers (`during` is its text).
    #[serde(skip)]
    pub(crate) during_call: Option<CallRef>,
    /// Where it came from, as the kernel said it (`sender` in words).
    #[serde(skip)]
    pub(crate) source: SigSource,
}

/// Where a signal came from: siginfo's `si_code` with the signal, and
/// what the kernel said after it (the OOM killer's choice).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum SigSource {
    /// Another task: kill(2), tgkill, sigqueue (`sender_pid` is it).
    #[default]
    Task,
    /// SI_KERNEL: the kernel itself (a timer, a limit, the terminal, a
    /// kill it does not name).
    Kernel,
    /// SI_KERNEL's SIGKILL, and then oom/mark_victim for this process.
    OomKiller,
    /// SI_TIMER: a POSIX timer the process made.
    PosixTimer,
    /// SIGSYS with SYS_SECCOMP: a seccomp filter's kill action at one of
    /// its system calls (kernel/seccomp.c, force_sig_seccomp).
    Seccomp,
    /// A task of the process itself (`sender_pid` is the process): raise,
    /// abort, a kill of its own pid or process group; and the kernel at
    /// one of its own system calls, which sends SIGPIPE (a write no one
    /// reads) and SIGXFSZ (past RLIMIT_FSIZE) as SI_USER from the caller
    /// (send_sig with no siginfo).
    Itself,
    /// A fault the kernel raised at the process's own instruction: the
    /// positive si_code of SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGTRAP
    /// (force_sig_fault), kept.
    Fault(i32),
    /// SI_KERNEL from the process's own context, with a signal the kernel
    /// never raises there (SIGUSR1, SIGTERM, SIGINT, …): a ptrace tracer
    /// resumed it from a stop with that signal (ptrace_report_syscall's
    /// send_sig), as strace's -e inject=…:signal= does.
    Tracer,
    /// Another si_code.
    Other(i32),
}

/// A signal waiting for the end of the call it landed in.
#[derive(Debug)]
pub(crate) struct PendingSig {
    pub(crate) info: SignalInfo,
    pub(crate) tid: u32,
    pub(crate) stage: Option<String>,
    pub(crate) cuinit: bool,
    /// (call, result) of the call it landed in, once that call returned
    /// with EINTR or a restart code: the next call tells what followed.
    pub(crate) interrupted: Option<(CallRef, CallResult)>,
    /// The receiver's disposition when it was delivered: (action,
    /// SA_RESTART).
    pub(crate) handler: Option<(SigAction, bool)>,
}
