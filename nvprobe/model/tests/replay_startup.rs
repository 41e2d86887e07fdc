//! The start-up past cuInit and the libraries that load in libcuda's place,
//! on the real driver: tests/scripts/record-startup.sh ran each case of
//! startup-workload.sh on the H200 (open module 580.159.04), untraced and
//! then under `nvprobe watch --json --raw`
//! (tests/fixtures/gpu-host/h200-startup.txt has the untraced results
//! beside the verdicts). Each verdict ends where the start-up did: the
//! first context, the device lookup or context that failed, the library
//! that could not load or answered in libcuda's place.

mod common;

use common::case;

use nvprobe_model::correlate::{Class, CuInit, DiagId, DiagSeverity, Outcome};

const REC: &str = "h200-580.159.04-startup.ndjson";

fn ids(v: &CuInit) -> Vec<DiagId> {
    v.diagnoses.iter().map(|d| d.id).collect()
}

/// A verdict found by its text (processes over before nvprobe could read
/// their command line).
fn by_text<'a>(v: &'a [CuInit], needle: &str) -> &'a CuInit {
    v.iter()
        .find(|x| x.text.contains(needle))
        .unwrap_or_else(|| panic!("no verdict says {needle:?}"))
}

#[test]
fn the_start_up_ends_at_the_first_context_or_what_stopped_it() {
    let (_, v) = common::verdicts(REC);
    // cuInit, cuDeviceGet(0), cuCtxCreate_v2: ok, at the context.
    let ok = case(&v, "ctx_ok");
    assert_eq!(ok.result, Outcome::Ok);
    let c = ok.context.as_ref().expect("first context");
    assert_eq!(
        (c.call.as_str(), c.device, c.code),
        ("cuCtxCreate_v2", Some(0), 0)
    );
    assert!(
        ok.text.starts_with("cuInit returned CUDA_SUCCESS (0) after uvm_gpu_registered; first context: cuCtxCreate_v2 (device 0) at "),
        "{}",
        ok.text
    );
    // cuDeviceGet(5) on the one-GPU host, with and without a list.
    for (name, dev, list) in [
        (
            "bad_ordinal",
            5,
            "CUDA_VISIBLE_DEVICES is not set: every GPU the process can open is visible (the host has 1 GPU)",
        ),
        (
            "bad_ordinal_visible",
            1,
            "CUDA_VISIBLE_DEVICES=0 selects /dev/nvidia[0] (the host has 1 GPU)",
        ),
    ] {
        let x = case(&v, name);
        assert_eq!(
            (x.result, ids(x)),
            (Outcome::Failed, vec![DiagId::InvalidDevice]),
            "{name}"
        );
        assert_eq!(x.curesult.as_deref(), Some("CUDA_SUCCESS (0)"));
        assert_eq!(
            x.diagnoses[0].evidence,
            format!(
                "cuDeviceGet (device {dev}) returned CUDA_ERROR_INVALID_DEVICE (101); cuDeviceGetCount said 1 device is visible (ordinal 0); {list}"
            )
        );
    }
    // Another process holds all 139 GiB: the first context is refused by
    // an RM allocation, and the holder is named.
    let holder = case(&v, "holder");
    assert_eq!(holder.result, Outcome::Ok);
    let oom = case(&v, "ctx_oom");
    assert_eq!(
        (oom.result, ids(oom)),
        (Outcome::Failed, vec![DiagId::ContextOutOfMemory])
    );
    assert_eq!(
        oom.failed_call
            .as_ref()
            .map(|f| (f.call.as_str(), f.result.as_str())),
        Some(("NV_ESC_RM_ALLOC", "NV_ERR_NO_MEMORY"))
    );
    let e = &oom.diagnoses[0].evidence;
    assert!(
        e.starts_with(&format!(
            "cuCtxCreate_v2 (device 0) returned CUDA_ERROR_OUT_OF_MEMORY (2); the driver refused NV_ESC_RM_ALLOC with \
NV_ERR_NO_MEMORY; held open by pid {} (python3, /dev/nvidia0) when nvprobe looked (at the failure); pid {} made ",
            holder.pid, holder.pid
        )),
        "{e}"
    );
    // What nvprobe saw the holder allocate: its 1 GiB and 64 MiB pieces
    // (139 GiB in all), each an RM allocation of a memory class.
    let n: u32 = e
        .split("; pid ")
        .nth(1)
        .and_then(|t| t.split(" made ").nth(1))
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .expect("a count");
    assert!(n > 139, "{e}");
    assert!(e.contains(" memory allocations (RM) and "), "{e}");
    assert!(oom.diagnoses[0].hint.contains("stop or wait for them"));
}

#[test]
fn a_library_that_does_not_load_or_answers_for_libcuda_is_named() {
    let (_, v) = common::verdicts(REC);
    // An empty and a text libcuda.so.1 first on the path (dlopen: "file too
    // short"): class cuda, failed, why from the file.
    for (name, why) in [
        ("/tmp/lib_empty/", "the file is empty (0 bytes)"),
        (
            "/tmp/lib_text/",
            "not an ELF file (22 bytes, beginning \"this is not a li\")",
        ),
    ] {
        let x = by_text(&v, name);
        assert_eq!(
            (x.class, x.result),
            (Class::Cuda, Outcome::Failed),
            "{}",
            x.text
        );
        assert_eq!(ids(x), [DiagId::LibcudaUnloadable]);
        assert!(
            x.diagnoses[0].evidence.contains(why),
            "{}",
            x.diagnoses[0].evidence
        );
    }
    // Its first 4 KiB: the loader maps segments past the file's end and the
    // process dies of SIGBUS (untraced: no output at all).
    let t = case(&v, "lib_trunc");
    assert_eq!((t.class, t.result), (Class::Cuda, Outcome::Killed));
    assert_eq!(
        ids(t),
        [DiagId::LibcudaUnloadable],
        "not killed_by_signal's harness hint"
    );
    assert!(
        t.diagnoses[0]
            .evidence
            .starts_with("the process was killed by SIGBUS right after the dynamic loader opened /tmp/lib_trunc/libcuda.so.1"),
        "{}",
        t.diagnoses[0].evidence
    );
    // libcuda 535 against the 580 module: 803 untraced, its cuInit not seen
    // (the copy was hooked at its load); the driver's answer decides.
    let m = by_text(&v, "libcuda.so.535.261.03");
    assert_eq!(
        (m.class, m.result),
        (Class::Cuda, Outcome::Failed),
        "{}",
        m.text
    );
    assert_eq!(ids(m), [DiagId::VersionMismatch]);
    assert_eq!(m.diagnoses[0].severity, DiagSeverity::Error);
    assert!(
        m.diagnoses[0].evidence.contains(
            "is 535.261.03, the kernel module is 580.159.04; the driver answered its version handshake with build 580.159.04"
        ),
        "{}",
        m.diagnoses[0].evidence
    );
    assert!(!m.text.contains("NVML"), "{}", m.text);
    // A preload that forwards to libcuda leaves libcuda's verdict; once it
    // is hooked, one that answers in libcuda's place is named so, and no
    // rule reads its 100 as libcuda's "no device".
    let f = case(&v, "interposer_forward");
    assert_eq!((f.result, ids(f)), (Outcome::Ok, vec![]));
    let h = case(&v, "interposer_hooked");
    assert_eq!((h.class, h.result), (Class::Cuda, Outcome::Failed));
    assert_eq!(ids(h), [DiagId::CudaInterposer]);
    assert!(
        h.text.starts_with("cuInit, answered by ")
            && h.text
                .contains("in libcuda's place, returned CUDA_ERROR_NO_DEVICE (100)"),
        "{}",
        h.text
    );
    // nvprobe's own processes: none.
    assert!(v.iter().all(|x| x.comm != "nvprobe"));
}

/// PyTorch's first tensor on the GPU: the CUDA runtime retains the primary
/// context (tests/scripts/record-torch-first-context.sh on the H200), and
/// the start-up ends there.
#[test]
fn the_runtimes_primary_context_ends_a_pytorch_start_up() {
    let (_, v) = common::verdicts("h200-580.159.04-torch-first-context.ndjson");
    let t = case(&v, "torch_first_context");
    assert_eq!((t.class, t.result), (Class::Cuda, Outcome::Ok));
    let c = t.context.as_ref().expect("first context");
    assert_eq!(
        (c.call.as_str(), c.device, c.code),
        ("cuDevicePrimaryCtxRetain", Some(0), 0)
    );
    assert!(
        t.text.starts_with("cuInit returned CUDA_SUCCESS (0) after uvm_gpu_registered; first context: cuDevicePrimaryCtxRetain (device 0) at "),
        "{}",
        t.text
    );
    assert!(t.diagnoses.is_empty(), "{:?}", t.diagnoses);
}

/// A first context 12 s after cuInit, past the verdict's 10 s wait
/// (tests/scripts/record-late-context.sh, fixture
/// h200-580.159.04-late-context.ndjson): alone it works; while another
/// process holds all of the GPU's memory it fails, and the
/// `first_context` record names the refusal and the holder. Each process
/// keeps its one verdict ("no context in the 10 s after it").
#[test]
fn a_late_first_context_is_reported_after_the_verdict() {
    use nvprobe_model::correlate::{FirstContext, Record};
    let (out, v) = common::verdicts("h200-580.159.04-late-context.ndjson");
    let late: Vec<&FirstContext> = out
        .iter()
        .filter_map(|r| match r {
            Record::FirstContext(c) => Some(&**c),
            _ => None,
        })
        .collect();
    let of = |c: &str| {
        let x = case(&v, c);
        assert_eq!(x.result, Outcome::Ok, "{c}: {}", x.text);
        assert!(
            x.text.ends_with("; no context in the 10 s after it"),
            "{}",
            x.text
        );
        assert_eq!(
            v.iter().filter(|y| y.pid == x.pid).count(),
            1,
            "one verdict"
        );
        let l: Vec<&&FirstContext> = late.iter().filter(|l| l.pid == x.pid).collect();
        assert_eq!(l.len(), 1, "{c}: {late:#?}");
        *l[0]
    };
    let ok = of("late_ok");
    assert!(ok.ok && ok.diagnoses.is_empty(), "{ok:#?}");
    assert_eq!(ok.context.result, "CUDA_SUCCESS (0)");
    let oom = of("late_oom");
    assert!(!oom.ok);
    assert_eq!(oom.context.result, "CUDA_ERROR_OUT_OF_MEMORY (2)");
    assert!(oom.context.at_ms > 12_000.0, "{}", oom.context.at_ms);
    let d = &oom.diagnoses;
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].id, DiagId::ContextOutOfMemory);
    let holder = case(&v, "holder").pid;
    assert!(
        d[0].evidence.contains("the driver refused NV_ESC_RM_ALLOC with NV_ERR_NO_MEMORY")
            && d[0].evidence.ends_with(&format!(
                "; held open by pid {holder} (python3, /dev/nvidia0) when nvprobe looked (at the failure)"
            )),
        "{}",
        d[0].evidence
    );
}
