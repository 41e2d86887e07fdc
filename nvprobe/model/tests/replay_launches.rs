//! Issue 37 on the real driver (an H100 host, open module 580.159.04):
//! kernel launches the driver refuses at once, and libcuda copies the
//! loader opens for the first time (tests/scripts/record-launch-refusals.sh,
//! record-late-hooks.sh; the figures are in
//! tests/fixtures/gpu-host/h100-late-hooks-and-launches.txt).

mod common;

use common::{case, verdicts};

use nvprobe_model::correlate::{Outcome, Record};

/// `--libcuda-hooks launches`: gpufault.py's launch of 2048 threads per
/// block and its launch asking 1 GiB of shared memory both come back at
/// once with CUDA_ERROR_INVALID_VALUE (1); each is a `fault` of class
/// program that names the launch, with no Xid; the `ok` case has none.
#[test]
fn a_launch_the_driver_refuses_is_a_program_fault_without_an_xid() {
    let (records, v) = verdicts("h100-580.159.04-launch-refusals.ndjson.gz");
    let faults: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::Fault(f) => Some(f),
            _ => None,
        })
        .collect();
    let pid_of = |c: &str| case(&v, c).pid;
    let mut faulted: Vec<u32> = faults.iter().map(|f| f.pid).collect();
    faulted.sort_unstable();
    let mut want = vec![pid_of("bigblock"), pid_of("bigshared")];
    want.sort_unstable();
    assert_eq!(faulted, want, "{faults:#?}");
    for f in &faults {
        let call = f.call.as_ref().expect("the refused call");
        assert_eq!(
            (call.func, call.result, call.result_name),
            ("cuLaunchKernel", Some(1), Some("CUDA_ERROR_INVALID_VALUE"))
        );
        assert_eq!(f.class.as_str(), "program");
        assert!(f.xid.is_none() && f.xids.is_empty(), "{:?}", f.xids);
        assert!(!f.drain);
        assert!(
            f.hint
                .starts_with("the driver refused the launch at once, so the kernel never ran"),
            "{}",
            f.hint
        );
        assert_eq!(
            f.text,
            "cuLaunchKernel returned 1 CUDA_ERROR_INVALID_VALUE; the driver logged no Xid; exited with status 0"
        );
    }
    // The start-ups themselves were fine.
    for c in ["bigblock", "bigshared", "ok"] {
        assert_eq!(case(&v, c).result, Outcome::Ok, "{c}");
    }
}

/// Twenty start-ups, each through a fresh copy of libcuda (a file no
/// hook had reached) called at once through ctypes: the loader's open
/// came about 2 ms before the first driver call, the hooks about 20 ms
/// after the open, in cuInit. cuInit's return is not seen, its next call
/// is, and each verdict rests on those and the driver calls: a start-up
/// that got through, never a failed one. The warning says how late.
#[test]
fn a_copy_hooked_during_cuinit_is_judged_from_the_calls_after_it() {
    let name = "h100-580.159.04-late-hooks.ndjson.gz";
    let (_, v) = verdicts(name);
    let late: Vec<_> = (1..=20).map(|i| case(&v, &format!("late-{i}"))).collect();
    for x in &late {
        assert_eq!(x.result, Outcome::Ok, "{}", x.text);
        assert_eq!(x.curesult, None);
        assert_eq!(
            x.source,
            "libcuda uprobes (CUDA calls other than cuInit) and driver calls"
        );
        assert!(x.stages.iter().any(|s| s.stage == "S7"), "{}", x.text);
        assert!(x.diagnoses.is_empty(), "{:#?}", x.diagnoses);
    }
    let r = common::replay(name, None);
    let warnings: Vec<&str> = r
        .records
        .iter()
        .filter(|x| x["type"] == "warning" && x["id"] == "libcuda_late")
        .filter_map(|x| x["message"].as_str())
        .collect();
    assert_eq!(warnings.len(), 20);
    for (w, x) in warnings.iter().zip(&late) {
        let ms: f64 = w
            .split(" ms after pid ")
            .next()
            .and_then(|h| h.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{w}"));
        assert!((1.0..200.0).contains(&ms), "{w}");
        assert!(
            w.contains(&format!("after pid {}'s loader opened it", x.pid)),
            "{w}"
        );
    }
}
