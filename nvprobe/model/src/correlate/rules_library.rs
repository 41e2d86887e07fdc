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
/// set, a call of libcuda's own), in a process where something other than
/// the kernel can answer a system call: a preloaded library that is not an
/// interposer of the driver API (a wrapper of libc's in it can fail a call
/// with no system call), or a ptrace tracer (it can skip a call and give
/// it a result of its own, as strace's -e inject does). Where the kernel
/// saw the mark of such a call (libcuda used a descriptor no open
/// returned: an ioctl's EBADF on a negative one after cuInit began; or
/// cuInit made no driver call at all) they replace the generic diagnoses;
/// otherwise each is a warning beside them (a preload such as jemalloc is
/// common, a debugger answers nothing, and a cause the kernel saw but no
/// rule names stays possible).
pub(super) fn answered_in_process(f: &Facts<'_>, out: &mut Vec<Diagnosis>) {
    let st = f.st;
    let Some((code, name)) = st.curesult.filter(|(c, _)| matches!(c, 100 | 999 | 304)) else {
        return;
    };
    let Some(info) = st.info.as_ref().filter(|i| i.cuda_preloads.is_empty()) else {
        return;
    };
    let preload = info
        .env
        .get("LD_PRELOAD")
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map(|v| format!("the process preloads {v}"))
        .or_else(|| {
            (!info.system_preloads.is_empty()).then(|| {
                format!(
                    "the process preloads {} (its /etc/ld.so.preload)",
                    info.system_preloads.join(" ")
                )
            })
        });
    let began = st.cuinit_at.unwrap_or(u64::MAX);
    // Calls a tracer skipped (number -1) after cuInit began: its own mark,
    // and proof of a tracer where none was read (it attached after the
    // process was read, or let go before).
    let skipped: Vec<(u64, u64)> = st
        .failed_syscalls
        .iter()
        .filter(|c| c.at_ns >= began)
        .filter_map(|c| c.skipped)
        .collect();
    let tracer = match &info.tracer {
        Some(t) if t.comm.is_empty() => Some(format!("traced by process {}", t.pid)),
        Some(t) => Some(format!("traced by {}[{}]", t.comm, t.pid)),
        None => (!skipped.is_empty()).then(|| "traced by a tracer nvprobe did not see".to_owned()),
    }
    .map(|who| {
        format!(
            "the process is {who} (ptrace), which can skip a call and answer it itself, as strace's -e inject does"
        )
    });
    if preload.is_none() && tracer.is_none() {
        return;
    }
    let visible_set = info.env.contains_key("CUDA_VISIBLE_DEVICES");
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
    let bad_fd = st
        .failed_syscalls
        .iter()
        .rev()
        .filter(|c| c.at_ns >= began)
        .find_map(|c| c.bad_fd);
    let marked = bad_fd.is_some() || (st.calls == 0 && st.cuinit_entered);
    // (Not how many: at --events verdicts the kernel counts some of them
    // later, at the exit.)
    let seen = if st.calls == 0 {
        "no driver call reached the kernel"
    } else {
        "every driver call it made succeeded"
    };
    let mark = bad_fd.map(|fd| {
        let what = match crate::decode::errno_name(i64::from(fd)) {
            Some(errno) if fd < -1 => format!("-{errno}, the result"),
            _ => "the result".to_owned(),
        };
        format!(
            "; libcuda then made an ioctl on descriptor {fd} (EBADF): {what} of an open that failed without \
reaching the kernel"
        )
    });
    let outcome = format!("cuInit returned {} ({code})", name.unwrap_or("CUresult"));
    let tracer = tracer.map(|t| format!("{t}{}", skipped_calls(&skipped)));
    let found: Vec<Diagnosis> = [
        (DiagId::AnsweredInProcess, preload, marked),
        (
            DiagId::AnsweredByTracer,
            tracer,
            marked || !skipped.is_empty(),
        ),
    ]
    .into_iter()
    .filter_map(|(id, who, marked)| {
        let e = format!(
            "{seen}, with no failed call the kernel saw that explains it; {}{}",
            who?,
            mark.as_deref().unwrap_or("")
        );
        let mut d = diag_after(id, &outcome, " and ", &e);
        if !marked {
            d.severity = DiagSeverity::Warning;
        }
        Some(d)
    })
    .collect();
    if found.iter().any(|d| d.severity == DiagSeverity::Error) {
        out.clear();
    }
    out.extend(found);
}

/// "; the kernel saw N calls skipped …" for the calls a tracer skipped
/// (their first two arguments), naming an NVIDIA ioctl's by its request.
fn skipped_calls(skipped: &[(u64, u64)]) -> String {
    let Some(&(fd, request)) = skipped.last() else {
        return String::new();
    };
    let n = skipped.len();
    let what = if n == 1 {
        "1 call skipped".to_owned()
    } else {
        format!("{n} calls skipped")
    };
    // An escape's request is _IOWR('F', nr, size): a number nothing else
    // passes as a second argument by chance. (UVM's commands are small
    // plain numbers, which other calls' arguments are too: not named.)
    let escape = (request >> 32 == 0
        && request >> 30 != 0
        && (request >> 16) & 0x3fff != 0
        && (request >> 8) & 0xff == u64::from(b'F'))
    .then(|| crate::decode::escape::lookup((request & 0xff) as u32))
    .flatten()
    .map(|e| e.name);
    let last = escape.map_or(String::new(), |name| {
        format!(
            ", {} with the arguments of {name} (descriptor {}, request {request:#x})",
            if n == 1 { "it" } else { "the last" },
            fd as u32 as i32
        )
    });
    format!(
        "; the kernel saw {what} after cuInit began (number -1, which a tracer sets for a call it answers itself){last}"
    )
}
