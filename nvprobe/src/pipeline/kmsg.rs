//! The kernel log, followed live: /dev/kmsg from nvprobe's start, read on
//! a thread of its own (one record per read; poll with a timeout, so the
//! stop is seen within [`POLL_MS`]). The NVIDIA lines the kernel wrote
//! (its facility, the driver's prefix: `nvprobe_model::kmsg`) go to the
//! collector, which hands them to the pipeline on its tick, ahead of the
//! ring buffer's records; the correlator makes their `kernel_log` records.
//!
//! Time: a record carries the kernel's own stamp (its local clock, µs
//! since boot), which is not CLOCK_MONOTONIC: NTP slews the one and not
//! the other. Every record read gives the two clocks' offset plus the
//! time it took to read it; the smallest offset of the last 32 records is
//! taken (`nvprobe_model::kmsg::syslog::Offsets`), and a line is put at its
//! stamp plus that offset (never after the time it was read).
//!
//! Opened before nvprobe drops its capabilities (reading needs CAP_SYSLOG
//! where `kernel.dmesg_restrict` is 1, and the check is at open).
//!
//! Where /dev/kmsg cannot be opened (a container: its device cgroup
//! refuses the node whatever the capabilities) but syslog(2) answers, the
//! same buffer is read through it (`SYSLOG_ACTION_READ_ALL`, the whole
//! buffer as text; `nvprobe_model::kmsg::syslog` finds what is new) every
//! [`SYSLOG_POLL_MS`], or less often where a read costs more than 1/500
//! of that (each walks the whole buffer: `crate::klog`). syslog(2) checks
//! CAP_SYSLOG at every call, so nvprobe then keeps it
//! ([`Opened::needs_syslog_cap`]). A record so read was logged between the
//! read before and this one: a line is put at its stamp read as
//! CLOCK_MONOTONIC, kept within those bounds (`Offsets`). The text carries
//! no sequence number.

use std::{
    io::Read as _,
    os::{fd::AsFd, unix::fs::OpenOptionsExt as _},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc::{Receiver, SyncSender, TrySendError, sync_channel},
    },
    thread::JoinHandle,
};

use nvprobe_model::{correlate::faults::LogLine, kmsg::syslog::Offsets, render::Note};

use super::Pipeline;

/// How long a read waits before it looks at the stop flag.
const POLL_MS: u16 = 100;
/// Lines queued for the collector; more are counted as dropped.
const QUEUE: usize = 4096;
/// How often, at most, syslog(2)'s buffer is read where /dev/kmsg cannot
/// be opened.
pub const SYSLOG_POLL_MS: u64 = 250;
/// A read of it may take at most 1/this of the follower's time (each read
/// walks the whole buffer: [`crate::klog`]), so a big log is read less
/// often: at most 0.2 % of a CPU.
const SYSLOG_DUTY: u64 = 500;
/// How seldom it is read, at least.
const SYSLOG_POLL_MAX_MS: u64 = 5_000;

/// The follower: its thread, and what it sends.
pub struct KernelLog {
    rx: Receiver<(u64, LogLine)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Records the kernel overwrote before they were read (EPIPE), and
    /// lines the queue had no room for.
    lost: Arc<AtomicU64>,
    said_lost: u64,
    /// Why the follower stopped, once it did (a read refused).
    failed: Arc<std::sync::OnceLock<String>>,
    said_failed: bool,
}

/// The kernel log opened at its end, not yet followed.
pub enum Opened {
    /// /dev/kmsg.
    Dev(std::fs::File),
    /// syslog(2), because /dev/kmsg could not be opened (`why`).
    Syslog {
        cursor: nvprobe_model::kmsg::syslog::Cursor,
        size: usize,
        /// CLOCK_MONOTONIC before the read the cursor is at.
        read_at: u64,
        why: String,
    },
}

impl KernelLog {
    /// Open /dev/kmsg at its end (what is logged from now on), while the
    /// capabilities are still held. Err says why it cannot be followed.
    /// Where /dev/kmsg cannot be opened, syslog(2) is asked instead.
    pub fn open() -> Result<Opened, String> {
        match open_dev() {
            Ok(f) => Ok(Opened::Dev(f)),
            Err(dev) => match open_syslog() {
                Ok((cursor, size, read_at)) => Ok(Opened::Syslog {
                    cursor,
                    size,
                    read_at,
                    why: dev,
                }),
                Err(sys) => Err(format!("{dev}; syslog(2): {sys}")),
            },
        }
    }
}

fn open_dev() -> Result<std::fs::File, String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/kmsg")
        .map_err(|e| format!("/dev/kmsg: {e}"))?;
    // SEEK_END on /dev/kmsg: the next read is the next record logged.
    nix::unistd::lseek(f.as_fd(), 0, nix::unistd::Whence::SeekEnd)
        .map_err(|e| format!("/dev/kmsg: seek: {e}"))?;
    Ok(f)
}

/// syslog(2)'s buffer size, a cursor past what it holds now, and the time
/// before that read.
type SyslogAt = (nvprobe_model::kmsg::syslog::Cursor, usize, u64);

fn open_syslog() -> Result<SyslogAt, String> {
    let size = crate::klog::size()?;
    let mut buf = vec![0u8; size];
    let before = crate::output::Clock::mono_now();
    let text = crate::klog::read_all(&mut buf)?;
    if !text.trim().is_empty() && nvprobe_model::kmsg::syslog::records(&text).is_empty() {
        return Err(
            "its lines carry no time (printk.time is off: echo Y > /sys/module/printk/parameters/time)"
                .into(),
        );
    }
    Ok((
        nvprobe_model::kmsg::syslog::Cursor::at_end(&text),
        size,
        before,
    ))
}

impl Opened {
    /// Follow it on a thread of its own. Started after nvprobe dropped the
    /// capabilities it no longer needs: a thread keeps the sets it was
    /// made with.
    pub fn follow(self) -> Result<KernelLog, String> {
        let (tx, rx) = sync_channel(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(std::sync::OnceLock::new());
        let thread = {
            let (stop, lost, failed) = (stop.clone(), lost.clone(), failed.clone());
            std::thread::Builder::new()
                .name("nvprobe-kmsg".into())
                .spawn(move || match self {
                    Opened::Dev(f) => follow(f, &tx, &stop, &lost),
                    Opened::Syslog {
                        cursor,
                        size,
                        read_at,
                        ..
                    } => {
                        let at = (cursor, read_at);
                        let mut buf = vec![0u8; size];
                        let read = |full: &mut bool| {
                            let t = crate::klog::read_all(&mut buf)?;
                            *full = t.len() >= size / 10 * 9;
                            Ok(t.into_owned())
                        };
                        if let Err(e) = follow_syslog(at, read, &tx, &stop, &lost) {
                            let _ = failed.set(e);
                        }
                    }
                })
                .map_err(|e| format!("starting the kernel-log thread: {e}"))?
        };
        Ok(KernelLog {
            rx,
            stop,
            thread: Some(thread),
            lost,
            said_lost: 0,
            failed,
            said_failed: false,
        })
    }

    /// Whether following needs CAP_SYSLOG after the start: syslog(2)
    /// checks it at every read where `kernel.dmesg_restrict` is 1 (or
    /// cannot be read); where it is 0, anyone may read the log and the
    /// capability (which could also clear it) goes.
    pub fn needs_syslog_cap(&self) -> bool {
        matches!(self, Opened::Syslog { .. })
            && std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict")
                .map_or(true, |v| v.trim() != "0")
    }

    /// What to say once at the start about how the log is read.
    pub fn note(&self) -> Option<String> {
        match self {
            Opened::Dev(_) => None,
            Opened::Syslog { why, .. } => Some(format!(
                "the kernel log is read through syslog(2) ({why}), every {SYSLOG_POLL_MS} ms or less often for a big log: a kernel_log record's time is the kernel's stamp read as CLOCK_MONOTONIC, off by at most the wait between two reads, and its seq is nvprobe's count, not the kernel's"
            )),
        }
    }
}

impl KernelLog {
    /// The lines read so far.
    pub fn take(&mut self) -> Vec<(u64, LogLine)> {
        self.rx.try_iter().collect()
    }

    /// Hand lines taken before the ring buffer was drained to the pipeline
    /// (so that they follow the calls made before them), and say once
    /// more when records were lost since the last time.
    pub fn hand(&mut self, lines: Vec<(u64, LogLine)>, pipe: &mut Pipeline) -> anyhow::Result<()> {
        for (mono, line) in lines {
            pipe.kernel_log(mono, line)?;
        }
        let lost = self.lost.load(Ordering::Relaxed);
        if lost > self.said_lost {
            let msg = format!(
                "{} kernel-log record{} went unread (overwritten in the kernel's buffer before nvprobe read them, or more NVIDIA lines than it queues): kernel_log records and the Xids in fault verdicts may miss them",
                lost - self.said_lost,
                if lost - self.said_lost == 1 { "" } else { "s" }
            );
            self.said_lost = lost;
            pipe.note(
                crate::output::Clock::mono_now(),
                &Note::Warning {
                    id: "kernel_log_lost",
                    message: &msg,
                },
            )?;
        }
        if let Some(why) = self.failed.get().filter(|_| !self.said_failed) {
            self.said_failed = true;
            let msg = format!(
                "the kernel log is no longer followed (syslog(2): {why}): no kernel_log records from now on, and fault verdicts name no Xid"
            );
            pipe.note(
                crate::output::Clock::mono_now(),
                &Note::Warning {
                    id: "kernel_log_unavailable",
                    message: &msg,
                },
            )?;
        }
        Ok(())
    }
}

impl Drop for KernelLog {
    /// The thread sees the flag within its poll's timeout; nvprobe does
    /// not wait for it (a stop must not take 100 ms longer for a thread
    /// that only reads).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.thread.take());
    }
}

fn follow(
    mut f: std::fs::File,
    tx: &SyncSender<(u64, LogLine)>,
    stop: &AtomicBool,
    lost: &AtomicU64,
) {
    let mut buf = vec![0u8; 8192];
    let mut offsets = Offsets::default();
    while !stop.load(Ordering::Relaxed) {
        let mut fds = [nix::poll::PollFd::new(
            f.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(POLL_MS)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
        // Everything there now, one record per read.
        loop {
            let n = match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // Records were overwritten before this read: the next read
                // goes on from the oldest one left.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {
                    lost.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Err(_) => return,
            };
            let read_at = crate::output::Clock::mono_now();
            let Some(rec) = nvprobe_model::kmsg::parse_record(&buf[..n]) else {
                continue;
            };
            offsets.sample(stamp_ns(&rec), i128::from(read_at), None);
            if !deliver(rec, read_at, offsets.estimate(None), tx, lost) {
                return;
            }
        }
    }
}

/// Follow syslog(2)'s buffer from `cursor`, reading it whole every
/// [`SYSLOG_POLL_MS`]; Err when a read is refused.
/// `read` gives the whole buffer as text (and whether it filled what it
/// was given: the log is full, and records are being overwritten).
fn follow_syslog(
    (mut cursor, mut prev): (nvprobe_model::kmsg::syslog::Cursor, u64),
    mut read: impl FnMut(&mut bool) -> Result<String, String>,
    tx: &SyncSender<(u64, LogLine)>,
    stop: &AtomicBool,
    lost: &AtomicU64,
) -> Result<(), String> {
    use crate::output::Clock;
    let mut offsets = Offsets::default();
    // The text has no sequence numbers: records are counted from here.
    let mut seq = 0u64;
    let mut wait_ms = SYSLOG_POLL_MS;
    while !stop.load(Ordering::Relaxed) {
        // In steps of at most SYSLOG_POLL_MS, so that the stop is seen
        // (nothing waits for this thread at the stop).
        let mut waited = 0;
        while waited < wait_ms && !stop.load(Ordering::Relaxed) {
            let step = (wait_ms - waited).min(SYSLOG_POLL_MS);
            std::thread::sleep(std::time::Duration::from_millis(step));
            waited += step;
        }
        // `prev`: before the last read, so a record not in it was logged
        // after then (the lower bound of what this read finds).
        let before = Clock::mono_now();
        let mut full = false;
        let text = read(&mut full)?;
        let read_at = Clock::mono_now();
        let got = cursor.advance(&text, full);
        // What the read and its parse cost, in µs, times the duty: the wait.
        let cost_us = Clock::mono_now().saturating_sub(before) / 1_000;
        wait_ms = (cost_us * SYSLOG_DUTY / 1_000).clamp(SYSLOG_POLL_MS, SYSLOG_POLL_MAX_MS);
        if got.gap {
            // Records may have been overwritten between the two reads.
            lost.fetch_add(1, Ordering::Relaxed);
        }
        for mut rec in got.new {
            seq += 1;
            rec.seq = seq;
            offsets.sample(stamp_ns(&rec), i128::from(read_at), Some(i128::from(prev)));
            // The stamps read as CLOCK_MONOTONIC, as far as the bounds allow.
            if !deliver(rec, read_at, offsets.estimate(Some(0)), tx, lost) {
                return Ok(());
            }
        }
        prev = before;
    }
    Ok(())
}

/// A record's stamp, ns of the kernel's local clock.
fn stamp_ns(rec: &nvprobe_model::kmsg::KmsgRecord<'_>) -> i128 {
    i128::from(rec.ts_us) * 1000
}

/// One record read at `read_at`, sent on, put at its stamp plus `offset`,
/// when it is an NVIDIA line the kernel wrote. False when the collector is
/// gone.
fn deliver(
    rec: nvprobe_model::kmsg::KmsgRecord<'_>,
    read_at: u64,
    offset: i128,
    tx: &SyncSender<(u64, LogLine)>,
    lost: &AtomicU64,
) -> bool {
    if rec.facility != 0 || nvprobe_model::kmsg::line_kind(&rec.msg).is_none() {
        return true;
    }
    let at = (stamp_ns(&rec) + offset).clamp(0, i128::from(read_at)) as u64;
    let line = LogLine {
        seq: rec.seq,
        kernel_ts_us: rec.ts_us,
        level: rec.level,
        message: rec.msg.into_owned(),
    };
    match tx.try_send((at, line)) {
        Ok(()) => true,
        Err(TrySendError::Full(_)) => {
            lost.fetch_add(1, Ordering::Relaxed);
            true
        }
        Err(TrySendError::Disconnected(_)) => false,
    }
}

/// The follower as the collector holds it.
pub type Followed = std::sync::Mutex<KernelLog>;

/// [`KernelLog::take`] of the follower, when there is one.
pub fn take(k: Option<&Followed>) -> Vec<(u64, LogLine)> {
    match k.map(std::sync::Mutex::lock) {
        Some(Ok(mut k)) => k.take(),
        _ => Vec::new(),
    }
}

/// [`KernelLog::hand`] of the follower, when there is one.
pub fn hand(
    k: Option<&Followed>,
    lines: Vec<(u64, LogLine)>,
    pipe: &mut Pipeline,
) -> anyhow::Result<()> {
    match k.map(std::sync::Mutex::lock) {
        Some(Ok(mut k)) => k.hand(lines, pipe),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc::sync_channel,
    };

    use super::follow_syslog;

    const XID: &str = "NVRM: Xid (PCI:0000:00:06): 31, pid=711, name=python3, channel 0x0000000a";

    /// Three reads of a growing buffer: the driver's lines logged after the
    /// start are sent once each, with their stamps and nvprobe's count,
    /// and neither the lines from before the start nor a user's forged one.
    #[test]
    fn the_syslog_follower_sends_each_new_driver_line_once() {
        let start = "<6>[    1.000000] Linux version\n<3>[    2.000000] NVRM: old line\n";
        let texts = [
            format!(
                "{start}<3>[    3.000000] {XID}\n<14>[    3.500000] NVRM: Xid (PCI:0000:00:06): 79, by a user\n"
            ),
            format!(
                "{start}<3>[    3.000000] {XID}\n<14>[    3.500000] NVRM: Xid (PCI:0000:00:06): 79, by a user\n<4>[    4.000000] nvidia-uvm: uvm error\n"
            ),
        ];
        let cursor = nvprobe_model::kmsg::syslog::Cursor::at_end(start);
        let (tx, rx) = sync_channel(16);
        let stop = Arc::new(AtomicBool::new(false));
        let lost = AtomicU64::new(0);
        let mut n = 0;
        let stopper = stop.clone();
        let read = |full: &mut bool| {
            *full = false;
            let t = texts[n.min(texts.len() - 1)].clone();
            n += 1;
            if n > texts.len() {
                stopper.store(true, Ordering::Relaxed);
            }
            Ok(t)
        };
        follow_syslog((cursor, 0), read, &tx, &stop, &lost).expect("followed");
        let got: Vec<(u64, String, u64)> = rx
            .try_iter()
            .map(|(_, l)| (l.kernel_ts_us, l.message, l.seq))
            .collect();
        assert_eq!(
            got,
            vec![
                (3_000_000, XID.to_owned(), 1),
                (4_000_000, "nvidia-uvm: uvm error".to_owned(), 3),
            ]
        );
        assert_eq!(lost.load(Ordering::Relaxed), 0);
    }

    /// A refused read ends the follower with why.
    #[test]
    fn a_refused_read_is_said() {
        let (tx, _rx) = sync_channel(1);
        let stop = AtomicBool::new(false);
        let lost = AtomicU64::new(0);
        let r = follow_syslog(
            (Default::default(), 0),
            |_: &mut bool| Err("Operation not permitted (os error 1)".to_owned()),
            &tx,
            &stop,
            &lost,
        );
        assert_eq!(r, Err("Operation not permitted (os error 1)".to_owned()));
    }
}
