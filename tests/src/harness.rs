//! Run the real nvprobe binary and read back its NDJSON.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use serde_json::Value;

/// target/<profile>/ of the running test binary (target/<profile>/deps/x).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().expect("deps dir");
    if dir.ends_with("deps") {
        dir.parent().expect("profile dir").to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} is not built: run the tests with `cargo xtask test` (it builds every binary first)",
        p.display()
    );
    p
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

pub struct Trace {
    child: Child,
    pub out: PathBuf,
    pub stderr: PathBuf,
}

pub struct Finished {
    pub status: ExitStatus,
    pub records: Vec<Value>,
    pub stderr: String,
}

impl Trace {
    /// Start `nvprobe watch --json -o FILE ARGS…` and wait until its start
    /// record is written (probes attached).
    pub fn start(tmp: &Path, args: &[&str]) -> Trace {
        let out = tmp.join(format!("trace-{}.ndjson", unique()));
        let stderr = tmp.join(format!("trace-{}.stderr", unique()));
        let child = Command::new(bin("nvprobe"))
            .args(["watch", "--json", "-o"])
            .arg(&out)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawn nvprobe");
        let mut t = Trace { child, out, stderr };
        let t0 = Instant::now();
        loop {
            if let Ok(text) = fs::read_to_string(&t.out)
                && text
                    .lines()
                    .next()
                    .is_some_and(|l| l.contains("\"type\":\"start\""))
            {
                break;
            }
            if let Ok(Some(st)) = t.child.try_wait() {
                panic!(
                    "nvprobe exited ({st}) before attaching: {}",
                    fs::read_to_string(&t.stderr).unwrap_or_default()
                );
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "nvprobe did not start within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        t
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGINT, wait, parse.
    pub fn stop(mut self) -> Finished {
        // Let the last events reach the ring buffer's consumer.
        std::thread::sleep(Duration::from_millis(300));
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGINT).expect("SIGINT nvprobe");
        let status = self.child.wait().expect("wait nvprobe");
        let text = fs::read_to_string(&self.out).expect("read trace");
        let records = text
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l)
                    .unwrap_or_else(|e| panic!("invalid JSON line {l:?}: {e}"))
            })
            .collect();
        Finished {
            status,
            records,
            stderr: fs::read_to_string(&self.stderr).unwrap_or_default(),
        }
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn unique() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

impl Finished {
    pub fn of_type<'a>(&'a self, t: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.records.iter().filter(move |r| r["type"] == t)
    }
    pub fn for_pid(&self, pid: u32) -> Vec<&Value> {
        self.records.iter().filter(|r| r["pid"] == pid).collect()
    }
    pub fn summary(&self) -> &Value {
        self.of_type("summary").last().expect("a summary record")
    }
}
