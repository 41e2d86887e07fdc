//! Tier 1, through the binary (issue 27, item 2): what `--help` says. No
//! rustdoc syntax reaches it (`watch --help` showed "([`STARTUP`])"); each
//! subcommand's help ends with the exit codes it can end with, from the one
//! table in nvprobe/src/cli/mod.rs (whose unit test checks the rendering
//! against the table itself); `decode` says what -o and --driver-version
//! mean for a recording, not watch's words. No root needed.

use std::{collections::BTreeMap, process::Command};

use nvprobe_tests::harness::bin;

const SUBCOMMANDS: [&str; 10] = [
    "watch",
    "top",
    "decode",
    "diff",
    "export",
    "schema",
    "doctor",
    "hooks",
    "completions",
    "manpage",
];

fn help(args: &[&str]) -> String {
    let o = Command::new(bin("nvprobe"))
        .args(args)
        .output()
        .expect("run nvprobe");
    assert_eq!(o.status.code(), Some(0), "{args:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The "Exit codes:" block of a help text: code -> what it means.
fn exit_codes(text: &str) -> BTreeMap<u8, String> {
    let at = text.find("\nExit codes:\n").expect("an Exit codes block");
    text[at..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let l = l.trim_start();
            let (code, meaning) = l.split_once("  ").expect("CODE  MEANING");
            (code.parse().expect("a code"), meaning.to_owned())
        })
        .collect()
}

#[test]
fn no_help_shows_rustdoc_syntax() {
    let mut texts = vec![help(&["--help"]), help(&["-h"])];
    for s in SUBCOMMANDS {
        texts.push(help(&[s, "--help"]));
        texts.push(help(&[s, "-h"]));
    }
    for t in &texts {
        for bad in ["[`", "`]", "[crate::", "](", "///"] {
            assert!(!t.contains(bad), "{bad:?} in\n{t}");
        }
    }
    // The text that had the link says the set's size instead.
    let w = help(&["watch", "--help"]);
    assert!(
        w.lines().any(|l| {
            let l = l.split_whitespace().collect::<Vec<_>>().join(" ");
            l.contains("- startup: The calls a program makes while it starts CUDA (58 functions)")
        }),
        "{w}"
    );
}

#[test]
fn every_help_ends_with_its_exit_codes() {
    let top = exit_codes(&help(&["--help"]));
    assert_eq!(top.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5]);
    assert!(
        top[&0].contains("the reader of nvprobe's output goes away"),
        "{top:?}"
    );
    assert!(
        top[&5].contains("doctor: a check failed (FAIL; warnings alone exit 0)"),
        "{top:?}"
    );
    assert!(!top[&1].contains("a check failed"), "{top:?}");
    assert!(top[&4].contains("not permitted (not root"), "{top:?}");
    for s in SUBCOMMANDS {
        for flag in ["--help", "-h"] {
            let codes = exit_codes(&help(&[s, flag]));
            // Each line is the top-level one's, less the rows of other
            // subcommands.
            for (c, meaning) in &codes {
                let all = &top[c];
                for part in meaning.split("; ") {
                    assert!(all.contains(part), "{s} {c}: {part:?} not in {all:?}");
                }
            }
            let want: &[u8] = match s {
                "watch" | "top" => &[0, 1, 2, 3, 4],
                "doctor" => &[0, 1, 2, 5],
                _ => &[0, 1, 2],
            };
            assert_eq!(codes.keys().copied().collect::<Vec<_>>(), want, "{s}");
        }
    }
    let doctor = exit_codes(&help(&["doctor", "--help"]));
    assert!(doctor[&5].contains("a check failed"), "{doctor:?}");
    assert!(!doctor[&1].contains("a check failed"), "{doctor:?}");
    let watch = exit_codes(&help(&["watch", "--help"]));
    assert!(!watch[&1].contains("a check failed"), "{watch:?}");
    assert!(
        watch[&2].contains("a --pid of no running process"),
        "{watch:?}"
    );
    let decode = exit_codes(&help(&["decode", "--help"]));
    assert!(
        decode[&2].contains("a file that is not a recording"),
        "{decode:?}"
    );
}

/// The codes the help promises are the codes nvprobe ends with.
#[test]
fn the_codes_are_the_ones_nvprobe_ends_with() {
    let code = |args: &[&str]| {
        Command::new(bin("nvprobe"))
            .args(args)
            .output()
            .expect("run nvprobe")
            .status
            .code()
    };
    assert_eq!(code(&["watch", "--no-such-flag"]), Some(2));
    assert_eq!(code(&["decode", "/nonexistent.ndjson"]), Some(2));
    assert_eq!(code(&["hooks", "--btf-dir", "/nonexistent"]), Some(2));
    assert_eq!(code(&["schema"]), Some(0));
}

/// decode's -o and --driver-version: what they mean for a recording.
#[test]
fn decode_has_its_own_texts() {
    for flag in ["--help", "-h"] {
        let d = help(&["decode", flag]);
        let w = help(&["watch", flag]);
        assert!(!d.contains("running driver"), "{d}");
        assert!(!d.contains("once start-up has succeeded"), "{d}");
        assert!(
            d.contains("instead of the one the recording was made with"),
            "{d}"
        );
        assert!(
            d.contains("nothing is created for a file that is not a recording"),
            "{d}"
        );
        // watch keeps its own.
        assert!(w.contains("running driver's"), "{w}");
        assert!(w.contains("once start-up has succeeded"), "{w}");
    }
}

/// `--version` says the version, the git commit the binary was built from
/// (or "unknown" outside a checkout) and its build date: what a node's
/// operator quotes in a report.
#[test]
fn version_says_the_commit_and_the_build_date() {
    let o = Command::new(bin("nvprobe"))
        .arg("--version")
        .output()
        .expect("run nvprobe --version");
    assert!(o.status.success());
    let t = String::from_utf8_lossy(&o.stdout);
    let t = t.trim();
    let rest = t
        .strip_prefix(concat!("nvprobe ", env!("CARGO_PKG_VERSION"), " (commit "))
        .unwrap_or_else(|| panic!("{t}"));
    let (commit, date) = rest
        .strip_suffix(')')
        .and_then(|r| r.split_once(", built "))
        .unwrap_or_else(|| panic!("{t}"));
    let hex = commit.strip_suffix("-modified").unwrap_or(commit);
    assert!(
        commit == "unknown" || (hex.len() == 12 && hex.chars().all(|c| c.is_ascii_hexdigit())),
        "{t}"
    );
    let d: Vec<u32> = date
        .split('-')
        .map(|p| p.parse().expect("a number"))
        .collect();
    assert!(
        d.len() == 3 && d[0] >= 2026 && (1..=12).contains(&d[1]) && (1..=31).contains(&d[2]),
        "{t}"
    );
}

/// The shell completions offer the values --events and --format take, not
/// file names.
#[test]
fn completions_offer_the_levels_and_formats() {
    let o = std::process::Command::new(nvprobe_tests::harness::bin("nvprobe"))
        .args(["completions", "bash"])
        .output()
        .expect("run nvprobe completions");
    assert!(o.status.success());
    let bash = String::from_utf8_lossy(&o.stdout);
    let offered = |flag: &str| -> Vec<String> {
        bash.lines()
            .skip_while(|l| l.trim() != format!("{flag})"))
            .nth(1)
            .and_then(|l| l.split("compgen -W \"").nth(1))
            .and_then(|l| l.split('"').next())
            .map(|w| w.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    };
    assert_eq!(
        offered("--events"),
        ["all", "failures", "verdicts"],
        "{bash}"
    );
    assert_eq!(offered("--format"), ["text", "json", "otlp-json"], "{bash}");
}

/// Issue 38: every subcommand's help shows examples, and each example
/// parses (run with --help in place of its effect; a shell redirection or
/// pipe after it, and sudo before it, are left out); the manual page has
/// the same examples.
#[test]
fn every_subcommands_examples_parse() {
    for s in SUBCOMMANDS {
        let h = help(&[s, "--help"]);
        let at = h
            .find("\nExamples:\n")
            .unwrap_or_else(|| panic!("{s}: no examples\n{h}"));
        let lines: Vec<&str> = h[at..]
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with("  "))
            .filter(|l| !l.starts_with("      "))
            .map(str::trim)
            .collect();
        assert!(!lines.is_empty(), "{s}: {h}");
        for line in lines {
            let cmd = line.split(['>', '|']).next().unwrap_or("").trim();
            let words: Vec<&str> = cmd
                .split_whitespace()
                .skip_while(|w| *w == "sudo")
                .collect();
            assert_eq!(words.first(), Some(&"nvprobe"), "{line}");
            assert_eq!(words.get(1), Some(&s), "{line}");
            let o = Command::new(bin("nvprobe"))
                .args(&words[1..])
                .arg("--help")
                .output()
                .expect("run nvprobe");
            assert_eq!(
                o.status.code(),
                Some(0),
                "{line}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let man = Command::new(bin("nvprobe"))
            .args(["manpage", s])
            .output()
            .expect("run nvprobe");
        let page = String::from_utf8_lossy(&man.stdout);
        assert!(page.contains(".SH EXAMPLES"), "{s}: {page}");
    }
}
