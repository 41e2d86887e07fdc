//! Run-time faults on constructed streams. The lines of the GPU faults the
//! H200 can make come from its driver (580.159.04,
//! tests/fixtures/h200-580.159.04-faults.ndjson replays them); the lines
//! of faults no test can make on a shared GPU (79, 48, 119, 74) are
//! constructed from the shape `kernel_rc.c` writes and public reports'
//! texts, and marked so in docs/FAILURE-CATALOGUE.md.

use super::{
    faults::{FaultClass, LogLine},
    tests::exit_of,
    tests_classes::cuda,
    *,
};
use crate::attribution::HostGpu;

const MS: u64 = 1_000_000;

fn log(c: &mut Correlator, t_ms: u64, msg: &str, out: &mut Vec<Record>) {
    let line = LogLine {
        seq: t_ms,
        kernel_ts_us: t_ms * 1000,
        level: 4,
        message: msg.to_owned(),
    };
    c.observe_obs(Obs::kernel_log(line, t_ms * MS), out);
}

/// A failing return whose call ran from `start_ms` to `end_ms`.
fn failed_call(start_ms: u64, end_ms: u64, func: &'static str, r: (i64, &'static str)) -> Event {
    let Event::Cuda(mut c) = cuda(start_ms, func, Some(r)) else {
        unreachable!()
    };
    c.duration_ns = Some((end_ms - start_ms) * MS);
    Event::Cuda(c)
}

fn corr() -> Correlator {
    let mut c = Correlator::default();
    c.set_host_gpus(vec![HostGpu {
        minor: 0,
        uuid: Some("GPU-f32ddf9e-1e8b-5bbb-c267-a7922d39ec21".into()),
        pci: Some("0000:00:06.0".into()),
        model: None,
    }]);
    c.set_host_driver(Some("580.159.04".into()));
    c
}

fn faults(out: &[Record]) -> Vec<&faults::Fault> {
    out.iter()
        .filter_map(|r| match r {
            Record::Fault(f) => Some(&**f),
            _ => None,
        })
        .collect()
}

fn logs(out: &[Record]) -> Vec<&faults::KernelLog> {
    out.iter()
        .filter_map(|r| match r {
            Record::KernelLog(k) => Some(&**k),
            _ => None,
        })
        .collect()
}

#[test]
fn an_mmu_fault_named_by_pid_explains_the_sync_that_failed() {
    let mut c = corr();
    let mut out = Vec::new();
    c.observe(&cuda(1, "cuInit", Some((0, "CUDA_SUCCESS"))), &mut out);
    // The Xid comes while the synchronisation waits, as on the H200.
    log(
        &mut c,
        140,
        "NVRM: GPU at PCI:0000:00:06: GPU-f32ddf9e-1e8b-5bbb-c267-a7922d39ec21",
        &mut out,
    );
    log(
        &mut c,
        140,
        "NVRM: Xid (PCI:0000:00:06): 31, pid=7, name=app, channel 0x0000000a, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_8 faulted @ 0x0_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE",
        &mut out,
    );
    c.observe(
        &failed_call(
            10,
            160,
            "cuCtxSynchronize",
            (700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
        ),
        &mut out,
    );
    c.observe(
        &failed_call(
            161,
            162,
            "cuMemFree_v2",
            (700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
        ),
        &mut out,
    );
    c.observe(&exit_of(200, 7, 1 << 8), &mut out);
    assert!(
        faults(&out).is_empty(),
        "the verdict waits for lines after the exit"
    );
    let k = logs(&out);
    assert_eq!(k.len(), 2);
    assert_eq!(k[1].pid, Some(7));
    assert_eq!(k[1].comm.as_deref(), Some("app"));
    let gpu = k[1].gpu.as_ref().unwrap();
    assert_eq!(
        (gpu.minor, gpu.uuid.as_deref()),
        (Some(0), Some("GPU-f32ddf9e-1e8b-5bbb-c267-a7922d39ec21"))
    );
    // Due 0.5 s after the exit: the next event past it gives it.
    c.observe_obs(Obs::tick(200 * MS + faults::GRACE_NS), &mut out);
    let f = faults(&out);
    assert_eq!(f.len(), 1);
    let f = f[0];
    assert_eq!(f.call.as_ref().unwrap().func, "cuCtxSynchronize");
    assert_eq!(f.later_failures, 1);
    let x = f.xid.as_ref().unwrap();
    assert_eq!((x.number, x.tied_by), (31, "pid"));
    assert_eq!(x.mmu_fault.as_ref().unwrap().address, 0);
    assert_eq!((f.class, f.drain), (FaultClass::Program, false));
    assert_eq!(f.ended, "exited with status 1");
    assert_eq!(
        f.text,
        "cuCtxSynchronize returned 700 CUDA_ERROR_ILLEGAL_ADDRESS (and 1 later call); Xid 31 (GPU memory page fault: the MMU reported an illegal address access; typically an application bug, also possibly a driver or hardware bug.) at 0x0, FAULT_PDE ACCESS_TYPE_VIRT_WRITE on 0000:00:06; exited with status 1"
    );
    assert!(
        f.hint.starts_with(
            "the program's GPU code wrote to address 0x0, which is not mapped (FAULT_PDE)"
        ),
        "{}",
        f.hint
    );
    assert!(!f.hint.contains("drain"), "{}", f.hint);
}

#[test]
fn lines_without_a_pid_go_with_the_pid_that_follows_them_or_the_call_that_ran() {
    let mut c = corr();
    let mut out = Vec::new();
    // Process 7's misaligned access: two lines without a pid, then 43
    // with it, 3.5 ms later.
    log(
        &mut c,
        100,
        "NVRM: Xid (PCI:0000:00:06): 13, Graphics SM Warp Exception on (GPC 1, TPC 4, SM 0): Misaligned Address",
        &mut out,
    );
    log(
        &mut c,
        101,
        "NVRM: Xid (PCI:0000:00:06): 13, Graphics Exception: ESR 0x519730=0x501000f",
        &mut out,
    );
    log(
        &mut c,
        103,
        "NVRM: Xid (PCI:0000:00:06): 43, pid=7, name=app, channel 0x0000000a",
        &mut out,
    );
    c.observe(
        &failed_call(
            90,
            300,
            "cuCtxSynchronize",
            (716, "CUDA_ERROR_MISALIGNED_ADDRESS"),
        ),
        &mut out,
    );
    // Process 8 traps 1 s later: only 43 names it; the earlier 13s are 7's.
    let mut other = failed_call(
        1000,
        1300,
        "cuCtxSynchronize",
        (719, "CUDA_ERROR_LAUNCH_FAILED"),
    );
    if let Event::Cuda(e) = &mut other {
        e.proc.pid = 8;
        e.proc.tid = 8;
    }
    log(
        &mut c,
        1010,
        "NVRM: Xid (PCI:0000:00:06): 43, pid=8, name=app, channel 0x0000000a",
        &mut out,
    );
    c.observe(&other, &mut out);
    c.finish(&mut out);
    let f = faults(&out);
    assert_eq!(f.len(), 2);
    let (a, b) = (f[0], f[1]);
    assert_eq!(a.pid, 7);
    assert_eq!(
        a.xids
            .iter()
            .map(|x| (x.number, x.tied_by))
            .collect::<Vec<_>>(),
        [(13, "same_burst"), (13, "same_burst"), (43, "pid")]
    );
    assert_eq!(
        a.xid.as_ref().unwrap().detail,
        "Graphics SM Warp Exception on (GPC 1, TPC 4, SM 0): Misaligned Address"
    );
    assert!(
        a.text.contains(r#"Xid 13 (Graphics Engine Exception"#)
            && a.text.contains(
                r#": "Graphics SM Warp Exception on (GPC 1, TPC 4, SM 0): Misaligned Address""#
            ),
        "{}",
        a.text
    );
    assert_eq!(a.ended, "still running");
    assert_eq!(b.pid, 8);
    assert_eq!(b.xids.iter().map(|x| x.number).collect::<Vec<_>>(), [43]);
    assert_eq!(b.class, FaultClass::Program);
}

#[test]
fn an_xid_without_a_pid_explains_the_call_that_was_waiting_on_its_gpu() {
    let mut c = corr();
    let mut out = Vec::new();
    // A pid-less line logged while the call ran (it returns after).
    log(
        &mut c,
        150,
        "NVRM: Xid (PCI:0000:00:06): 13, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 1): Illegal Instruction Encoding",
        &mut out,
    );
    c.observe(
        &failed_call(
            100,
            400,
            "cuStreamSynchronize",
            (715, "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
        ),
        &mut out,
    );
    // An Xid on another GPU is not this process's.
    log(
        &mut c,
        200,
        "NVRM: Xid (PCI:0000:41:00): 13, Graphics Exception on another GPU",
        &mut out,
    );
    c.finish(&mut out);
    let f = faults(&out);
    assert_eq!(f.len(), 1);
    assert_eq!(
        f[0].xids
            .iter()
            .map(|x| (x.number, x.tied_by, x.pci.as_str()))
            .collect::<Vec<_>>(),
        [(13, "gpu_time", "0000:00:06")]
    );
    assert!(
        f[0].hint
            .starts_with("the program's GPU code ran an illegal instruction"),
        "{}",
        f[0].hint
    );
}

/// Constructed from public reports (no test can make these on a shared
/// GPU): the GPU falls off the bus, a double-bit ECC error, a GSP RPC
/// timeout naming an RM control, an NVLink error.
#[test]
fn hardware_and_driver_xids_say_drain_or_collect_and_never_blame_the_program() {
    let cases: [(&str, (i64, &'static str), FaultClass, bool); 4] = [
        (
            "NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
            (999, "CUDA_ERROR_UNKNOWN"),
            FaultClass::Hardware,
            true,
        ),
        (
            "NVRM: Xid (PCI:0000:00:06): 48, pid=7, name=app, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
            (214, "CUDA_ERROR_ECC_UNCORRECTABLE"),
            FaultClass::Hardware,
            true,
        ),
        (
            "NVRM: Xid (PCI:0000:00:06): 119, pid=7, name=app, Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
            (999, "CUDA_ERROR_UNKNOWN"),
            FaultClass::Driver,
            false,
        ),
        (
            "NVRM: Xid (PCI:0000:00:06): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 4(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
            (220, "CUDA_ERROR_NVLINK_UNCORRECTABLE"),
            FaultClass::Hardware,
            true,
        ),
    ];
    for (line, result, class, drain) in cases {
        let mut c = corr();
        let mut out = Vec::new();
        log(&mut c, 150, line, &mut out);
        c.observe(&failed_call(100, 400, "cuCtxSynchronize", result), &mut out);
        c.observe(&exit_of(500, 7, 1 << 8), &mut out);
        c.finish(&mut out);
        let k = logs(&out);
        assert_eq!(k.len(), 1, "{line}");
        if line.contains("GSP_RM_CONTROL") {
            let r = k[0]
                .rm_control
                .as_ref()
                .expect("the control a GSP timeout names");
            assert_eq!(r.control, 0x20800a4c);
            assert_eq!(
                r.control_name,
                Some("NV2080_CTRL_CMD_INTERNAL_GPU_GET_SMC_MODE"),
                "{line}"
            );
        }
        assert_eq!(
            crate::render::Severity::of_record(&Record::KernelLog(Box::new(k[0].clone()))),
            crate::render::Severity::Error,
            "{line}"
        );
        let f = faults(&out);
        assert_eq!(f.len(), 1, "{line}");
        assert_eq!(
            (f[0].class, f[0].drain),
            (class, drain),
            "{line}: {}",
            f[0].hint
        );
        assert!(
            !f[0].hint.contains("fix the kernel"),
            "{line}: {}",
            f[0].hint
        );
        assert_eq!(
            f[0].xid.as_ref().map(|x| x.number),
            crate::kmsg::xid(line).map(|x| x.1),
            "{line}"
        );
    }
}

#[test]
fn a_pid_the_driver_names_without_a_failing_call_still_gets_a_verdict() {
    let mut c = corr();
    let mut out = Vec::new();
    log(
        &mut c,
        100,
        "NVRM: Xid (PCI:0000:00:06): 43, pid=9, name=worker, channel 0x0000000a",
        &mut out,
    );
    // No exit seen (a process nvprobe does not follow): the wait ends it.
    c.observe_obs(Obs::tick(100 * MS + faults::WAIT_NS), &mut out);
    let f = faults(&out);
    assert_eq!(f.len(), 1);
    assert!(f[0].call.is_none());
    assert_eq!(f[0].comm, "worker");
    assert!(
        f[0].text.starts_with("no failing CUDA call was seen"),
        "{}",
        f[0].text
    );
    assert_eq!(f[0].ended, "still running");
}

#[test]
fn what_is_not_a_fault_makes_no_verdict_and_memory_stays_bounded() {
    let mut c = corr();
    let mut out = Vec::new();
    // Not sticky: out of memory, an invalid value.
    c.observe(
        &failed_call(1, 2, "cuMemcpyDtoH_v2", (1, "CUDA_ERROR_INVALID_VALUE")),
        &mut out,
    );
    c.observe(
        &failed_call(3, 4, "cuMemFree_v2", (2, "CUDA_ERROR_OUT_OF_MEMORY")),
        &mut out,
    );
    // Lines that are not the driver's make no record.
    log(&mut c, 5, "usb 1-1: new high-speed USB device", &mut out);
    log(&mut c, 6, "NVRM: Xid 79[123]: segfault at 0", &mut out);
    for i in 0..10_000u64 {
        log(
            &mut c,
            10 + i,
            "NVRM: Xid (PCI:0000:00:06): 13, Graphics Exception: ESR",
            &mut out,
        );
    }
    c.finish(&mut out);
    assert!(faults(&out).is_empty());
    assert_eq!(logs(&out).len(), 10_000);
}

#[test]
fn a_wait_left_by_a_process_that_exits_on_its_own_is_no_fault() {
    let unfinished = |pid: u32| {
        let Event::Cuda(mut c) = failed_call(10, 4000, "cuStreamSynchronize", (0, "")) else {
            unreachable!()
        };
        c.phase = crate::decode::CudaPhase::Unfinished;
        c.result = None;
        c.result_name = None;
        c.proc.pid = pid;
        c.proc.tid = pid + 1;
        Event::Cuda(c)
    };
    let mut c = corr();
    let mut out = Vec::new();
    c.observe(&unfinished(7), &mut out);
    c.observe(&exit_of(4001, 7, 0), &mut out);
    c.observe(&unfinished(9), &mut out);
    c.observe(&exit_of(4002, 9, 9), &mut out);
    c.finish(&mut out);
    let f = faults(&out);
    assert_eq!(
        f.iter().map(|f| (f.pid, f.class)).collect::<Vec<_>>(),
        [(9, FaultClass::Unfinished)]
    );
    assert_eq!(f[0].ended, "killed by SIGKILL");
}

/// The records of `calls` on the H200's GPU, after an Xid 13 without a
/// pid when `xid13` (a pid-less line that a failing call may claim).
fn records_of(xid13: bool, calls: &[Event]) -> Vec<Record> {
    let mut c = corr();
    let mut out = Vec::new();
    if xid13 {
        log(
            &mut c,
            1,
            "NVRM: Xid (PCI:0000:00:06): 13, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 1): Illegal Instruction Encoding",
            &mut out,
        );
    }
    for e in calls {
        c.observe(e, &mut out);
    }
    c.finish(&mut out);
    out
}

/// A launch the driver refuses at once (`--libcuda-hooks launches`): not
/// sticky, but the program's failure and said by no later call, so it is
/// a fault of the program's, with what the error means; the same error
/// from a copy is not.
#[test]
fn a_launch_the_driver_refused_is_the_programs_fault() {
    let invalid = (1, "CUDA_ERROR_INVALID_VALUE");
    let out = records_of(
        false,
        &[
            failed_call(1, 2, "cuLaunchKernel", invalid),
            failed_call(3, 4, "cuMemcpyDtoH_v2", invalid),
        ],
    );
    let f = faults(&out);
    assert_eq!(f.len(), 1, "{f:#?}");
    let call = f[0].call.as_ref().expect("the launch");
    assert_eq!((call.func, call.result), ("cuLaunchKernel", Some(1)));
    assert_eq!(f[0].class, FaultClass::Program);
    assert!(!f[0].drain);
    assert!(
        f[0].hint.starts_with("the driver refused the launch at once, so the kernel never ran: an argument of the launch is invalid")
            && f[0].hint.contains("1024 threads per block"),
        "{}",
        f[0].hint
    );
    // A refused launch that ran nothing claims no Xid of its GPU, and a
    // sticky fault after it is the verdict (the real story).
    let out = records_of(
        true,
        &[
            failed_call(
                1,
                2,
                "cuLaunchKernel",
                (701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"),
            ),
            failed_call(
                3,
                9,
                "cuCtxSynchronize",
                (715, "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
            ),
        ],
    );
    let f = faults(&out);
    assert_eq!(f.len(), 1, "{f:#?}");
    let call = f[0].call.as_ref().expect("the sync");
    assert_eq!((call.func, call.result), ("cuCtxSynchronize", Some(715)));
    assert!(
        f[0].hint
            .starts_with("the program's GPU code ran an illegal instruction"),
        "{}",
        f[0].hint
    );
    // A refusal alone claims none of the GPU's Xids.
    let out = records_of(true, &[failed_call(1, 2, "cuLaunchKernel", invalid)]);
    let f = faults(&out);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(f[0].xids.is_empty(), "{:#?}", f[0].xids);
    assert!(
        f[0].hint
            .contains("a program that checks the error may go on"),
        "{}",
        f[0].hint
    );
    // A launch's error that is not a refusal of its own (out of memory)
    // is left to the calls after it.
    let out = records_of(
        false,
        &[failed_call(
            1,
            2,
            "cuLaunchKernel",
            (2, "CUDA_ERROR_OUT_OF_MEMORY"),
        )],
    );
    assert!(faults(&out).is_empty());
}
