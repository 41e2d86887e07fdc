//! Signals to processes in start-up: who sent them, which call they landed
//! in, and what became of that call (EINTR, restarted, completed, the
//! process died in it).

use super::{
    facts::{CallRef, CallResult, ERESTARTNOINTR, ERESTARTSYS, Exit},
    record::{Record, SigOutcome, SignalReport},
    state::{CONTEXT_WAIT_NS, PendingSig, ProcInit, SigSource, SignalInfo, ms},
};
use crate::decode::{ProcCall, SigAction, signal::name as signal_name};

impl ProcInit {
    /// A call from `tid` spanning `start..=end` returned `result` (None:
    /// success): settle the signals it tells about.
    pub(crate) fn settle(
        &mut self,
        pid: u32,
        tid: u32,
        span: (u64, u64),
        call: CallRef,
        result: Option<CallResult>,
        out: &mut Vec<Record>,
    ) {
        let (start, end) = span;
        let mut keep = Vec::new();
        for mut p in std::mem::take(&mut self.pending) {
            if let Some((icall, ires)) = &p.interrupted {
                // The first call after the interrupted one: the same call
                // again is a restart (by the kernel for ERESTART*, by the
                // caller's retry loop for EINTR).
                let same = icall.same(&call);
                let outcome = match (ires.errno() == Some(libc::EINTR), same) {
                    (true, true) => SigOutcome::EintrRetried,
                    (_, true) => SigOutcome::Restarted,
                    (_, false) => SigOutcome::Eintr,
                };
                let what = (*icall, Some(*ires));
                out.push(self.report(pid, p, Some(what), outcome));
                continue;
            }
            if start <= p.info.at_ns && p.info.at_ns <= end {
                p.info.during = Some(call.text());
                p.info.during_call = Some(call);
                match result {
                    Some(r) if r.interrupted() => {
                        p.interrupted = Some((call, r));
                        keep.push(p);
                    }
                    r => out.push(self.report(pid, p, Some((call, r)), SigOutcome::Completed)),
                }
            } else if start > p.info.at_ns && (tid == p.tid || p.tid == 0) {
                // The thread it was sent to started a new call: it was not
                // in one when the signal came.
                if p.cuinit {
                    out.push(self.report(pid, p, None, SigOutcome::InUserSpace));
                }
            } else {
                keep.push(p);
            }
        }
        self.pending = keep;
    }

    /// The process ended itself (`exit`: a status, or an exec) while a
    /// driver call of its start-up was in flight in another thread: the
    /// kernel's SIGKILL to that thread cut the call short, so its failure
    /// (UVM answers NV_ERR_BUSY_RETRY to a dying caller) is the end's, not
    /// the driver's. It moves from `last_failure` to `cut`. The call is the
    /// last that failed, with what a dying caller gets (UVM's
    /// NV_ERR_BUSY_RETRY, EINTR, a restart code), of the thread the SIGKILL
    /// took, and the process's last NVIDIA call (a genuine failure is
    /// followed by libcuda's clean-up calls), ended at most 50 ms before it
    /// (the thread returns from the call into the signal, no user code
    /// between; a busy or throttled CPU delays it).
    pub(crate) fn take_cut_short(&mut self, exit: Exit) {
        const WINDOW_NS: u64 = 50_000_000;
        if exit.signal() != 0 || self.curesult.is_some() {
            return;
        }
        let dying = |r: CallResult| match r {
            CallResult::Status(s) => s == crate::decode::status::NV_ERR_BUSY_RETRY,
            r => matches!(
                r.errno(),
                Some(libc::EINTR | ERESTARTSYS | ERESTARTNOINTR | super::facts::ERESTARTNOHAND)
            ),
        };
        if let Some(f) = self.last_failure
            && dying(f.result)
            && self.last_call.is_some_and(|(_, end, _)| end == f.end)
            && self
                .zapped
                .iter()
                .any(|&(tid, at)| f.tid == tid && f.end <= at && at - f.end <= WINDOW_NS)
        {
            self.cut = Some(f);
            self.last_failure = None;
        }
    }

    /// A signal whose default action ends a process, sent during the
    /// start-up and caught by a handler of the process's: what ended a
    /// process that exited with an error before a first context after it
    /// (a harness's timer whose handler raises, such as pytest-timeout's; a
    /// launcher's graceful stop). The last such.
    /// Only the signals a harness or a launcher ends a process with
    /// (SIGALRM, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2; not a
    /// profiler's timer, a fault, the C library's real-time ones), sent
    /// after cuInit was entered, and caught at most 10 s before the end.
    pub(crate) fn caught_ender(&self, end_ns: u64) -> Option<&SignalInfo> {
        let cuinit = self.cuinit_at?;
        self.signals.iter().rev().find(|s| {
            s.at_ns >= cuinit
                && matches!(
                    s.sig,
                    libc::SIGALRM
                        | libc::SIGTERM
                        | libc::SIGINT
                        | libc::SIGHUP
                        | libc::SIGQUIT
                        | libc::SIGUSR1
                        | libc::SIGUSR2
                )
                && !matches!(s.source, SigSource::Fault(_) | SigSource::Other(_))
                && self.handled.iter().any(|&(n, at)| {
                    n == s.sig && at >= s.at_ns && end_ns.saturating_sub(at) <= CONTEXT_WAIT_NS
                })
        })
    }

    /// The process is gone (or tracing stopped): settle what is left.
    /// `end`: died_in_call (exit), eintr (exec), interrupted (tracing
    /// stopped before the next call).
    pub(crate) fn settle_all(&mut self, pid: u32, end: SigOutcome, out: &mut Vec<Record>) {
        for p in std::mem::take(&mut self.pending) {
            match p.interrupted {
                Some((call, r)) => out.push(self.report(pid, p, Some((call, Some(r))), end)),
                None if p.cuinit => out.push(self.report(pid, p, None, SigOutcome::InUserSpace)),
                None => {}
            }
        }
    }

    /// The report of `p`: `call` is the call it landed in and what that
    /// returned (None: it succeeded), when it landed in one.
    fn report(
        &self,
        pid: u32,
        p: PendingSig,
        call: Option<(CallRef, Option<CallResult>)>,
        outcome: SigOutcome,
    ) -> Record {
        let i = &p.info;
        let in_flight = call.map_or_else(|| "cuInit".to_owned(), |c| c.0.text());
        let result = call.and_then(|c| c.1);
        let r = result.map(CallResult::text).unwrap_or_default();
        let what = match (outcome, call.is_some(), result) {
            (SigOutcome::Completed, true, None) => "the call completed successfully".to_owned(),
            (SigOutcome::Completed, true, Some(_)) => format!("the call returned {r}, not EINTR"),
            (SigOutcome::EintrRetried, _, _) => {
                "the call returned EINTR and the caller made it again".to_owned()
            }
            (SigOutcome::Eintr, true, Some(CallResult::Errno(libc::EINTR))) => {
                "the call returned EINTR to the caller".to_owned()
            }
            (SigOutcome::Eintr, true, _) => match p.handler {
                Some((SigAction::Handler, false))
                    if result == Some(CallResult::Errno(ERESTARTSYS)) =>
                {
                    format!(
                        "the call was interrupted ({r}) and, the handler lacking SA_RESTART, returned EINTR to the caller"
                    )
                }
                Some((SigAction::Handler, _)) => {
                    format!(
                        "the call was interrupted ({r}) and returned EINTR to the caller after the handler ran"
                    )
                }
                _ => format!(
                    "the call was interrupted ({r}) and not made again: the caller saw EINTR"
                ),
            },
            (SigOutcome::Restarted, true, _) => match p.handler {
                Some((SigAction::Handler, true)) => {
                    format!(
                        "the kernel restarted the call ({r}) after the handler ran (SA_RESTART)"
                    )
                }
                Some((SigAction::Handler, false)) => {
                    format!("the kernel restarted the call ({r}) after the handler ran")
                }
                _ => format!("the kernel restarted the call ({r})"),
            },
            (SigOutcome::DiedInCall, true, _) => format!("the process died in the call ({r})"),
            (SigOutcome::Interrupted, true, _) => {
                format!("the call was interrupted ({r}); tracing stopped before the next call")
            }
            _ => "it arrived in user space, between driver calls".to_owned(),
        };
        let text = format!(
            "{} from {} at {:.1} ms in {}{}: {what}",
            i.name,
            i.sender,
            i.at_ms,
            in_flight,
            p.stage
                .as_ref()
                .map_or(String::new(), |s| format!(" (after {s})")),
        );
        Record::Signal(Box::new(SignalReport {
            pid,
            comm: self.comm.clone(),
            sig: i.sig,
            signal: i.name.clone(),
            sender: i.sender.clone(),
            sender_pid: i.sender_pid,
            at_ms: i.at_ms,
            stage: p.stage,
            in_flight,
            outcome,
            text,
        }))
    }
}

/// Who sent a signal, in words: the task, or the kernel and why. The
/// kernel's own (SI_KERNEL) by their number: a timer the process set
/// (kernel/time/itimer.c), a CPU-time limit (posix-cpu-timers.c), its
/// terminal (drivers/tty), a fault it could not describe, the OOM killer
/// (mm/oom_kill.c, named once oom/mark_victim said so).
fn sender_text(source: SigSource, sig: i32, (comm, pid): (&str, u32)) -> String {
    let kernel = match (source, sig) {
        (SigSource::Task, _) => return format!("{comm}[{pid}]"),
        (SigSource::Itself, _) => return format!("{comm}[{pid}] itself{}", own_why(sig)),
        (SigSource::Fault(c), _) => {
            return format!(
                "the kernel (a fault at the process's own access: {})",
                fault_text(sig, c)
            );
        }
        (SigSource::Other(c), _) => return format!("{comm}[{pid}] (si_code {c})"),
        (SigSource::PosixTimer, _) => "a POSIX timer (timer_create)",
        (SigSource::Seccomp, _) => {
            "a seccomp filter (its kill or trap action, at one of the process's system calls)"
        }
        (SigSource::OomKiller, _) => "the kernel's OOM killer",
        (_, libc::SIGALRM) => "the kernel (a timer the process set: alarm, setitimer)",
        (_, libc::SIGVTALRM | libc::SIGPROF) => "the kernel (a CPU-time timer the process set)",
        (_, libc::SIGXCPU) => "the kernel (the CPU-time limit, RLIMIT_CPU)",
        (_, libc::SIGHUP | libc::SIGTTIN | libc::SIGTTOU | libc::SIGTSTP) => {
            "the kernel (its terminal: a hangup or job control)"
        }
        (_, libc::SIGINT | libc::SIGQUIT) => {
            "the kernel (its terminal: Ctrl-C or Ctrl-\\ typed there)"
        }
        // x86's #GP in user mode (arch/x86/kernel/traps.c: force_sig,
        // SI_KERNEL): an instruction refused; or force_sigsegv, a signal
        // frame the kernel could not write. Not a bad address (those carry
        // SEGV_MAPERR or SEGV_ACCERR).
        (SigSource::Kernel, libc::SIGSEGV) => {
            "the kernel (a general protection fault, an instruction the CPU refused, or a signal frame it could \
not write: not a bad address)"
        }
        (_, libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP) => {
            "the kernel (a fault)"
        }
        (_, libc::SIGKILL) => "the kernel (no process sent it; no OOM kill of it was seen)",
        _ => "the kernel",
    };
    kernel.to_owned()
}

/// Where a signal came from, by its si_code, its number and whether the
/// process's own context generated it.
fn source_of(p: &ProcCall, sig: i32, code: i32) -> SigSource {
    match code {
        // SI_USER, SI_QUEUE, SI_TKILL.
        0 | -1 | -6 if p.proc.pid == p.target_pid => SigSource::Itself,
        0 | -1 | -6 => SigSource::Task,
        0x80 if p.proc.pid == p.target_pid && !raised_in_own_context(sig) => SigSource::Tracer,
        0x80 => SigSource::Kernel,
        -2 => SigSource::PosixTimer,
        // SYS_SECCOMP (uapi asm-generic/siginfo.h).
        1 if sig == libc::SIGSYS => SigSource::Seccomp,
        c if c > 0
            && matches!(
                sig,
                libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP
            ) =>
        {
            SigSource::Fault(c)
        }
        c => SigSource::Other(c),
    }
}

/// The signals the kernel raises with SI_KERNEL in the receiving task's
/// own context: its faults, its timers and limits (a timer's interrupt may
/// land while it runs), job control at its own terminal read or write,
/// I/O readiness and urgent data, a write no one reads, a seccomp
/// filter's, a kill. Another with SI_KERNEL from the task's own context
/// (SIGUSR1, SIGTERM, SIGINT) is ptrace_report_syscall's send_sig: a
/// tracer resuming it with that signal. (The terminal's Ctrl-C comes from
/// the tty's worker, not the task.)
fn raised_in_own_context(sig: i32) -> bool {
    matches!(
        sig,
        libc::SIGALRM
            | libc::SIGVTALRM
            | libc::SIGPROF
            | libc::SIGXCPU
            | libc::SIGXFSZ
            | libc::SIGTTIN
            | libc::SIGTTOU
            | libc::SIGSEGV
            | libc::SIGBUS
            | libc::SIGILL
            | libc::SIGFPE
            | libc::SIGTRAP
            | libc::SIGSYS
            | libc::SIGIO
            | libc::SIGURG
            | libc::SIGPIPE
            | libc::SIGKILL
    )
}

/// What a signal a process sent itself says by its number: abort(3)'s,
/// and the two the kernel sends from the process's own system call as
/// if the process had (fs/pipe.c and net/core for SIGPIPE, mm/filemap.c's
/// write checks for SIGXFSZ).
fn own_why(sig: i32) -> &'static str {
    match sig {
        libc::SIGABRT => {
            " (abort(): a failed assertion, an uncaught C++ exception or a fatal error a library reported)"
        }
        libc::SIGPIPE => " (a write to a pipe or socket that no one reads any more)",
        libc::SIGXFSZ => " (a write past its file-size limit, RLIMIT_FSIZE)",
        _ => "",
    }
}

/// A fault's si_code in words (uapi asm-generic/siginfo.h).
fn fault_text(sig: i32, code: i32) -> String {
    let what = match (sig, code) {
        (libc::SIGSEGV, 1) => "SEGV_MAPERR, an address with nothing mapped there",
        (libc::SIGSEGV, 2) => "SEGV_ACCERR, a mapping that does not allow that access",
        (libc::SIGSEGV, 3) => "SEGV_BNDERR, a bounds check",
        (libc::SIGSEGV, 4) => "SEGV_PKUERR, a protection key",
        (libc::SIGSEGV, 10) => "SEGV_CPERR, a control-protection (shadow stack) check",
        (libc::SIGBUS, 1) => "BUS_ADRALN, a misaligned address",
        (libc::SIGBUS, 2) => {
            "BUS_ADRERR, an address with nothing behind it, such as past the end of a mapped file"
        }
        (libc::SIGBUS, 3) => "BUS_OBJERR, an error of the object mapped there",
        (libc::SIGBUS, 4 | 5) => "BUS_MCEERR, a hardware memory error (machine check)",
        (libc::SIGILL, 1) => "ILL_ILLOPC, an instruction this CPU does not have",
        (libc::SIGILL, 5 | 6) => "a privileged instruction",
        (libc::SIGILL, _) => "an illegal instruction",
        (libc::SIGFPE, 1) => "FPE_INTDIV, an integer division by zero",
        (libc::SIGFPE, 2) => "FPE_INTOVF, an integer overflow",
        (libc::SIGFPE, _) => "a floating-point exception",
        (libc::SIGTRAP, _) => "a breakpoint or trace trap",
        _ => return format!("si_code {code}"),
    };
    what.to_owned()
}

impl ProcInit {
    /// The kernel's seccomp audit line of one of its calls: a kill
    /// action's is kept (the newest 4), to name the call a thread killed
    /// alone was making.
    pub(crate) fn on_seccomp_audit(&mut self, a: &crate::kmsg::audit::SeccompAudit, at: u64) {
        use crate::kmsg::audit::SeccompAction;
        if matches!(
            a.action,
            SeccompAction::KillThread | SeccompAction::KillProcess
        ) {
            if self.seccomp_kills.len() >= 4 {
                self.seccomp_kills.remove(0);
            }
            self.seccomp_kills.push((at, a.clone()));
        }
    }

    /// The OOM killer chose this process: the kernel's SIGKILL just
    /// before was its.
    pub(crate) fn on_oom_victim(&mut self) {
        self.oom_victim = true;
        let oom = |i: &mut SignalInfo| {
            if i.sig == libc::SIGKILL && i.source == SigSource::Kernel {
                i.source = SigSource::OomKiller;
                i.sender = sender_text(i.source, i.sig, ("", 0));
            }
        };
        if let Some(i) = self
            .signals
            .iter_mut()
            .rev()
            .find(|i| i.sig == libc::SIGKILL)
        {
            oom(i);
        }
        if let Some(p) = self
            .pending
            .iter_mut()
            .rev()
            .find(|p| p.info.sig == libc::SIGKILL)
        {
            oom(&mut p.info);
        }
    }

    /// The signal that ended process `pid`, traced back to where it came
    /// from: one it sent itself after a handler of its own caught the same
    /// signal from elsewhere (Python ends so on a KeyboardInterrupt; a
    /// runtime's handler cleans up, then raises the signal again) names
    /// that sender, which is what ended it. The one caught last before it
    /// counts; one ignored, or one of its own, does not.
    pub(crate) fn origin_of(&self, pid: u32, s: SignalInfo) -> SignalInfo {
        if s.source != SigSource::Itself || s.sender_pid != Some(pid) {
            return s;
        }
        // The last catch of that signal before the process sent it itself.
        let Some(&(_, caught)) = self
            .handled
            .iter()
            .rev()
            .find(|(n, at)| *n == s.sig && *at <= s.at_ns)
        else {
            return s;
        };
        let Some(first) = self.signals.iter().rev().find(|o| {
            o.sig == s.sig
                && o.at_ns <= caught
                && o.sender_pid != Some(pid)
                && !matches!(
                    o.source,
                    SigSource::Itself | SigSource::Fault(_) | SigSource::Other(_)
                )
        }) else {
            return s;
        };
        // "comm[pid] itself", without what the signal's number says when
        // the process sends it first (it raised again what it caught).
        let who = s.sender.strip_suffix(own_why(s.sig)).unwrap_or(&s.sender);
        SignalInfo {
            sender: format!(
                "{who} (raising again the {} that {} sent at {:.1} ms)",
                s.name, first.sender, first.at_ms
            ),
            sender_pid: first.sender_pid,
            source: first.source,
            ..s
        }
    }

    /// Who sent a signal, in words, for `source`.
    fn sender_of(&self, source: SigSource, p: &ProcCall, sig: i32) -> String {
        match (source, p.call.as_deref()) {
            // The kernel said which call the filter refused.
            (SigSource::Seccomp, Some(call)) => {
                format!("a seccomp filter (its kill or trap action, at {call}())")
            }
            (SigSource::Tracer, _) => {
                let who = match self.info.as_ref().and_then(|i| i.tracer.as_ref()) {
                    Some(t) if t.comm.is_empty() => format!("its tracer, process {}", t.pid),
                    Some(t) => format!("its tracer {}[{}]", t.comm, t.pid),
                    // (No tracer at any read: the kernel's stamp may also
                    // be the process's own, queued to itself with
                    // rt_sigqueueinfo, which lets a process give itself
                    // any si_code.)
                    None => {
                        return "a ptrace tracer nvprobe did not see (it gives a signal as it resumes the \
process from a ptrace stop, as strace's -e inject=…:signal= does), or the process itself, queueing the signal \
with the kernel's mark (rt_sigqueueinfo)"
                            .to_owned();
                    }
                };
                format!(
                    "{who} (it gave the signal as it resumed the process from a ptrace stop, as strace's \
-e inject=…:signal= does)"
                )
            }
            _ => sender_text(source, sig, (&p.proc.comm, p.proc.pid)),
        }
    }

    /// A signal generated for this process: who sent it, the call it
    /// landed in (settled when that call returns).
    pub(crate) fn on_signal(&mut self, p: &ProcCall) {
        let at = p.time_ns;
        let during = self
            .last_call
            .as_ref()
            .filter(|(s, e, _)| *s <= at && at <= *e + 1_000_000)
            .map(|(_, _, c)| *c);
        let code = p.code.unwrap_or(0);
        let sig = p.sig.unwrap_or(0);
        // SIGCONT to a process that was not stopped changes nothing
        // (timeout(1) sends one after its SIGTERM): not worth a report.
        // After a stop signal it says when the process went on.
        if sig == libc::SIGCONT
            && !self.signals.last().is_some_and(|s| {
                matches!(
                    s.sig,
                    libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                )
            })
        {
            return;
        }
        let source = source_of(p, sig, code);
        // A tracer gives its signal at a stop, at a call's entry or after
        // its exit, and a fault is the faulting thread's own instruction in
        // user space (another thread's call in flight then is not where it
        // landed): never in a call.
        let fault = matches!(source, SigSource::Fault(_))
            || (source == SigSource::Kernel
                && matches!(
                    sig,
                    libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP
                ));
        let during = during.filter(|_| source != SigSource::Tracer && !fault);
        let sender = self.sender_of(source, p, sig);
        let sender_pid =
            matches!(source, SigSource::Task | SigSource::Itself).then_some(p.proc.pid);
        if self.signals.len() == 16 {
            // The oldest that landed in no call goes first: one that did
            // explains a verdict given later (at the first context, or at
            // the exit).
            let i = self
                .signals
                .iter()
                .take(12)
                .position(|s| s.during.is_none())
                .unwrap_or(0);
            self.signals.remove(i);
        }
        let info = SignalInfo {
            at_ns: at,
            sig,
            name: signal_name(sig),
            sender,
            sender_pid,
            at_ms: ms(at, self.first_ns),
            during: during.map(|c| c.text()),
            during_call: during,
            source,
        };
        // Its call, if any, has not returned yet (the call's record
        // comes at its end): settle it when it does.
        // timeout(1) signals its child, then its process group: one
        // signal to the process, reported once.
        let again = self.pending.iter().any(|q| {
            q.info.sig == info.sig
                && q.info.source == info.source
                && q.info.sender_pid == info.sender_pid
                && q.interrupted.is_none()
                && info.at_ns.saturating_sub(q.info.at_ns) < 10_000_000
        });
        if self.pending.len() == 8 {
            self.pending.remove(0);
        }
        if !again {
            self.pending.push(PendingSig {
                info: info.clone(),
                tid: p.target_tid.unwrap_or(0),
                stage: self.last_stage(),
                cuinit: self.cuinit_running(),
                interrupted: None,
                handler: None,
            });
        }
        self.signals.push(info);
    }

    /// A signal delivered to this process (its disposition): for a call
    /// interrupted with a restart code, decides restart or EINTR now.
    pub(crate) fn on_signal_delivered(&mut self, pid: u32, p: &ProcCall, out: &mut Vec<Record>) {
        let (Some(sig), Some(action)) = (p.sig, p.action) else {
            return;
        };
        // A SIGKILL no one sent: the kernel ending the thread because
        // another thread of the process exited or exec'd (zap_other_threads
        // and de_thread queue it without generating a signal).
        if sig == libc::SIGKILL
            && self.zapped.len() < 16
            && !self.signals.iter().any(|s| s.sig == libc::SIGKILL)
        {
            self.zapped.push((p.proc.tid, p.time_ns));
        }
        if action == SigAction::Handler {
            if self.handled.len() == 8 {
                self.handled.remove(0);
            }
            self.handled.push((sig, p.time_ns));
        }
        let restart = p.sa_restart.unwrap_or(false);
        let Some(i) = self
            .pending
            .iter()
            .position(|q| q.info.sig == sig && q.handler.is_none())
        else {
            return;
        };
        self.pending[i].handler = Some((action, restart));
        // A restart code and a handler: the kernel decides now
        // (x86 handle_signal): ERESTARTSYS restarts only with
        // SA_RESTART, ERESTARTNOINTR always, the others never.
        if action == SigAction::Handler
            && let Some((_, res)) = &self.pending[i].interrupted
            && res.errno() != Some(libc::EINTR)
        {
            let restarted = match res.errno() {
                Some(ERESTARTSYS) => restart,
                Some(ERESTARTNOINTR) => true,
                _ => false,
            };
            let q = self.pending.remove(i);
            let what = q.interrupted.map(|(c, r)| (c, Some(r)));
            out.push(self.report(
                pid,
                q,
                what,
                if restarted {
                    SigOutcome::Restarted
                } else {
                    SigOutcome::Eintr
                },
            ));
        }
    }
}
