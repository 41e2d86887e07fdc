//! Tests of the diff (diff.rs): alignment, naming, GPUs.
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
    let ev = |v: serde_json::Value| crate::decode::recorded(v).expect("an event");
    let p = serde_json::json!({"pid": 7, "tid": 7, "comm": "a", "uid": 0});
    let mut v = serde_json::json!({"type": "ioctl", "fd": 3, "name": "NV_ESC_RM_CONTROL",
        "device": {"major": 195, "minor": 255, "kind": "ctl"}, "request": "0xc020462a",
        "family": "escape", "size": 32, "start_ns": 5, "duration_ns": 1000, "ret": 0,
        "args": {"hClient": "0xc1d0001b", "control": "0x101", "control_name": "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION"},
        "status": {"code": "0x0", "name": "NV_OK", "offset": 28, "layout": "stable"}, "ok": true});
    let mut o = serde_json::json!({"type": "open", "syscall": "openat", "path": "/dev/nvidia-uvm",
        "flags": "O_RDWR", "start_ns": 5, "duration_ns": 1, "ret": 4, "fd": 4,
        "device": {"major": 1, "minor": 3, "kind": "none"}, "ok": true});
    let mut c = serde_json::json!({"type": "close", "syscall": "close", "fd": 4,
        "device": {"major": 1, "minor": 3, "kind": "none"}, "start_ns": 5, "duration_ns": 1, "ret": 0, "ok": true});
    for x in [&mut v, &mut o, &mut c] {
        x.as_object_mut()
            .expect("object")
            .extend(p.as_object().expect("object").clone());
    }
    let (v, o, c) = (ev(v), ev(o), ev(c));
    assert_eq!(
        typed::call_name(&v).as_deref(),
        Some("ioctl NV_ESC_RM_CONTROL NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION")
    );
    assert_eq!(typed::result(&v), "NV_OK");
    assert_eq!(
        typed::call_name(&o).as_deref(),
        Some("open /dev/nvidia-uvm")
    );
    assert_eq!(typed::result(&o), "ok, device none");
    assert_eq!(typed::call_name(&c), None);
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
