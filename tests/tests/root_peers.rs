//! Tier 2: the real BPF programs on this machine's kernel, as root.
//!
//! Two nvprobes on one host: each reads every libcuda a process loads,
//! through /proc/PID/root, to hook it, and those reads look like a process
//! loading libcuda. Neither traces nor follows the other (else they chase
//! each other's reads into /proc/A/root/proc/B/root/…); each says once
//! that the other is there.

use nvprobe_tests::{
    need_root,
    scenario::{
        FakeDrv, check_schema, go, lock, spawn_cuinit, stub_libcuda, tmpdir, wait_hooked, watch,
    },
};
use serde_json::Value;

#[test]
#[ignore = "needs root"]
fn two_nvprobes_neither_trace_nor_follow_each_other() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("peers");
    let drv = FakeDrv::start(&tmp);
    let lib = stub_libcuda(&tmp);
    let a = watch(&tmp, &drv, &[]);
    let b = watch(&tmp, &drv, &[]);
    let (pa, pb) = (a.pid(), b.pid());
    let (mut c, mut out) = spawn_cuinit(&drv, &lib, "ok");
    let pid = c.id();
    // Both hook the copy it loaded: each read it through /proc/PID/root.
    wait_hooked(&a, pid);
    wait_hooked(&b, pid);
    go(&mut c, &mut out);
    let fb = b.stop();
    let fa = a.stop();
    check_schema(&fa);
    check_schema(&fb);
    for (name, f, other) in [("A", &fa, pb), ("B", &fb, pa)] {
        let theirs: Vec<&Value> = f.records.iter().filter(|r| r["pid"] == other).collect();
        assert!(
            theirs.is_empty(),
            "{name} traced nvprobe {other}: {theirs:#?}"
        );
        assert!(
            !f.records.iter().any(|r| r["path"]
                .as_str()
                .is_some_and(|p| p.contains("/root/proc/"))),
            "{name} followed a read of a read"
        );
        // The traced process is there, its cuInit judged.
        assert!(
            f.of_type("cuinit")
                .any(|v| v["pid"] == pid && v["result"] == "ok"),
            "{name}: no verdict for {pid}"
        );
    }
    // B found A running when it started; A found B at B's first read.
    let said = |f: &nvprobe_tests::harness::Finished, other: u32| {
        f.of_type("warning").any(|w| {
            w["id"] == "another_nvprobe"
                && w["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(&format!("pid {other} is another nvprobe")))
        })
    };
    assert!(said(&fb, pa), "B did not say A is there");
    assert!(said(&fa, pb), "A did not say B is there");
}
