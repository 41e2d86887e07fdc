//! Tests of the diff (diff.rs): alignment, naming, GPUs.
use super::recorded::{call_name, result_of};
use super::*;

fn side(label: &str, calls: &[(&str, &str)]) -> Side {
    Side {
        label: label.into(),
        steps: calls
            .iter()
            .enumerate()
            .map(|(i, (c, r))| Step {
                call: (*c).into(),
                result: (*r).into(),
                ok: *r == "ok",
                at_ms: i as f64,
                duration_ms: 0.0,
                detail: None,
                detail_is_node: false,
            })
            .collect(),
        ..Side::default()
    }
}

#[test]
fn alignment_names_the_first_divergence_and_what_only_one_side_did() {
    let a = side(
        "A",
        &[
            ("open ctl", "ok"),
            ("alloc", "ok"),
            ("uvm init", "ok"),
            ("register gpu0", "ok"),
            ("register gpu1", "ok"),
        ],
    );
    let b = side(
        "B",
        &[
            ("open ctl", "ok"),
            ("alloc", "ok"),
            ("uvm init", "NV_ERR_NOT_SUPPORTED"),
        ],
    );
    let d = diff(&a, &b);
    assert_eq!(
        d.first_divergence,
        Some(Difference::Result {
            call: "uvm init".into(),
            a: "ok".into(),
            b: "NV_ERR_NOT_SUPPORTED".into(),
            index_a: 2,
            index_b: 2
        })
    );
    assert_eq!(d.same_calls, 2);
    assert_eq!(
        d.call_counts,
        vec![
            ("register gpu0".into(), 1, 0),
            ("register gpu1".into(), 1, 0)
        ]
    );
    let t = d.to_text();
    assert!(
        t.contains(
            "first divergence: uvm init: A (call #3) got ok, B (call #3) got NV_ERR_NOT_SUPPORTED"
        ),
        "{t}"
    );
    // Identical sides: no divergence.
    let same = diff(&a, &a);
    assert!(same.first_divergence.is_none() && same.same_calls == 5);
}

#[test]
fn gpus_align_by_the_order_each_side_used_them() {
    let with = |label: &str, gpus: &[(&str, bool)]| {
        let mut s = side(label, &[]);
        for (i, (d, node)) in gpus.iter().enumerate() {
            s.steps.push(Step {
                call: if *node {
                    "ioctl RM_CONTROL"
                } else {
                    "ioctl UVM_REGISTER_GPU"
                }
                .into(),
                result: "ok".into(),
                ok: true,
                at_ms: i as f64,
                duration_ms: 0.0,
                detail: Some((*d).into()),
                detail_is_node: *node,
            });
        }
        s
    };
    // Another host or container: other nodes and UUIDs, the same
    // start-up.
    let a = with(
        "A",
        &[
            ("/dev/nvidia0", true),
            ("GPU-aa", false),
            ("/dev/nvidia1", true),
        ],
    );
    let b = with(
        "B",
        &[
            ("/dev/nvidia2", true),
            ("GPU-bb", false),
            ("/dev/nvidia3", true),
        ],
    );
    assert!(diff(&a, &b).first_divergence.is_none());
    // One GPU fewer: the second GPU's call is what only A made.
    let b = with("B", &[("/dev/nvidia0", true), ("GPU-aa", false)]);
    let d = diff(&a, &b);
    match &d.first_divergence {
        Some(Difference::OnlyA { step, index_a: 2 }) => {
            assert_eq!(step.detail.as_deref(), Some("/dev/nvidia1"))
        }
        other => panic!("{other:?}"),
    }
    assert!(
        d.to_text()
            .contains("A call #3 ioctl RM_CONTROL (/dev/nvidia1) = ok")
    );
}

#[test]
fn calls_are_named_without_handles() {
    let v: Value = serde_json::json!({"type": "ioctl", "pid": 7, "name": "NV_ESC_RM_CONTROL",
        "args": {"hClient": "0xc1d0001b", "control": "0x101", "control_name": "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION"},
        "status": {"name": "NV_OK"}, "ok": true, "start_ns": 5, "duration_ns": 1000});
    assert_eq!(
        call_name(&v).as_deref(),
        Some("ioctl NV_ESC_RM_CONTROL NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION")
    );
    assert_eq!(result_of(&v), "NV_OK");
    let o: Value = serde_json::json!({"type": "open", "pid": 7, "path": "/dev/nvidia-uvm", "device": {"kind": "none"}, "ok": true});
    assert_eq!(call_name(&o).as_deref(), Some("open /dev/nvidia-uvm"));
    assert_eq!(result_of(&o), "ok, device none");
    let c: Value = serde_json::json!({"type": "close", "pid": 7});
    assert_eq!(call_name(&c), None);
}

/// Issue 23, item 1: what a recording holds (a process name, a path, a
/// verdict's text, a GPU's name) reaches the terminal escaped: a newline
/// makes no line of its own, ESC sequences, BEL and U+202E are shown as
/// escapes.
#[test]
fn hostile_names_in_a_recording_are_escaped_in_the_text() {
    let evil = "x\n== INJECTED verdict\r\u{1b}[2J\u{7}\u{202e}txt";
    let mut a = side(
        "A",
        &[
            ("open /dev/nvidiactl", "ok"),
            (&format!("open {evil}"), "ok"),
        ],
    );
    let mut b = side(
        "B",
        &[
            ("open /dev/nvidiactl", "ok"),
            ("open /dev/nvidia0", "ENOENT"),
        ],
    );
    a.comm = evil.into();
    a.verdict = Some(("failed".into(), evil.into()));
    b.gpu_calls.insert(evil.into(), 1);
    b.registered = vec![evil.into()];
    let text = diff(&a, &b).to_text();
    for bad in ['\r', '\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(!text.contains(bad), "{bad:?} in {text}");
    }
    assert!(!text.lines().any(|l| l.starts_with("== ")), "{text}");
    assert!(
        text.contains("x\\x0a== INJECTED verdict\\x0d\\x1b[2J\\x07\\u{202e}txt"),
        "{text}"
    );
}
