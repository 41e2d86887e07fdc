//! The diagnosis checks: what finds each diagnosis of the rule table
//! (`table.rs`) in a process's start-up. A diagnosis names its evidence;
//! hints are written once, in the table (and in `crate::hints` where
//! `doctor` shares them).

use super::facts::CallResult;
use super::{
    state::ProcInit,
    table::{
        Check, DiagId, DiagSeverity, Diagnosis, Facts, HMM_HINT, INFERRED, diag, diag_after,
        plural, unseen_stop,
    },
};
use crate::decode::{
    Call,
    status::NV_ERR_BUSY_RETRY,
    uvm::{UVM_INITIALIZE, UVM_REGISTER_GPU, UVM_REGISTER_GPU_VASPACE},
};
use crate::{hmm_issues, hmm_reload, records::HmmFacts};

/// The second fork_after_init: no parent seen, but cuInit answered 3
/// without a single driver call.
const HINT_FORK_NO_CALLS: &str = "libcuda refuses in a process forked after its parent initialised CUDA: start workers with spawn \
(multiprocessing.set_start_method('spawn')) or fork before the parent's first CUDA call";

/// The hint of a node libcuda created itself.
const HINT_NODE_MADE: &str = "libcuda created the missing node itself, with the major number the loaded module \
registered (/proc/devices), which it can as root: nothing to fix for this process. One that is not root cannot: \
create the nodes at boot (nvidia-modprobe -c0 -u, or udev) or pass them into the container";

/// Whether `d` is a problem the process got past: a node that was missing
/// or refused and then opened (or created) successfully.
pub(crate) fn is_recovered(d: &Diagnosis, st: &ProcInit) -> bool {
    d.severity == DiagSeverity::Recovered
        || st
            .fixed_paths
            .iter()
            .any(|p| d.about.path.as_ref() == Some(p))
}

/// The truthfulness pass: no diagnosis contradicts the outcome. On a
/// start-up that succeeded, every problem is one it recovered from (said
/// so, at a lower severity); on one that failed, a node problem the
/// process later got past is marked recovered too, and never explains the
/// failure.
pub(crate) fn settle_severity(ds: &mut [Diagnosis], st: &ProcInit, succeeded: bool) {
    for d in ds.iter_mut() {
        if d.id == DiagId::InheritedNvidiaFds {
            d.severity = if succeeded {
                DiagSeverity::Info
            } else {
                DiagSeverity::Warning
            };
            continue;
        }
        let fixed = st
            .fixed_paths
            .iter()
            .find(|p| d.about.path.as_ref() == Some(*p));
        if !(succeeded || fixed.is_some()) {
            continue;
        }
        d.severity = DiagSeverity::Recovered;
        let made = st
            .mknods
            .iter()
            .find(|(p, _, err)| d.about.path.as_ref() == Some(p) && err.is_none())
            .map(|(_, dev, _)| {
                let dev = dev.map_or_else(String::new, |d| d.to_string());
                format!("; libcuda created it (mknod {dev})")
            });
        if made.is_some() {
            // The module is loaded (libcuda read the node's major from
            // /proc/devices): no hint to load it or to make the node for
            // this process.
            d.hint = HINT_NODE_MADE;
        }
        d.evidence = format!(
            "{}{}{}",
            d.evidence,
            made.unwrap_or_default(),
            if succeeded && st.context.as_ref().is_some_and(|c| c.code != 0) {
                // cuInit got past it; the first context then failed.
                "; cuInit got past it"
            } else if succeeded {
                "; start-up recovered and succeeded"
            } else if fixed.is_some() {
                "; it was opened successfully later, so it is not what failed"
            } else {
                ""
            }
        );
    }
}

/// The checks, in the order their diagnoses are listed.
const CHECKS: &[Check] = &[
    libcuda_not_found,
    super::rules_library::libcuda_unloadable,
    super::rules_library::cuda_interposer,
    stub_library,
    super::rules_nodes::node_problems,
    inherited_fds,
    version_mismatch,
    modprobe_failed,
    fork_after_init,
    super::rules_fds::descriptor_closed,
    calls_blocked,
    ioctl_refused,
    super::rules_visible::visible_repeat,
    super::rules_visible::no_visible_devices,
    known_curesults,
    os_call_failed,
    signal_or_uvm_step,
    super::rules_kill::cuinit_thread_ended,
    super::rules_library::answered_by_tracer,
    super::rules_library::answered_in_process,
];

pub(crate) fn diagnose(f: &Facts<'_>) -> Vec<Diagnosis> {
    let mut v = Vec::new();
    if matches!(f.st.interposed, Some((_, _, false))) || f.st.wrapped_from.is_some() {
        // A preloaded library answered cuInit in libcuda's place: what
        // libcuda's answers would mean (no device, a fork, a stub) says
        // nothing here.
        super::rules_library::cuda_interposer(f, &mut v);
        signal_or_uvm_step(f, &mut v);
        return v;
    }
    for c in CHECKS {
        c(f, &mut v);
    }
    v
}

/// A start-up that took a second or more in a cgroup allowed less than one
/// CPU (`cpu.max`): the quota stretches its CPU work (on the H100 host, a
/// quota of 5 % took the first context from 0.2 s to 5.8 s). Added after
/// the outcome and its cause are chosen, never one of them: info on a
/// start-up that succeeded, a warning on one that did not. Only where the
/// verdict's time is the start-up's own: made at its first context or
/// its failed cuInit, or a start-up a signal ended (not a process that
/// exited or lived on, whose time runs to its end).
pub(crate) fn cpu_quota(
    st: &ProcInit,
    ended_in_startup: bool,
    succeeded: bool,
) -> Option<Diagnosis> {
    let took = st.last_ns.saturating_sub(st.first_ns);
    let (quota, period, cgroup) = st
        .info
        .as_ref()
        .and_then(|i| i.limits.as_ref())
        .and_then(|l| l.cpu_quota.as_ref())
        .map(|q| (q.quota, q.period, q.cgroup.as_str()))?;
    if !ended_in_startup || took < 1_000_000_000 || quota >= period {
        return None;
    }
    let share = quota as f64 / period as f64;
    let mut d = diag(
        DiagId::CpuQuota,
        format!(
            "the start-up took {:.1} s in a cgroup allowed {} of a CPU (cpu.max {quota} {period} of {cgroup}): a \
second of its CPU work takes at least {:.1} s",
            took as f64 / 1e9,
            percent(share),
            1.0 / share
        ),
    );
    d.severity = if succeeded {
        DiagSeverity::Info
    } else {
        DiagSeverity::Warning
    };
    Some(d)
}

/// 0.05 -> "5 %", 0.125 -> "12.5 %".
fn percent(share: f64) -> String {
    let t = format!("{:.1}", share * 100.0);
    format!("{} %", t.strip_suffix(".0").unwrap_or(&t))
}

/// The loader looked for libcuda and found none: no libcuda opened or
/// mapped, no CUDA call, no driver call.
fn libcuda_not_found(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let st = f.st;
    let mapped = st.info.as_ref().is_some_and(|i| !i.libcuda.is_empty());
    if st.lib_opens.is_empty()
        || st.lib_loaded().is_some()
        || mapped
        || st.cuda_calls > 0
        || st.calls > 0
    {
        return;
    }
    let names: Vec<&str> = {
        let mut v: Vec<&str> = Vec::new();
        for n in st
            .lib_opens
            .iter()
            .filter_map(|(p, _)| p.rsplit('/').next())
        {
            if !v.contains(&n) {
                v.push(n);
            }
        }
        v
    };
    let tried: Vec<String> = st
        .lib_opens
        .iter()
        .take(4)
        .map(|(p, e)| format!("{p} ({})", e.map_or_else(|| "?".to_owned(), |e| e.text())))
        .collect();
    let count = st.lib_open_count.max(st.lib_opens.len() as u32);
    let more = count as usize - tried.len().min(count as usize);
    out.push(diag(
        DiagId::LibcudaNotFound,
        format!(
            "the dynamic loader looked for {} {} time{} and found none: {}{}",
            names.join(" / "),
            count,
            if count == 1 { "" } else { "s" },
            tried.join(", "),
            if more > 0 {
                format!(", and {more} more")
            } else {
                String::new()
            }
        ),
    ));
}

/// cuInit returned 34 (CUDA_ERROR_STUB_LIBRARY), or the process mapped the
/// toolkit's stub: name the file.
fn stub_library(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let stub =
        f.st.info
            .as_ref()
            .and_then(|i| i.libcuda.iter().find(|l| l.stub))
            .map(|l| l.path.as_str())
            .or_else(|| f.st.lib_loaded().filter(|p| crate::decode::is_stub_path(p)));
    let returned = matches!(f.st.curesult, Some((34, _)));
    if !returned && stub.is_none() {
        return;
    }
    let what = match (returned, stub) {
        (true, Some(l)) => format!("the process loaded {l}, the CUDA toolkit's stub"),
        (true, None) => "a stub libcuda was loaded".to_owned(),
        (false, Some(l)) => {
            let what = format!("the process loaded {l}, the CUDA toolkit's stub libcuda");
            return out.push(diag(DiagId::StubLibrary, what));
        }
        (false, None) => return,
    };
    out.push(diag_after(
        DiagId::StubLibrary,
        "cuInit returned CUDA_ERROR_STUB_LIBRARY (34)",
        ": ",
        &what,
    ));
}

/// cuInit failed and no call on an NVIDIA file did: a call of the
/// start-up's own did. The one the kernel side saw fail (a thread, a
/// mapping, a descriptor) and what refused it; without one, for
/// CUDA_ERROR_OPERATING_SYSTEM (304) or CUDA_ERROR_OUT_OF_MEMORY (2),
/// what the process ran under.
fn os_call_failed(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let st = f.st;
    let Some((code, name)) = st.curesult else {
        // cuInit's return not seen: the failed call alone, where one
        // explains the stop by itself.
        if let Some(stop) = unseen_stop(f)
            && st.last_failure.is_none()
            && st.path_problems.is_empty()
            && out.is_empty()
            && let Some(mut d) = super::rules_startcalls::diagnose(st, false, &stop)
        {
            d.evidence.push_str(INFERRED);
            out.push(d);
        }
        return;
    };
    if code == 0
        || st.last_failure.is_some()
        || !st.path_problems.is_empty()
        || out
            .iter()
            .any(|d| matches!(d.id, DiagId::CallsBlocked | DiagId::DescriptorClosed))
    {
        return;
    }
    let outcome = format!("cuInit returned {} ({code})", name.unwrap_or("CUresult"));
    if let Some(d) = super::rules_startcalls::diagnose(st, false, &outcome) {
        // Another cause already named wins (a missing device, a stub).
        if out.is_empty() {
            out.push(d);
        }
        return;
    }
    // (Only where nothing else explains it.)
    if out.is_empty()
        && let Some(d) = super::rules_startcalls::proc_unavailable(st, &outcome)
    {
        out.push(d);
        return;
    }
    if !matches!(code, 304 | 2) {
        return;
    }
    let mut d = diag_after(
        DiagId::OsCallFailed,
        &outcome,
        " and ",
        "no call on an NVIDIA file failed",
    );
    if let Some(i) = st.info.as_ref()
        && let Some(l) = i.limits.as_ref()
    {
        let mut facts = Vec::new();
        if let Some((soft, hard)) = l.nofile {
            let n = |v: Option<u64>| v.map_or_else(|| "unlimited".to_owned(), |x| x.to_string());
            facts.push(format!("open-file limit {} (hard {})", n(soft), n(hard)));
        }
        if let Some(fds) = l.fds {
            facts.push(format!("{fds} descriptors open"));
        }
        if let Some(n) = l.seccomp_filters {
            facts.push(format!("{n} seccomp filter{}", plural(n)));
        }
        facts.extend(super::rules_refused::limit_facts(l));
        if !facts.is_empty() {
            d.evidence.push_str(&format!(
                "; when nvprobe read the process ({}): {}",
                i.read_when(),
                facts.join(", ")
            ));
        }
    }
    if let Some(failed) = st.failed_text() {
        d.evidence.push_str(&format!("; {failed}"));
    }
    // The open-file limit is no suspect where it was far from reached.
    if let Some(l) = st.info.as_ref().and_then(|i| i.limits.as_ref())
        && let (Some((Some(soft), _)), Some(fds)) = (l.nofile, l.fds)
        && fds.saturating_mul(2) < soft
    {
        d.hint = HINT_OS_CALL_NOT_FILES;
    }
    out.push(d);
}

/// [`DiagId::OsCallFailed`]'s hint where the open-file limit was far from
/// reached when nvprobe read the process.
const HINT_OS_CALL_NOT_FILES: &str = "a system call of libcuda's own failed: where the kernel side saw the \
start-up's failed system calls (the raw sys_exit tracepoint), the evidence lists them, newest first; where it names \
none, no system call of the start-up failed as far as nvprobe saw (find it with strace -f). The open-file limit was far \
from reached; the other common causes are a seccomp profile that refuses open, mmap or ioctl (a filter the process \
installed after nvprobe read it is not in the evidence), and memory or thread limits (ulimit -v, the cgroup's \
pids.max)";

/// cuInit results whose cause is outside the driver calls.
fn known_curesults(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let Some((code, name)) = f.st.curesult else {
        return;
    };
    // A descriptor taken from the start-up explains what libcuda made of
    // the answers it then got.
    if out.iter().any(|d| d.id == DiagId::DescriptorClosed) {
        return;
    }
    let id = match code {
        // No escape reached the driver: its version was never asked, so
        // the refused calls explain the 803, not two drivers.
        803 if out.iter().any(|d| d.id == DiagId::CallsBlocked) => return,
        803 => DiagId::SystemDriverMismatch,
        802 => DiagId::SystemNotReady,
        46 => DiagId::DevicesUnavailable,
        _ => return,
    };
    let outcome = format!("cuInit returned {} ({code})", name.unwrap_or("CUresult"));
    let mut rest = String::new();
    if code == 803
        && let Some(l) = f.st.info.as_ref().and_then(|i| i.libcuda.first())
    {
        rest = format!(
            "libcuda in use: {}{}",
            l.path,
            l.version
                .as_ref()
                .map_or(String::new(), |v| format!(" ({v})"))
        );
    }
    let sep = if rest.is_empty() { "" } else { "; " };
    out.push(diag_after(id, &outcome, sep, &rest));
}

fn inherited_fds(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    if let Some((call, fd)) = &f.st.inherited {
        out.push(diag(DiagId::InheritedNvidiaFds,
            format!("the first NVIDIA call, {call}, used fd {fd}, which this process was not seen opening"),
        ));
    }
}

fn version_mismatch(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let module = f.st.host_driver.as_deref();
    // The libcuda files mapped, then those the loader was seen opening (a
    // copy mapped after nvprobe read the process): (path, version).
    let libs: Vec<(&str, Option<&str>)> = f.st.info.as_ref().map_or_else(Vec::new, |i| {
        i.libcuda
            .iter()
            .filter(|l| !l.stub)
            .map(|l| (l.path.as_str(), l.version.as_deref()))
            .chain(
                i.libcuda_opened
                    .iter()
                    .filter(|l| !l.stub && l.unloadable.is_none())
                    .map(|l| (l.path.as_str(), l.version.as_deref())),
            )
            .collect()
    });
    let other = libs
        .iter()
        .find(|(_, v)| v.zip(module).is_some_and(|(a, b)| a != b));
    let both = |(path, version): &(&str, Option<&str>)| {
        format!(
            "libcuda {path} is {}, the kernel module is {}",
            version.unwrap_or("?"),
            module.unwrap_or("?")
        )
    };
    if let Some((call, result)) = &f.st.version_check {
        let extra = other.map_or(String::new(), |l| format!("; {}", both(l)));
        out.push(diag(
            DiagId::VersionMismatch,
            format!("{call} returned {result}{extra}"),
        ));
    } else if let Some(l) = other {
        // The driver's own answer to the handshake: a library of another
        // version that was told the driver's build stops there (a failed
        // start-up); without it, the versions alone are a warning.
        match f.st.told_version.as_deref() {
            Some(told) if l.1.is_some_and(|v| v != told) => {
                let ended = if f.st.curesult.is_none() && f.exit.is_some() && !f.st.uvm_touched {
                    "; it made no UVM call and no cuInit return was seen"
                } else {
                    ""
                };
                out.push(diag(
                    DiagId::VersionMismatch,
                    format!(
                        "{}; the driver answered its version handshake with build {told} \
(NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION){ended}",
                        both(l)
                    ),
                ));
            }
            _ => out.push(Diagnosis {
                severity: DiagSeverity::Warning,
                ..diag(DiagId::VersionMismatch, both(l))
            }),
        }
    }
}

fn modprobe_failed(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    for (m, ok) in &f.st.modprobe {
        if !ok {
            out.push(diag(DiagId::NvidiaModprobeFailed, m.clone()));
        }
    }
}

fn fork_after_init(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let st = f.st;
    let not_initialized = matches!(st.curesult, Some((3, _)));
    if let Some((ppid, true)) = st.parent
        && (st.inherited.is_some() || not_initialized || st.not_initialized.is_some())
    {
        let refused = st.not_initialized.map_or(String::new(), |f| {
            format!(
                "; its {} returned CUDA_ERROR_NOT_INITIALIZED (3)",
                crate::decode::cudafn::name(f)
            )
        });
        out.push(diag(
            DiagId::ForkAfterInit,
            format!("forked from pid {ppid} after its cuInit had completed{refused}"),
        ));
    } else if not_initialized && st.calls == 0 {
        // Seen on the real driver: in a child forked after its parent's
        // cuInit, libcuda answers NOT_INITIALIZED without one driver call.
        out.push(Diagnosis {
            hint: HINT_FORK_NO_CALLS,
            ..diag_after(
                DiagId::ForkAfterInit,
                "cuInit returned CUDA_ERROR_NOT_INITIALIZED (3)",
                "",
                " without a single driver call",
            )
        });
    }
}

/// A failed cuInit whose escapes never reached the kernel ([`ioctls_unseen`]).
fn calls_blocked(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let failed = matches!(f.st.curesult, Some((code, _)) if code != 0);
    let unseen = unseen_stop(f).is_some();
    // Escapes on a descriptor taken from the start-up fail at the system
    // call's exit too (EBADF, ENOTTY), untraced: no filter's doing.
    let taken = out.iter().any(|d| d.id == DiagId::DescriptorClosed);
    if (failed || unseen)
        && !taken
        && let Some(mut d) = super::rules_refused::ioctls_unseen(f.st)
            .or_else(|| super::rules_refused::command_blocked(f.st))
    {
        // A filter's trap action the process handled: the call returned
        // what the handler left in its registers.
        let trapped =
            f.st.signals
                .iter()
                .filter(|s| s.sig == libc::SIGSYS && s.source == super::state::SigSource::Seccomp)
                .count();
        if trapped > 0 && f.fatal_sig != libc::SIGSYS {
            d.evidence.push_str(&format!(
                "; the filter's trap action sent SIGSYS {trapped} time{} and the process's handler took it, so \
the refused call returned what the handler left (on x86 the call's own number), which libcuda read as the driver's \
answer",
                plural(trapped as u32)
            ));
        }
        if unseen {
            d.evidence.push_str(INFERRED);
        }
        out.push(d);
    }
}

/// A failed escape refused by a security module's ioctl rule
/// ([`super::rules_refused::ioctl_refused`]).
fn ioctl_refused(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    if let Some(d) = super::rules_refused::ioctl_refused(f.st) {
        out.push(d);
    }
}

fn signal_or_uvm_step(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    if super::rules_kill::killed(f, out)
        || super::rules_kill::ended_itself(f, out)
        || super::rules_kill::caught_then_exited(f, out)
    {
        return;
    }
    let Some(fc) = &f.st.last_failure else { return };
    // A security module refused the call: UVM never ran it, so what UVM
    // would have answered (HMM) says nothing.
    if out.iter().any(|d| d.id == DiagId::IoctlRefused) {
        return;
    }
    let uvm_step = [UVM_INITIALIZE, UVM_REGISTER_GPU, UVM_REGISTER_GPU_VASPACE]
        .iter()
        .any(|&c| fc.call.is(Call::Uvm(c)));
    match (f.signal, uvm_step) {
        (Some(sig), _) if sig.during_call.is_some_and(|c| c.same(&fc.call)) => out.push(diag(
            DiagId::InterruptedBySignal,
            format!(
                "{} returned {} while {} from {} arrived",
                fc.call, fc.result, sig.name, sig.sender
            ),
        )),
        (_, true) if fc.result == CallResult::Status(NV_ERR_BUSY_RETRY) => out.push(diag(
            DiagId::UvmBusyRetry,
            format!("{} returned {}", fc.call, fc.result),
        )),
        (_, true) => {
            let mut d = diag(
                DiagId::UvmStepFailed,
                match &f.st.last_breakdown {
                    Some(b) => format!("{} returned {}; in the driver: {b}", fc.call, fc.result),
                    None => format!("{} returned {}", fc.call, fc.result),
                },
            );
            // What UVM had said about the va_space the failed call was made
            // on. True means HMM (x86) or ATS is on system-wide; false
            // clears nothing: a va_space made with DISABLE_HMM answers
            // false, while a GPU's HMM device memory is set up whenever
            // HMM is on system-wide.
            match f.st.pageable_at_failure {
                Some(true) => {
                    d.evidence.push_str(PAGEABLE_ON);
                    d.hint = HMM_IN_EFFECT;
                }
                Some(false) => d.evidence.push_str(PAGEABLE_OFF),
                None => {}
            }
            d.about.pageable = f.st.pageable_at_failure;
            out.push(d);
        }
        _ => {}
    }
}

/// Evidence from the process's own UVM_PAGEABLE_MEM_ACCESS.
const PAGEABLE_ON: &str =
    "; UVM told this process that pageable memory access is on (UVM_PAGEABLE_MEM_ACCESS: true)";
const PAGEABLE_OFF: &str =
    "; UVM told this process that pageable memory access is off (UVM_PAGEABLE_MEM_ACCESS: false)";

const HMM_IN_EFFECT: &str = concat!(
    "UVM said pageable memory access was on for this process: on x86 that is HMM, a known cause (",
    hmm_issues!(),
    "): reload nvidia_uvm with `",
    hmm_reload!(),
    "`; on Grace or POWER it is ATS, not HMM"
);

/// Make the UVM diagnoses of a live verdict (its `diagnoses`) specific to this host: whether
/// nvidia_uvm has HMM at all, and whether it is already disabled. (Not for
/// replays: a recording's host is not this one.)
pub fn apply_hmm_facts(diagnoses: &mut [Diagnosis], f: &HmmFacts) {
    for d in diagnoses.iter_mut() {
        if !matches!(d.id, DiagId::UvmStepFailed | DiagId::UvmBusyRetry) {
            continue;
        }
        // What the host says decides: a true answer from UVM on a host
        // whose HMM is off or compiled out was ATS. Without host facts, a
        // true answer keeps its hint.
        let said_on = d.about.pageable == Some(true);
        d.evidence = format!("{}; host: {}", d.evidence, f.describe());
        if d.id != DiagId::UvmStepFailed {
            continue;
        }
        d.hint = match (f.compiled_in, f.disabled) {
            (_, Some(true)) => {
                "HMM is already disabled (uvm_disable_hmm=Y), so it is not the cause: read the kernel log \
(dmesg | grep -i nvidia) for the UVM error and check the GPU's state (nvidia-smi -q)"
            }
            (Some(false), _) => {
                "this nvidia_uvm was built without HMM (the kernel lacks CONFIG_HMM_MIRROR or CONFIG_DEVICE_PRIVATE, \
or is older than 6.1), so HMM is not the cause: read the kernel log (dmesg | grep -i nvidia) for the UVM error"
            }
            (Some(true), Some(false)) => HMM_WHEN_ON,
            _ if said_on => HMM_IN_EFFECT,
            _ => HMM_HINT,
        };
    }
}

const HMM_WHEN_ON: &str = concat!(
    "this kernel's nvidia_uvm has HMM and it is enabled (uvm_disable_hmm=N): UVM's HMM support is a \
known cause (",
    hmm_issues!(),
    "): reload it with `",
    hmm_reload!(),
    "`"
);
