//! `cargo xtask test`'s account of a run: one row per tier (per test
//! binary in the test tier, per kernel in the kernel tier) with what
//! passed, failed and was skipped, and why; and the readers that fill it:
//! cargo's and libtest's output (read while it streams past), the skips
//! the tests record (tests/src/harness.rs `skip`), and nvvmtest's lines
//! in a VM's console.

use std::{collections::BTreeSet, fmt::Write as _, time::Duration};

/// One line of the summary.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Row {
    /// "fmt", "tests/root_attach.rs", "kernel 6.1 real driver".
    pub name: String,
    pub passed: usize,
    /// What failed: test names, checks, or the reason a tier failed.
    pub failed: Vec<String>,
    /// What was skipped, each with its reason ("NAME: REASON").
    pub skipped: Vec<String>,
    pub took: Option<Duration>,
    /// Said after the counts (a failure's remedy, what was checked).
    pub note: Option<String>,
}

impl Row {
    pub fn passed(name: &str, took: Duration, note: Option<String>) -> Row {
        Row {
            name: name.to_owned(),
            passed: 1,
            took: Some(took),
            note,
            ..Row::default()
        }
    }
    pub fn failed(name: &str, took: Option<Duration>, why: String) -> Row {
        Row {
            name: name.to_owned(),
            failed: vec![why],
            took,
            ..Row::default()
        }
    }
    pub fn skipped(name: &str, why: &str) -> Row {
        Row {
            name: name.to_owned(),
            skipped: vec![why.to_owned()],
            ..Row::default()
        }
    }
    /// A check that ran: passed, or failed with the error (and a remedy).
    pub fn check(name: &str, took: Duration, r: anyhow::Result<()>, remedy: &str) -> Row {
        match r {
            Ok(()) => Row::passed(name, took, None),
            Err(e) if remedy.is_empty() => Row::failed(name, Some(took), format!("{e:#}")),
            Err(e) => Row::failed(name, Some(took), format!("{e:#} ({remedy})")),
        }
    }
}

/// The rows of one tier, under a heading when there are several.
#[derive(Debug, Default)]
pub struct Tier {
    pub name: String,
    pub rows: Vec<Row>,
    pub took: Option<Duration>,
    /// Lines said under the tier (what was left behind, folders kept).
    pub notes: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Summary {
    pub tiers: Vec<Tier>,
}

impl Summary {
    /// A tier of one row.
    pub fn push(&mut self, row: Row) {
        self.tiers.push(Tier {
            name: row.name.clone(),
            took: row.took,
            rows: vec![row],
            notes: Vec::new(),
        });
    }

    /// (passed, failed, skipped) over every row.
    pub fn totals(&self) -> (usize, usize, usize) {
        let rows = self.tiers.iter().flat_map(|t| &t.rows);
        rows.fold((0, 0, 0), |(p, f, s), r| {
            (p + r.passed, f + r.failed.len(), s + r.skipped.len())
        })
    }

    /// The summary: a line per row (its failures under it), the skips
    /// with their reasons (a reason shared by more than three tests once,
    /// with where), and the totals last.
    pub fn render(&self, title: &str, took: Duration) -> String {
        let mut out = format!("== {title}: summary ({})\n", human(took));
        let width = self
            .tiers
            .iter()
            .flat_map(|t| {
                std::iter::once(t.name.len()).chain(
                    t.rows
                        .iter()
                        .map(|r| r.name.len() + if t.rows.len() > 1 { 2 } else { 0 }),
                )
            })
            .max()
            .unwrap_or(0)
            .min(48);
        let mut skips = Vec::new();
        for t in &self.tiers {
            let single = t.rows.len() == 1 && t.rows[0].name == t.name;
            if single {
                row_line(&mut out, "", &t.rows[0], width);
            } else {
                let (p, f, s) = t.rows.iter().fold((0, 0, 0), |(p, f, s), r| {
                    (p + r.passed, f + r.failed.len(), s + r.skipped.len())
                });
                let _ = writeln!(
                    out,
                    "{:<width$}  {}{}",
                    t.name,
                    counts(p, f, s),
                    t.took
                        .map(|d| format!("  ({})", human(d)))
                        .unwrap_or_default()
                );
                for r in &t.rows {
                    row_line(&mut out, "  ", r, width);
                }
            }
            for n in &t.notes {
                let _ = writeln!(out, "  note: {n}");
            }
            for r in &t.rows {
                for s in &r.skipped {
                    // "TEST: REASON" in a test binary's row, REASON alone in
                    // a check's.
                    match s.split_once(": ") {
                        Some((test, why)) if !single => {
                            skips.push((
                                r.name.clone(),
                                format!("{} {test}", r.name),
                                why.to_owned(),
                            ));
                        }
                        _ => skips.push((r.name.clone(), r.name.clone(), s.clone())),
                    }
                }
            }
        }
        if !skips.is_empty() {
            out.push_str("skipped, and why:\n");
            let mut reasons: Vec<&str> = Vec::new();
            for (_, _, why) in &skips {
                if !reasons.contains(&why.as_str()) {
                    reasons.push(why);
                }
            }
            for why in reasons {
                let these: Vec<_> = skips.iter().filter(|(_, _, w)| w == why).collect();
                if these.len() > 3 {
                    let mut rows: Vec<(&str, usize)> = Vec::new();
                    for (row, _, _) in &these {
                        match rows.iter_mut().find(|(r, _)| r == row) {
                            Some((_, n)) => *n += 1,
                            None => rows.push((row, 1)),
                        }
                    }
                    let _ = writeln!(
                        out,
                        "  {} tests: {why} ({})",
                        these.len(),
                        rows.iter()
                            .map(|(r, n)| format!("{r}: {n}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                } else {
                    for (_, place, _) in these {
                        let _ = writeln!(out, "  {place}: {why}");
                    }
                }
            }
        }
        let (p, f, s) = self.totals();
        let _ = writeln!(out, "{p} passed, {f} failed, {s} skipped");
        out
    }
}

fn row_line(out: &mut String, indent: &str, r: &Row, width: usize) {
    let w = width.saturating_sub(indent.len());
    let _ = writeln!(
        out,
        "{indent}{:<w$}  {}{}{}",
        r.name,
        counts(r.passed, r.failed.len(), r.skipped.len()),
        r.took
            .map(|d| format!("  ({})", human(d)))
            .unwrap_or_default(),
        r.note
            .as_ref()
            .map(|n| format!("  {n}"))
            .unwrap_or_default()
    );
    for f in &r.failed {
        let _ = writeln!(out, "{indent}    FAILED {f}");
    }
}

fn counts(p: usize, f: usize, s: usize) -> String {
    let mut c = format!("{p} passed");
    if f > 0 {
        let _ = write!(c, ", {f} failed");
    }
    if s > 0 {
        let _ = write!(c, ", {s} skipped");
    }
    c
}

pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{} min {} s", s / 60, s % 60)
    } else if d.as_secs_f64() >= 10.0 {
        format!("{s} s")
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// What one libtest line `test result: ok. 5 passed; 0 failed; …` says.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Counts {
    pub passed: usize,
    pub failed: usize,
    pub ignored: usize,
    pub filtered: usize,
    pub secs: Option<f64>,
}

/// The counts of a `test result:` line (anywhere in it: a child process's
/// output can share the line), or None if it is not one.
pub fn parse_result(line: &str) -> Option<Counts> {
    let rest = &line[line.find("test result: ")? + "test result: ".len()..];
    let (_status, rest) = rest.split_once(". ")?;
    let mut c = Counts::default();
    let mut any = false;
    for part in rest.split(';') {
        let part = part.trim();
        if let Some(t) = part.strip_prefix("finished in ") {
            c.secs = t.trim_end_matches('s').parse().ok();
            continue;
        }
        let Some((n, what)) = part.split_once(' ') else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else {
            continue;
        };
        any = true;
        match what.trim() {
            "passed" => c.passed = n,
            "failed" => c.failed = n,
            "ignored" => c.ignored = n,
            "filtered out" => c.filtered = n,
            _ => {}
        }
    }
    any.then_some(c)
}

/// One test binary cargo ran (or a doc-test run).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Binary {
    /// "tests/root_attach.rs", "nvprobe: unittests src/lib.rs",
    /// "doc-tests nvprobe_model".
    pub label: String,
    /// The executable's file name (`root_attach-0123abcd`), which the
    /// tests' skip records name.
    pub exe: Option<String>,
    pub counts: Option<Counts>,
    pub failed_tests: Vec<String>,
    pub ignored_tests: Vec<String>,
    /// cargo's "process didn't exit successfully: …" for it.
    pub exit: Option<String>,
    /// The test that had started and not ended (for a binary that died).
    pub running: Option<String>,
}

/// cargo test's output, line by line, as it comes.
#[derive(Debug, Default)]
pub struct TestLog {
    pub binaries: Vec<Binary>,
    /// "could not compile `nvprobe-tests` (test "x") due to 2 previous errors".
    pub build_failures: Vec<String>,
    /// The binary whose `test result:` line has not come yet.
    current: Option<usize>,
    /// The names under the latest `failures:` line of the current binary.
    failures_list: Option<Vec<String>>,
}

impl TestLog {
    pub fn feed(&mut self, raw: &str) {
        let line = strip_ansi(raw);
        let line = line.trim_end_matches(['\r', '\n']);
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("Running ")
            && let Some((what, exe)) = rest.strip_suffix(')').and_then(|r| r.rsplit_once(" ("))
        {
            let exe = exe.rsplit('/').next().unwrap_or(exe).to_owned();
            let label = if what.starts_with("unittests ") {
                let krate = exe.rsplit_once('-').map_or(exe.as_str(), |(k, _)| k);
                format!("{krate}: {what}")
            } else {
                what.to_owned()
            };
            self.start(label, Some(exe));
        } else if let Some(krate) = t.strip_prefix("Doc-tests ") {
            self.start(format!("doc-tests {}", krate.trim()), None);
        } else if let Some(c) = parse_result(line) {
            let i = match self.current {
                Some(i) => i,
                None => {
                    self.start("(a test binary cargo did not name)".into(), None);
                    self.binaries.len() - 1
                }
            };
            let b = &mut self.binaries[i];
            b.counts = Some(c);
            if let Some(list) = self.failures_list.take().filter(|l| !l.is_empty()) {
                b.failed_tests = list;
            }
            self.current = None;
        } else if t == "failures:" {
            if self.current.is_some() {
                self.failures_list = Some(Vec::new());
            }
        } else if let Some(list) = &mut self.failures_list
            && line.starts_with("    ")
            && !t.is_empty()
        {
            list.push(t.to_owned());
        } else if let Some(rest) = t.strip_prefix("test ")
            && let Some((name, result)) = rest.rsplit_once(" ... ")
            && let Some(i) = self.current
        {
            let b = &mut self.binaries[i];
            let (name, result) = (name.trim().to_owned(), result.trim());
            // "ok", "FAILED", "ignored[, REASON]"; anything else is what
            // another process wrote while the test ran.
            b.running = None;
            if result == "FAILED" {
                if !b.failed_tests.contains(&name) {
                    b.failed_tests.push(name);
                }
            } else if result.starts_with("ignored") {
                if !b.ignored_tests.contains(&name) {
                    b.ignored_tests.push(name);
                }
            } else if result != "ok" {
                b.running = Some(name);
            }
        } else if let Some(e) = t.strip_prefix("error: could not compile ") {
            self.build_failures
                .push(format!("could not compile {}", e.trim_end_matches(';')));
        } else if let Some(i) = self.current
            && matches!(t, "ok" | "FAILED")
        {
            // The end of a test line another process's output broke.
            let b = &mut self.binaries[i];
            if let Some(name) = b.running.take()
                && t == "FAILED"
                && !b.failed_tests.contains(&name)
            {
                b.failed_tests.push(name);
            }
        } else if t.starts_with("process didn't exit successfully: ") {
            // cargo's words for a binary that failed or died: kept for the
            // one that gave no result line.
            if let Some(b) = self
                .binaries
                .iter_mut()
                .rev()
                .find(|b| b.exe.as_ref().is_some_and(|e| t.contains(e.as_str())))
            {
                b.exit = Some(t.to_owned());
            }
        }
    }

    fn start(&mut self, label: String, exe: Option<String>) {
        self.binaries.push(Binary {
            label,
            exe,
            ..Binary::default()
        });
        self.current = Some(self.binaries.len() - 1);
        self.failures_list = None;
    }

    /// The test tier's rows: one per binary that ran tests or failed,
    /// with the skips recorded (`EXE\tTEST\tREASON` lines), then one per
    /// compile failure; and how many binaries had no tests at all.
    /// `cargo_failed`: cargo's own status said failure (one row more if
    /// nothing here explains it).
    pub fn rows(&self, skips: &str, cargo_failed: Option<String>) -> (Vec<Row>, usize) {
        let mut skip_of: Vec<(String, String, String)> = skips
            .lines()
            .filter_map(|l| {
                let mut f = l.splitn(3, '\t');
                Some((f.next()?.into(), f.next()?.into(), f.next()?.into()))
            })
            .collect();
        let mut rows = Vec::new();
        let mut empty = 0;
        for b in &self.binaries {
            let mut row = Row {
                name: b.label.clone(),
                ..Row::default()
            };
            row.failed = b.failed_tests.clone();
            let mut seen = BTreeSet::new();
            skip_of.retain(|(exe, test, why)| {
                if b.exe.as_deref() != Some(exe.as_str()) {
                    return true;
                }
                // A test that skipped part of itself and then failed is a
                // failure; a test that skips twice is one skip.
                if !b.failed_tests.contains(test) && seen.insert(test.clone()) {
                    row.skipped.push(format!("{test}: {why}"));
                }
                false
            });
            for t in &b.ignored_tests {
                row.skipped.push(format!("{t}: #[ignore]"));
            }
            match b.counts {
                Some(c) => {
                    row.passed = c.passed.saturating_sub(seen.len());
                    // Failures libtest counted that no line named.
                    if c.failed > row.failed.len() {
                        let n = c.failed - row.failed.len();
                        row.failed.push(format!("{n} more (unnamed in the output)"));
                    }
                    // Ignored tests whose lines were lost.
                    for _ in b.ignored_tests.len()..c.ignored {
                        row.skipped.push("a test: #[ignore]".into());
                    }
                    row.took = c.secs.map(Duration::from_secs_f64);
                    if c.passed + c.failed + c.ignored == 0 {
                        empty += 1;
                        continue;
                    }
                }
                None => row.failed.push(format!(
                    "no `test result:` line: the binary did not finish{} ({})",
                    b.running
                        .as_ref()
                        .map(|t| format!(", in test {t}"))
                        .unwrap_or_default(),
                    b.exit
                        .as_deref()
                        .unwrap_or("crashed, killed, or its output was cut")
                )),
            }
            rows.push(row);
        }
        for f in &self.build_failures {
            rows.push(Row::failed("build", None, f.clone()));
        }
        for (exe, test, why) in skip_of {
            rows.push(Row {
                name: format!("({exe}: not among the binaries cargo ran)"),
                skipped: vec![format!("{test}: {why}")],
                ..Row::default()
            });
        }
        if let Some(status) = cargo_failed
            && rows.iter().all(|r| r.failed.is_empty())
        {
            rows.push(Row::failed(
                "cargo test",
                None,
                format!("{status}, and its output names no failure (see above)"),
            ));
        }
        (rows, empty)
    }
}

/// Drop terminal colour sequences (`ESC [ … letter`).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// nvvmtest's checks in a VM's console: (ok, failed, skipped) from its
/// `NVVM: ok   SCENARIO: WHAT`, `NVVM: FAIL SCENARIO: WHAT` and `NVVM: skip
/// NAME: WHY` lines.
pub fn vm_checks(console: &str) -> (usize, Vec<String>, Vec<String>) {
    let mut ok = 0;
    let mut failed = Vec::new();
    let mut skipped = Vec::new();
    for l in console.lines().map(str::trim) {
        if l.starts_with("NVVM: ok ") {
            ok += 1;
        } else if let Some(f) = l.strip_prefix("NVVM: FAIL ") {
            failed.push(f.trim().to_owned());
        } else if let Some(s) = l.strip_prefix("NVVM: skip ") {
            skipped.push(s.trim().to_owned());
        }
    }
    (ok, failed, skipped)
}

#[cfg(test)]
mod tests;
