//! The HMM hints of a failed UVM step: what the host says (live) and
//! what UVM_PAGEABLE_MEM_ACCESS told the process. Constructed streams; the
//! real ones are in nvprobe/model/tests/replay_hmm.rs.

use super::{
    table::HMM_HINT,
    tests::{io, open, stages},
    *,
};
use crate::correlate::{DiagId, Outcome};
use crate::decode::Event;

/// A failing UVM_INITIALIZE with no signal points at HMM.
#[test]
fn a_failing_uvm_step_gets_the_hmm_hint() {
    let mut bad = io(3, "UVM_INITIALIZE", None, "uvm");
    if let Event::Ioctl(i) = &mut bad {
        i.ok = false;
        i.status = Some(crate::decode::Status {
            code: 0x56,
            name: Some("NV_ERR_NOT_SUPPORTED"),
            offset: 8,
            layout: crate::decode::version::LayoutBasis::Stable,
        });
    }
    let ev = vec![open(1, "/dev/nvidiactl", "ctl"), bad];
    let (_, v) = stages(&ev);
    assert_eq!(v.result, Outcome::Failed);
    assert_eq!(v.diagnoses[0].id, DiagId::UvmStepFailed);
    assert!(v.diagnoses[0].hint.contains("uvm_disable_hmm=1"));
    assert_eq!(
        v.text,
        "UVM_INITIALIZE returned NV_ERR_NOT_SUPPORTED after ctl_opened"
    );
    // On a live host, the hint follows what the host says about HMM.
    let facts = |compiled_in, disabled| crate::records::HmmFacts {
        compiled_in,
        disabled,
    };
    let hint = |f| {
        let mut v = v.clone();
        apply_hmm_facts(&mut v.diagnoses, &f);
        (v.diagnoses[0].hint, v.diagnoses[0].evidence.clone())
    };
    let (h, e) = hint(facts(Some(true), Some(false)));
    assert!(
        h.contains("has HMM and it is enabled") && h.contains("uvm_disable_hmm=1"),
        "{h}"
    );
    assert_eq!(
        e,
        "UVM_INITIALIZE returned NV_ERR_NOT_SUPPORTED; host: nvidia_uvm is built with HMM \
(uvm_hmm_* in /proc/kallsyms), uvm_disable_hmm=N"
    );
    let (h, _) = hint(facts(Some(false), Some(false)));
    assert!(
        h.starts_with("this nvidia_uvm was built without HMM"),
        "{h}"
    );
    assert!(!h.contains("uvm_disable_hmm=1"), "{h}");
    let (h, _) = hint(facts(Some(true), Some(true)));
    assert!(h.starts_with("HMM is already disabled"), "{h}");
    let (h, _) = hint(facts(None, None));
    assert_eq!(h, HMM_HINT);
}

/// A failing GPU registration after UVM answered UVM_PAGEABLE_MEM_ACCESS
/// on the same fd: true points at HMM where nothing else is known; false
/// is evidence only; on a live host its facts decide.
#[test]
fn uvm_pageable_answer_weighs_in_the_hmm_hint() {
    let run = |pageable: bool| {
        let mut pm = io(3, "UVM_PAGEABLE_MEM_ACCESS", None, "uvm");
        if let Event::Ioctl(i) = &mut pm {
            i.args.pageable(pageable);
        }
        let mut bad = io(4, "UVM_REGISTER_GPU", None, "uvm");
        if let Event::Ioctl(i) = &mut bad {
            i.ok = false;
            i.status = Some(crate::decode::Status {
                code: 0x40,
                name: Some("NV_ERR_INVALID_STATE"),
                offset: 36,
                layout: crate::decode::version::LayoutBasis::Stable,
            });
        }
        let ev = vec![
            open(1, "/dev/nvidiactl", "ctl"),
            io(2, "UVM_INITIALIZE", None, "uvm"),
            pm,
            bad,
        ];
        stages(&ev).1
    };
    let on = run(true);
    let d = &on.diagnoses[0];
    assert_eq!(d.id, DiagId::UvmStepFailed);
    assert_eq!(
        d.evidence,
        "UVM_REGISTER_GPU returned NV_ERR_INVALID_STATE; UVM told this process that pageable memory \
access is on (UVM_PAGEABLE_MEM_ACCESS: true)"
    );
    assert!(
        d.hint.starts_with(
            "UVM said pageable memory access was on for this process: on x86 that is HMM"
        ) && d.hint.contains("uvm_disable_hmm=1"),
        "{}",
        d.hint
    );
    // False clears nothing (a DISABLE_HMM va_space answers false while the
    // GPU's HMM memory is set up system-wide): evidence, the usual hint.
    let off = run(false);
    let d = &off.diagnoses[0];
    assert!(
        d.evidence.ends_with("(UVM_PAGEABLE_MEM_ACCESS: false)"),
        "{}",
        d.evidence
    );
    assert_eq!(d.hint, HMM_HINT);
    // The answer belongs to the fd's va_space: a failure on another uvm fd,
    // or after a new UVM_INITIALIZE on the same fd, has none.
    let other_fd = |reinit: bool| {
        let mut pm = io(3, "UVM_PAGEABLE_MEM_ACCESS", None, "uvm");
        if let Event::Ioctl(i) = &mut pm {
            i.args.pageable(true);
        }
        let mut bad = io(5, "UVM_REGISTER_GPU", None, "uvm");
        if let Event::Ioctl(i) = &mut bad {
            i.ok = false;
            i.fd = if reinit { 3 } else { 4 };
            i.errno = Some("EINVAL".into());
            i.ret = super::tests_classes::errno_ret("EINVAL");
        }
        let mut ev = vec![open(1, "/dev/nvidiactl", "ctl"), pm];
        if reinit {
            ev.push(io(4, "UVM_INITIALIZE", None, "uvm"));
        }
        ev.push(bad);
        stages(&ev).1
    };
    for reinit in [false, true] {
        let v = other_fd(reinit);
        assert_eq!(v.diagnoses[0].id, DiagId::UvmStepFailed);
        assert!(
            !v.diagnoses[0].evidence.contains("UVM told"),
            "{}",
            v.diagnoses[0].evidence
        );
        assert_eq!(v.diagnoses[0].hint, HMM_HINT);
    }
    // Live, the host decides: off there with a true answer means ATS.
    let live = |v: &CuInit, compiled_in, disabled| {
        let mut v = v.clone();
        apply_hmm_facts(
            &mut v.diagnoses,
            &crate::records::HmmFacts {
                compiled_in,
                disabled,
            },
        );
        (v.diagnoses[0].hint, v.diagnoses[0].evidence.clone())
    };
    let (h, e) = live(&on, Some(true), Some(true));
    assert!(h.starts_with("HMM is already disabled"), "{h}");
    assert!(
        e.contains("(UVM_PAGEABLE_MEM_ACCESS: true); host: ") && e.ends_with("uvm_disable_hmm=Y"),
        "{e}"
    );
    let (h, _) = live(&on, Some(false), None);
    assert!(
        h.starts_with("this nvidia_uvm was built without HMM"),
        "{h}"
    );
    let (h, _) = live(&on, None, None);
    assert!(
        h.starts_with("UVM said pageable memory access was on"),
        "{h}"
    );
    let (h, _) = live(&off, Some(true), Some(false));
    assert!(h.contains("has HMM and it is enabled"), "{h}");
    // An answer given after the failure does not explain it.
    let mut pm = io(5, "UVM_PAGEABLE_MEM_ACCESS", None, "uvm");
    if let Event::Ioctl(i) = &mut pm {
        i.args.pageable(true);
    }
    let mut bad = io(4, "UVM_REGISTER_GPU", None, "uvm");
    if let Event::Ioctl(i) = &mut bad {
        i.ok = false;
        i.errno = Some("EINVAL".into());
        i.ret = super::tests_classes::errno_ret("EINVAL");
    }
    let v = stages(&[open(1, "/dev/nvidiactl", "ctl"), bad, pm]).1;
    assert!(
        !v.diagnoses[0].evidence.contains("UVM told"),
        "{}",
        v.diagnoses[0].evidence
    );
}
