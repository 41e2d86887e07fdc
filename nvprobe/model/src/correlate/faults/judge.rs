//! What a fault comes to: the Xid that explains most, the class, whether
//! to drain, the hint, and the verdict's line.

use super::types::{FaultCall, FaultClass, FaultXid, Pending};
use crate::{
    decode::curesult,
    kmsg::{self, xid::XidAction},
};

/// The Xid that explains most: what needs the node drained, then the
/// driver's faults, then the specific ones (an MMU fault, an exception)
/// over a channel's reset (43, which follows them).
pub(super) fn best(xids: &[FaultXid]) -> Option<&FaultXid> {
    let rank = |x: &FaultXid| {
        let action = x.meaning.as_ref().map(|m| m.action);
        let a = match action {
            Some(XidAction::DrainNode) => 6,
            Some(XidAction::ResetGpu) => 5,
            Some(XidAction::DriverFault) => 4,
            Some(XidAction::FixProgram) => 3,
            Some(XidAction::RestartApp) => 2,
            Some(XidAction::Informational) => 1,
            None => 0,
        };
        (a, x.mmu_fault.is_some(), x.number != 43)
    };
    // The first of the best rank.
    xids.iter().rev().max_by_key(|x| rank(x))
}

/// The class, whether to drain, and the hint, from what was seen.
pub(super) fn judge(
    first: Option<&FaultCall>,
    unfinished: Option<&FaultCall>,
    xids: &[FaultXid],
    ended: &str,
) -> (FaultClass, bool, String) {
    let x = best(xids);
    let action = x.and_then(|x| x.meaning.as_ref().map(|m| m.action));
    let todo = x.and_then(|x| x.meaning.as_ref().map(|m| m.what_to_do));
    let result = first.and_then(|f| f.result);
    if action == Some(XidAction::DrainNode) || result.is_some_and(curesult::hardware) {
        let why = todo.unwrap_or(
            "the GPU reported an uncorrectable hardware error: drain the node, then have the GPU checked (nvidia-smi -q -d ECC,ROW_REMAPPER) before it takes work again",
        );
        return (FaultClass::Hardware, true, why.to_owned());
    }
    if matches!(action, Some(XidAction::DriverFault | XidAction::ResetGpu)) {
        let why = todo.unwrap_or(
            "a driver or firmware fault: collect nvidia-bug-report.sh, then reset the GPU",
        );
        return (FaultClass::Driver, false, why.to_owned());
    }
    if let Some(r) = result
        && curesult::program_fault(r)
    {
        let what = match (r, x.and_then(|x| x.mmu_fault.as_ref())) {
            (_, Some(f)) => format!(
                "the program's GPU code {} address {:#x}, which is not mapped ({}): an out-of-bounds index, a null or freed pointer, or a host pointer passed to a kernel",
                match f.access {
                    kmsg::Access::Write => "wrote to",
                    kmsg::Access::Read => "read from",
                    kmsg::Access::Other => "accessed",
                },
                f.address,
                f.fault_type
            ),
            (716, _) => "the program's GPU code made a misaligned memory access".to_owned(),
            (715, _) => "the program's GPU code ran an illegal instruction".to_owned(),
            (710, _) => "a device-side assertion in the program's GPU code failed".to_owned(),
            (714, _) => "the program's GPU code overflowed its call stack".to_owned(),
            (719, _) => "the program's kernel failed while it ran (a trap, an assertion, or an exception the driver does not name)".to_owned(),
            _ => format!(
                "the program's GPU code faulted ({})",
                curesult::name(r).unwrap_or("a launch failure")
            ),
        };
        return (
            FaultClass::Program,
            false,
            format!(
                "{what}; the GPU recovered and the node is fine: fix the kernel (run it under compute-sanitizer, or with CUDA_LAUNCH_BLOCKING=1 to find the launch), then restart the program"
            ),
        );
    }
    if let Some(r) = result
        && !curesult::fatal(r)
        && x.is_none()
        && let Some(why) = curesult::launch_refusal(r)
    {
        // Only a refused launch is a fault without being fatal; an Xid the
        // driver tied to the process is another story (judged below).
        return (
            FaultClass::Program,
            false,
            format!(
                "the driver refused the launch at once, so the kernel never ran: {why}; the GPU and the context are \
fine, and a program that checks the error may go on (trying another configuration); if it failed, fix the launch"
            ),
        );
    }
    if let Some(u) = unfinished
        && result.is_none()
    {
        return (
            FaultClass::Unfinished,
            false,
            format!(
                "{} had waited {:.1} s for the GPU when the process was {ended}, and the driver reported no error: the GPU was still running its work (a kernel that never ends, such as a spin on memory nothing writes, or one slower than the process's timeout); the node is fine",
                u.func,
                u.duration_ns as f64 / 1e9
            ),
        );
    }
    if let Some(t) = todo {
        let class = match action {
            Some(XidAction::FixProgram) => FaultClass::Program,
            _ => FaultClass::Unknown,
        };
        return (class, false, t.to_owned());
    }
    (
        FaultClass::Unknown,
        false,
        "the error names no cause and the driver logged no Xid: see the program's own error output; run it again under compute-sanitizer".to_owned(),
    )
}

pub(super) fn text_of(p: &Pending, xid: Option<&FaultXid>, ended: &str, meaning: bool) -> String {
    let mut t = match (&p.first, &p.unfinished) {
        (Some(f), _) => format!(
            "{} returned {} {}",
            f.func,
            f.result.unwrap_or(0),
            f.result_name.unwrap_or("")
        )
        .trim_end()
        .to_owned(),
        (None, Some(u)) => format!(
            "{} still waiting after {:.1} s",
            u.func,
            u.duration_ns as f64 / 1e9
        ),
        (None, None) => "no failing CUDA call was seen (the call that failed is not hooked, or the process did not check)".to_owned(),
    };
    if p.later > 0 {
        t.push_str(&format!(
            " (and {} later call{})",
            p.later,
            if p.later == 1 { "" } else { "s" }
        ));
    }
    match xid {
        Some(x) => {
            t.push_str(&format!("; Xid {}", x.number));
            if let Some(m) = x.meaning.as_ref().filter(|_| meaning) {
                t.push_str(&format!(" ({})", m.meaning));
            }
            if let Some(f) = &x.mmu_fault {
                t.push_str(&format!(
                    " at {:#x}, {}{}",
                    f.address,
                    f.fault_type,
                    f.access_type
                        .as_deref()
                        .map_or(String::new(), |a| format!(" {a}"))
                ));
            } else if x.number != 43 && !x.detail.is_empty() {
                let d: String = x.detail.chars().take(120).collect();
                t.push_str(&format!(": \"{d}\""));
            }
            t.push_str(&format!(" on {}", x.pci));
        }
        None => t.push_str("; the driver logged no Xid"),
    }
    t.push_str(&format!("; {ended}"));
    t
}
