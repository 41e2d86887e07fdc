//! Hooking libcuda copies found while tracing, on a thread of its own: an
//! attach is a system call that can wait for the kernel (a perf event
//! waits for the tracing lock, which another tool's removals may hold for
//! minutes), and the collector must never wait with it. The collector
//! sends what it saw (loaders' opens, processes new to NVIDIA), and reads
//! what was hooked on its next tick.

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
        mpsc::{Receiver, Sender, TryRecvError, channel},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use super::{Attached, Libcuda};

/// What the collector saw since its last tick.
#[derive(Default)]
pub struct Job {
    /// (tgid, path as the process named it, through its root, when the
    /// open returned): a loader opened a libcuda.
    pub opened: Vec<(u32, PathBuf, u64)>,
    /// Processes first seen making NVIDIA calls: their maps may name one.
    pub new_tgids: Vec<u32>,
    /// Preloaded libraries that export cuInit, opened while their process
    /// was read: (tgid, path as it names it, the file).
    pub preloads: Vec<(u32, String, std::fs::File)>,
}

impl Job {
    pub fn is_empty(&self) -> bool {
        self.opened.is_empty() && self.new_tgids.is_empty() && self.preloads.is_empty()
    }
}

/// One file's outcome.
pub struct Hooked {
    pub tgid: u32,
    /// Found at the loader's open (else in a new process's maps).
    pub at_load: bool,
    /// When that open returned (CLOCK_MONOTONIC ns), for a file the loader
    /// opened; and when its hooks were in place.
    pub opened_ns: Option<u64>,
    pub hooked_ns: u64,
    pub result: Result<Attached, String>,
}

/// What one job did.
pub struct Done {
    pub hooked: Vec<Hooked>,
    /// The loaders of this job (their identity is read again once their
    /// libcuda is mapped, which it is by now).
    pub loaders: Vec<u32>,
}

pub struct Attacher {
    tx: Option<Sender<Job>>,
    rx: Receiver<Done>,
    thread: Option<JoinHandle<Libcuda>>,
    /// Set at the stop: no new attach begins.
    stop: Arc<AtomicBool>,
}

impl Attacher {
    pub fn spawn(mut libcuda: Libcuda) -> std::io::Result<Attacher> {
        let (tx, jobs) = channel::<Job>();
        let (done_tx, rx) = channel::<Done>();
        let stop = libcuda.stop_flag();
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("nvprobe-hooks".into())
            .spawn(move || {
                while let Ok(job) = jobs.recv() {
                    let done = run(&mut libcuda, job, &stopping);
                    if done_tx.send(done).is_err() {
                        break;
                    }
                }
                libcuda
            })?;
        Ok(Attacher {
            tx: Some(tx),
            rx,
            thread: Some(thread),
            stop,
        })
    }

    /// Hand a job over; never waits.
    pub fn send(&self, job: Job) {
        if let Some(tx) = &self.tx
            && !job.is_empty()
        {
            let _ = tx.send(job);
        }
    }

    /// What the thread finished since the last call; never waits.
    pub fn done(&self) -> Vec<Done> {
        let mut out = Vec::new();
        loop {
            match self.rx.try_recv() {
                Ok(d) => out.push(d),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return out,
            }
        }
    }

    /// At the stop: no more jobs; wait for the system call in progress
    /// (leaving during it would end the thread with a fatal signal
    /// pending, and the kernel then leaks every uprobe that call was
    /// placing), saying so if the kernel keeps it. Jobs not begun are
    /// dropped. Returns the layer, for what it still holds.
    pub fn finish(mut self) -> Option<Libcuda> {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.tx.take());
        let thread = self.thread.take()?;
        let t0 = Instant::now();
        let mut said = false;
        while !thread.is_finished() {
            if !said && t0.elapsed() > Duration::from_millis(500) {
                eprintln!(
                    "nvprobe: waiting for the kernel to finish attaching a libcuda copy (it waits for the kernel's tracing lock); SIGKILL now would leave that call's uprobes behind"
                );
                said = true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        thread.join().ok()
    }
}

fn run(libcuda: &mut Libcuda, job: Job, stop: &AtomicBool) -> Done {
    let mut loaders: Vec<u32> = job.opened.iter().map(|l| l.0).collect();
    loaders.sort_unstable();
    loaders.dedup();
    let mut hooked = Vec::new();
    // The libcuda files the loader opened first: their processes are
    // about to call them.
    for (tgid, path, at) in job.opened {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(mut h) = attach_one(libcuda, tgid, &path, true, false) {
            h.opened_ns = Some(at);
            hooked.push(h);
        }
    }
    // (tgid, file, found at the loader's open, an interposer). A loader's
    // process has its preloads mapped by the time it opens libcuda: a
    // library among them that exports the driver API is hooked too, and
    // told apart.
    let mut found: Vec<(u32, PathBuf, bool, bool)> = Vec::new();
    for &tgid in &loaders {
        found.extend(
            super::preloads_of(tgid)
                .into_iter()
                .map(|p| (tgid, p, true, true)),
        );
    }
    for tgid in job.new_tgids {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        found.extend(
            super::mapped_by(tgid)
                .into_iter()
                .map(|p| (tgid, p, false, false)),
        );
        if loaders.binary_search(&tgid).is_err() {
            found.extend(
                super::preloads_of(tgid)
                    .into_iter()
                    .map(|p| (tgid, p, false, true)),
            );
        }
    }
    for (tgid, shown, file) in job.preloads {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        // A preload that is not hooked (already, or not a CUDA library):
        // nothing to say.
        if let Ok(Some(a)) = libcuda.attach_file(file, std::path::Path::new(&shown), true) {
            hooked.push(Hooked {
                tgid,
                at_load: true,
                opened_ns: None,
                hooked_ns: crate::output::Clock::mono_now(),
                result: Ok(a),
            });
        }
    }
    attach_found(libcuda, found.into_iter(), stop, &mut hooked);
    Done { hooked, loaders }
}

/// Hook each file found (tgid, path, found at the loader's open, an
/// interposer), saying what became of it.
fn attach_found(
    libcuda: &mut Libcuda,
    found: impl Iterator<Item = (u32, PathBuf, bool, bool)>,
    stop: &AtomicBool,
    hooked: &mut Vec<Hooked>,
) {
    for (tgid, path, at_load, interposer) in found {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        hooked.extend(attach_one(libcuda, tgid, &path, at_load, interposer));
    }
}

/// One file's outcome; None when there is nothing to say (hooked already,
/// or a preload that is not a CUDA library).
fn attach_one(
    libcuda: &mut Libcuda,
    tgid: u32,
    path: &std::path::Path,
    at_load: bool,
    interposer: bool,
) -> Option<Hooked> {
    let result = match libcuda.attach_as(path, interposer) {
        Ok(Some(a)) => Ok(a),
        Ok(None) => return None,
        Err(_) if interposer => return None,
        Err(e) => Err(e),
    };
    Some(Hooked {
        tgid,
        at_load,
        opened_ns: None,
        hooked_ns: crate::output::Clock::mono_now(),
        result,
    })
}
