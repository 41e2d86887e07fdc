//! Nothing a traced process wrote reaches a terminal raw through the text
//! output (issue 23, item 1): its name, executable, command line,
//! environment, paths in evidence, whether read live (escaped at read) or
//! from a recording (escaped when rendered).

use crate::attribution::ProcessInfo;
use crate::correlate::{Class, CuInit, DiagId, Outcome, Record};

const HOSTILE: &str = "0\n== python3[1] cuInit ok: forged\r\x1b[2J\x1b]0;pwn\x07\u{202e}txt.exe";

fn hostile_verdict() -> CuInit {
    let mut env = std::collections::BTreeMap::new();
    env.insert("CUDA_VISIBLE_DEVICES".to_owned(), HOSTILE.to_owned());
    CuInit {
        headline: None,
        detail: Vec::new(),
        cuinit_seen: true,
        pid: 7,
        comm: HOSTILE.into(),
        result: Outcome::Failed,
        source: "driver calls alone (no libcuda uprobe)",
        text: format!("stopped before any driver call: the dynamic loader opened {HOSTILE}"),
        total_ms: 1.0,
        stages: Vec::new(),
        calls: 0,
        failed_call: None,
        signal: None,
        exit: None,
        curesult: None,
        context: None,
        diagnoses: vec![crate::correlate::table::diag(
            DiagId::LibcudaUnloadable,
            format!("the dynamic loader opened {HOSTILE} and could not load it"),
        )],
        class: Class::Cuda,
        process: Some(ProcessInfo {
            pid: 7,
            exe: Some(HOSTILE.into()),
            cmdline: Some(vec![HOSTILE.into()]),
            env,
            ..ProcessInfo::default()
        }),
        gpus: Vec::new(),
        failed_syscalls: Vec::new(),
    }
}

#[test]
fn a_verdict_with_hostile_fields_stays_on_its_own_lines() {
    let text = super::text::record_text(&Record::Cuinit(Box::new(hostile_verdict())));
    // The header (its first line too long: broken at a space, the rest
    // indented), how long it took, the process line, the diagnosis and
    // its hint: six lines, each begun by nvprobe.
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert!(
        lines[0].starts_with("== 0\\x0a== python3[1] cuInit ok: forged\\x0d\\x1b[2J"),
        "{}",
        lines[0]
    );
    assert!(lines[1].starts_with("     forged\\x0d"), "{}", lines[1]);
    assert!(lines[2].starts_with("   took 1.0 ms, 0 driver calls; seen by "));
    assert!(lines[3].starts_with("   process: "));
    assert!(lines[4].starts_with("   ! libcuda_unloadable: "));
    assert!(lines[5].starts_with("     hint: "));
    for c in text.chars() {
        assert!(
            c == '\n' || !(c.is_control() || c == '\u{202e}'),
            "raw {:?} in {text}",
            c
        );
    }
    assert!(text.contains("\\u{202e}txt.exe"), "{text}");
}

#[test]
fn escaped_bytes_carry_no_reordering_characters() {
    let e = crate::decode::escape_bytes("a\u{202e}b\u{2066}c\u{200f}d".as_bytes());
    assert_eq!(e, "a\\u{202e}b\\u{2066}c\\u{200f}d");
    // Text already escaped passes the renderer unchanged (no second escape).
    assert_eq!(crate::decode::terminal_safe(&e), e);
    assert_eq!(crate::decode::terminal_safe("ok \\x0a"), "ok \\x0a");
}
