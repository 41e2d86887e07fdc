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
    /// (tgid, path as the process named it, through its root): a loader
    /// opened a libcuda.
    pub opened: Vec<(u32, PathBuf)>,
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
    // (tgid, file, found at the loader's open, an interposer).
    let mut found: Vec<(u32, PathBuf, bool, bool)> = job
        .opened
        .into_iter()
        .map(|(tgid, p)| (tgid, p, true, false))
        .collect();
    // A loader's process has its preloads mapped by the time it opens
    // libcuda: a library among them that exports the driver API is hooked
    // too, and told apart.
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
    let mut hooked = Vec::new();
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
                result: Ok(a),
            });
        }
    }
    for (tgid, path, at_load, interposer) in found {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let result = match libcuda.attach_as(&path, interposer) {
            Ok(Some(a)) => Ok(a),
            Ok(None) => continue,
            // A preload that is not a CUDA library at all: nothing to say.
            Err(_) if interposer => continue,
            Err(e) => Err(e),
        };
        hooked.push(Hooked {
            tgid,
            at_load,
            result,
        });
    }
    Done { hooked, loaders }
}
