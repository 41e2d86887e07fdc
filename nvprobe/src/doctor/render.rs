//! The text form of a run: one line per check, each followed by its hint.

use super::{Check, Verdict};

/// One line per check, then the hints.
pub fn text(checks: &[Check]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for c in checks {
        let v = match c.verdict {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
        };
        let _ = writeln!(s, "{v} {:<7} {:<14} {}", c.area, c.id, c.evidence);
        if let Some(h) = &c.hint {
            let _ = writeln!(s, "     hint: {h}");
        }
    }
    s
}
