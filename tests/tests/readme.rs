//! The README's usage is what the binary takes: every flag the Usage block
//! lists under a subcommand is in that subcommand's `--help`, and every
//! command line the README shows in a code block parses (run with `--help`
//! appended: clap refuses an unknown flag or a missing value before it
//! prints help, with exit 2). No root needed; nothing is traced.

use std::process::Command;

use nvprobe_tests::harness::bin;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).expect("README")
}

/// The lines of the README's fenced code blocks.
fn code_lines(text: &str) -> Vec<&str> {
    let mut inside = false;
    let mut out = Vec::new();
    for l in text.lines() {
        if l.starts_with("```") {
            inside = !inside;
            continue;
        }
        if inside {
            out.push(l);
        }
    }
    out
}

/// The subcommand of a usage line (`nvprobe watch [OPTIONS] …` → watch).
fn subcommand(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("sudo ").unwrap_or(line);
    let rest = rest.strip_prefix("nvprobe ")?;
    rest.split_whitespace()
        .next()
        .filter(|w| w.chars().all(|c| c.is_ascii_lowercase()))
}

fn help(sub: &str) -> String {
    let o = Command::new(bin("nvprobe"))
        .args([sub, "--help"])
        .output()
        .expect("run nvprobe");
    assert!(o.status.success(), "nvprobe {sub} --help: {o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The `--flags` of a usage text (not those inside backquotes, which are
/// examples of other commands).
fn flags(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut quoted = false;
    for (i, part) in text.split('`').enumerate() {
        quoted = i % 2 == 1;
        if quoted {
            continue;
        }
        for w in part.split(|c: char| {
            c.is_whitespace() || matches!(c, ',' | '(' | ')' | '[' | ']' | ';' | '/')
        }) {
            if let Some(f) = w.strip_prefix("--")
                && !f.is_empty()
                && f.chars().all(|c| c.is_ascii_lowercase() || c == '-')
            {
                out.push(format!("--{f}"));
            }
        }
    }
    let _ = quoted;
    out
}

/// Whether `line` shows `flag` with a value (`--pid PID`, one space and a
/// word in capitals) or without one (`--json   NDJSON …`: the description
/// after a wide gap, or the end); None when the line does not show it as
/// an option (only in a sentence).
fn shown_with_value(line: &str, flag: &str) -> Option<bool> {
    let at = line.find(&format!("{flag} ")).or_else(|| {
        line.trim_end()
            .ends_with(flag)
            .then(|| line.trim_end().len() - flag.len())
    })?;
    // As an option: the line starts with it (usage rows) or it is in a
    // command's synopsis (`nvprobe sub … --flag …`, `[--flag …]`).
    let before = &line[..at];
    let in_synopsis = line.trim_start().starts_with("nvprobe ") || before.ends_with('[');
    let in_row = before.trim().is_empty() || before.trim_end().ends_with(',');
    if !(in_synopsis || in_row) {
        return None;
    }
    let rest = &line[at + flag.len()..];
    if !rest.starts_with(' ') || rest.starts_with("  ") {
        return Some(false);
    }
    let word: String = rest[1..]
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != ']')
        .collect();
    let caps = word.chars().take_while(char::is_ascii_uppercase).count();
    Some(caps >= 1)
}

#[test]
fn every_flag_the_usage_lists_is_in_its_subcommands_help() {
    let text = readme();
    let start = text.find("## Usage").expect("a Usage section");
    let usage = &text[start..];
    let usage = &usage[..usage[3..].find("\n## ").map_or(usage.len(), |i| i + 3)];
    let mut current: Option<String> = None;
    let mut checked = 0;
    for line in code_lines(usage) {
        if let Some(s) = subcommand(line) {
            current = Some(s.to_owned());
        }
        let Some(sub) = &current else { continue };
        // `top` takes watch's options too; a line saying so names them.
        if line.contains("watch's options") {
            continue;
        }
        let h = help(sub);
        let h = if sub == "top" {
            format!("{h}{}", help("watch"))
        } else {
            h
        };
        for f in flags(line) {
            assert!(
                h.contains(&format!("{f} ")) || h.contains(&format!("{f}\n")),
                "README's usage shows {f} for `nvprobe {sub}`, which its --help does not have"
            );
            // A flag shown with a value takes one, and one shown bare
            // takes none (`--perfetto FILE` read as if FILE were its value).
            let takes = h.contains(&format!("{f} <"));
            if let Some(shown) = shown_with_value(line, &f) {
                assert_eq!(
                    shown,
                    takes,
                    "README shows `{f}` {} a value for `nvprobe {sub}`; its --help says it takes {}",
                    if shown { "with" } else { "without" },
                    if takes { "one" } else { "none" }
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked > 30,
        "only {checked} flags found in the Usage block"
    );
}

/// The other way: every flag of watch, decode and doctor is in the Usage
/// block (a flag a user cannot find is a flag nobody uses).
#[test]
fn every_flag_of_the_main_subcommands_is_in_the_usage() {
    let text = readme();
    let start = text.find("## Usage").expect("a Usage section");
    let usage = &text[start..];
    let shown = flags(&code_lines(usage).join("\n"));
    for sub in [
        "watch", "decode", "doctor", "diff", "export", "hooks", "top",
    ] {
        for line in help(sub).lines() {
            // Only the lines that define a flag ("  -o, --output <FILE>").
            let def = line.trim_start();
            if !def.starts_with('-') {
                continue;
            }
            let Some(f) = def.split([' ', ',']).find(|w| w.starts_with("--")) else {
                continue;
            };
            let f = f.split('=').next().unwrap_or(f);
            if f == "--help" || f == "--version" {
                continue;
            }
            assert!(
                shown.iter().any(|s| s == f),
                "`nvprobe {sub} {f}` is not in the README's Usage block"
            );
        }
    }
}

#[test]
fn every_command_line_the_readme_shows_parses() {
    let text = readme();
    let mut checked = 0;
    for line in code_lines(&text) {
        let Some(sub) = subcommand(line) else {
            continue;
        };
        // Usage lines (options in brackets, words in capitals) are checked
        // flag by flag above; these are commands as a person types them.
        if line.contains('[') || line.contains("  ") {
            continue;
        }
        let args: Vec<&str> = line
            .strip_prefix("sudo ")
            .unwrap_or(line)
            .split_whitespace()
            .skip(1)
            .collect();
        let o = Command::new(bin("nvprobe"))
            .args(&args)
            .arg("--help")
            .output()
            .expect("run nvprobe");
        assert!(
            o.status.success(),
            "README's `{line}` does not parse: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("nvprobe {sub}")));
        checked += 1;
    }
    assert!(checked >= 1, "no command line found in the README");
}

/// What the checks above rest on: a flag the binary lacks is caught.
#[test]
fn a_flag_the_binary_lacks_is_refused_before_help() {
    let o = Command::new(bin("nvprobe"))
        .args(["watch", "--no-such-flag", "--help"])
        .output()
        .expect("run nvprobe");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        !help("export").contains("--perfetto <"),
        "--perfetto takes no value"
    );
    assert_eq!(flags("--a-b x `--c` (--d)"), ["--a-b", "--d"]);
    // The usage line the README once had reads --perfetto as taking FILE:
    // the check above refuses it.
    let old = "nvprobe export --perfetto FILE -o OUT";
    assert_eq!(shown_with_value(old, "--perfetto"), Some(true));
    assert_eq!(
        shown_with_value("  --json               NDJSON", "--json"),
        Some(false)
    );
    assert_eq!(shown_with_value("  --pid PID  only", "--pid"), Some(true));
}

/// What the README and docs/LOG-PIPELINES.md say SIGHUP does is what
/// nvprobe does (root_reopen.rs runs it): the -o file is reopened; without
/// -o, `watch` goes on (pipeline/live.rs) and `top` stops. They once said
/// that without -o a SIGHUP stops nvprobe.
#[test]
fn sighup_is_described_as_it_behaves() {
    let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let readme = words(&readme());
    assert!(
        readme.contains(
            "SIGHUP reopens the -o file (logrotate); without -o watch ignores it (a reload must not stop a service logging to stdout), top stops"
        ),
        "the watch usage's SIGHUP line"
    );
    assert!(!readme.contains("without -o it stops nvprobe"));
    let pipelines = words(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/LOG-PIPELINES.md"
        ))
        .expect("LOG-PIPELINES.md"),
    );
    assert!(
        pipelines.contains("When `watch` writes to stdout, it ignores SIGHUP and keeps running"),
        "LOG-PIPELINES.md's SIGHUP paragraph"
    );
    assert!(!pipelines.contains("When nvprobe writes to stdout, SIGHUP stops it"));
}
