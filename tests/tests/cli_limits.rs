//! Tier 1, through the binary: `watch` flags that parse but cannot be
//! meant (issue 11) are refused when parsed, with the reason and exit 2,
//! before anything is attached. Each run carries `--duration 1`, so that an
//! nvprobe that took the flag (as root) stops by itself.

use std::process::Command;

use nvprobe_tests::harness::bin;

fn watch(args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(bin("nvprobe"))
        .arg("watch")
        .args(args)
        .output()
        .expect("run nvprobe");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Durations that overflowed a timer once attached (exit 101): at most a
/// year, said so.
#[test]
fn durations_past_a_year_are_refused() {
    for args in [
        ["--duration", "1e308"],
        ["--duration", "1e19"],
        ["--stall-after", "1e308"],
        ["--stall-after", "9999999999m"],
    ] {
        let mut a = args.to_vec();
        if args[0] != "--duration" {
            a.extend(["--duration", "1"]);
        }
        let (code, err) = watch(&a);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("at most 31536000 seconds"), "{args:?}: {err}");
    }
}

/// A pid no process can have, an empty name: refused with the reason.
#[test]
fn impossible_pids_and_empty_names_are_refused() {
    for (args, why) in [
        (["--pid", "0"], "pids start at 1"),
        (["--pid", "99999999"], "pid_max"),
        (["--comm", ""], "matches no process"),
    ] {
        let mut a = args.to_vec();
        a.extend(["--duration", "1"]);
        let (code, err) = watch(&a);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
}

/// `--perfetto FILE` at a symbolic link: refused before anything is
/// attached (as `-o` refuses one), exit 2, the link's target not created.
#[test]
fn a_perfetto_file_at_a_link_is_refused() {
    let d = nvprobe_tests::harness::TestDir::new("perfetto-link");
    let (link, target) = (d.join("run.pftrace"), d.join("elsewhere"));
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let (code, err) = watch(&[
        "--perfetto",
        link.to_str().expect("utf8"),
        "--duration",
        "1",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "refusing to write to {}: it is a symbolic link",
            link.display()
        )),
        "{err}"
    );
    assert!(!target.exists(), "nothing written through the link");
}
