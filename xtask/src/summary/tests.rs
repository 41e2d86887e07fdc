//! The readers on captured output: cargo test runs kept in `logs/`
//! (a real nvprobe run whose root_capabilities binary failed, and a small
//! crate's run with a failing, a crashing and an ignored test, and one
//! with a test that does not compile).

use super::*;

fn read(log: &str) -> TestLog {
    let mut t = TestLog::default();
    for l in log.lines() {
        t.feed(l);
    }
    t
}

const FAILING: &str = include_str!("logs/failing-crashing-ignored.log");
const COMPILE: &str = include_str!("logs/compile-error.log");
const CAPS: &str = include_str!("logs/root-capabilities-failing.log");

#[test]
fn result_lines_give_their_counts() {
    let c = parse_result(
        "test result: FAILED. 4 passed; 2 failed; 1 ignored; 0 measured; 3 filtered out; finished in 18.65s",
    )
    .expect("a result line");
    assert_eq!(
        c,
        Counts {
            passed: 4,
            failed: 2,
            ignored: 1,
            filtered: 3,
            secs: Some(18.65)
        }
    );
    // Another process's words in front of it on the same line.
    let c = parse_result("child words test result: ok. 7 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s")
        .expect("still a result line");
    assert_eq!(c.passed, 7);
    assert_eq!(parse_result("test foo ... ok"), None);
    assert_eq!(parse_result("test result: nothing here"), None);
}

#[test]
fn a_failing_binary_names_its_failed_tests_and_not_its_captured_output() {
    let t = read(CAPS);
    assert_eq!(t.binaries.len(), 1);
    let b = &t.binaries[0];
    assert_eq!(b.label, "tests/root_capabilities.rs");
    assert_eq!(b.exe.as_deref(), Some("root_capabilities-298166ca583067a1"));
    assert_eq!(b.counts.map(|c| (c.passed, c.failed)), Some((4, 2)));
    assert_eq!(
        b.failed_tests,
        [
            "a_missing_bpf_or_perfmon_capability_is_a_clear_error",
            "libcuda_uprobes_need_cap_sys_admin_only_through_perf_events"
        ]
    );
    let (rows, empty) = t.rows("", Some("exit status: 101".into()));
    assert_eq!(empty, 0);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0].passed, 4);
    assert_eq!(rows[0].failed.len(), 2);
    assert_eq!(rows[0].took, Some(Duration::from_secs_f64(18.65)));
}

#[test]
fn failing_crashing_ignored_and_empty_binaries() {
    let t = read(FAILING);
    let labels: Vec<&str> = t.binaries.iter().map(|b| b.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "demo: unittests src/lib.rs",
            "tests/crash.rs",
            "tests/ok.rs",
            "doc-tests demo"
        ]
    );
    let (rows, empty) = t.rows("", Some("exit status: 101".into()));
    assert_eq!(empty, 1, "the doc-tests ran no test");
    assert_eq!(rows.len(), 3, "{rows:#?}");
    // The unit tests: "some captured words / indented like a name" in the
    // failing test's output is not a test name.
    assert_eq!(rows[0].passed, 1);
    assert_eq!(rows[0].failed, ["tests::breaks"]);
    assert_eq!(rows[0].skipped, ["tests::later: #[ignore]"]);
    // The binary that aborted: no result line, the test it was in, cargo's
    // words.
    assert_eq!(rows[1].passed, 0);
    assert_eq!(rows[1].failed.len(), 1);
    let why = &rows[1].failed[0];
    assert!(why.contains("in test dies"), "{why}");
    assert!(why.contains("signal: 6, SIGABRT"), "{why}");
    // A child's stderr inside a test line does not hide its `ok`.
    assert_eq!(rows[2].passed, 2);
    assert!(rows[2].failed.is_empty());
}

#[test]
fn a_test_that_does_not_compile_is_a_failure() {
    let t = read(COMPILE);
    assert!(t.binaries.is_empty());
    assert_eq!(
        t.build_failures,
        ["could not compile `demo` (test \"broken\") due to 1 previous error"]
    );
    let (rows, _) = t.rows("", Some("exit status: 101".into()));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].name, "build");
    assert_eq!(rows[0].failed.len(), 1);
}

#[test]
fn skips_move_tests_from_passed_to_skipped_with_their_reasons() {
    let t = read(FAILING);
    let skips = "ok-3beb59c195250f0d\tfine\tprometheus is not installed\n\
                 ok-3beb59c195250f0d\tfine\tprometheus is not installed\n\
                 demo-8348ca7a80742723\ttests::breaks\tpartly skipped, then failed\n\
                 gone-0000\tsomething\tnot root\n";
    let (rows, _) = t.rows(skips, None);
    let ok = rows
        .iter()
        .find(|r| r.name == "tests/ok.rs")
        .expect("ok.rs");
    assert_eq!(ok.passed, 1);
    assert_eq!(ok.skipped, ["fine: prometheus is not installed"]);
    let unit = &rows[0];
    assert_eq!(unit.passed, 1);
    assert_eq!(unit.failed, ["tests::breaks"], "a failure stays a failure");
    assert_eq!(unit.skipped, ["tests::later: #[ignore]"]);
    let stray = rows.last().expect("a row");
    assert!(stray.name.contains("gone-0000"), "{stray:?}");
    assert_eq!(stray.skipped, ["something: not root"]);
}

#[test]
fn a_failed_cargo_that_names_no_failure_is_still_a_failure() {
    let t = read(
        "     Running tests/ok.rs (/t/debug/deps/ok-1)\n\nrunning 1 test\ntest a ... ok\n\n\
         test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n",
    );
    let (rows, _) = t.rows("", Some("exit status: 101".into()));
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].name, "cargo test");
    assert_eq!(rows[1].failed.len(), 1);
    let (rows, _) = t.rows("", None);
    assert_eq!(rows.len(), 1);
}

#[test]
fn colours_do_not_hide_lines() {
    let t = read(
        "\u{1b}[1m\u{1b}[92m     Running\u{1b}[0m tests/ok.rs (/t/debug/deps/ok-1)\n\
         test result: \u{1b}[32mok\u{1b}[0m. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s\n",
    );
    assert_eq!(t.binaries.len(), 1);
    assert_eq!(t.binaries[0].counts.map(|c| c.passed), Some(3));
}

#[test]
fn vm_consoles_count_nvvmtest_checks() {
    let console = "NVVM: kernel 6.1.0-57-amd64\n\
                   NVVM: ok   attach: kprobes attached\n\
                   NVVM: ok   attach: records came\n\
                   NVVM: FAIL hooks: rm_ioctl fired\n\
                   NVVM: skip real_mismatch: no libcuda of another version\n\
                   NVVM: attach: 2 passed, 0 failed\n\
                   NVVM-RESULT: FAIL\n";
    let (ok, failed, skipped) = vm_checks(console);
    assert_eq!(ok, 2);
    assert_eq!(failed, ["hooks: rm_ioctl fired"]);
    assert_eq!(skipped, ["real_mismatch: no libcuda of another version"]);
}

#[test]
fn the_summary_ends_with_the_totals() {
    let mut s = Summary::default();
    s.push(Row::passed("fmt", Duration::from_secs(2), None));
    s.push(Row::failed(
        "clippy",
        Some(Duration::from_secs(50)),
        "cargo clippy failed".into(),
    ));
    let t = read(FAILING);
    let (rows, _) = t.rows("", Some("exit status: 101".into()));
    s.tiers.push(Tier {
        name: "tests".into(),
        rows,
        took: Some(Duration::from_secs(75)),
        notes: vec!["1 test binary ran no tests".into()],
    });
    s.push(Row::skipped("kernel tier", "--no-vm"));
    assert_eq!(s.totals(), (4, 3, 2));
    let text = s.render("cargo xtask test", Duration::from_secs(130));
    let last = text.lines().last().expect("a line");
    assert_eq!(last, "4 passed, 3 failed, 2 skipped");
    assert!(
        text.starts_with("== cargo xtask test: summary (2 min 10 s)\n"),
        "{text}"
    );
    assert!(text.contains("\n      FAILED tests::breaks\n"), "{text}");
    assert!(
        text.contains("\n    FAILED cargo clippy failed\n"),
        "{text}"
    );
    assert!(text.contains("\n  kernel tier: --no-vm\n"), "{text}");
    assert!(
        text.contains("\n  demo: unittests src/lib.rs tests::later: #[ignore]\n"),
        "{text}"
    );
}

#[test]
fn a_reason_many_tests_share_is_said_once() {
    let row = |name: &str, tests: &[&str]| Row {
        name: name.into(),
        skipped: tests
            .iter()
            .map(|t| format!("{t}: loading BPF programs needs root"))
            .collect(),
        ..Row::default()
    };
    let mut s = Summary::default();
    s.tiers.push(Tier {
        name: "tests".into(),
        rows: vec![
            row("tests/root_attach.rs", &["a", "b"]),
            row("tests/root_decode.rs", &["c", "d", "e"]),
        ],
        ..Tier::default()
    });
    let text = s.render("cargo xtask test", Duration::from_secs(1));
    assert!(
        text.contains("\n  5 tests: loading BPF programs needs root (tests/root_attach.rs: 2, tests/root_decode.rs: 3)\n"),
        "{text}"
    );
    assert!(
        text.ends_with("\n0 passed, 0 failed, 5 skipped\n"),
        "{text}"
    );
}
