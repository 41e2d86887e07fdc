//! The verdict on one process's start-up: its result, the text a person
//! reads, what it rests on, and the diagnoses the rules found.

use super::outcome::{Class, CuInit, Outcome};
use super::verdict_driver::driver_only;
use super::{
    facts::{CallRef, Exit},
    named::{call_named, during_named},
    rules,
    state::{CONTEXT_WAIT_NS, ProcInit, SignalInfo, ms},
    table::{DiagId, Diagnosis},
};

/// When no diagnosis explains a start-up that did not end well: the
/// failed system calls of its start-up, the newest first (None: it had
/// none, or a diagnosis explains it, or the process never tried: it
/// exited with status 0 without a CUDA or driver call, and the calls that
/// failed on its way, a library search or a terminal check, were its
/// own business).
fn unexplained(
    st: &ProcInit,
    (result, exit): (Outcome, Option<Exit>),
    diagnoses: &[Diagnosis],
) -> Option<Diagnosis> {
    let never_tried = result == Outcome::Exited
        && matches!(exit, Some(Exit::Status(0)))
        && st.calls == 0
        && st.cuda_calls == 0
        && !st.cuinit_entered;
    if never_tried
        || matches!(result, Outcome::Ok | Outcome::Incomplete)
        || diagnoses
            .iter()
            .any(|d| d.severity == super::table::DiagSeverity::Error && !rules::is_recovered(d, st))
    {
        return None;
    }
    let text = st.failed_text()?;
    let mut d = super::table::diag(DiagId::FailedSyscalls, text);
    if result == Outcome::Exited && matches!(exit, Some(Exit::Status(0))) {
        // The program ended content (status 0): its failed calls are no
        // failure's cause, only what it met.
        d.severity = super::table::DiagSeverity::Warning;
    }
    Some(d)
}

/// A CPU quota that stretched the start-up: said, never its cause, where
/// the verdict's time is the start-up's own (its first context, its failed
/// cuInit or first context, or the signal that ended it).
fn quota(
    st: &ProcInit,
    result: Outcome,
    context_failed: bool,
    fatal_sig: i32,
) -> Option<Diagnosis> {
    let ended_in_startup = result == Outcome::Ok
        || context_failed
        || st.curesult.is_some_and(|(code, _)| code != 0)
        || fatal_sig != 0;
    rules::cpu_quota(st, ended_in_startup, result == Outcome::Ok)
}

pub(crate) fn verdict(pid: u32, st: &ProcInit, exit: Option<Exit>) -> CuInit {
    let last_stage = st.last_stage();
    let fatal_sig = exit.map_or(0, Exit::signal);
    // The signal that explains the end: the last one of the fatal number,
    // else the last one that landed during a call.
    let signal = st
        .signals
        .iter()
        .rev()
        .find(|s| fatal_sig != 0 && s.sig == fatal_sig)
        .or_else(|| st.signals.iter().rev().find(|s| s.during.is_some()))
        .cloned()
        .map(|s| st.origin_of(pid, s));
    let class = class_of(st);
    if class != Class::Cuda || st.held_unseen() {
        return other_class(pid, st, class, exit, signal);
    }
    let mut diagnoses = rules::diagnose(&super::table::Facts {
        st,
        fatal_sig,
        exited_ok: exit.is_some_and(|e| e.signal() == 0),
        signal: signal.as_ref(),
        exit,
    });
    let (result, said, source, curesult) = if let Some((code, name)) = st.curesult {
        let r = format!("{} ({code})", name.unwrap_or("CUresult"));
        let (result, said) = if code == 0 {
            after_cuinit(st, &r, last_stage.as_deref(), exit, signal.as_ref())
        } else {
            (
                Outcome::Failed,
                cuinit_failed(st, &r, last_stage.as_deref(), &diagnoses),
            )
        };
        (
            result,
            said,
            "libcuda uprobe (cuInit's return) and driver calls",
            Some(r),
        )
    } else {
        let named = |c: &CallRef| call_named(c, st);
        let (result, text, cause) = driver_only(
            st,
            (exit, signal.as_ref(), last_stage.as_deref()),
            &diagnoses,
            &named,
        );
        (result, Said::caused(text, cause), driver_source(st), None)
    };
    let context_failed = st.context.as_ref().is_some_and(|c| c.code != 0);
    // Whatever cuInit got past, it succeeded: a first context that failed
    // is explained by the context's own diagnoses.
    rules::settle_severity(&mut diagnoses, st, result == Outcome::Ok || context_failed);
    if context_failed {
        diagnoses.extend(super::rules_context::diagnose(st));
    }
    diagnoses.extend(unexplained(st, (result, exit), &diagnoses));
    diagnoses.extend(quota(st, result, context_failed, fatal_sig));
    let failed_syscalls = if result == Outcome::Ok {
        Vec::new()
    } else {
        st.failed_newest_first()
    };
    let (text, headline, detail) = said.shown(st, &diagnoses, result == Outcome::Killed);
    CuInit {
        pid,
        comm: st.comm.clone(),
        result,
        source,
        text,
        headline,
        detail,
        cuinit_seen: names_cuinit(st, result),
        total_ms: ms(st.last_ns, st.first_ns),
        stages: st.stages.clone(),
        calls: st.calls,
        failed_call: if context_failed {
            st.after_init_failure
        } else {
            st.last_failure
        }
        .map(|f| f.shown(st.first_ns)),
        signal,
        exit: exit.map(Exit::text),
        curesult,
        context: st.context.clone(),
        diagnoses,
        class,
        process: st.info.clone(),
        gpus: st.gpus.clone(),
        failed_syscalls,
    }
}

/// A verdict's text (the JSON's `text`), and for the text view a shorter
/// first line with what explains it on a line of its own (`detail`), or
/// in a diagnosis below.
struct Said {
    text: String,
    headline: Option<String>,
    /// The failed driver call that explains it, said under the first
    /// line when no diagnosis does.
    failed: Option<String>,
}

impl Said {
    fn plain(text: String) -> Self {
        Said {
            text,
            headline: None,
            failed: None,
        }
    }

    /// `head`, and the cause a diagnosis below says (the text view's first
    /// line stops before it).
    fn caused(head: String, cause: Option<String>) -> Self {
        match cause {
            Some(c) => Said {
                text: format!("{head}: {c}"),
                headline: Some(head),
                failed: None,
            },
            None => Self::plain(head),
        }
    }
}

impl Said {
    /// The verdict's text, the text view's first line and the lines under
    /// it, with the time the process was stopped.
    fn shown(
        self,
        st: &ProcInit,
        diagnoses: &[Diagnosis],
        killed: bool,
    ) -> (String, Option<String>, Vec<String>) {
        let stop = stopped(st);
        let mut text = match &stop {
            Some((secs, who)) => format!("{}; stopped for {secs:.1} s of it ({who})", self.text),
            None => self.text.clone(),
        };
        // The thread in cuInit had ended long before (its diagnosis says
        // how): the end above came to a process waiting for nothing.
        if let Some((at, _, code)) = st.cuinit_thread_ended
            && let Some(d) = diagnoses.iter().find(|d| d.id == DiagId::CuinitThreadEnded)
            && !text.contains(&d.evidence)
        {
            text.push_str(&format!(
                "; its thread in cuInit had ended at {:.1} ms ({})",
                ms(at, st.first_ns),
                super::rules_kill::thread_end_text(code, at, st)
            ));
        }
        // A kill: what the stall check found the thread doing before it,
        // as the kill's diagnosis says.
        match diagnoses.iter().find_map(|d| d.about.stall_by) {
            Some(by) => {
                if let Some((seen, _)) = super::rules_kill::stall_seen(st, by) {
                    text.push_str(&format!("; {seen}"));
                }
            }
            // Not killed (or killed with no look before it): what held a
            // start-up that got past it, or failed after it.
            None if !killed => {
                if let Some(seen) = super::rules_kill::stall_survived(st) {
                    text.push_str(&format!("; {seen}"));
                }
            }
            None => {}
        }
        // The text view: the first line short, what explains it below.
        let headline = match &stop {
            Some((secs, _)) => Some(format!(
                "{}; stopped for {secs:.1} s of it",
                self.headline.as_deref().unwrap_or(&self.text)
            )),
            None => self.headline,
        };
        let mut detail = Vec::new();
        if let Some(c) = self.failed
            && unexplained_below(diagnoses, st)
        {
            detail.push(format!("failed call: {c}"));
        }
        detail.extend(stop.map(|(_, who)| format!("stopped: {who}")));
        (text, headline, detail)
    }
}

/// The text of a failed cuInit: the driver call that explains it, else
/// the first diagnosis not got past.
fn cuinit_failed(
    st: &ProcInit,
    r: &str,
    last_stage: Option<&str>,
    diagnoses: &[Diagnosis],
) -> Said {
    let returned = cuinit_returned(st);
    match &st.last_failure {
        Some(f) => {
            let call = format!("{} returned {}", call_named(&f.call, st), f.result);
            let stage = last_stage.unwrap_or("no stage");
            Said {
                text: format!(
                    "{returned} {r}; the driver call that explains it: {call} (after {stage})"
                ),
                headline: Some(format!("{returned} {r} after {stage}")),
                failed: Some(call),
            }
        }
        None => Said::caused(
            format!(
                "{returned} {r} after {}",
                last_stage.unwrap_or("no driver call")
            ),
            diagnoses
                .iter()
                .find(|d| !rules::is_recovered(d, st))
                .map(|d| {
                    // Said once: the evidence that begins with
                    // this very outcome goes on after it.
                    d.evidence[d.about.detail_at.unwrap_or(0)..].to_owned()
                })
                // Nothing past the outcome: no cause to add.
                .filter(|c| !c.is_empty()),
        ),
    }
}

/// No diagnosis below the verdict explains it (an error not got past):
/// the failed call is said on a line of its own.
fn unexplained_below(diagnoses: &[Diagnosis], st: &ProcInit) -> bool {
    !diagnoses
        .iter()
        .any(|d| d.severity == super::table::DiagSeverity::Error && !rules::is_recovered(d, st))
}

/// How the verdict was reached when cuInit's return was not seen.
fn driver_source(st: &ProcInit) -> &'static str {
    if st.cuinit_entered {
        "libcuda uprobe (cuInit entered and never returned) and driver calls"
    } else if st.cuda_calls > 0 {
        "libcuda uprobes (CUDA calls other than cuInit) and driver calls"
    } else {
        "driver calls alone (no libcuda uprobe)"
    }
}

/// Time of the start-up that was not the driver's: how long the process
/// was stopped (SIGSTOP, which no process can catch, until a SIGCONT),
/// and by whom.
fn stopped(st: &ProcInit) -> Option<(f64, String)> {
    let mut total = 0u64;
    let mut who = Vec::new();
    let mut stop: Option<&SignalInfo> = None;
    for s in &st.signals {
        match (s.sig, stop) {
            (libc::SIGSTOP, None) => stop = Some(s),
            (libc::SIGCONT, Some(a)) => {
                total += s.at_ns.saturating_sub(a.at_ns);
                let w = format!("SIGSTOP from {}, SIGCONT from {}", a.sender, s.sender);
                if !who.contains(&w) {
                    who.push(w);
                }
                stop = None;
            }
            _ => {}
        }
    }
    // Stopped to the end: a SIGKILL (the one signal that acts on a
    // stopped process) ended it still stopped.
    if let Some(a) = stop
        && let Some(k) = st
            .signals
            .iter()
            .find(|s| s.sig == libc::SIGKILL && s.at_ns > a.at_ns)
    {
        total += k.at_ns - a.at_ns;
        who.push(format!(
            "SIGSTOP from {}, and no SIGCONT before the SIGKILL",
            a.sender
        ));
    }
    (total > 0).then(|| (total as f64 / 1e9, who.join("; ")))
}

/// "cuInit returned", or, where a preloaded library answered in
/// libcuda's place, who did.
fn cuinit_returned(st: &ProcInit) -> String {
    match st.interposed {
        Some((_, _, false)) => format!(
            "cuInit, answered by {} in libcuda's place, returned",
            super::rules_library::interposer_name(st)
        ),
        _ => "cuInit returned".to_owned(),
    }
}

/// The result and text of a start-up whose cuInit succeeded: it ended at
/// the first context, or at the device or context call that failed
/// before one was made, or without one.
fn after_cuinit(
    st: &ProcInit,
    r: &str,
    last_stage: Option<&str>,
    exit: Option<Exit>,
    signal: Option<&SignalInfo>,
) -> (Outcome, Said) {
    // The stage cuInit had reached when it returned (the first context's
    // calls reach later ones).
    let init = format!(
        "{} {r} after {}",
        cuinit_returned(st),
        st.cuinit_stage
            .as_deref()
            .or(last_stage)
            .unwrap_or("no driver call")
    );
    if st.context.is_none()
        && let Some(e) = exit
        && e.signal() != 0
    {
        let how = e.text();
        // Killed before its first context: the start-up did not end.
        return (
            Outcome::Killed,
            Said::plain(format!(
                "{init}, then {how}{} before a first context was made",
                signal.map_or(String::new(), |s| format!(
                    " (from {}{})",
                    s.sender,
                    during_named(s, st).map_or(String::new(), |c| format!(", during {c}"))
                ))
            )),
        );
    }
    // Its handler for a signal that came in the start-up ran, and it
    // exited with an error before a first context: the signal's doing.
    if st.context.is_none()
        && let Some(Exit::Status(n)) = exit
        && n != 0
        && let Some(s) = st.caught_ender(st.last_ns)
    {
        return (
            Outcome::Exited,
            Said::caused(
                format!("{init}, then exited with status {n} before a first context"),
                Some(format!(
                    "its handler caught {} from {} at {:.1} ms{}",
                    s.name,
                    s.sender,
                    s.at_ms,
                    during_named(s, st).map_or(String::new(), |c| format!(" (during {c})"))
                )),
            ),
        );
    }
    let Some(c) = &st.context else {
        let why = if st.context_waited {
            format!(
                "; no context in the {} s after it",
                CONTEXT_WAIT_NS / 1_000_000_000
            )
        } else if exit.is_some() {
            "; no context made".to_owned()
        } else {
            String::new()
        };
        return (Outcome::Ok, Said::plain(format!("{init}{why}")));
    };
    let dev = c.device.map_or(String::new(), |d| format!(" (device {d})"));
    if c.code == 0 {
        return (
            Outcome::Ok,
            Said::plain(format!(
                "{init}; first context: {}{dev} at {:.1} ms",
                c.call, c.at_ms
            )),
        );
    }
    let head = format!("{init}, then {}{dev} returned {}", c.call, c.result);
    let failed = st
        .after_init_failure
        .as_ref()
        .map(|f| format!("{} returned {}", call_named(&f.call, st), f.result));
    (
        Outcome::Failed,
        Said {
            text: failed.as_ref().map_or_else(
                || head.clone(),
                |f| format!("{head}; the driver call that explains it: {f}"),
            ),
            headline: failed.is_some().then(|| head.clone()),
            failed,
        },
    )
}

/// The process's class, from what it did (see [`CuInit::class`]).
pub(crate) fn class_of(st: &ProcInit) -> Class {
    let program = crate::decode::Program::of(&st.comm, st.info.as_ref().and_then(|i| i.program()));
    // A libcuda mapped, or a loader's search that found none. A libcuda
    // opened but never seen mapped is no load: any program that reads the
    // file opens it so (ldconfig, `nvprobe doctor`, a backup).
    let ldconfig = program == crate::decode::Program::Ldconfig;
    let libcuda = st.info.as_ref().is_some_and(|i| !i.libcuda.is_empty())
        || (!st.lib_opens.is_empty() && st.lib_loaded().is_none() && !ldconfig);
    // A libcuda loaded: mapped, or opened by the loader and followed by
    // driver calls (a copy mapped after nvprobe read the process), or one
    // the loader found and could not load.
    let unloadable = st
        .info
        .as_ref()
        .is_some_and(|i| i.libcuda_opened.iter().any(|f| f.unloadable.is_some()));
    let loaded = st
        .info
        .as_ref()
        .is_some_and(|i| !i.libcuda.is_empty() || !i.cuda_preloads.is_empty())
        || st.fault_at_load().is_some()
        || (!ldconfig
            && (unloadable || (st.lib_loaded().is_some() && (st.calls > 0 || st.opened_any))));
    let client = program == crate::decode::Program::DriverClient;
    let nvml = st.info.as_ref().is_some_and(|i| i.libnvml.is_some()) || client;
    // UVM registration is the step only CUDA takes (nvidia-smi opens UVM and
    // initialises it too, seen on the H200, but registers no GPU).
    let registered = st.reached[7] || st.gpus.iter().any(|g| g.register_result.is_some());
    // A child of a process whose cuInit completed carries on its CUDA work.
    let cuda_parent = matches!(st.parent, Some((_, true)));
    if st.parent.is_some() && program == crate::decode::Program::NvidiaModprobe {
        Class::Helper
    } else if st.cuinit_entered || st.curesult.is_some() || st.cuda_calls > 0 || registered {
        Class::Cuda
    } else if loaded && !client {
        // A process that loaded a libcuda was starting CUDA, whatever else
        // it has mapped (NVML beside it).
        Class::Cuda
    } else if nvml && (st.calls > 0 || st.opened_any || !st.modprobe.is_empty()) {
        Class::Nvml
    } else if st.uvm_touched || st.reached[4] || libcuda || cuda_parent || !st.modprobe.is_empty() {
        // UVM, libcuda, or the setuid helper libcuda runs for missing nodes.
        Class::Cuda
    } else if st.calls > 0 || st.opened_any {
        Class::Nvml
    } else {
        Class::Probe
    }
}

/// The rules' diagnoses of a process judged by how it ended.
fn diagnose_end(st: &ProcInit, exit: Option<Exit>, signal: Option<&SignalInfo>) -> Vec<Diagnosis> {
    rules::diagnose(&super::table::Facts {
        st,
        fatal_sig: exit.map_or(0, Exit::signal),
        exited_ok: exit.is_some_and(|e| e.signal() == 0),
        signal,
        exit,
    })
}

/// The verdict of a driver client (NVML, nvidia-smi): only the node and
/// version problems and how it ended weigh.
fn driver_client(
    st: &ProcInit,
    exit: Option<Exit>,
    signal: Option<&SignalInfo>,
    ended: &str,
) -> (Outcome, String, Vec<Diagnosis>) {
    let fatal = exit.is_some_and(|e| e.signal() != 0);
    let mut d = diagnose_end(st, exit, signal);
    d.retain(|x| {
        matches!(
            x.id,
            DiagId::NodeWrongDevice
                | DiagId::NodePermission
                | DiagId::NodeMissing
                | DiagId::NodeCreateFailed
                | DiagId::NodeError
                | DiagId::VersionMismatch
                | DiagId::KilledBySignal
                | DiagId::InheritedNvidiaFds
                | DiagId::NvidiaModprobeFailed
                | DiagId::IoctlRefused
        )
    });
    let failed = st.last_failure.as_ref();
    let result = if fatal {
        Outcome::Killed
    } else if failed.is_some() && !d.is_empty() {
        Outcome::Failed
    } else {
        Outcome::Ok
    };
    rules::settle_severity(&mut d, st, result == Outcome::Ok);
    let text = if fatal {
        // Who killed it, where: as for a CUDA start-up.
        let last = st.last_stage();
        let (_, t, cause) = driver_only(st, (exit, signal, last.as_deref()), &d, &|c| c.text());
        let t = cause.map_or_else(|| t.clone(), |c| format!("{t}: {c}"));
        format!("{t} (a driver client: no CUDA call)")
    } else {
        format!(
            "a driver client (NVML or similar; no CUDA call): {} driver calls{}; {ended}",
            st.calls,
            failed.map_or(String::new(), |f| format!(
                ", last failed: {} returned {}",
                f.call, f.result
            ))
        )
    };
    (result, text, d)
}

/// The verdict of such a process: how it ended, and what failed while
/// nvprobe followed it.
fn held(
    st: &ProcInit,
    exit: Option<Exit>,
    signal: Option<&SignalInfo>,
    ended: &str,
) -> (Outcome, String, Vec<Diagnosis>) {
    let fatal = exit.is_some_and(|e| e.signal() != 0);
    let mut d = diagnose_end(st, exit, signal);
    d.retain(|x| matches!(x.id, DiagId::KilledBySignal | DiagId::IoctlRefused));
    let result = match exit {
        _ if fatal => Outcome::Killed,
        Some(e) if e != Exit::Status(0) => Outcome::Exited,
        _ => Outcome::Ok,
    };
    rules::settle_severity(&mut d, st, result == Outcome::Ok);
    let how = match signal.filter(|_| fatal) {
        Some(s) => format!("killed by {} from {}", s.name, s.sender),
        None => ended.to_owned(),
    };
    let failed = st.last_failure.as_ref().map_or(String::new(), |f| {
        format!("; last failed: {} returned {}", f.call, f.result)
    });
    let text = format!(
        "{how}; it held an NVIDIA descriptor when nvprobe started, so its start-up was not seen{failed}"
    );
    (result, text, d)
}

/// The verdict of a process that never started CUDA: a driver client, a
/// process that only looked at paths, or a helper. Never a failed CUDA
/// start-up.
fn other_class(
    pid: u32,
    st: &ProcInit,
    class: Class,
    exit: Option<Exit>,
    signal: Option<SignalInfo>,
) -> CuInit {
    let fatal = exit.is_some_and(|e| e.signal() != 0);
    let ended = exit.map_or_else(
        || "still running when tracing stopped".to_owned(),
        Exit::text,
    );
    let (result, text, diagnoses) = match class {
        _ if st.held_unseen() => held(st, exit, signal.as_ref(), &ended),
        Class::Helper => {
            let parent = st.parent.map_or(0, |p| p.0);
            let ok = exit == Some(Exit::Status(0));
            (
                if ok {
                    Outcome::Ok
                } else if fatal {
                    Outcome::Killed
                } else {
                    Outcome::Failed
                },
                format!("run by pid {parent} to load a module or create a node: {ended}"),
                Vec::new(),
            )
        }
        Class::Nvml => driver_client(st, exit, signal.as_ref(), &ended),
        _ if st.lookups == 0 && st.lib_loaded().is_some() => (
            Outcome::Ok,
            format!(
                "opened {} without being seen to map it or call CUDA (a read of the file, not a load); {ended}",
                st.lib_loaded().unwrap_or_default()
            ),
            Vec::new(),
        ),
        _ => (
            Outcome::Ok,
            format!(
                "looked up NVIDIA paths only ({} lookups, no driver call, no libcuda seen){}; {ended}",
                st.lookups,
                st.path_problems
                    .first()
                    .map_or(String::new(), |(p, why)| format!(": {p} {why}"))
            ),
            Vec::new(),
        ),
    };
    CuInit {
        pid,
        comm: st.comm.clone(),
        result,
        source: "driver calls and path lookups",
        text,
        headline: None,
        detail: Vec::new(),
        cuinit_seen: names_cuinit(st, result),
        total_ms: ms(st.last_ns, st.first_ns),
        stages: st.stages.clone(),
        calls: st.calls,
        failed_call: st.last_failure.map(|f| f.shown(st.first_ns)),
        signal,
        exit: exit.map(Exit::text),
        curesult: None,
        context: None,
        diagnoses,
        class,
        process: st.info.clone(),
        gpus: st.gpus.clone(),
        failed_syscalls: Vec::new(),
    }
}

/// Whether the text's first line names cuInit: the process was seen in
/// cuInit, and the outcome is cuInit's (not a start-up that failed, or
/// was killed, after cuInit returned CUDA_SUCCESS: "CUDA start-up").
fn names_cuinit(st: &ProcInit, result: Outcome) -> bool {
    let init_ok = st.curesult.is_some_and(|(c, _)| c == 0);
    (st.cuinit_entered || st.curesult.is_some()) && (result == Outcome::Ok || !init_ok)
}
