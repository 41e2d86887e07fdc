//! The uretprobe/seccomp gate on the tier's kernels: doctor's answer
//! against the release.

use std::{fs, path::Path, process::Command};

use serde_json::Value;

use super::{Checks, NVPROBE};

/// doctor's `uretprobe_seccomp` answer, asked of this kernel by two
/// children, against what its release says (6.1: no uretprobe system
/// call; Debian's 6.12.y: the passthrough).
pub(super) fn uretprobe_gate(_: &Path, c: &mut Checks) -> anyhow::Result<()> {
    use nvprobe::uretprobe_gate::{Gate, by_release, parse_release};
    let rel = fs::read_to_string("/proc/sys/kernel/osrelease")?;
    let want = parse_release(rel.trim()).map(by_release);
    let o = Command::new(NVPROBE).args(["doctor", "--json"]).output()?;
    let doc: Value = serde_json::from_slice(&o.stdout)?;
    let check = doc["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["id"] == "uretprobe_seccomp").cloned())
        .unwrap_or(Value::Null);
    println!("NVVM: uretprobe_gate: {} says {check}", rel.trim());
    let evidence = check["evidence"].as_str().unwrap_or("");
    let (verdict, words) = match want {
        Some(Gate::NoSyscall) => ("ok", "no uretprobe system call"),
        Some(Gate::PassesFilters) => ("ok", "lets the uretprobe system call through"),
        Some(Gate::Filtered) => ("warn", "so libcuda is not hooked"),
        None => ("?", "?"),
    };
    c.check(
        check["verdict"] == verdict && evidence.contains(words),
        &format!("doctor says {verdict}: {words} ({want:?} by the release)"),
    );
    Ok(())
}
