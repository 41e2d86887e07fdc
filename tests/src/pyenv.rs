//! Python tools the tests check nvprobe's output with (the official OTLP
//! protobuf definitions, Kubernetes' API schema): a virtual environment
//! per tool set under target/pyenv/, made once with pip and reused.
//!
//! pip needs the network. Without it the test fails with a clear message,
//! unless NVPROBE_TEST_OFFLINE=1 says to skip such checks.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The python of a virtual environment holding `packages` (pip
/// requirement strings), or why there is none. `Ok(None)`: offline, skip.
pub fn python_with(name: &str, packages: &[&str]) -> Result<Option<PathBuf>, String> {
    // Tests of one binary may ask at once: one makes it, the others wait.
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/pyenv")
        .join(name);
    let python = dir.join("bin/python3");
    let stamp = dir.join("nvprobe-packages.txt");
    let want = packages.join("\n");
    if python.exists() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == want) {
        return Ok(Some(python));
    }
    let offline = std::env::var("NVPROBE_TEST_OFFLINE").is_ok_and(|v| v == "1");
    let run = |c: &mut Command, what: &str| -> Result<(), String> {
        let out = c.output().map_err(|e| format!("{what}: cannot run: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .rev()
                    .take(5)
                    .collect::<Vec<_>>()
                    .join(" | ")
            ))
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    let made = run(
        Command::new("python3").args(["-m", "venv"]).arg(&dir),
        "python3 -m venv (Debian: apt-get install python3-venv)",
    )
    .and_then(|()| {
        run(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(packages),
            &format!("pip install {}", packages.join(" ")),
        )
    });
    match made {
        Ok(()) => {
            std::fs::write(&stamp, want).map_err(|e| format!("{}: {e}", stamp.display()))?;
            Ok(Some(python))
        }
        Err(e) if offline => {
            crate::harness::skip(format_args!("NVPROBE_TEST_OFFLINE=1: {e}"));
            Ok(None)
        }
        Err(e) => Err(format!(
            "{e}\n(the check needs these Python packages from PyPI; set NVPROBE_TEST_OFFLINE=1 to skip it on a machine without network)"
        )),
    }
}
