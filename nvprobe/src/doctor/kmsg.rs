//! Kernel-log evidence: the lines the NVIDIA modules wrote to the kernel
//! ring buffer (live: /dev/kmsg read without blocking; a tree: ROOT/kmsg.txt,
//! which `--snapshot` writes), and the kernel_log checks they give.
//!
//! A line counts only when the driver wrote it: the kernel's facility
//! (user space may write to /dev/kmsg too, and the kernel marks those
//! records with the user facility), a message that starts with a driver's
//! own printk prefix (`NVRM: `, `nvidia-uvm: `, …), and not a line the
//! kernel starts with a task's name (`COMM[PID]: segfault at …`: a process
//! may name itself `NVRM: Xid 79`). Where the driver itself quotes a task's
//! name (an Xid's `name=`), only what comes before it is read.

use std::{fs, io::Read as _, os::unix::fs::OpenOptionsExt as _, path::Path};

use super::check::{Check, Verdict, check};

pub use nvprobe_model::kmsg::{driver_line, line_gpu, pci_slot, xid};

/// The NVIDIA modules' lines (and the kernel's leaked-uprobe lines), oldest
/// first, at most `max`, each as "[seconds] message".
pub fn nvidia_lines(root: &Path, live: bool, max: usize) -> Vec<String> {
    let all = if live { read_live() } else { read_tree(root) };
    let mut v: Vec<String> = all.into_iter().filter(|l| kept(message(l))).collect();
    if v.len() > max {
        v.drain(..v.len() - max);
    }
    v
}

fn kept(msg: &str) -> bool {
    driver_line(msg) || leaked_uprobe(msg).is_some()
}

/// The message of a "[time] message" line (the time as dmesg or this
/// module writes it), or the line itself.
pub fn message(line: &str) -> &str {
    line.strip_prefix('[')
        .and_then(|rest| rest.split_once("] "))
        .map_or(line, |(_, msg)| msg)
}

/// The kernel's own line for a uprobe it could not remove (kernel/events/
/// uprobes.c, uprobe_warn: "uprobe: COMM:PID failed to unregister, leaking
/// uprobe"): the task that removed it, as "COMM:PID". Only a line that
/// starts and ends as the kernel writes it counts (a process's name in a
/// segfault line cannot make one).
pub fn leaked_uprobe(line: &str) -> Option<&str> {
    message(line)
        .trim_end()
        .strip_prefix("uprobe: ")?
        .strip_suffix(" failed to unregister, leaking uprobe")
}

/// A tree's kmsg.txt: what `--snapshot` wrote (the driver's lines, as
/// "[time] message", their facility checked when it read them), or a saved
/// kernel log. `dmesg -r` ("<prio>[time] message") and a copy of /dev/kmsg
/// ("prio,seq,usec,flags;message") carry the facility, and a record of
/// another facility than the kernel's is left out; plain `dmesg` text
/// carries none (it shows what user space wrote to /dev/kmsg as well), so
/// there a line is judged by its text alone.
///
/// A record of several lines (a task's name with a newline in it, in a
/// segfault line) is written by syslog(2)'s readers (`dmesg -S -r`,
/// busybox, /proc/kmsg) with the record's prefix again on each line, so a
/// line with the very same time as the line before it, when that one is
/// not the driver's, is taken for its continuation, not a record of its
/// own: an unprivileged user's program cannot forge driver lines that way.
fn read_tree(root: &Path) -> Vec<String> {
    let Some(text) = crate::safefs::read_text(root, "kmsg.txt", crate::safefs::CAP) else {
        return Vec::new();
    };
    let mut prev: Option<(String, bool)> = None;
    text.lines()
        .filter_map(|l| {
            if let Some(rec) = kmsg_record(l.as_bytes()) {
                return rec;
            }
            let line = match l.strip_prefix('<').and_then(|r| r.split_once('>')) {
                Some((prio, rest)) if prio.bytes().all(|b| b.is_ascii_digit()) => {
                    kernel_facility(prio).then(|| rest.to_owned())
                }
                _ => Some(l.to_owned()),
            };
            let time = l
                .split_once('[')
                .and_then(|(_, r)| r.split_once(']'))
                .map(|(t, _)| t.trim().to_owned());
            let continued = matches!((&prev, &time), (Some((pt, false)), Some(t)) if pt == t);
            if let Some(t) = time {
                // A continuation belongs to its record's first line.
                if !continued {
                    let ours = line.as_deref().is_some_and(|x| driver_line(message(x)));
                    prev = Some((t, ours));
                }
            }
            line.filter(|_| !continued)
        })
        .collect()
}

/// A syslog priority (facility * 8 + level) of the kernel's facility (0).
fn kernel_facility(prio: &str) -> bool {
    prio.parse::<u32>().is_ok_and(|p| p >> 3 == 0)
}

/// One /dev/kmsg record ("prio,seq,usec,flags;message\n continuation"):
/// None when it is not one; Some(None) when it is another facility's (user
/// space wrote it); else its line as "[seconds] message".
fn kmsg_record(rec: &[u8]) -> Option<Option<String>> {
    let rec = String::from_utf8_lossy(rec);
    let (head, msg) = rec.split_once(';')?;
    let fields: Vec<&str> = head.split(',').collect();
    if fields.len() < 4
        || !fields[..3]
            .iter()
            .all(|f| f.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    if !kernel_facility(fields[0]) {
        return Some(None);
    }
    let usec: u64 = fields[2].parse().unwrap_or(0);
    let msg = msg.lines().next().unwrap_or("");
    Some(Some(format!(
        "[{:>5}.{:06}] {msg}",
        usec / 1_000_000,
        usec % 1_000_000
    )))
}

/// /dev/kmsg gives one record per read; O_NONBLOCK ends with EAGAIN at the
/// end of the buffer instead of waiting for new records. Where it cannot
/// be opened (a container), syslog(2) gives the same records as text.
fn read_live() -> Vec<String> {
    let Ok(mut f) = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
    else {
        return read_syslog();
    };
    let mut out = Vec::new();
    let mut buf = vec![0u8; 8192];
    for _ in 0..100_000 {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend(kmsg_record(&buf[..n]).flatten()),
            // EPIPE: records were overwritten while reading; go on.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(_) => break,
        }
    }
    out
}

/// The kernel's records through syslog(2) (continuations folded, other
/// facilities left out), as "[seconds] message"; none when it is refused.
fn read_syslog() -> Vec<String> {
    let Ok(text) = crate::klog::text() else {
        return Vec::new();
    };
    nvprobe_model::kmsg::syslog::records(&text)
        .into_iter()
        .filter(|r| r.facility == 0)
        .map(|r| {
            format!(
                "[{:>5}.{:06}] {}",
                r.ts_us / 1_000_000,
                r.ts_us % 1_000_000,
                r.msg
            )
        })
        .collect()
}

/// What the driver's lines say, as findings: (kind, line). Each is read
/// where the driver writes it: an Xid by its number (79: the GPU fell off
/// the bus), never by the task name it quotes; nvidia.ko's sentences from
/// their start (osinit.c, osapi.c, nv.c); nvidia-uvm's errors from its own
/// lines, which quote no task name.
pub fn findings(lines: &[String]) -> Vec<(&'static str, &String)> {
    use nvprobe_model::kmsg::LogKind;
    lines
        .iter()
        .filter_map(|l| {
            let kind = match nvprobe_model::kmsg::kind_of(message(l))? {
                LogKind::Xid => "xid",
                LogKind::GpuLost => "gpu_lost",
                LogKind::GpuInitFailed => "gpu_init_failed",
                LogKind::UvmError => "uvm_error",
                LogKind::VersionMismatch => "version_mismatch",
                LogKind::GpuIdentity | LogKind::Other | LogKind::Seccomp => return None,
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
        assert!(log.iter().all(|l| kept(message(l))));
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

    fn owned(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|l| (*l).to_owned()).collect()
    }

    /// A record user space wrote to /dev/kmsg has the user facility (the
    /// kernel sets facility 1 when the writer gives none, and refuses to let
    /// it claim 0): left out, however it reads.
    #[test]
    fn records_user_space_wrote_are_not_the_drivers() {
        let forged = b"14,2001,9000000,-;NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=x, GPU has fallen off the bus.\n";
        assert_eq!(kmsg_record(forged), Some(None));
        // user.err, and local0 (facility 16) as a writer may ask for.
        for prio in ["11", "131"] {
            let rec = format!("{prio},7,1,-;NVRM: Xid (PCI:0000:00:06): 79, x");
            assert_eq!(kmsg_record(rec.as_bytes()), Some(None), "{prio}");
        }
        // The driver's own (kernel facility, level 4), with its dictionary.
        let real = b"4,2002,9500000,-;NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:00:06.0\n";
        assert_eq!(
            kmsg_record(real),
            Some(Some(
                "[    9.500000] NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus."
                    .to_owned()
            ))
        );
        assert_eq!(kmsg_record(b"[ 1.0] NVRM: a; b"), None, "not a record");
    }

    /// Lines the kernel wrote (facility kernel) that start with a task's
    /// name: a process named like the driver makes none of the driver's
    /// lines, and so no Xid, lost GPU, UVM error or mismatch.
    #[test]
    fn a_task_named_like_the_driver_makes_no_finding() {
        let forged = [
            // comm "NVRM Xid 79", segfaulting.
            "[  100.1] NVRM Xid 79[4242]: segfault at 0 ip 0000000000401136 sp 00007ffd4a3c error 6 in a.out[401000+1000] likely on CPU 1 (core 1, socket 0)",
            // comm "NVRM: Xid 79,", and a library named to finish the line.
            "[  100.2] NVRM: Xid 79,[4243]: segfault at 0 ip 0 sp 0 error 4 in x): 79, GPU has fallen off the bus.so[7f00+1000]",
            "[  100.3] NVRM: Xid (PCI:[4244]: segfault at 0 ip 0 sp 0 error 4 in 0000:00:06): 79, y[7f00+1000]",
            // comm with a control byte, as the kernel escapes it.
            "[  100.4] NVRM: Xid\\x01\\x02\\x03 79,[4245]: segfault at 0 ip 0 sp 0 error 4",
            "[  100.5] nvidia-uvm: hmm[4246] trap invalid opcode ip:401136 sp:7ffd error:0 in a.out",
            "[  100.6] NVRM: API mis (4247): drop_caches: 3",
            "[  100.7] nvidia-uvm: page allocation failure: order:10, mode:0xcc0(GFP_KERNEL), nodemask=(null),cpuset=hmm-error,mems_allowed=0",
            // Tasks named "nvidia-uvm: hmm" and "NVRM: version m" that ran
            // out of a memory cgroup's limit (the red-team rerun of issue 23).
            "[  100.8] nvidia-uvm: hmm invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
            "[  100.9] NVRM: version m invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
        ];
        let log = owned(&forged);
        for l in &log {
            assert!(!kept(message(l)), "kept: {l}");
        }
        assert!(findings(&log).is_empty(), "{:?}", findings(&log));
        let mut out = Vec::new();
        checks(&log, &mut out);
        assert!(out.is_empty(), "{out:?}");
        // The driver quotes a task's name in a real Xid: only its number
        // counts, not what the name says.
        let real13 = owned(&[
            "[  101.0] NVRM: Xid (PCI:0000:00:06): 13, pid=4249, name=x 79, GPU has, Graphics Exception: ESR 0x404490=0x80000000",
        ]);
        assert_eq!(xid(message(&real13[0])), Some(("PCI:0000:00:06", 13)));
        assert_eq!(
            findings(&real13)
                .iter()
                .map(|(k, _)| *k)
                .collect::<Vec<_>>(),
            ["xid"]
        );
    }

    /// The driver's lines as its sources write them still count.
    #[test]
    fn the_drivers_own_lines_count() {
        let log = owned(&[
            "[  200.0] NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus.",
            "[  200.1] NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus.",
            "[  200.2] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No",
            "[  200.3] NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (0x22:0x56:884)",
            "[  200.4] NVRM: GPU 0000:41:00.0: GPU has fallen off the bus.",
            "[  200.5] nvidia-uvm: uvm_gpu.c:1234 uvm_hmm_register_gpu[pid:1234] failed: NV_ERR_INVALID_STATE",
            "[  200.6] NVRM: API mismatch: the client 'python3' (pid 1234)",
        ]);
        assert!(log.iter().all(|l| kept(message(l))));
        let kinds: Vec<&str> = findings(&log).iter().map(|(k, _)| *k).collect();
        assert_eq!(
            kinds,
            [
                "gpu_lost",
                "gpu_lost",
                "xid",
                "gpu_init_failed",
                "gpu_lost",
                "uvm_error",
                "version_mismatch"
            ]
        );
        let gpus: Vec<Option<String>> = log.iter().map(|l| line_gpu(message(l))).collect();
        assert_eq!(
            gpus,
            [
                Some("0000:00:06"),
                Some("0000:00:06"),
                Some("0000:01:00"),
                Some("0000:41:00"),
                Some("0000:41:00"),
                None,
                None
            ]
            .map(|g| g.map(str::to_owned))
        );
        let mut out = Vec::new();
        checks(&log, &mut out);
        let ids: Vec<(&str, Verdict)> = out.iter().map(|c| (c.id, c.verdict)).collect();
        assert_eq!(
            ids,
            [("xid", Verdict::Warn), ("version_mismatch", Verdict::Fail)]
        );
        // And the other lines a snapshot keeps (the H200's, as recorded).
        let h200 = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/hosts/h200-snapshot/kmsg.txt"
        ))
        .expect("the H200 snapshot's kmsg.txt");
        assert!(h200.lines().count() >= 5);
        for l in h200.lines() {
            assert!(kept(message(l)), "dropped: {l}");
        }
    }

    /// A saved log: `dmesg -r` and a /dev/kmsg copy keep their facility, and
    /// a user-space record is left out; plain dmesg text is judged by its
    /// words.
    #[test]
    fn a_saved_log_is_read_with_its_facility() {
        let (dir, _) = crate::safefs::private_temp_dir(&std::env::temp_dir(), "nvprobe-kmsg-")
            .expect("mkdtemp");
        std::fs::write(
            dir.join("kmsg.txt"),
            "<14>[    5.0] NVRM: Xid (PCI:0000:00:06): 79, forged by a writer\n\
             <4>[    6.0] NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=a, GPU has fallen off the bus.\n\
             12,1,7000000,-;NVRM: Xid (PCI:0000:00:06): 79, forged too\n\
             3,2,8000000,-;NVRM: Xid (PCI:0000:00:06): 48, pid=2, name=b, An uncorrectable double bit error\n\
             [    9.0] NVRM: Xid (PCI:0000:00:06): 31, pid=3, name=c, Ch 00000008, intr 10000000\n\
             [    9.5] NVRM Xid 79[77]: segfault at 0 ip 0 sp 0 error 4\n",
        )
        .expect("write kmsg.txt");
        let got = nvidia_lines(&dir, false, 400);
        assert_eq!(
            got,
            [
                "[    6.0] NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=a, GPU has fallen off the bus.",
                "[    8.000000] NVRM: Xid (PCI:0000:00:06): 48, pid=2, name=b, An uncorrectable double bit error",
                "[    9.0] NVRM: Xid (PCI:0000:00:06): 31, pid=3, name=c, Ch 00000008, intr 10000000",
            ]
        );
        // syslog(2)'s text of a segfault whose task name holds newlines:
        // each line with the record's prefix; the driver's own lines at
        // other times are kept.
        std::fs::write(
            dir.join("kmsg.txt"),
            "<6>[   10.000001] a[77]: segfault at 0 ip 0 sp 0 error 4 in a\n\
             <6>[   10.000001] NVRM: API mismatch: the client has the version 1.0\n\
             <6>[   10.000001] NVRM: Xid (PCI:0000:00:06): 48, pid=2, name=b, An uncorrectable double bit error\n\
             <4>[   11.000000] NVRM: Xid (PCI:0000:00:06): 43, pid=5, name=c, Ch 00000008\n\
             <4>[   11.000000] NVRM: Xid (PCI:0000:00:06): 43, pid=6, name=d, Ch 00000009\n",
        )
        .expect("write kmsg.txt");
        let got = nvidia_lines(&dir, false, 400);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            got,
            [
                "[   11.000000] NVRM: Xid (PCI:0000:00:06): 43, pid=5, name=c, Ch 00000008",
                "[   11.000000] NVRM: Xid (PCI:0000:00:06): 43, pid=6, name=d, Ch 00000009",
            ]
        );
    }
}
