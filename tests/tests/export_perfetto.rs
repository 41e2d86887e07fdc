//! `nvprobe export --perfetto` on real H200 recordings, read back with
//! Perfetto's own protobuf definitions (PyPI `perfetto`'s
//! perfetto_trace_pb2, through tests/scripts/perfetto-validate.py): every
//! event on a described track, time in order, every track's slices
//! balanced and nested; the tracks and slice counts nvprobe's records
//! call for.

use std::{collections::BTreeMap, path::Path, process::Command};

use nvprobe_tests::{
    harness::{bin, fixture},
    pyenv::python_with,
    scenario::tmpdir,
};
use serde_json::Value;

fn decoded(rec: &Path) -> Vec<Value> {
    let o = Command::new(bin("nvprobe"))
        .arg("decode")
        .arg(rec)
        .arg("--json")
        .output()
        .expect("decode");
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

/// Python with Perfetto's own protobuf definitions (None: offline, skip).
fn perfetto_python() -> Option<std::path::PathBuf> {
    python_with("perfetto", &["perfetto==0.59.1"]).unwrap_or_else(|e| panic!("{e}"))
}

/// The trace read back by tests/scripts/perfetto-validate.py, which fails
/// on anything Perfetto's reader would not accept.
fn read_back(python: &Path, trace: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/perfetto-validate.py");
    let o = Command::new(python)
        .arg(script)
        .arg(trace)
        .output()
        .expect("validator");
    assert!(
        o.status.success(),
        "Perfetto's reader refused the trace: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("validator output")
}

fn export(rec: &Path, out: &Path) -> (i32, String) {
    let o = Command::new(bin("nvprobe"))
        .args(["export", "--perfetto"])
        .arg(rec)
        .arg("-o")
        .arg(out)
        .output()
        .expect("export");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn an_h200_start_up_exports_to_a_trace_perfettos_reader_accepts() {
    let Some(python) = perfetto_python() else {
        return;
    };
    let tmp = tmpdir("perfetto");
    let rec = fixture("h200-580.159.04-uprobes.ndjson");
    let out = tmp.join("uprobes.pftrace");
    let _ = std::fs::remove_file(&out);
    let (rc, err) = export(&rec, &out);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("5 processes"), "{err}");
    let r = read_back(&python, &out);
    // What the records call for.
    let recs = decoded(&rec);
    let count = |f: &dyn Fn(&Value) -> bool| recs.iter().filter(|v| f(v)).count() as u64;
    let cuinits =
        count(&|v| v["type"] == "cuda" && v["func"] == "cuInit" && v["phase"] == "return");
    let registers = count(&|v| v["type"] == "ioctl" && v["name"] == "UVM_REGISTER_GPU");
    let s7 = count(&|v| v["type"] == "stage" && v["stage"] == "S7");
    let pids: std::collections::BTreeSet<u64> =
        recs.iter().filter_map(|v| v["pid"].as_u64()).collect();
    assert_eq!(r["slices"]["cuInit"].as_u64(), Some(cuinits));
    // On the thread's track and on the GPU's.
    assert_eq!(
        r["slices"]["UVM_REGISTER_GPU"].as_u64(),
        Some(2 * registers)
    );
    assert_eq!(r["instants"]["uvm_gpu_registered"].as_u64(), Some(s7));
    assert_eq!(r["processes"]["434"], "python3");
    assert_eq!(
        r["processes"].as_object().map(|m| m.len() as u64),
        Some(pids.len() as u64)
    );
    // cuInit (its uprobe) encloses the driver calls it made.
    assert_eq!(r["depth"], 2);
    let named: BTreeMap<String, u64> =
        serde_json::from_value(r["named_tracks"].clone()).expect("tracks");
    // One GPU on the H200: each verdict lists one node opened and one GPU
    // registered, so the calls naming either land on one track.
    let gpus: Vec<&String> = named.keys().filter(|k| k.starts_with("GPU ")).collect();
    assert_eq!(gpus.len(), 1, "{named:?}");
    assert!(gpus[0].starts_with("GPU /dev/nvidia0 GPU-"), "{named:?}");
    assert!(err.contains(" 1 GPU, "), "{err}");
    // An existing file is not overwritten without --force.
    let (rc, err) = export(&rec, &out);
    assert_eq!(rc, 2);
    assert!(err.contains("refusing to overwrite"), "{err}");
    // Lines that are not records: named, counted, exit 2 (as decode).
    let bad = tmp.join("bad.ndjson");
    std::fs::write(&bad, "not a record\n").expect("write");
    let (rc, err) = export(&bad, &tmp.join("bad.pftrace"));
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("1 line(s) of") && err.contains("could not be decoded"),
        "{err}"
    );
}

/// A GPU is one track: the calls that name it by its node (/dev/nvidia0)
/// and UVM_REGISTER_GPU, which names it by its UUID, land on the same one
/// when a verdict ties the two (the H200 catalogue run: one GPU). Two
/// GPUs of one process stay two (the two-GPU test of the H200x2 run).
#[test]
fn a_gpu_named_by_node_and_by_uuid_is_one_track() {
    let Some(python) = perfetto_python() else {
        return;
    };
    let tmp = tmpdir("perfetto-one-gpu");
    let rec = fixture("h200-580.159.04-catalogue.ndjson");
    let out = tmp.join("catalogue.pftrace");
    let _ = std::fs::remove_file(&out);
    let (rc, err) = export(&rec, &out);
    assert_eq!(rc, 0, "{err}");
    let r = read_back(&python, &out);
    let named: BTreeMap<String, u64> =
        serde_json::from_value(r["named_tracks"].clone()).expect("tracks");
    let gpus: Vec<&String> = named.keys().filter(|k| k.starts_with("GPU ")).collect();
    assert_eq!(
        gpus,
        ["GPU /dev/nvidia0 GPU-0f3cc1cf-565d-9b0a-543c-d4b754f70410"],
        "{named:?}"
    );
    // Every registration is on the GPU's track as well as its thread's.
    let registers = decoded(&rec)
        .iter()
        .filter(|v| v["type"] == "ioctl" && v["name"] == "UVM_REGISTER_GPU")
        .count() as u64;
    assert!(registers > 0);
    assert_eq!(
        r["slices"]["UVM_REGISTER_GPU"].as_u64(),
        Some(2 * registers)
    );
    // Two GPUs, one process of them using both: two tracks.
    let out = tmp.join("two.pftrace");
    let _ = std::fs::remove_file(&out);
    let (rc, err) = export(&fixture("h200x2-580.159.04-one-vs-two-gpus.ndjson"), &out);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains(" 2 GPUs, "), "{err}");
    let r = read_back(&python, &out);
    let named: BTreeMap<String, u64> =
        serde_json::from_value(r["named_tracks"].clone()).expect("tracks");
    let gpus: Vec<&String> = named.keys().filter(|k| k.starts_with("GPU ")).collect();
    assert_eq!(gpus.len(), 2, "{named:?}");
}

/// `watch --perfetto FILE` writes the live run's timeline when it stops:
/// the scenario's calls are slices on its thread, as many as the NDJSON of
/// the same run has, and Perfetto's reader accepts the file.
#[test]
#[ignore = "needs root"]
fn watch_writes_the_timeline_of_a_live_run() {
    nvprobe_tests::need_root!();
    let Some(python) = perfetto_python() else {
        return;
    };
    let _g = nvprobe_tests::scenario::lock();
    let tmp = tmpdir("perfetto-live");
    let trace = tmp.join("live.pftrace");
    let _ = std::fs::remove_file(&trace);
    let drv = nvprobe_tests::scenario::FakeDrv::start(&tmp);
    let t =
        nvprobe_tests::scenario::watch(&tmp, &drv, &["--perfetto", trace.to_str().expect("utf8")]);
    let ran = nvprobe_tests::scenario::scenario(&drv, "basic", &[]);
    let f = t.stop();
    nvprobe_tests::scenario::check_schema(&f);
    assert!(
        f.stderr.contains("nvprobe: Perfetto trace:"),
        "{}",
        f.stderr
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&trace)
            .expect("trace written")
            .permissions(),
    ) & 0o777;
    assert_eq!(mode, 0o600);
    let r = read_back(&python, &trace);
    let pid = ran["pid"].as_u64().expect("pid");
    assert!(r["processes"].get(pid.to_string()).is_some(), "{r}");
    // Every RM_ALLOC of the run is a slice (none on a GPU track: it is a
    // ctl call).
    let allocs = f
        .records
        .iter()
        .filter(|v| v["type"] == "ioctl" && v["name"] == "NV_ESC_RM_ALLOC")
        .count() as u64;
    let sliced: u64 = r["slices"]
        .as_object()
        .expect("slices")
        .iter()
        .filter(|(k, _)| k.starts_with("NV_ESC_RM_ALLOC"))
        .filter_map(|(_, n)| n.as_u64())
        .sum();
    assert!(allocs > 0);
    assert_eq!(sliced, allocs, "{r}");
}

/// Issue 23, item 8: `watch --perfetto FILE` created FILE only at the
/// stop, so a link planted at the path meanwhile lost the timeline. Now
/// FILE is created (0600, empty) once start-up has succeeded, before the
/// start record is written, and the trace is written into it at the stop.
#[test]
#[ignore = "needs root"]
fn watch_creates_the_trace_file_at_start() {
    nvprobe_tests::need_root!();
    let _g = nvprobe_tests::scenario::lock();
    let tmp = tmpdir("perfetto-at-start");
    let trace = tmp.join("start.pftrace");
    let _ = std::fs::remove_file(&trace);
    let drv = nvprobe_tests::scenario::FakeDrv::start(&tmp);
    // Returns once the start record is written.
    let t =
        nvprobe_tests::scenario::watch(&tmp, &drv, &["--perfetto", trace.to_str().expect("utf8")]);
    let m = std::fs::symlink_metadata(&trace).expect("the trace file exists at start");
    assert!(m.file_type().is_file());
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777,
        0o600
    );
    assert_eq!(m.len(), 0, "written at the stop");
    nvprobe_tests::scenario::scenario(&drv, "basic", &[]);
    let f = t.stop();
    assert!(f.status.success(), "{}", f.stderr);
    assert!(
        f.stderr.contains("nvprobe: Perfetto trace:"),
        "{}",
        f.stderr
    );
    let after = std::fs::symlink_metadata(&trace).expect("trace");
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&after),
        std::os::unix::fs::MetadataExt::ino(&m),
        "the file created at start"
    );
    assert!(after.len() > 0, "the timeline written");
}

/// Perfetto is the only format: `--perfetto` may be left out, and the
/// trace is the same.
#[test]
fn the_format_flag_may_be_left_out() {
    let tmp = tmpdir("perfetto-default");
    let rec = fixture("h200-580.159.04-uprobes.ndjson");
    let (with, without) = (tmp.join("with.pftrace"), tmp.join("without.pftrace"));
    let _ = std::fs::remove_file(&with);
    let _ = std::fs::remove_file(&without);
    let (rc, err) = export(&rec, &with);
    assert_eq!(rc, 0, "{err}");
    let o = Command::new(bin("nvprobe"))
        .arg("export")
        .arg(&rec)
        .arg("-o")
        .arg(&without)
        .output()
        .expect("export");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (a, b) = (
        std::fs::read(&with).expect("with"),
        std::fs::read(&without).expect("without"),
    );
    assert!(!a.is_empty());
    assert_eq!(a, b);
}
