//! Tier 2: the real BPF programs on this machine's kernel, as root.
//!
//! Text shows the fork, exec, exit and signal lines of the processes that
//! make NVIDIA calls and of their children, not those of a shell that only
//! looked at an NVIDIA path (the kernel side follows it, and every command
//! it runs, from then on): those are counted in the summary.
//! `--all-processes` shows them; JSON always holds them. The recording is
//! made live (`watch --json --raw`) and shown as text by `decode`, the
//! pipeline `watch`'s text goes through.

use std::process::Command;

use nvprobe_tests::{
    harness::{bin, is_lifecycle_line},
    need_root,
    scenario::{FakeDrv, check_schema, lock, scenario, tmpdir, watch},
};

fn text(rec: &std::path::Path, extra: &[&str]) -> String {
    let o = Command::new(bin("nvprobe"))
        .arg("decode")
        .arg(rec)
        .args(extra)
        .output()
        .expect("decode");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
#[ignore = "needs root"]
fn a_shell_that_only_looked_at_a_path_stays_out_of_the_text() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("lifelines");
    let drv = FakeDrv::start(&tmp);
    let t = watch(&tmp, &drv, &["--raw"]);
    let rec = t.out.clone();
    // `test -e` is the shell's own stat of an NVIDIA-looking path (absent):
    // from then on the kernel side follows it and the commands it runs.
    let sh = Command::new("sh")
        // Each command's loader searches a missing folder first (ENOENT).
        .env("LD_LIBRARY_PATH", "/nonexistent-nvprobe-test/lib")
        .args([
            "-c",
            "test -e /dev/nvidia-nvprobe-test-absent; for i in 1 2 3 4 5; do /bin/true; done",
        ])
        .spawn()
        .expect("sh");
    let sh_pid = sh.id();
    let st = sh.wait_with_output().expect("wait sh");
    assert!(st.status.success());
    // A driver client that forks a child which makes a call of its own.
    let forked = scenario(&drv, "fork", &[]);
    let child = forked["child"].as_u64().expect("child pid");
    let f = t.stop();
    check_schema(&f);
    // JSON holds the shell's life: its five children, their exits.
    let kids: Vec<u64> = f
        .of_type("proc")
        .filter(|r| r["op"] == "fork" && r["pid"] == sh_pid)
        .filter_map(|r| r["target_pid"].as_u64())
        .collect();
    assert_eq!(kids.len(), 5, "{kids:?}");
    for k in &kids {
        assert!(
            f.of_type("proc")
                .any(|r| r["op"] == "exit" && r["pid"] == *k),
            "exit of {k}"
        );
    }
    // Followed from the shell, they made no NVIDIA call of their own: not
    // in a CUDA start-up, so their failed calls (the loader's searches of
    // a library path that includes missing folders) are not sent; the
    // shell's own stat of the path is its record, and not a call_failed.
    let strays: Vec<_> = f
        .of_type("proc")
        .filter(|r| r["op"] == "call_failed")
        .filter(|r| kids.contains(&r["pid"].as_u64().unwrap_or(0)) || r["pid"] == sh_pid)
        .collect();
    assert!(strays.is_empty(), "{strays:#?}");
    let out = text(&rec, &[]);
    // The fork, exec, exit and signal lines about a process (its stat of
    // the path is a call's line, shown as every call is).
    let about = |t: &str, pid: u64| {
        t.lines()
            .filter(|l| is_lifecycle_line(l))
            .filter(|l| l.contains(&format!("[{pid}]")) || l.ends_with(&format!(" {pid}")))
            .count()
    };
    assert_eq!(about(&out, sh_pid.into()), 0, "{out}");
    for k in &kids {
        assert_eq!(about(&out, *k), 0, "{out}");
    }
    // The counted lines: the shell's 5 forks, 5 execs and 5 exits of its
    // children, its SIGCHLDs, its own exit: 6 processes at least (other
    // processes of this host may add to both).
    let left = out
        .lines()
        .find(|l| l.contains("lines of") && l.contains("left out (--all-processes shows them)"))
        .unwrap_or_else(|| panic!("no count of lines left out: {out}"));
    let n: Vec<u64> = left
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert!(n.len() == 2 && n[0] >= 16 && n[1] >= 6, "{left}");
    // The driver client's fork and its child's exit are shown.
    assert!(
        out.lines()
            .any(|l| l.contains(&format!("[{child}]")) && l.contains("exited with status 0")),
        "{out}"
    );
    // Every line with --all-processes, and no count.
    let all = text(&rec, &["--all-processes"]);
    assert!(about(&all, sh_pid.into()) >= 6, "{all}");
    for k in &kids {
        assert!(about(&all, *k) >= 2, "{all}");
    }
    assert!(!all.contains("left out (--all-processes"), "{all}");
}
