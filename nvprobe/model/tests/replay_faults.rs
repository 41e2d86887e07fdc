//! Run-time faults on the real driver (H200, 580.159.04): the recording of
//! tests/scripts/record-faults.sh, replayed. Each case's process is found
//! by the `--case NAME` its command line carries; its `fault` verdict must
//! name the call, the CUresult, the Xid (number, fault address and type)
//! and the hint the kernel log and the call's result support, and the
//! kernel log's NVIDIA lines come back as `kernel_log` records.

mod common;

use std::collections::HashMap;

use nvprobe_model::correlate::{
    Record,
    faults::{Fault, FaultClass, KernelLog},
};

const FIXTURE: &str = "h200-580.159.04-faults.ndjson";

fn cases(r: &common::Replay) -> HashMap<String, u32> {
    let mut m = HashMap::new();
    for p in r.records.iter().filter(|x| x["type"] == "process") {
        let Some(cmd) = p["cmdline"].as_array() else {
            continue;
        };
        if let Some(i) = cmd.iter().position(|a| a == "--case")
            && let Some(name) = cmd.get(i + 1).and_then(|v| v.as_str())
        {
            m.insert(name.to_owned(), p["pid"].as_u64().expect("pid") as u32);
        }
    }
    m
}

fn faults(r: &common::Replay) -> Vec<&Fault> {
    r.made
        .iter()
        .filter_map(|x| match x {
            Record::Fault(f) => Some(&**f),
            _ => None,
        })
        .collect()
}

fn logs(r: &common::Replay) -> Vec<&KernelLog> {
    r.made
        .iter()
        .filter_map(|x| match x {
            Record::KernelLog(k) => Some(&**k),
            _ => None,
        })
        .collect()
}

#[test]
fn each_fault_the_h200_made_gets_its_verdict() {
    let r = common::replay(FIXTURE, None);
    let pids = cases(&r);
    let f = faults(&r);
    let of = |case: &str| -> &Fault {
        let pid = pids[case];
        let v: Vec<&&Fault> = f.iter().filter(|x| x.pid == pid).collect();
        assert_eq!(v.len(), 1, "{case}: one verdict, {v:?}");
        v[0]
    };
    assert!(
        f.iter().all(|x| x.pid != pids["ok"]),
        "a kernel that does nothing wrong makes no fault"
    );
    // (case, call, CUresult, Xid, fault address, access type)
    type Want<'a> = (&'a str, &'a str, i64, u32, Option<u64>, Option<&'a str>);
    let want: [Want; 6] = [
        (
            "write",
            "cuCtxSynchronize",
            700,
            31,
            Some(0),
            Some("ACCESS_TYPE_VIRT_WRITE"),
        ),
        (
            "read",
            "cuCtxSynchronize",
            700,
            31,
            Some(0x7f00_0000_0000),
            Some("ACCESS_TYPE_VIRT_READ"),
        ),
        ("misaligned", "cuCtxSynchronize", 716, 13, None, None),
        ("trap", "cuCtxSynchronize", 719, 43, None, None),
        ("torch-assert", "cuCtxSynchronize_v2", 710, 43, None, None),
        ("spin", "", 0, 0, None, None),
    ];
    for (case, call, result, xid, addr, access) in want {
        let v = of(case);
        if case == "spin" {
            // Killed while it waited; the driver logged nothing.
            assert!(v.call.is_none() && v.xid.is_none(), "{v:?}");
            let u = v.unfinished.as_ref().expect("the call it waited in");
            assert_eq!(u.func, "cuCtxSynchronize");
            assert!(u.duration_ns > 3_000_000_000, "{u:?}");
            assert_eq!(v.class, FaultClass::Unfinished);
            assert_eq!(v.ended, "killed by SIGKILL");
            assert!(
                v.hint.contains("the driver reported no error"),
                "{}",
                v.hint
            );
            continue;
        }
        let c = v.call.as_ref().unwrap_or_else(|| panic!("{case}: {v:?}"));
        assert_eq!((c.func, c.result), (call, Some(result)), "{case}");
        let x = v
            .xid
            .as_ref()
            .unwrap_or_else(|| panic!("{case}: no Xid: {v:?}"));
        assert_eq!(x.number, xid, "{case}: {:?}", v.xids);
        assert_eq!(x.pci, "0000:00:06");
        assert_eq!(x.mmu_fault.as_ref().map(|m| m.address), addr, "{case}");
        assert_eq!(
            x.mmu_fault.as_ref().and_then(|m| m.access_type.as_deref()),
            access,
            "{case}"
        );
        assert_eq!((v.class, v.drain), (FaultClass::Program, false), "{case}");
        assert!(v.hint.contains("the node is fine"), "{case}: {}", v.hint);
        assert!(!v.hint.contains("drain"), "{case}: {}", v.hint);
        // The sticky error failed the copy and the free after it too.
        if case != "torch-assert" {
            assert_eq!(v.later_failures, 2, "{case}");
        }
    }
    // The Xid 13 lines without a pid are the misaligned access's (the 43
    // that named its process followed them), not the trap's after it.
    let m = of("misaligned");
    assert_eq!(
        m.xids.iter().map(|x| x.number).collect::<Vec<_>>(),
        [13, 13, 43],
        "{:?}",
        m.xids
    );
    assert!(m.text.contains("Misaligned Address"), "{}", m.text);
    assert_eq!(
        of("trap").xids.iter().map(|x| x.number).collect::<Vec<_>>(),
        [43]
    );
    assert_eq!(f.len(), 6, "{f:?}");
}

/// A call a `kernel_log` record says was in flight had not returned when
/// the line was logged (the live run's text of this recording still said
/// cuCtxCreate_v2, whose return that build did not count for start-up
/// calls).
#[test]
fn a_call_in_flight_had_not_returned() {
    use nvprobe_model::decode::{CudaPhase, Event};
    let r = common::replay(FIXTURE, None);
    for k in logs(&r) {
        let Some(c) = k.call.as_ref().filter(|c| c.state == "in_flight") else {
            continue;
        };
        let at = k.line.kernel_ts_us * 1000;
        let returned_before = r.events.iter().any(|e| {
            matches!(e, Event::Cuda(cu)
                if Some(cu.proc.pid) == k.pid
                    && cu.func == c.func
                    && cu.phase == CudaPhase::Return
                    && cu.start_ns + cu.duration_ns.unwrap_or(0) + 5_000_000 < at)
        });
        assert!(!returned_before, "{k:?}");
    }
}

#[test]
fn every_nvidia_line_of_the_kernel_log_is_a_kernel_log_record() {
    let r = common::replay(FIXTURE, None);
    let k = logs(&r);
    // What kmsgdump.py read after the run: the same lines, in order.
    let dump = std::fs::read_to_string(common::fixture("gpu-host/h200-faults-kmsg.ndjson"))
        .expect("kmsg dump");
    let want: Vec<String> = dump
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .filter(|v| {
            v["facility"] == 0
                && nvprobe_model::kmsg::kind_of(v["msg"].as_str().unwrap_or("")).is_some()
        })
        .map(|v| v["msg"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        k.iter().map(|x| x.line.message.clone()).collect::<Vec<_>>(),
        want
    );
    assert_eq!(k.len(), 9);
    let pids = cases(&r);
    for x in k
        .iter()
        .filter(|x| x.xid.as_ref().is_some_and(|x| x.pid.is_some()))
    {
        // Every line with a pid names a case's process, and the record
        // knows it by the name nvprobe followed it by.
        assert!(pids.values().any(|p| Some(*p) == x.pid), "{x:?}");
        assert_eq!(x.comm.as_deref(), Some("python3"));
        let g = x.gpu.as_ref().expect("gpu");
        assert_eq!((g.pci.as_deref(), g.minor), (Some("0000:00:06"), Some(0)));
        assert!(
            g.uuid.as_deref().is_some_and(|u| u.starts_with("GPU-")),
            "{g:?}"
        );
        assert!(x.meaning.is_some());
    }
}
