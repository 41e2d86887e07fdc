//! `cargo xtask test`: every tier, each run whatever the ones before it
//! gave, their output streaming past as it comes, and one summary at the
//! end (summary.rs; docs/TESTING.md shows it). Exits 1 when anything
//! failed.

use std::{
    collections::BTreeMap,
    fs,
    io::{Read as _, Write as _},
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{Command, ExitStatus, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use crate::{
    cargo, is_root,
    summary::{Row, Summary, TestLog, Tier},
    target_dir,
};

/// The variable the tests' skip helper writes to (tests/src/harness.rs).
const SKIPS_ENV: &str = "NVPROBE_TEST_SKIPS";

/// How long to keep reading after cargo has exited: a process a test left
/// running may hold the output pipe open; its words after that are lost.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(5);

pub fn test(no_lint: bool, no_vm: bool, no_package: bool) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let mut s = Summary::default();
    s.push(timed("setup", || crate::setup(false), ""));
    s.push(timed("test tools", crate::test_tools, ""));
    if no_lint {
        s.push(Row::skipped("fmt", "--no-lint"));
        s.push(Row::skipped("clippy", "--no-lint"));
    } else {
        s.push(timed(
            "fmt",
            || crate::sh(cargo().args(["fmt", "--all", "--", "--check"])),
            "run `cargo fmt --all`",
        ));
        s.push(timed(
            "clippy",
            || crate::sh(cargo().args(["clippy", "--all-targets", "--", "-D", "warnings"])),
            "its warnings are above",
        ));
    }
    // The root tests run the nvprobe and nvfixture binaries. (Default
    // members only: the eBPF crate builds for the bpf target, from
    // nvprobe/build.rs.)
    s.push(timed(
        "build",
        || crate::sh(cargo().args(["build", "--bins"])),
        "the compiler's words are above",
    ));
    if !is_root() {
        eprintln!(
            "xtask: not root: the tests that load BPF programs are ignored (run as root for all tiers)"
        );
    }
    let leaks_before = crate::leaked_uprobes();
    s.tiers.push(test_tier());
    // No test may leave a uprobe the kernel could not remove (its own
    // line, kernel/events/uprobes.c; a count of this host's log).
    s.push(match (leaks_before, crate::leaked_uprobes()) {
        (Some(a), Some(b)) if b > a => Row::failed(
            "leaked uprobes",
            None,
            format!(
                "the kernel logged {} new \"failed to unregister, leaking uprobe\" lines during the tests (dmesg)",
                b - a
            ),
        ),
        (Some(a), Some(b)) if b < a => Row::skipped(
            "leaked uprobes",
            "the kernel log wrapped during the tests: not checked",
        ),
        (Some(_), Some(_)) => Row {
            name: "leaked uprobes".into(),
            passed: 1,
            note: Some("no new \"leaking uprobe\" line in the kernel log".into()),
            ..Row::default()
        },
        _ => Row::skipped(
            "leaked uprobes",
            "the kernel log cannot be read here (dmesg): not checked",
        ),
    });
    // The kernel tier: kernels with kprobes under qemu (needs root and apt).
    if no_vm {
        s.push(Row::skipped("kernel tier", "--no-vm"));
    } else if !is_root() {
        s.push(Row::skipped(
            "kernel tier",
            "not root: it installs qemu and keeps a cache in /var/cache/nvprobe-vm (cargo xtask vm-test as root)",
        ));
    } else {
        let t = Instant::now();
        match crate::vm::kernel_tier(None, false) {
            Ok(rows) => s.tiers.push(Tier {
                name: "kernel tier".into(),
                rows,
                took: Some(t.elapsed()),
                notes: Vec::new(),
            }),
            Err(e) => s.push(Row::failed(
                "kernel tier",
                Some(t.elapsed()),
                format!("could not start: {e:#}"),
            )),
        }
    }
    // The package tier: the .deb built, judged by lintian and installed
    // into a clean root (needs root and apt; pkgtest.rs).
    if no_package {
        s.push(Row::skipped("package", "--no-package"));
    } else {
        s.tiers.push(crate::pkgtest::tier());
    }
    let text = s.render("cargo xtask test", t0.elapsed());
    let _ = std::io::stdout().flush();
    print!("\n{text}");
    let _ = std::io::stdout().flush();
    let file = target_dir().join("xtask-test/summary.txt");
    if fs::create_dir_all(file.parent().expect("parent"))
        .and_then(|()| fs::write(&file, &text))
        .is_err()
    {
        eprintln!("xtask: could not keep the summary in {}", file.display());
    }
    if s.totals().1 > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// Run one check, timed, into its row.
fn timed(name: &str, f: impl FnOnce() -> anyhow::Result<()>, remedy: &str) -> Row {
    let t = Instant::now();
    let r = f();
    if let Err(e) = &r {
        eprintln!("xtask: {name} failed: {e:#}; going on with the other tiers");
    }
    Row::check(name, t.elapsed(), r, remedy)
}

/// The unit and integration tests: cargo test over the default members,
/// one test at a time, every binary whatever the others gave. The tests
/// get a TMPDIR of their own and a file for their skips.
fn test_tier() -> Tier {
    let t0 = Instant::now();
    let mut notes = Vec::new();
    let rows = match run_tests(&mut notes) {
        Ok(rows) => rows,
        Err(e) => vec![Row::failed(
            "cargo test",
            Some(t0.elapsed()),
            format!("could not run: {e:#}"),
        )],
    };
    Tier {
        name: "tests".into(),
        rows,
        took: Some(t0.elapsed()),
        notes,
    }
}

fn run_tests(notes: &mut Vec<String>) -> anyhow::Result<Vec<Row>> {
    let dir = target_dir().join("xtask-test");
    fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
    let skips = dir.join("skips.tsv");
    let _ = fs::remove_file(&skips);
    // 0755: tests hand parts of their folders to other users' processes.
    let tmp = nix::unistd::mkdtemp(&std::env::temp_dir().join("nvprobe-xtask-test-XXXXXX"))
        .context("making the tests' TMPDIR")?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))?;
    // The tools unpacked under target/tools/ first (Prometheus).
    let path = std::env::join_paths(std::iter::once(crate::tools_bin()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))?;
    // The root tests are `#[ignore = "needs root"]` (a plain `cargo test`
    // lists them as ignored): as root, every one runs.
    let root = is_root();
    let test_cmd = |args: &[String]| {
        let mut c = cargo();
        c.arg("test")
            .args(args)
            .args(["--no-fail-fast", "--", "--test-threads=1"])
            .args(root.then_some("--include-ignored"))
            .env(SKIPS_ENV, &skips)
            .env("TMPDIR", &tmp)
            .env("PATH", &path);
        c
    };
    let mut log = TestLog::default();
    let status = stream(&mut test_cmd(&[]), &mut log, notes)?;
    let mut cargo_failed = (!status.success()).then(|| format!("cargo test: {status}"));
    if !log.build_failures.is_empty() {
        // cargo stops at a target that does not compile, before running
        // any test: run the ones that do, package by package.
        eprintln!(
            "xtask: {} test target(s) did not compile; running the others",
            log.build_failures.len()
        );
        notes.push("a test target did not compile: the others were run package by package, without doc-tests".into());
        let broken = log.build_failures.clone();
        for args in rerun_args(&broken)? {
            let st = stream(&mut test_cmd(&args), &mut log, notes)?;
            if !st.success() {
                cargo_failed = Some(format!("cargo test {}: {st}", args.join(" ")));
            }
        }
        log.build_failures.sort();
        log.build_failures.dedup();
    }
    let recorded = fs::read_to_string(&skips).unwrap_or_default();
    let (rows, empty) = log.rows(&recorded, cargo_failed);
    if empty > 0 {
        notes.push(format!("{empty} test binaries have no tests (not listed)"));
    }
    let failed = rows.iter().any(|r| !r.failed.is_empty());
    let left = leftovers(&tmp);
    if failed && !left.is_empty() {
        notes.push(format!(
            "the tests' TMPDIR is kept for the failures: {} (the failing tests' folders, named in their output)",
            tmp.display()
        ));
    } else {
        if !left.is_empty() {
            notes.push(format!(
                "passing tests left {} in their TMPDIR (removed): {}",
                left.values().sum::<usize>(),
                left.iter()
                    .map(|(k, n)| format!("{k} ×{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Err(e) = fs::remove_dir_all(&tmp) {
            notes.push(format!("could not remove {}: {e}", tmp.display()));
        }
    }
    Ok(rows)
}

/// What is left in `dir`, by name with its unique part as `*`.
fn leftovers(dir: &Path) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let key = match name.rsplit_once('-') {
            Some((stem, _)) => format!("{stem}-*"),
            None => name,
        };
        *m.entry(key).or_insert(0) += 1;
    }
    m
}

/// Run `cmd` with its stdout and stderr as one stream, written through to
/// ours as it comes (a person watches it) and read line by line into
/// `log`. Returns cargo's status.
fn stream(
    cmd: &mut Command,
    log: &mut TestLog,
    notes: &mut Vec<String>,
) -> anyhow::Result<ExitStatus> {
    eprintln!("xtask: {cmd:?}");
    let (mut reader, writer) = std::io::pipe().context("a pipe for cargo's output")?;
    cmd.stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer);
    let mut child = cmd.spawn().with_context(|| format!("running {cmd:?}"))?;
    // The command keeps its copies of the pipe's write end: drop them, or
    // the pipe never ends.
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        let mut line = Vec::new();
        let mut out = std::io::stdout();
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            // Through at once, partial lines too ("test x ... " while x runs).
            let _ = out.write_all(&buf[..n]);
            let _ = out.flush();
            for &b in &buf[..n] {
                if b == b'\n' {
                    if tx
                        .send(String::from_utf8_lossy(&line).into_owned())
                        .is_err()
                    {
                        return;
                    }
                    line.clear();
                } else {
                    line.push(b);
                }
            }
        }
        if !line.is_empty() {
            let _ = tx.send(String::from_utf8_lossy(&line).into_owned());
        }
    });
    let mut exited: Option<(ExitStatus, Instant)> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(l) => log.feed(&l),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if exited.is_none()
                    && let Some(st) = child.try_wait()?
                {
                    exited = Some((st, Instant::now()));
                }
                if let Some((_, at)) = exited
                    && at.elapsed() > DRAIN_AFTER_EXIT
                {
                    notes.push(format!(
                        "a process the tests started still held their output {} s after cargo ended; its later output is not read",
                        DRAIN_AFTER_EXIT.as_secs()
                    ));
                    break;
                }
            }
        }
    }
    match exited {
        Some((st, _)) => Ok(st),
        None => child.wait().context("waiting for cargo test"),
    }
}

/// `cargo test` arguments, one package each, for every default member's
/// lib, bins and tests except the ones that did not compile
/// (`could not compile `PKG` (test "NAME") …`, `(lib test)`, `(bin "NAME"
/// test)`; a package whose library does not compile is left out whole).
fn rerun_args(broken: &[String]) -> anyhow::Result<Vec<Vec<String>>> {
    let out = crate::output(cargo().args(["metadata", "--no-deps", "--format-version", "1"]))
        .context("cargo metadata")?;
    let meta: serde_json::Value = serde_json::from_str(&out).context("cargo metadata's JSON")?;
    runs_without(&meta, broken)
}

/// [`rerun_args`] on `cargo metadata`'s document.
fn runs_without(meta: &serde_json::Value, broken: &[String]) -> anyhow::Result<Vec<Vec<String>>> {
    let members: Vec<&str> = meta["workspace_default_members"]
        .as_array()
        .context("cargo metadata: workspace_default_members")?
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    let mut runs = Vec::new();
    for p in meta["packages"].as_array().into_iter().flatten() {
        let Some(id) = p["id"].as_str() else { continue };
        let Some(name) = p["name"].as_str() else {
            continue;
        };
        if !members.contains(&id) {
            continue;
        }
        let is_broken = |what: &str| {
            broken
                .iter()
                .any(|b| b.starts_with(&format!("could not compile `{name}` ({what}")))
        };
        if is_broken("lib)") {
            continue;
        }
        let mut args = vec!["-p".to_owned(), name.to_owned()];
        for t in p["targets"].as_array().into_iter().flatten() {
            let tname = t["name"].as_str().unwrap_or_default();
            let kinds: Vec<&str> = t["kind"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|k| k.as_str())
                .collect();
            if kinds.iter().any(|k| k.ends_with("lib")) && !is_broken("lib test)") {
                args.push("--lib".into());
            } else if kinds.contains(&"bin") && !is_broken(&format!("bin \"{tname}\" test)")) {
                args.extend(["--bin".into(), tname.to_owned()]);
            } else if kinds.contains(&"test") && !is_broken(&format!("test \"{tname}\")")) {
                args.extend(["--test".into(), tname.to_owned()]);
            }
        }
        if args.len() > 2 {
            runs.push(args);
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two members and a package outside the default ones, as cargo
    /// metadata lays them out.
    fn meta() -> serde_json::Value {
        let target = |name: &str, kind: &str| serde_json::json!({"name": name, "kind": [kind]});
        serde_json::json!({
            "workspace_default_members": ["path+file:///w/a#0.1.0", "path+file:///w/b#0.1.0"],
            "packages": [
                {"id": "path+file:///w/a#0.1.0", "name": "a", "targets": [
                    target("a", "lib"), target("tool", "bin"), target("one", "test"),
                    target("two", "test"), target("build-script-build", "custom-build")]},
                {"id": "path+file:///w/b#0.1.0", "name": "b", "targets": [target("b", "lib")]},
                {"id": "path+file:///w/c#0.1.0", "name": "c", "targets": [target("c", "lib")]}
            ]
        })
    }

    #[test]
    fn a_target_that_does_not_compile_is_left_out_of_the_rerun() {
        let broken = ["could not compile `a` (test \"two\") due to 1 previous error".to_owned()];
        let runs = runs_without(&meta(), &broken).expect("runs");
        assert_eq!(
            runs,
            [
                vec!["-p", "a", "--lib", "--bin", "tool", "--test", "one"],
                vec!["-p", "b", "--lib"]
            ]
        );
    }

    #[test]
    fn a_library_that_does_not_compile_leaves_its_package_out() {
        let broken = [
            "could not compile `b` (lib) due to 3 previous errors".to_owned(),
            "could not compile `a` (bin \"tool\" test) due to 1 previous error".to_owned(),
            "could not compile `a` (lib test) due to 1 previous error".to_owned(),
        ];
        let runs = runs_without(&meta(), &broken).expect("runs");
        assert_eq!(runs, [vec!["-p", "a", "--test", "one", "--test", "two"]]);
    }
}
