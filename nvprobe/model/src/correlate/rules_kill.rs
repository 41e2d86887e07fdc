//! Who ended a process with a signal, from what the kernel said: a fault
//! of its own, the OOM killer (oom/mark_victim), a timer it set, a limit,
//! its terminal, or a task; the hint says what to do about that source,
//! never guessing one the evidence does not show.

use super::{
    state::{ProcInit, SigSource},
    table::{DiagId, Diagnosis, Facts, diag},
};
use crate::attribution::CgroupCount;

/// A fault of the process itself, not a kill (SIGILL, SIGBUS, SIGFPE,
/// SIGSEGV from the kernel).
const HINT_FAULT: &str = "the process faulted (the kernel sends SIGSEGV, SIGBUS, SIGILL or SIGFPE for the \
process's own bad access): nothing killed it from outside, and waiting longer will not help: get its core dump or run \
it under a debugger; during start-up this is a corrupt or mismatched library";

const HINT_OOM: &str = "the kernel's OOM killer ended it: memory ran out (the memory cgroup's limit, a parent \
cgroup's, or the host's), so the driver did not hang and waiting will not help: give the job more memory (the \
container's or cgroup's memory limit, memory.max) or make it use less; `dmesg | grep -i 'killed process'` has the \
kernel's account";

/// A SIGKILL that found the process stopped.
const HINT_STOPPED: &str = "the process was stopped (SIGSTOP: a debugger, a job control, a checkpointer or a \
scheduler's suspend) when SIGKILL ended it: it did not hang in the driver and more time would not have helped while \
it stayed stopped; find who stopped it and have it continued (SIGCONT) instead of killed";

/// Whether the process was stopped at `at_ns`: a SIGSTOP (which no
/// process can catch) with no SIGCONT after it.
fn stopped_at(st: &ProcInit, at_ns: u64) -> bool {
    st.signals
        .iter()
        .filter(|s| s.at_ns < at_ns)
        .fold(false, |stopped, s| match s.sig {
            libc::SIGSTOP => true,
            libc::SIGCONT => false,
            _ => stopped,
        })
}

const HINT_FROZEN: &str = "its cgroup was frozen (docker pause, a checkpointing tool, a systemd or Kubernetes \
freeze) while it waited: the process could not run at all, so neither the driver nor more time is the answer; thaw \
the cgroup (docker unpause, echo 0 > cgroup.freeze) and find what froze it";
const HINT_IN_DRIVER: &str = "when it was killed its thread had been inside the NVIDIA driver for seconds (the stall \
record's stack says where): either the driver was slow to bring the GPU up (no persistence mode: nvidia-smi -pm 1 or \
nvidia-persistenced; many GPUs at once) or it was stuck there (dmesg | grep -E 'NVRM|Xid'). Run it once without the \
timeout: a start-up that ends was slow, one that never does is a driver or GPU problem";
const HINT_TRACER_HOLD: &str = "its ptrace tracer held the thread in a stop (a debugger at a breakpoint, strace's \
delay injection) while the time ran: the driver did not hang; let the tracer go on, or run without it";

/// What nvprobe's stall check last found the start-up's call doing, at or
/// before `by_ns`: the phrase for the evidence and the verdict, and the
/// hint it calls for (None: the kill's own). A stopped process (T) has its
/// stop's own words, a thread that had ended its own diagnosis.
pub(super) fn stall_seen(st: &ProcInit, by_ns: u64) -> Option<(String, Option<&'static str>)> {
    let (at, r) = st.stalls.iter().rev().find(|(at, _)| *at <= by_ns)?;
    let head = format!(
        "when nvprobe's stall check looked, {:.1} s before the signal, {} had run {:.1} s",
        by_ns.saturating_sub(*at) as f64 / 1e9,
        r.call,
        r.elapsed_s
    );
    look_text(head, r)
}

/// What held a start-up that was not killed: the stall check's newest
/// look at it, whether its thread went on from it or not ("; when nvprobe's
/// stall check looked, cuInit had run 5.4 s, held in a ptrace stop by its
/// tracer").
pub(super) fn stall_survived(st: &ProcInit) -> Option<String> {
    let newest = st
        .stalls
        .iter()
        .chain(st.past_stall.as_ref())
        .max_by_key(|(at, _)| *at)?;
    let r = &newest.1;
    let head = format!(
        "when nvprobe's stall check looked, {} had run {:.1} s",
        r.call, r.elapsed_s
    );
    look_text(head, r).map(|(t, _)| t)
}

/// A stall look in words after `head`, and the hint it calls for.
fn look_text(
    head: String,
    r: &crate::records::StallReport,
) -> Option<(String, Option<&'static str>)> {
    let wchan = r.wchan.as_deref().unwrap_or("?");
    let inside = r
        .driver_function
        .as_ref()
        .map_or(String::new(), |d| format!(", inside the driver in {d}"));
    let driver = r.driver_function.is_some().then_some(HINT_IN_DRIVER);
    Some(match (r.state.as_str(), &r.frozen_cgroup) {
        (_, Some(cg)) => (
            format!("{head}, frozen with its cgroup ({cg}: the cgroup freezer)"),
            Some(HINT_FROZEN),
        ),
        ("D", _) => (
            format!("{head}, blocked in the kernel (D) in {wchan}{inside}"),
            driver,
        ),
        ("S" | "I", _) => (format!("{head}, sleeping (S) in {wchan}{inside}"), driver),
        ("R", _) => (format!("{head}, running (R)"), None),
        ("t", _) => (
            format!("{head}, held in a ptrace stop by its tracer"),
            Some(HINT_TRACER_HOLD),
        ),
        _ => return None,
    })
}

/// The hint of a kill whose source says more than "something killed it":
/// the kernel's own kills (None: a task sent it, the table's hint says
/// what to do about a harness or an orchestrator).
fn kill_hint(source: SigSource, sig: i32) -> Option<&'static str> {
    Some(match (source, sig) {
        (SigSource::OomKiller, _) => HINT_OOM,
        (SigSource::Kernel, libc::SIGALRM | libc::SIGVTALRM | libc::SIGPROF)
        | (SigSource::PosixTimer, _) => {
            "a timer the process itself set fired (alarm, setitimer, timer_create: often a harness's in-process \
timeout, such as Python's signal.alarm or a test framework's): the driver did not hang; give it more time or \
remove the timer to see the real result"
        }
        (SigSource::Seccomp, _) => {
            "a seccomp filter ended it (a profile's kill action, SECCOMP_RET_KILL_PROCESS or KILL_THREAD, the \
default of some profiles for calls they do not list; or its trap action with no SIGSYS handler): the driver did not \
fail. The kernel names the call (`syscall=N`) in its audit record: `dmesg | grep type=1326` where no audit daemon \
runs, `ausearch -m SECCOMP` where one does (a trap is logged only where the filter asks). Allow the call in the \
container's or unit's profile (seccomp profile, SystemCallFilter=), or run with one that does"
        }
        (SigSource::Itself, libc::SIGABRT) => {
            "the process aborted itself (abort(): a failed assertion, an uncaught C++ exception, a fatal error a \
library reported, or the C library's heap check): nothing killed it from outside and the driver did not hang, so \
more time will not help; its standard error says why, and its core dump where one is kept (`coredumpctl`)"
        }
        (SigSource::Itself, libc::SIGPIPE) => {
            "the kernel sent SIGPIPE at one of the process's own writes, to a pipe or socket whose reader had gone \
(`prog | head` after head ended, a closed connection): the driver did not fail; keep the reader open, write to a \
file, or have the program ignore SIGPIPE"
        }
        (SigSource::Itself, libc::SIGXFSZ) => {
            "a write of the process went past its file-size limit (RLIMIT_FSIZE, `ulimit -f`): the driver did not \
fail; raise or remove the limit"
        }
        (SigSource::Itself, _) => {
            "the process sent the signal to itself (raise, a kill of its own pid or of its process group): nothing \
outside killed it and the driver did not hang; the program's own code, or a library in it, chose to end it"
        }
        (SigSource::Fault(4 | 5), libc::SIGBUS) => {
            "a hardware memory error (a machine check in host RAM) hit a page the process used: the kernel log \
names it (`dmesg | grep -i 'memory failure'`); the driver did not fail; run it again, and have the host's memory \
checked if it recurs"
        }
        (SigSource::Tracer, _) => {
            "the process's ptrace tracer (strace, a debugger, a supervisor) gave it this signal as it resumed it \
from a stop (strace -e inject=CALL:signal=SIG does so): nothing else sent it and the driver did not fail; run it \
without the tracer, or without the tracer's signal injection"
        }
        (SigSource::Kernel, libc::SIGSEGV) => {
            "SIGSEGV with the kernel's own si_code (SI_KERNEL) is a general protection fault: an instruction the \
CPU refused in this process, not an access to a bad address: rdtsc or cpuid where the process or its launcher made \
them fault (prctl PR_SET_TSC, arch_prctl ARCH_SET_CPUID: record-replay tools such as rr and some sandboxes set them), \
a privileged instruction, or a non-canonical address; or the kernel could not write a signal handler's frame (a \
full or unusable stack). The kernel log's `traps: COMM[PID] general protection fault ip:…` line names the \
instruction's address; run it once without the sandbox or launcher that sets such faults"
        }
        (SigSource::Kernel, libc::SIGXCPU) => {
            "the process used up its CPU-time limit (RLIMIT_CPU, `ulimit -t`): raise or remove the limit"
        }
        (SigSource::Kernel, libc::SIGHUP | libc::SIGTTIN | libc::SIGTTOU | libc::SIGTSTP) => {
            "its terminal sent it (a hangup, or job control of a background job): run it detached from the \
terminal (nohup, setsid, a service) or in the foreground"
        }
        (SigSource::Kernel, libc::SIGINT | libc::SIGQUIT) => {
            "Ctrl-C (SIGINT) or Ctrl-\\ (SIGQUIT) was typed at its terminal, which signals every process of the \
foreground job: nothing else killed it and the driver did not hang; let it run to its end to see the real result"
        }
        (SigSource::Kernel, libc::SIGKILL) => {
            "the kernel killed it, not another process, and no OOM kill of it was seen: look for the OOM killer \
in the kernel log (`dmesg | grep -i 'killed process'`; nvprobe sees it only where oom/mark_victim is traced) and for \
a CPU-time limit (`ulimit -t`, whose hard limit ends a process with SIGKILL)"
        }
        _ => return None,
    })
}

/// The process's memory cgroup as nvprobe read it, for an OOM kill.
fn memory_facts(st: &ProcInit) -> String {
    let mem = st
        .info
        .as_ref()
        .and_then(|i| i.limits.as_ref())
        .and_then(|l| l.memory.as_ref());
    match mem {
        Some(&CgroupCount {
            current,
            max: Some(max),
        }) => format!(
            "; its memory cgroup held {} of its memory.max {} when nvprobe read it",
            mib(current),
            mib(max)
        ),
        Some(&CgroupCount { current, max: None }) => format!(
            "; its memory cgroup (holding {}) sets no memory.max: a parent cgroup's limit or the host's memory ran out",
            mib(current)
        ),
        None => String::new(),
    }
}

/// The process ended itself (another thread's exit or exec) while a
/// driver call of its start-up was in flight: the call its end cut short
/// ([`ProcInit::take_cut_short`]) and how it ended. True when said.
pub(super) fn ended_itself(f: &Facts<'_>, out: &mut Vec<Diagnosis>) -> bool {
    let (Some(c), Some(exit)) = (f.st.cut, f.exit) else {
        return false;
    };
    out.push(diag(
        DiagId::EndedItself,
        format!(
            "{} returned {} as the kernel ended its thread: another thread of the process {}",
            c.call,
            c.result,
            match exit {
                super::facts::Exit::Exec => "exec'd a new program".to_owned(),
                e => e.text(),
            }
        ),
    ));
    true
}

/// The hint of a task's kill that says no more than who sent it: its
/// parent's (a launcher stopping its workers, or the parent-death signal
/// the kernel sends in a dying parent's name), or a harness's; once cuInit
/// had returned CUDA_SUCCESS, the time it needs is not cuInit's.
fn task_kill_hint(st: &ProcInit, sig: &super::state::SignalInfo) -> &'static str {
    // (Not init: a service manager's stop, whose parent never exits.)
    let parent = sig.sender_pid.is_some_and(|p| p > 1)
        && sig.sender_pid == st.info.as_ref().and_then(|i| i.ppid)
        && sig.source == SigSource::Task;
    let init_ok = matches!(st.curesult, Some((0, _)));
    match (parent, init_ok) {
        (true, _) => HINT_PARENT_KILL,
        (false, true) => HINT_KILLED_AFTER_INIT,
        (false, false) => DiagId::KilledBySignal.rule().hint,
    }
}

/// A kill by the process's parent.
const HINT_PARENT_KILL: &str = "the process did not hang in the driver: its parent ended it: a harness's \
timeout (give the start-up more time, or run it without the timeout to see its real result), a launcher stopping \
its workers, or the parent-death signal (PR_SET_PDEATHSIG, which launchers such as torchrun and multiprocessing \
pools set) that the kernel sends in the parent's name as the parent exits: then find why the parent exited";

/// A task's kill after cuInit had succeeded, before a first context.
const HINT_KILLED_AFTER_INIT: &str = "the process did not hang in the driver: cuInit had succeeded, and something \
killed it after (a test harness timeout, an orchestrator, a stop): give the start-up, its first context included, \
more time or run it without the timeout to see its real result";

/// The hint of a start-up its own handler for a signal ended.
const HINT_HANDLED: &str = "the process's own handler for the signal ended it (a harness's timeout that raises, \
such as pytest-timeout's signal method; a launcher's graceful stop): cuInit had succeeded and the driver did not \
fail; give the start-up more time, or find who sent the signal and why";

/// A process whose cuInit succeeded and that exited with an error before
/// a first context, after its handler caught a signal that came in the
/// start-up ([`ProcInit::caught_ender`]): the signal, and whose it was.
pub(super) fn caught_then_exited(f: &Facts<'_>, out: &mut Vec<Diagnosis>) -> bool {
    let st = f.st;
    let Some(super::facts::Exit::Status(n)) = f.exit else {
        return false;
    };
    if n == 0 || st.context.is_some() || !matches!(st.curesult, Some((0, _))) {
        return false;
    }
    let Some(s) = st.caught_ender(st.last_ns) else {
        return false;
    };
    out.push(Diagnosis {
        hint: kill_hint(s.source, s.sig).unwrap_or(HINT_HANDLED),
        ..diag(
            DiagId::InterruptedBySignal,
            format!(
                "{} from {} at {:.1} ms{}: the process's handler caught it, and the process exited with status {n} \
before a first context",
                s.name,
                s.sender,
                s.at_ms,
                s.during
                    .as_ref()
                    .map_or(String::new(), |c| format!(", during {c}"))
            ),
        )
    });
    true
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
}

/// A diagnosis of how a signal ended the process; true when one was made.
pub(super) fn killed(f: &Facts<'_>, out: &mut Vec<Diagnosis>) -> bool {
    if f.fatal_sig != 0 && f.st.fault_at_load().is_some() {
        // The load itself faulted: libcuda_unloadable says so.
        return true;
    }
    if let Some(sig) = f.signal
        && f.fatal_sig != 0
        && matches!(f.fatal_sig, 4 | 5 | 7 | 8 | 11)
        && sig.sender_pid.is_none()
    {
        out.push(Diagnosis {
            hint: kill_hint(sig.source, sig.sig).unwrap_or(HINT_FAULT),
            ..diag(
                DiagId::KilledBySignal,
                format!(
                    "{} from {} at {:.1} ms: a fault, not a kill",
                    sig.name, sig.sender, sig.at_ms
                ),
            )
        });
        return true;
    }
    if let Some(sig) = f.signal
        && f.fatal_sig != 0
    {
        let mut d = diag(
            DiagId::KilledBySignal,
            format!(
                "{} from {} at {:.1} ms{}",
                sig.name,
                sig.sender,
                sig.at_ms,
                sig.during
                    .as_ref()
                    .map_or(String::new(), |c| format!(", during {c}"))
            ),
        );
        let mut chosen = false;
        if let Some(hint) = kill_hint(sig.source, sig.sig) {
            d.hint = hint;
            chosen = true;
        }
        let stopped = sig.sig == libc::SIGKILL
            && matches!(sig.source, SigSource::Task | SigSource::Itself)
            && stopped_at(f.st, sig.at_ns);
        if stopped {
            d.hint = HINT_STOPPED;
            chosen = true;
        }
        if sig.source == SigSource::OomKiller {
            d.evidence.push_str(&memory_facts(f.st));
        } else if let Some((seen, hint)) = stall_seen(f.st, sig.at_ns) {
            // What the thread was doing while the time ran out; where the
            // kill's source says nothing more certain (a task sent it, the
            // process was not stopped), it decides the hint.
            d.evidence.push_str(&format!("; {seen}"));
            d.about.stall_by = Some(sig.at_ns);
            if let Some(h) = hint
                && !chosen
            {
                d.hint = h;
                chosen = true;
            }
        }
        if !chosen {
            d.hint = task_kill_hint(f.st, sig);
        }
        out.push(d);
        return true;
    }
    if f.st.oom_victim && f.fatal_sig == libc::SIGKILL {
        // The OOM killer's choice was seen, its signal was not.
        out.push(Diagnosis {
            hint: HINT_OOM,
            ..diag(
                DiagId::KilledBySignal,
                format!("SIGKILL from the kernel's OOM killer{}", memory_facts(f.st)),
            )
        });
        return true;
    }
    false
}

/// How a thread's exit code reads: a thread the kernel ended alone with a
/// signal (SIGSYS: a seccomp filter's kill-thread action, at the call the
/// kernel's audit line names when nvprobe read it), or one that called
/// exit(2). `at` is when the thread ended.
pub(super) fn thread_end_text(code: i32, at: u64, st: &ProcInit) -> String {
    match code & 0x7f {
        0 => format!("it exited alone, with status {}", (code >> 8) & 0xff),
        libc::SIGSYS => {
            let call = seccomp_killed_at(st, at)
                .map(|c| format!(" at {c}() (the kernel's audit line names it)"))
                .unwrap_or_default();
            format!("killed alone by SIGSYS: a seccomp filter's kill-thread action{call}")
        }
        sig => format!("killed alone by {}", crate::decode::signal::name(sig)),
    }
}

/// The call of a seccomp kill-thread action logged in the second before
/// `at` (the audit line is printed just before the thread ends; the kernel
/// log's stamps are mapped onto nvprobe's clock, to a few ms, hence 100 ms
/// after it too): named only where every such line kept names the same
/// call (the line names the process, not the thread).
fn seccomp_killed_at(st: &ProcInit, at: u64) -> Option<&str> {
    let mut calls = st.seccomp_kills.iter().filter(|(logged, a)| {
        a.action == crate::kmsg::audit::SeccompAction::KillThread
            && *logged <= at.saturating_add(100_000_000)
            && at.saturating_sub(*logged) <= 1_000_000_000
    });
    let first = calls.next()?.1.call.as_str();
    calls.all(|(_, a)| a.call == first).then_some(first)
}

/// The thread in cuInit ended alone at least 100 ms before the process's
/// end (or tracing's): cuInit never returned, and whatever ended the
/// process later (a harness's timeout, a kill) came to a process waiting
/// for a thread that was gone. The start-up's end is that thread's: this
/// replaces the signal's diagnoses, whose remedy (more time) it rules out.
pub(super) fn cuinit_thread_ended(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let st = f.st;
    let Some((at, tid, code)) = st.cuinit_thread_ended else {
        return;
    };
    let lived = st.last_ns.saturating_sub(at);
    if st.curesult.is_some() || lived < 100_000_000 {
        return;
    }
    let until = match (f.signal.filter(|_| f.fatal_sig != 0), f.exit) {
        (Some(s), _) => format!(", until {} from {}", s.name, s.sender),
        (None, Some(e)) => format!(", until it {}", e.text()),
        (None, None) => ", until tracing stopped".to_owned(),
    };
    out.retain(|d| !matches!(d.id, DiagId::KilledBySignal | DiagId::InterruptedBySignal));
    out.insert(
        0,
        diag(
            DiagId::CuinitThreadEnded,
            format!(
                "its thread in cuInit (tid {tid}) ended at {:.1} ms ({}); cuInit never returned, and the process \
went on without it for {:.1} s{until}",
                super::state::ms(at, st.first_ns),
                thread_end_text(code, at, st),
                lived as f64 / 1e9
            ),
        ),
    );
}
