//! Tier 2: `nvprobe top` on the real BPF programs, as root, in a real
//! terminal (tmux, on a server of its own): what a person sees while one
//! start-up fails and another process's call hangs, then after `q`; and
//! the plain-text tables when stdout is not a terminal.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use nvprobe_tests::{
    harness::{bin, is_root},
    need_root,
    scenario::{FakeDrv, lock, scenario, tmpdir},
};

/// tmux on a socket of the test's own (a user's tmux is never touched).
struct Tmux {
    sock: std::path::PathBuf,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.sock);
        c
    }

    fn start(tmp: &Path, shell_cmd: &str) -> Tmux {
        let t = Tmux {
            sock: tmp.join("tmux.sock"),
        };
        let ok = t
            .cmd()
            .args(["new-session", "-d", "-x", "200", "-y", "40", shell_cmd])
            .env("TERM", "xterm-256color")
            .status()
            .expect("tmux");
        assert!(ok.success(), "tmux new-session");
        t
    }

    fn screen(&self) -> String {
        let o = self
            .cmd()
            .args(["capture-pane", "-p"])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The screen once `want` holds (a minute at most: waiting, not timing).
    fn wait_for(&self, what: &str, want: impl Fn(&str) -> bool) -> String {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let s = self.screen();
            if want(&s) {
                return s;
            }
            assert!(Instant::now() < until, "waited a minute for {what}:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

fn have_tmux() -> bool {
    let found = Command::new("tmux")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    // As root the test must run: `cargo xtask test` installs tmux.
    assert!(
        found || !is_root(),
        "tmux is missing (apt-get install tmux)"
    );
    found
}

/// `top`'s arguments: the stand-in's nodes, the stand-ins' driver version,
/// only nvfixture processes, then `extra`.
fn top_args(drv: &FakeDrv, extra: &[&str]) -> Vec<String> {
    let mut args = drv.device_args();
    args.extend(["--driver-version", "580.159.04", "--comm", "nvfixture"].map(String::from));
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

/// The table row of `pid` on a screen.
fn row(screen: &str, pid: u64) -> Option<&str> {
    screen
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&pid.to_string()))
}

#[test]
#[ignore = "needs root"]
fn top_shows_a_hanging_call_first_and_the_failed_start_up_then_quits_on_q() {
    need_root!();
    if !have_tmux() {
        return;
    }
    let _g = lock();
    let tmp = tmpdir("top");
    // The hanging control hangs 15 s here: time to look at it on a slow
    // machine (the stall shows from 1 s on).
    let drv = FakeDrv::start_hanging(&tmp, 15000);
    let exit = tmp.join("exit");
    let args = top_args(&drv, &["--stall-after", "1"]);
    let cmd = format!(
        "{} top {}; echo EXIT=$? > {}; sleep 600",
        bin("nvprobe").display(),
        args.join(" "),
        exit.display()
    );
    let tmux = Tmux::start(&tmp, &cmd);
    tmux.wait_for("the view", |s| {
        s.contains("nvprobe top:") && s.contains("q: quit")
    });
    // A start-up that fails (no nvidia-uvm on the stand-in).
    let basic = scenario(&drv, "basic", &[]);
    let failed = basic["pid"].as_u64().expect("pid");
    // A call that hangs in the driver.
    let mut hang = Command::new(bin("nvfixture"))
        .args(["run", "hang", "--dir"])
        .arg(&drv.dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("hang");
    let hung = u64::from(hang.id());
    let s = tmux.wait_for("the hanging call, stalled", |s| {
        row(s, hung).is_some_and(|r| r.contains("s NV_ESC_RM_CONTROL")) && s.contains("1 stalled")
    });
    let lines: Vec<&str> = s.lines().collect();
    assert!(
        lines[1].starts_with("PID") && lines[1].contains("IN FLIGHT"),
        "{s}"
    );
    // Most likely wrong first: the hanging call, then the failed start-up.
    assert_eq!(row(&s, hung), Some(lines[2]), "{s}");
    assert_eq!(row(&s, failed), Some(lines[3]), "{s}");
    let f = lines[3];
    assert!(
        f.contains("openat /dev/nvidia-uvm = ENOENT") && f.trim_end().ends_with("failed"),
        "{s}"
    );
    assert!(f.contains("version_handshake"), "{s}");
    // Why the first row is first, and the footer.
    assert!(
        s.contains(&format!(
            "nvfixture [{hung}]: NV_ESC_RM_CONTROL has been running for"
        )) && s.contains("(stage ctl_opened)"),
        "{s}"
    );
    assert!(
        s.contains("probes: syscall ") && s.contains("process "),
        "{s}"
    );
    assert!(hang.wait().expect("wait").success());
    tmux.cmd()
        .args(["send-keys", "q"])
        .status()
        .expect("send q");
    let s = tmux.wait_for("the exit", |_| exit.exists());
    assert_eq!(
        std::fs::read_to_string(&exit).expect("exit").trim(),
        "EXIT=0"
    );
    // The last view stays on the terminal as text, the hang now over.
    let f = row(&s, failed).expect("failed row after exit");
    assert!(f.contains("openat /dev/nvidia-uvm = ENOENT"), "{s}");
    let h = row(&s, hung).expect("hang row after exit");
    assert!(
        !h.contains("s NV_ESC_RM_CONTROL"),
        "nothing in flight any more: {s}"
    );
    assert!(s.contains(&format!("  nvfixture [{failed}]: ")), "{s}");
}

#[test]
#[ignore = "needs root"]
fn top_writes_plain_tables_when_stdout_is_not_a_terminal() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("top-plain");
    let drv = FakeDrv::start(&tmp);
    // A bad interval is a usage error, before anything is attached.
    let bad = Command::new(bin("nvprobe"))
        .args(["top", "--interval", "0"])
        .output()
        .expect("nvprobe top");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--interval must be between"));
    let args = top_args(&drv, &["--interval", "0.2"]);
    let out_path = tmp.join("top.txt");
    let top = Command::new(bin("nvprobe"))
        .arg("top")
        .args(&args)
        .stdout(std::fs::File::create(&out_path).expect("out"))
        .stderr(Stdio::piped())
        .spawn()
        .expect("nvprobe top");
    // Attached once the first table is out.
    let until = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&out_path).is_ok_and(|s| s.contains("nvprobe top:")) {
        assert!(Instant::now() < until, "no table in a minute");
        std::thread::sleep(Duration::from_millis(100));
    }
    let basic = scenario(&drv, "basic", &[]);
    let pid = basic["pid"].as_u64().expect("pid");
    let until = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&out_path)
        .is_ok_and(|s| row(&s, pid).is_some_and(|r| r.ends_with("failed")))
    {
        assert!(Instant::now() < until, "no verdict row in a minute");
        std::thread::sleep(Duration::from_millis(100));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(top.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let o = top.wait_with_output().expect("wait");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out_path).expect("out");
    // Nothing but text for people: no terminal control sequences.
    assert!(!text.contains('\x1b'), "{text}");
    let tables: Vec<&str> = text
        .split("\n\n")
        .filter(|t| !t.trim().is_empty())
        .collect();
    assert!(tables.len() >= 2, "{text}");
    for t in &tables {
        let mut l = t.lines();
        assert!(
            l.next().is_some_and(|h| h.starts_with("nvprobe top: ")),
            "{t}"
        );
        assert!(l.next().is_some_and(|h| h.starts_with("PID ")), "{t}");
        assert!(
            t.lines().last().is_some_and(|p| p.starts_with("probes: ")),
            "{t}"
        );
    }
    // The last table (printed at the stop) has the verdict.
    let last = tables.last().expect("last");
    let r = row(last, pid).expect("row");
    assert!(
        r.contains("version_handshake") && r.contains("openat /dev/nvidia-uvm = ENOENT"),
        "{last}"
    );
}

#[test]
#[ignore = "needs root"]
fn top_stops_when_its_terminal_goes_away() {
    need_root!();
    if !have_tmux() {
        return;
    }
    let _g = lock();
    let tmp = tmpdir("top-hangup");
    let drv = FakeDrv::start(&tmp);
    let args = top_args(&drv, &[]);
    let cmd = format!("{} top {}", bin("nvprobe").display(), args.join(" "));
    let tmux = Tmux::start(&tmp, &cmd);
    tmux.wait_for("the view", |s| s.contains("nvprobe top:"));
    // Ours: the one whose --device is this test's private stand-in.
    let ours = || {
        Command::new("pgrep")
            .args(["-f", &format!("nvprobe top --device {}", drv.ctl())])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    assert!(!ours().is_empty(), "nvprobe top is running");
    // The terminal hangs up (an ssh session dropped): no one sees the view,
    // so nvprobe stops and detaches rather than trace unseen.
    let _ = tmux.cmd().arg("kill-server").status();
    let until = Instant::now() + Duration::from_secs(60);
    while !ours().is_empty() {
        assert!(
            Instant::now() < until,
            "nvprobe top still running a minute after the hang-up"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
