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
    low.contains("nvrm")
        || low.contains("nvidia")
        || low.contains("uvm")
        || leaked_uprobe(l).is_some()
}

/// The kernel's own line for a uprobe it could not remove (kernel/events/
/// uprobes.c, uprobe_warn: "uprobe: COMM:PID failed to unregister, leaking
/// uprobe"): the task that removed it, as "COMM:PID". Only a line that
/// starts and ends as the kernel writes it counts (a process's name in a
/// segfault line cannot make one).
pub fn leaked_uprobe(line: &str) -> Option<&str> {
    let msg = match line.strip_prefix('[') {
        Some(rest) => rest.split_once("] ")?.1,
        None => line,
    };
    msg.trim_end()
        .strip_prefix("uprobe: ")?
        .strip_suffix(" failed to unregister, leaking uprobe")
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
    let leaks: Vec<&str> = log.iter().filter_map(|l| leaked_uprobe(l)).collect();
    if let Some(last) = leaks.last() {
        out.push(check(
            "kernel_log",
            "uprobe_leaked",
            Verdict::Warn,
            format!(
                "the kernel logged {} uprobe{} it could not remove (the last by {last}): each stays as a breakpoint in the processes that had the library mapped then, and costs them a trap per hit until they exit",
                leaks.len(),
                if leaks.len() == 1 { "" } else { "s" }
            ),
            Some(
                "a uprobe removal made by a task with SIGKILL pending fails this way (a tracer killed while it attached or removed probes); restart the processes that still use that library, or reboot. nvprobe leaves its removals to a kernel worker, which cannot fail so; only a SIGKILL during its attach still can",
            ),
        ));
    }
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

    #[test]
    fn leaked_uprobes_are_the_kernels_own_lines_only() {
        // As this machine's kernel logged them (a tracer SIGKILLed while it
        // removed its uprobes), with and without the time prefix.
        assert_eq!(
            leaked_uprobe("[  347.077421] uprobe: loop:7225 failed to unregister, leaking uprobe"),
            Some("loop:7225")
        );
        assert_eq!(
            leaked_uprobe("uprobe: nvprobe:81 failed to unregister, leaking uprobe\n"),
            Some("nvprobe:81")
        );
        // A process named to look like one does not make it.
        for forged in [
            "[ 1.0] leaking uprobe[99]: segfault at 0 ip 0 sp 0 error 4",
            "[ 1.0] a[1]: uprobe: x:1 failed to unregister, leaking uprobe",
            "[ 1.0] uprobe: x:1 failed to unregister, leaking uprobe at 0",
        ] {
            assert_eq!(leaked_uprobe(forged), None, "{forged}");
        }
        let log: Vec<String> = [
            "[ 1.0] uprobe: a:1 failed to unregister, leaking uprobe",
            "[ 2.0] uprobe: nvprobe:2 failed to unregister, leaking uprobe",
        ]
        .map(str::to_owned)
        .to_vec();
        assert!(log.iter().all(|l| relevant(l)));
        let mut out = Vec::new();
        checks(&log, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].id, out[0].verdict),
            ("uprobe_leaked", Verdict::Warn)
        );
        assert!(
            out[0].evidence.contains("2 uprobes") && out[0].evidence.contains("nvprobe:2"),
            "{}",
            out[0].evidence
        );
    }
}
