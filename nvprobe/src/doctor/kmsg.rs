//! Kernel-log evidence: the NVRM and nvidia-uvm lines of the kernel ring
//! buffer (live: /dev/kmsg read without blocking; a tree: ROOT/kmsg.txt,
//! which `--snapshot` writes), and the kernel_log checks they give.

use std::{fs, io::Read as _, os::unix::fs::OpenOptionsExt as _, path::Path};

use super::{Check, Verdict, check};

/// Lines that mention the NVIDIA modules, oldest first, at most `max`.
pub fn nvidia_lines(root: &Path, live: bool, max: usize) -> Vec<String> {
    let all = if live { read_live() } else { read_tree(root) };
    let mut v: Vec<String> = all.into_iter().filter(|l| relevant(l)).collect();
    if v.len() > max {
        v.drain(..v.len() - max);
    }
    v
}

fn relevant(l: &str) -> bool {
    let low = l.to_ascii_lowercase();
    low.contains("nvrm") || low.contains("nvidia") || low.contains("uvm")
}

fn read_tree(root: &Path) -> Vec<String> {
    crate::safefs::read_text(root, "kmsg.txt", crate::safefs::CAP)
        .map(|t| t.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// /dev/kmsg gives one record per read; O_NONBLOCK ends with EAGAIN at the
/// end of the buffer instead of waiting for new records.
fn read_live() -> Vec<String> {
    let Ok(mut f) = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut buf = vec![0u8; 8192];
    for _ in 0..100_000 {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let rec = String::from_utf8_lossy(&buf[..n]);
                // "prio,seq,usec,flags;message\n continuation lines"
                if let Some((head, msg)) = rec.split_once(';') {
                    let usec: u64 = head
                        .split(',')
                        .nth(2)
                        .and_then(|u| u.parse().ok())
                        .unwrap_or(0);
                    let msg = msg.lines().next().unwrap_or("");
                    out.push(format!(
                        "[{:>5}.{:06}] {msg}",
                        usec / 1_000_000,
                        usec % 1_000_000
                    ));
                }
            }
            // EPIPE: records were overwritten while reading; go on.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(_) => break,
        }
    }
    out
}

/// What the lines say, as findings: (kind, line).
pub fn findings(lines: &[String]) -> Vec<(&'static str, &String)> {
    lines
        .iter()
        .filter_map(|l| {
            let low = l.to_ascii_lowercase();
            let kind = if low.contains("fallen off the bus") {
                "gpu_lost"
            } else if low.contains("rminitadapter failed")
                || low.contains("failed to initialize") && low.contains("nvrm")
            {
                "gpu_init_failed"
            } else if low.contains("xid") && low.contains("nvrm") {
                "xid"
            } else if (low.contains("nvidia-uvm") || low.contains("uvm"))
                && (low.contains("hmm") || low.contains("error") || low.contains("fail"))
            {
                "uvm_error"
            } else if low.contains("api mismatch") || low.contains("version mismatch") {
                "version_mismatch"
            } else {
                return None;
            };
            Some((kind, l))
        })
        .collect()
}

/// Kernel-log lines that explain failures the other checks cannot see.
pub(super) fn checks(log: &[String], out: &mut Vec<Check>) {
    for (kind, l) in findings(log) {
        let (verdict, hint) = match kind {
            "version_mismatch" => (
                Verdict::Fail,
                "a user-space driver of another version talked to this module: install the matching user-space driver, or reboot after an upgrade",
            ),
            "xid" => (
                Verdict::Warn,
                "an Xid is a GPU error report: look the number up in NVIDIA's Xid catalogue",
            ),
            _ => continue,
        };
        out.push(check(
            "kernel_log",
            kind,
            verdict,
            l.trim().to_owned(),
            Some(hint),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_log_findings() {
        let lines: Vec<String> = [
            "[    0.556889] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04",
            "[   12.0] NVRM: GPU at PCI:0000:41:00: GPU has fallen off the bus.",
            "[   13.0] NVRM: Xid (PCI:0000:41:00): 79, pid=1234, GPU has fallen off the bus.",
            "[   14.0] nvidia-uvm: uvm_hmm_va_space_initialize failed: Operation not permitted",
            "[   15.0] NVRM: API mismatch: the client has the version 575.57.08, but this kernel module has the version 580.159.04.",
        ]
        .map(str::to_owned)
        .to_vec();
        let kinds: Vec<&str> = findings(&lines).iter().map(|(k, _)| *k).collect();
        assert_eq!(
            kinds,
            ["gpu_lost", "gpu_lost", "uvm_error", "version_mismatch"]
        );
    }
}
