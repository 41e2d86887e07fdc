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
//! time it took to read it; the smallest offset of the last
//! [`OFFSET_SAMPLES`] records is taken, and a line is put at its stamp plus
//! that offset (never after the time it was read).
//!
//! Opened before nvprobe drops its capabilities (reading needs CAP_SYSLOG
//! where `kernel.dmesg_restrict` is 1, and the check is at open).

use std::{
    collections::VecDeque,
    io::Read as _,
    os::{fd::AsFd, unix::fs::OpenOptionsExt as _},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc::{Receiver, SyncSender, TrySendError, sync_channel},
    },
    thread::JoinHandle,
};

use nvprobe_model::{correlate::faults::LogLine, render::Note};

use super::Pipeline;

/// How long a read waits before it looks at the stop flag.
const POLL_MS: u16 = 100;
/// Records whose clock offsets are kept.
const OFFSET_SAMPLES: usize = 32;
/// Lines queued for the collector; more are counted as dropped.
const QUEUE: usize = 4096;

/// The follower: its thread, and what it sends.
pub struct KernelLog {
    rx: Receiver<(u64, LogLine)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Records the kernel overwrote before they were read (EPIPE), and
    /// lines the queue had no room for.
    lost: Arc<AtomicU64>,
    said_lost: u64,
}

/// /dev/kmsg opened at its end, not yet followed.
pub struct Opened(std::fs::File);

impl KernelLog {
    /// Open /dev/kmsg at its end (what is logged from now on), while the
    /// capabilities are still held. Err says why it cannot be followed.
    pub fn open() -> Result<Opened, String> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/kmsg")
            .map_err(|e| format!("/dev/kmsg: {e}"))?;
        // SEEK_END on /dev/kmsg: the next read is the next record logged.
        nix::unistd::lseek(f.as_fd(), 0, nix::unistd::Whence::SeekEnd)
            .map_err(|e| format!("/dev/kmsg: seek: {e}"))?;
        Ok(Opened(f))
    }
}

impl Opened {
    /// Follow it on a thread of its own. Started after nvprobe dropped the
    /// capabilities it no longer needs: a thread keeps the sets it was
    /// made with.
    pub fn follow(self) -> Result<KernelLog, String> {
        let f = self.0;
        let (tx, rx) = sync_channel(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, lost) = (stop.clone(), lost.clone());
            std::thread::Builder::new()
                .name("nvprobe-kmsg".into())
                .spawn(move || follow(f, &tx, &stop, &lost))
                .map_err(|e| format!("starting the kernel-log thread: {e}"))?
        };
        Ok(KernelLog {
            rx,
            stop,
            thread: Some(thread),
            lost,
            said_lost: 0,
        })
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
    let mut offsets: VecDeque<i128> = VecDeque::with_capacity(OFFSET_SAMPLES);
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
            let stamp = i128::from(rec.ts_us) * 1000;
            if offsets.len() == OFFSET_SAMPLES {
                offsets.pop_front();
            }
            offsets.push_back(i128::from(read_at) - stamp);
            if rec.facility != 0 || nvprobe_model::kmsg::kind_of(&rec.msg).is_none() {
                continue;
            }
            let offset = offsets.iter().copied().min().unwrap_or(0);
            let at = (stamp + offset).clamp(0, i128::from(read_at)) as u64;
            let line = LogLine {
                seq: rec.seq,
                kernel_ts_us: rec.ts_us,
                level: rec.level,
                message: rec.msg.into_owned(),
            };
            match tx.try_send((at, line)) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    lost.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => return,
            }
        }
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
