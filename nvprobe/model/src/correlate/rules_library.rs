//! The diagnoses of library loading: a libcuda the loader found and could
//! not load (its ELF header says why), and a preloaded library that
//! answers the CUDA driver API in libcuda's place.

use super::{
    facts::Exit,
    table::{DiagId, DiagSeverity, Diagnosis, Facts, diag, diag_after},
};

/// Each libcuda file the loader opened that it cannot load. An error
/// unless another libcuda was then loaded (the loader goes on past a file
/// of another class or machine), when the start-up got past it.
pub(crate) fn libcuda_unloadable(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    if let Some((path, sig)) = f.st.fault_at_load() {
        // Seen on the H200: the first 4 KiB of the real libcuda as
        // libcuda.so.1 first on the path; the loader maps segments the
        // file does not have, and the first touch past its end is SIGBUS.
        let checked = f.st.info.as_ref().and_then(|i| {
            i.libcuda_opened
                .iter()
                .find(|l| l.path == path)
                .and_then(|l| l.unloadable.clone())
        });
        out.push(diag(
            DiagId::LibcudaUnloadable,
            format!(
                "the process was killed by {} right after the dynamic loader opened {path}, before any CUDA or \
driver call: {}",
                if sig == 7 { "SIGBUS" } else { "SIGSEGV" },
                checked.unwrap_or_else(|| if sig == 7 {
                    "the loader maps a library's segments from its file, and touching one past the file's end \
(a copy cut short) is SIGBUS".to_owned()
                } else {
                    "a library whose code or relocations are corrupt faults while it loads".to_owned()
                })
            ),
        ));
        return;
    }
    let Some(info) = f.st.info.as_ref() else {
        return;
    };
    // The loader went on past it (it skips a file of another class or
    // machine): another libcuda was mapped, or CUDA calls were answered.
    let got_past = info.libcuda.iter().any(|l| !l.stub)
        || f.st.curesult.is_some()
        || f.st.cuda_calls > 0
        || f.st.calls > 0;
    for l in &info.libcuda_opened {
        let Some(why) = &l.unloadable else { continue };
        let mut d = diag(
            DiagId::LibcudaUnloadable,
            format!(
                "the dynamic loader opened {} and could not load it: {why}",
                l.path
            ),
        );
        if got_past {
            d.severity = DiagSeverity::Recovered;
            d.evidence.push_str("; another libcuda was loaded after it");
        }
        out.push(d);
    }
}

/// The preloaded library, as the process named it (its `LD_PRELOAD`).
pub(crate) fn interposer_name(st: &super::state::ProcInit) -> String {
    st.info
        .as_ref()
        .and_then(|i| i.env.get("LD_PRELOAD"))
        .map_or_else(
            || "a preloaded library".to_owned(),
            |v| format!("the preloaded {v}"),
        )
}

/// A preloaded library that exports the driver API: it answered cuInit
/// in libcuda's place (its uprobe saw its cuInit return without libcuda's
/// being called), wrapped it and changed the answer, or (not hooked in
/// time) libcuda was loaded under LD_PRELOAD and its own cuInit was never
/// seen.
pub(crate) fn cuda_interposer(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let st = f.st;
    let name = interposer_name(st);
    let cuname = |code: i64, n: Option<&str>| format!("{} ({code})", n.unwrap_or("CUresult"));
    match st.interposed {
        Some((code, n, false)) => {
            let mut d = diag(
                DiagId::CudaInterposer,
                format!(
                    "cuInit was answered by {name} in libcuda's place: it returned {} and libcuda's own cuInit was not called",
                    cuname(code, n)
                ),
            );
            if code == 0 {
                d.severity = DiagSeverity::Info;
            }
            out.push(d);
        }
        Some((code, n, true)) => {
            // libcuda's own answer (kept aside when the program got the
            // wrapper's).
            let real = st.wrapped_from.or(st.curesult);
            if let Some((rc, rn)) = real.filter(|(c, _)| *c != code) {
                let mut d = diag(
                    DiagId::CudaInterposer,
                    format!(
                        "{name} wraps cuInit: libcuda's returned {}, and the wrapper gave the program {}",
                        cuname(rc, rn),
                        cuname(code, n)
                    ),
                );
                // It turned a success into the failure the program saw: it
                // explains the outcome.
                if !(rc == 0 && code != 0) {
                    d.severity = DiagSeverity::Warning;
                }
                out.push(d);
            }
        }
        None if st
            .info
            .as_ref()
            .is_some_and(|i| !i.cuda_preloads.is_empty())
            && !st.cuinit_entered
            && st.calls == 0
            && f.exit.is_some() =>
        {
            // Not hooked in time (a process over in a millisecond), but
            // the preload was read while the process lived: it exports
            // cuInit, so the program's cuInit is its.
            let libs = st
                .info
                .as_ref()
                .map(|i| i.cuda_preloads.join(", "))
                .unwrap_or_default();
            let mut d = diag(
                DiagId::CudaInterposer,
                format!(
                    "{libs}, which the process preloads, exports cuInit, so the program's calls reach it before \
libcuda: libcuda's own cuInit was not seen, nor any driver call, and the process {}",
                    f.exit.map_or_else(|| "ended".to_owned(), Exit::text)
                ),
            );
            if f.exited_ok {
                d.severity = DiagSeverity::Warning;
            }
            out.push(d);
        }
        None => {
            let preload = st.info.as_ref().and_then(|i| i.env.get("LD_PRELOAD"));
            let loaded = st.info.as_ref().is_some_and(|i| !i.libcuda.is_empty())
                || st.lib_loaded().is_some();
            if let Some(v) = preload
                && loaded
                && !st.cuinit_entered
                && st.calls == 0
                && f.exit.is_some()
            {
                let mut d = diag(
                    DiagId::CudaInterposer,
                    format!(
                        "the process loaded libcuda under LD_PRELOAD={v} and exited without libcuda's own cuInit \
or any driver call: a preloaded library that exports the driver API answers calls before libcuda does"
                    ),
                );
                d.severity = DiagSeverity::Warning;
                out.push(d);
            }
        }
    }
}

/// cuInit failed (100, 999 or 304) with nothing the kernel saw to explain
/// it (no diagnosis but the generic ones: a visibility list that is not
/// set, a call of libcuda's own), in a process that preloads a library
/// that is not an interposer of the driver API (`LD_PRELOAD`, or its
/// /etc/ld.so.preload): a wrapper of libc's in it can fail a call with no
/// system call. Where the kernel saw the mark of such a call (libcuda
/// used a descriptor no open returned: an ioctl's EBADF on a negative one
/// after cuInit began; or cuInit made no driver call at all) it replaces
/// the generic diagnoses; otherwise it is a warning beside them (a preload
/// such as jemalloc is common, and a cause the kernel saw but no rule
/// names stays possible).
pub(super) fn answered_in_process(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let st = f.st;
    let Some((code, name)) = st.curesult.filter(|(c, _)| matches!(c, 100 | 999 | 304)) else {
        return;
    };
    let Some(info) = st.info.as_ref().filter(|i| i.cuda_preloads.is_empty()) else {
        return;
    };
    let Some(preload) = info
        .env
        .get("LD_PRELOAD")
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .or_else(|| {
            (!info.system_preloads.is_empty()).then(|| {
                format!(
                    "{} (its /etc/ld.so.preload)",
                    info.system_preloads.join(" ")
                )
            })
        })
    else {
        return;
    };
    // (Unknown past the part of the environment nvprobe read.)
    let visible_set = info.env.contains_key("CUDA_VISIBLE_DEVICES") || info.env_cut;
    let generic = |d: &Diagnosis| match d.id {
        DiagId::NoVisibleDevices => !visible_set,
        DiagId::OsCallFailed => true,
        _ => false,
    };
    if st.interposed.is_some() || st.last_failure.is_some() || !out.iter().all(generic) {
        return;
    }
    // A descriptor libcuda used that no open returned: what an open that
    // failed without a system call gave it.
    let began = st.cuinit_at.unwrap_or(u64::MAX);
    let bad_fd = st
        .failed_syscalls
        .iter()
        .rev()
        .filter(|c| c.at_ns >= began)
        .find_map(|c| c.bad_fd);
    let marked = bad_fd.is_some() || (st.calls == 0 && st.cuinit_entered);
    let mut e = format!(
        "{}, with no failed call the kernel saw that explains it; the process preloads {preload}",
        seen_calls(st)
    );
    if let Some(fd) = bad_fd {
        let what = match crate::decode::errno_name(i64::from(fd)) {
            Some(errno) if fd < -1 => format!("-{errno}, the result"),
            _ => "the result".to_owned(),
        };
        e.push_str(&format!(
            "; libcuda then made an ioctl on descriptor {fd} (EBADF): {what} of an open that failed without \
reaching the kernel"
        ));
    }
    let outcome = format!("cuInit returned {} ({code})", name.unwrap_or("CUresult"));
    let mut d = diag_after(DiagId::AnsweredInProcess, &outcome, " and ", &e);
    if marked {
        out.clear();
    } else {
        d.severity = DiagSeverity::Warning;
    }
    out.push(d);
}

/// What the kernel saw of the start-up's driver calls. (Not how many: at
/// --events verdicts the kernel counts some of them later, at the exit.)
fn seen_calls(st: &super::state::ProcInit) -> &'static str {
    if st.calls == 0 {
        "no driver call reached the kernel"
    } else {
        "every driver call it made succeeded"
    }
}

/// cuInit failed, and the kernel saw calls of the start-up skipped: their
/// number was -1 at the system call's exit, which is what a ptrace tracer
/// sets to skip a call it answers itself (strace -e inject, a sandbox's
/// supervisor). With nothing else the kernel saw to explain the failure
/// (only the generic diagnoses, a visibility list that selects a GPU, no
/// driver call that failed) the tracer's answer is the diagnosis;
/// otherwise a warning beside what was found. A tracer that skipped
/// nothing answered nothing (a debugger, a plain strace): not named,
/// unless the kernel side stopped sending failed calls (capped), when it
/// may have.
pub(super) fn answered_by_tracer(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let st = f.st;
    let Some((code, name)) = st.curesult.filter(|(c, _)| *c != 0) else {
        return;
    };
    let info = st.info.as_ref();
    let known = info.and_then(|i| i.tracer.as_ref());
    let skipped = st.skipped;
    if skipped.is_none() && !(st.failed_capped && known.is_some()) {
        return;
    }
    let who = match known {
        Some(t) if t.comm.is_empty() => format!("process {}", t.pid),
        Some(t) => format!("{}[{}]", t.comm, t.pid),
        None => "a ptrace tracer nvprobe did not see (it attached after nvprobe read the process)"
            .to_owned(),
    };
    let outcome = format!("cuInit returned {} ({code})", name.unwrap_or("CUresult"));
    let Some(s) = skipped else {
        let mut d = diag_after(
            DiagId::AnsweredByTracer,
            &outcome,
            "; ",
            &format!(
                "the process is traced by {who} (ptrace), which can skip a call and answer it itself, as strace's \
-e inject does; the kernel stopped sending the start-up's failed calls at {}, so whether it did is not known",
                nvprobe_common::call_failed::SENT_MAX
            ),
        );
        d.severity = DiagSeverity::Warning;
        out.push(d);
        return;
    };
    let (fd, request) = s.last;
    let what = if s.count == 1 {
        "1 call".to_owned()
    } else {
        format!("{} calls", s.count)
    };
    let last = super::state::Skipped::escape(request).map_or(String::new(), |escape| {
        format!(
            ", {} with the arguments of {escape} (descriptor {}, request {request:#x})",
            if s.count == 1 { "it" } else { "the last" },
            fd as u32 as i32
        )
    });
    let e = format!(
        "the kernel saw {what} of its start-up skipped (number -1 at the call's exit, which a ptrace tracer sets \
for a call it answers itself){last}; {}: the process is traced by {who}, which answered {} itself, as strace's \
-e inject does",
        seen_calls(st),
        if s.count == 1 { "it" } else { "them" }
    );
    let mut d = diag_after(DiagId::AnsweredByTracer, &outcome, " and ", &e);
    // What else was found: the generic diagnoses, and a visibility list
    // that selects a GPU (its "no device" is the tracer's doing).
    let lists_a_gpu = info
        .and_then(|i| i.env.get("CUDA_VISIBLE_DEVICES"))
        .is_none_or(|v| crate::attribution::resolve_visible(v, &st.host_gpus).is_ok());
    let generic = |d: &Diagnosis| match d.id {
        DiagId::NoVisibleDevices => lists_a_gpu,
        DiagId::OsCallFailed | DiagId::FailedSyscalls => true,
        _ => false,
    };
    if st.interposed.is_none() && st.last_failure.is_none() && out.iter().all(generic) {
        out.clear();
    } else {
        d.severity = DiagSeverity::Warning;
    }
    out.push(d);
}
