//! The package tier's checks in the clean root: each command runs there
//! from the root's PATH, in a mount namespace of its own (the host's /proc,
//! /sys and /dev bound in, gone when the command ends).

use std::{
    fs,
    io::{BufRead as _, BufReader, Read as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use serde_json::Value;

use super::{PATIENCE, ROOT_ENV, file_name, run_for, text};
use crate::{dist, target_dir};

/// `sh -c SCRIPT` in the root, in a mount namespace of its own with the
/// host's /proc, /sys and /dev bound in (gone when the command ends).
pub(super) fn in_root(root: &Path, script: &str) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
        .arg(r#"set -e; r=$1; shift; for d in proc sys dev; do mount --rbind "/$d" "$r/$d"; done; exec chroot "$r" "$@""#)
        .arg("sh")
        .arg(root)
        .args(["/bin/sh", "-c", script])
        .env_clear()
        .envs(ROOT_ENV.iter().copied());
    c
}

/// Run SCRIPT in the root; its output, or an error with it when it fails.
pub(super) fn root_sh(root: &Path, script: &str) -> anyhow::Result<String> {
    let o = run_for(&mut in_root(root, script), PATIENCE)?;
    if !o.status.success() {
        bail!(
            "`{script}` in the root ({}):\n{}",
            o.status,
            text(&o).trim()
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

pub(super) fn install(root: &Path, b: &dist::Built) -> anyhow::Result<String> {
    let name = file_name(&b.deb);
    fs::copy(&b.deb, root.join("tmp").join(&name))?;
    let out = root_sh(root, &format!("dpkg -i /tmp/{name} && rm /tmp/{name}"))?;
    let status = root_sh(root, "dpkg-query -W -f '${Status} ${Version}' nvprobe")?;
    let want = format!("install ok installed {}", b.deb_version);
    if status != want {
        bail!("dpkg-query says {status:?}, not {want:?}:\n{out}");
    }
    // Installed, not enabled: no unit link anywhere under /etc/systemd.
    let links = root_sh(root, "find /etc/systemd -name 'nvprobe*'")?;
    if !links.trim().is_empty() {
        bail!("the package enabled its unit: {}", links.trim());
    }
    Ok(status)
}

pub(super) fn version(root: &Path, b: &dist::Built) -> anyhow::Result<String> {
    let out = root_sh(root, "command -v nvprobe && nvprobe --version")?;
    let want = format!("/usr/bin/nvprobe\n{}\n", b.version_line);
    if out != want {
        bail!("said {out:?}, not {want:?}");
    }
    Ok(b.version_line.clone())
}

/// doctor in a root on a machine without the NVIDIA driver: exit 5 (a
/// check failed) exactly when a check says FAIL, and every FAIL is about
/// the driver or its libraries; the tracing checks pass (the installed,
/// stripped binary's BPF programs load and its probes fire).
pub(super) fn doctor(root: &Path) -> anyhow::Result<String> {
    let o = run_for(&mut in_root(root, "exec nvprobe doctor --json"), PATIENCE)?;
    let doc: Value = serde_json::from_slice(&o.stdout)
        .with_context(|| format!("doctor --json's output is not JSON: {}", text(&o)))?;
    let checks = doc["checks"].as_array().context("no checks")?;
    let verdict = |id: &str| {
        checks
            .iter()
            .find(|c| c["id"] == id)
            .and_then(|c| c["verdict"].as_str())
            .unwrap_or("missing")
    };
    for id in ["bpf", "btf", "raw_tracepoint", "uprobe"] {
        if verdict(id) != "ok" {
            bail!("doctor's {id} check says {}: {}", verdict(id), text(&o));
        }
    }
    let fails: Vec<String> = checks
        .iter()
        .filter(|c| c["verdict"] == "fail")
        .map(|c| {
            format!(
                "{}/{}",
                c["area"].as_str().unwrap_or("?"),
                c["id"].as_str().unwrap_or("?")
            )
        })
        .collect();
    // 5: a check said FAIL (nvprobe's exit codes).
    let want_code = if fails.is_empty() { 0 } else { 5 };
    if o.status.code() != Some(want_code) {
        bail!(
            "doctor exited {} with FAILs {fails:?}: want {want_code}",
            o.status
        );
    }
    if let Some(f) = fails
        .iter()
        .find(|f| !f.starts_with("driver/") && !f.starts_with("libraries/"))
    {
        bail!("doctor: {f} failed in the root: {}", text(&o));
    }
    if !Path::new("/sys/module/nvidia").exists()
        && !fails.iter().any(|f| f == "driver/driver_loaded")
    {
        bail!("doctor did not say that the nvidia module is missing: {fails:?}");
    }
    Ok(format!(
        "exit {want_code}; tracing ok (bpf, btf, raw tracepoint, uprobe); FAIL only {}",
        fails.join(", ")
    ))
}

/// `man nvprobe-watch` renders it, and the whatis database (built by
/// man-db's trigger) has a line for each page.
pub(super) fn man(root: &Path, b: &dist::Built, dir: &str) -> anyhow::Result<String> {
    let page = root_sh(root, "man nvprobe-watch")?;
    for want in ["nvprobe-watch - ", "--device", "EXIT STATUS", "SEE ALSO"] {
        if !page.contains(want) {
            bail!("man nvprobe-watch has no {want:?}:\n{page}");
        }
    }
    let path = root_sh(root, "readlink -f \"$(man -w nvprobe-watch)\"")?;
    if path.trim() != format!("{dir}/man1/nvprobe-watch.1.gz") {
        bail!("man -w nvprobe-watch: {path:?}");
    }
    let whatis = root_sh(root, "whatis -w 'nvprobe*'")?;
    let n = whatis.lines().filter(|l| l.contains(" - ")).count();
    if n != b.subcommands.len() + 1 {
        bail!(
            "whatis lists {n} nvprobe pages, not {}:\n{whatis}",
            b.subcommands.len() + 1
        );
    }
    Ok(format!("{} lines; whatis: {n} pages", page.lines().count()))
}

/// bash-completion's loader finds the script where it looks (`file`),
/// and the function it registers completes a subcommand and a flag.
pub(super) fn completion(root: &Path, file: &str) -> anyhow::Result<String> {
    let script = r#"set -u
. /usr/share/bash-completion/bash_completion
__load_completion nvprobe || { echo "no completion loaded for nvprobe"; exit 3; }
spec=$(complete -p nvprobe)
fn=$(printf '%s\n' "$spec" | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
echo "spec: $spec"
try() {
  COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  "$fn" nvprobe "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
  echo "$* => ${COMPREPLY[*]}"
}
try nvprobe wa
try nvprobe watch --dev
"#;
    let path = format!("{}/tmp/complete.sh", root.display());
    fs::write(&path, script)?;
    let out = root_sh(
        root,
        "bash /tmp/complete.sh; s=$?; rm /tmp/complete.sh; exit $s",
    )?;
    let spec = out.lines().next().unwrap_or_default();
    if !spec.starts_with("spec: complete ") || !spec.contains(" -F ") || !spec.ends_with(" nvprobe")
    {
        bail!("complete -p nvprobe: {out}");
    }
    let want = ["nvprobe wa => watch", "nvprobe watch --dev => --device"];
    for w in want {
        if !out.lines().any(|l| l == w) {
            bail!("wanted `{w}`; the completion gave:\n{out}");
        }
    }
    // Where the loader found it: the file in the standard place.
    let found = root_sh(root, &format!("test -f {file} && echo {file}"))?;
    Ok(format!("{} (from {})", want.join(", "), found.trim()))
}

/// systemd-analyze verify of the installed unit, with the root's systemd:
/// nothing said about nvprobe.service.
pub(super) fn verify(root: &Path, unit: &str) -> anyhow::Result<String> {
    let o = run_for(
        &mut in_root(root, &format!("exec systemd-analyze verify {unit}")),
        PATIENCE,
    )?;
    let t = text(&o);
    let about: Vec<&str> = t
        .lines()
        .filter(|l| l.contains("nvprobe.service"))
        .collect();
    if !o.status.success() || !about.is_empty() {
        bail!("systemd-analyze verify {unit} ({}):\n{t}", o.status);
    }
    Ok(unit.to_owned())
}

/// The stand-in, served from the host into the root's /run/nvfake.
struct StandIn {
    child: Child,
    dir: PathBuf,
}

impl StandIn {
    fn start(root: &Path) -> anyhow::Result<StandIn> {
        let fixture = target_dir().join("debug/nvfixture");
        if !fixture.is_file() {
            bail!(
                "{} is missing: the build tier builds it (cargo build --bins)",
                fixture.display()
            );
        }
        let dir = root.join("run/nvfake");
        fs::create_dir_all(&dir)?;
        let mut child = Command::new(&fixture)
            .arg("serve")
            .arg(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} serve", fixture.display()))?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().context("stdout")?).read_line(&mut line)?;
        let s = StandIn { child, dir };
        if line.trim() != "ready" {
            bail!("the FUSE stand-in did not mount (it said {line:?})");
        }
        Ok(s)
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
        let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// `nvprobe watch --json` in the root on the stand-in's nodes (--device),
/// while nvfixture's `basic` scenario makes its ten driver calls from the
/// host; SIGTERM once they are all out, then the run's end.
pub(super) fn watch(root: &Path) -> anyhow::Result<String> {
    let drv = StandIn::start(root)?;
    let mut cmd = in_root(
        root,
        "exec nvprobe watch --json --device /run/nvfake/nvidiactl=ctl --device /run/nvfake/nvidia0=gpu --driver-version 580.159.04 --duration 300",
    );
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().context("starting nvprobe watch in the root")?;
    let (tx, rx) = mpsc::channel::<Value>();
    let stdout = child.stdout.take().context("stdout")?;
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&l)
                && tx.send(v).is_err()
            {
                return;
            }
        }
    });
    let mut stderr = child.stderr.take().context("stderr")?;
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let result = (|| {
        let mut records = Vec::new();
        let t = Instant::now();
        let mut wait_for = |what: &str, pred: &dyn Fn(&[Value]) -> bool| -> anyhow::Result<()> {
            while !pred(&records) {
                let left = PATIENCE.saturating_sub(t.elapsed());
                match rx.recv_timeout(left) {
                    Ok(v) => records.push(v),
                    Err(_) => bail!("nvprobe wrote no {what} within {} s", PATIENCE.as_secs()),
                }
            }
            Ok(())
        };
        wait_for("start record", &|r| r.iter().any(|v| v["type"] == "start"))?;
        let o = run_for(
            Command::new(target_dir().join("debug/nvfixture"))
                .args(["run", "basic", "--dir"])
                .arg(&drv.dir),
            PATIENCE,
        )?;
        if !o.status.success() {
            bail!("nvfixture run basic: {}", text(&o));
        }
        let said: Value = serde_json::from_str(
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .last()
                .unwrap_or_default(),
        )
        .context("nvfixture's JSON")?;
        let pid = said["pid"].as_u64().context("nvfixture's pid")?;
        let ioctls = move |r: &[Value]| {
            r.iter()
                .filter(|v| v["type"] == "ioctl" && v["pid"] == pid)
                .count()
        };
        wait_for("ioctl records of nvfixture's ten calls", &|r| {
            ioctls(r) >= 10
        })?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )?;
        wait_for("summary", &|r| r.iter().any(|v| v["type"] == "summary"))?;
        let n = ioctls(&records);
        let named = records.iter().any(|v| {
            v["type"] == "ioctl"
                && v["pid"] == pid
                && v["args"]["control_name"] == "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION"
        });
        if n != 10 || !named {
            bail!(
                "{n} ioctl records of nvfixture (pid {pid}), want 10 with GET_BUILD_VERSION decoded (it was {named})"
            );
        }
        Ok(format!(
            "{} records, nvfixture's 10 ioctls decoded",
            records.len()
        ))
    })();
    let status = match run_until(&mut child, PATIENCE) {
        Some(st) => st,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("nvprobe watch did not end after SIGTERM: killed");
        }
    };
    let stderr = err.join().unwrap_or_default();
    drop(drv);
    let note = result.with_context(|| format!("nvprobe's stderr:\n{stderr}"))?;
    if !status.success() {
        bail!("nvprobe watch ended with {status} after SIGTERM:\n{stderr}");
    }
    Ok(note)
}

pub(super) fn run_until(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let t = Instant::now();
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if t.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// dpkg --purge takes every file away, the conffile too.
pub(super) fn purge(root: &Path) -> anyhow::Result<String> {
    root_sh(root, "dpkg --purge nvprobe")?;
    let left = root_sh(
        root,
        "for f in /usr/bin/nvprobe /etc/logrotate.d/nvprobe /usr/lib/systemd/system/nvprobe.service /usr/share/doc/nvprobe /usr/share/man/man1/nvprobe.1.gz; do [ ! -e $f ] || echo $f; done",
    )?;
    if !left.trim().is_empty() {
        bail!("left after the purge: {}", left.trim());
    }
    Ok(String::new())
}

/// The tarball, unpacked into the root's /usr/local as the README says:
/// the binary on the PATH, its pages found by man, its completion by
/// bash-completion, its unit verified.
pub(super) fn tarball(root: &Path, b: &dist::Built) -> anyhow::Result<String> {
    crate::sh(
        Command::new("tar")
            .args([
                "--extract",
                "--gzip",
                "--no-same-owner",
                "--strip-components=1",
                "--file",
            ])
            .arg(&b.tarball)
            .arg("--directory")
            .arg(root.join("usr/local")),
    )?;
    let out = root_sh(root, "command -v nvprobe && nvprobe --version")?;
    let want = format!("/usr/local/bin/nvprobe\n{}\n", b.version_line);
    if out != want {
        bail!("said {out:?}, not {want:?}");
    }
    // (Debian's /usr/local/man is a link to share/man.)
    let path = root_sh(root, "readlink -f \"$(man -w nvprobe-watch)\"")?;
    if path.trim() != "/usr/local/share/man/man1/nvprobe-watch.1.gz" {
        bail!("man -w nvprobe-watch: {path:?}");
    }
    let page = root_sh(root, "man nvprobe-watch")?;
    if !page.contains("nvprobe-watch - ") || !page.contains("--device") {
        bail!("man nvprobe-watch from /usr/local:\n{page}");
    }
    completion(root, "/usr/local/share/bash-completion/completions/nvprobe")?;
    verify(root, "/usr/local/lib/systemd/system/nvprobe.service")?;
    Ok("nvprobe --version, man nvprobe-watch, bash completion, systemd-analyze verify from /usr/local".into())
}
