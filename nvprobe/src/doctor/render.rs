//! The text form of a run: one line per check, each followed by its hint.

use super::check::{Check, Verdict};

/// One line per check, then the hints. Evidence and hints can hold what a
/// host tree or a process wrote (file names inside an archive, a
/// library's path, a kernel-log line quoting a process's name): made safe
/// for a terminal, a newline in them is no line of its own.
pub fn text(checks: &[Check]) -> String {
    use nvprobe_model::decode::terminal_safe as safe;
    use std::fmt::Write as _;
    let mut s = String::new();
    for c in checks {
        let v = match c.verdict {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
        };
        let _ = writeln!(s, "{v} {:<7} {:<14} {}", c.area, c.id, safe(&c.evidence));
        if let Some(h) = &c.hint {
            let _ = writeln!(s, "     hint: {}", safe(h));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 23, item 1: a hostile name in a check's evidence or hint
    /// (newline, CR, ESC, BEL, U+202E, the escape of invalid UTF-8) makes
    /// no line of its own and no terminal command.
    #[test]
    fn hostile_evidence_stays_on_its_line() {
        let evil = "lib\n== FAIL fake\r\u{1b}]0;pwn\u{7}\u{202e}x";
        let c = Check {
            area: "libs",
            id: "libcuda",
            verdict: Verdict::Warn,
            evidence: format!(
                "{evil} {}",
                nvprobe_model::decode::escape_bytes(b"\xff\xfe")
            ),
            hint: Some(evil.into()),
        };
        let t = text(&[c]);
        assert_eq!(t.lines().count(), 2, "{t}");
        for bad in ['\r', '\u{1b}', '\u{7}', '\u{202e}'] {
            assert!(!t.contains(bad), "{bad:?} in {t}");
        }
        assert!(
            t.contains("lib\\x0a== FAIL fake") && t.contains("\\xff\\xfe"),
            "{t}"
        );
    }
}
