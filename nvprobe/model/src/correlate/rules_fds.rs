//! A descriptor of the start-up's taken from under it: another part of
//! the program closed (close, close_range) or replaced (dup2, dup3 from
//! another file) an NVIDIA descriptor libcuda had opened, and libcuda's
//! next call on it failed (EBADF on a closed one; ENOTTY or another error
//! on the file put in its place). The kernel answers such a call without
//! reaching the driver, so no NVIDIA call failed.

use super::{
    facts::CallResult,
    fds::{GoneBy, UsedGone},
    state::{ProcInit, ms},
    table::{DiagId, Diagnosis, diag_after},
};

/// For a cuInit that returned an error (the CHECKS entry); for one that
/// got past a descriptor taken from it and a start-up that then went on
/// well, the same, recovered (a race that other runs lose).
pub(super) fn descriptor_closed(f: &super::table::Facts<'_>, out: &mut Vec<Diagnosis>) {
    let st = f.st;
    let context_failed = st.context.as_ref().is_some_and(|c| c.code != 0);
    if matches!(st.curesult, Some((0, _))) && !context_failed {
        if let Some(mut d) = diagnose_after_recovery(st, None) {
            d.severity = super::table::DiagSeverity::Recovered;
            out.push(d);
        }
        return;
    }
    let Some((code, name)) = st.curesult.filter(|(c, _)| *c != 0) else {
        return;
    };
    // A driver call that failed explains it; what libcuda then did with
    // its descriptors is its clean-up.
    if st.last_failure.is_some() {
        return;
    }
    let outcome = format!("cuInit returned {} ({code})", name.unwrap_or("CUresult"));
    if let Some(d) = diagnose(st, &outcome, false) {
        out.push(d);
    }
}

/// The diagnosis for `outcome` when a call of the start-up failed on a
/// descriptor taken from it: in cuInit (`after_init` false) or in the
/// first context (true).
pub(crate) fn diagnose(st: &ProcInit, outcome: &str, after_init: bool) -> Option<Diagnosis> {
    let u = st
        .fds
        .used
        .as_ref()
        .filter(|u| u.after_init == after_init)?;
    Some(diag_after(
        DiagId::DescriptorClosed,
        outcome,
        ": ",
        &evidence(u, st.first_ns),
    ))
}

/// cuInit got past a descriptor taken from it (libcuda opened the node
/// again): said for the first context that then failed with no call of
/// its own explaining it (what took it took the start-up's other
/// descriptors too: its threads' event descriptors, no NVIDIA files), and
/// for a start-up that went on well.
pub(crate) fn diagnose_after_recovery(st: &ProcInit, outcome: Option<&str>) -> Option<Diagnosis> {
    let u = st.fds.used.as_ref().filter(|u| !u.after_init)?;
    if u.gone.by == GoneBy::Unseen {
        return None;
    }
    let again = if st.fds.reopened(&u.gone.path, u.at_ns) {
        format!(
            "cuInit opened {} again and returned CUDA_SUCCESS",
            u.gone.path
        )
    } else {
        "cuInit returned CUDA_SUCCESS all the same".to_owned()
    };
    let rest = match u.gone.by {
        GoneBy::CloseRange { first, last } => format!(
            ": close_range({first}, {last}) took every descriptor of the process in that range, not only its NVIDIA \
files"
        ),
        _ => String::new(),
    };
    let e = evidence(u, st.first_ns);
    Some(match outcome {
        Some(outcome) => diag_after(
            DiagId::DescriptorClosed,
            outcome,
            ": ",
            &format!("{e}; {again}, and no driver call refused the context{rest}"),
        ),
        None => super::table::diag(
            DiagId::DescriptorClosed,
            format!("{e}; {again}: it got past it this time, in a race with the call that took it"),
        ),
    })
}

fn evidence(u: &UsedGone, first_ns: u64) -> String {
    let g = &u.gone;
    let held = format!(
        "fd {} ({}, opened at {:.2} ms)",
        g.fd,
        g.path,
        ms(g.opened_ns, first_ns)
    );
    let by = |what: String| {
        format!(
            "{what} at {:.2} ms by thread {} ({})",
            ms(g.at_ns, first_ns),
            g.tid,
            g.comm
        )
    };
    let how = match g.by {
        GoneBy::Close => by(format!("was closed (close({}))", g.fd)),
        GoneBy::CloseRange { first, last } => {
            by(format!("was closed (close_range({first}, {last}))"))
        }
        GoneBy::Replaced { call, from } => by(format!(
            "was replaced ({call}({from}, {}), from a file that is not an NVIDIA node)",
            g.fd
        )),
        GoneBy::Unseen => {
            return format!(
                "{held} was no longer open when the start-up's {} used it at {:.2} ms (thread {}): it failed with \
{}, and nvprobe saw no close of it (close and close_range are recorded where the kernel has their tracepoints; a \
recording of an older nvprobe has no close_range, and a record can be lost)",
                u.call,
                ms(u.at_ns, first_ns),
                u.tid,
                CallResult::Errno(u.errno)
            );
        }
    };
    format!(
        "{held} {how}, and the start-up's next call on it, {} at {:.2} ms (thread {}), failed with {}: the kernel \
answered it without reaching the driver",
        u.call,
        ms(u.at_ns, first_ns),
        u.tid,
        CallResult::Errno(u.errno)
    )
}
