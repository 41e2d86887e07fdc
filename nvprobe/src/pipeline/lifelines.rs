//! Which fork, exec, exit, signal and failed-call lines the text output
//! shows.
//!
//! The kernel side follows every process that touched an NVIDIA file and
//! every process forked from one, so a shell that once looked at
//! /dev/nvidia0 brings in each command it runs, and each of their exits
//! and SIGCHLDs. Text shows the lifecycle, signal and failed-call lines
//! (call_failed: a failed system call of a start-up) of a process
//! that made an NVIDIA call (an open, an ioctl, a mapping, a mknod, a
//! libcuda call; a stat or access of a path does not count), and of the
//! children such a process forks (nvidia-modprobe's exit status, a worker's
//! end), not of their own children unless they make a call. The lines of any other process are held, a few per
//! process: they are written, before its first NVIDIA call's line, if it
//! makes one, and are left out, and counted, when it ends without one.
//! JSON and OTLP keep every record (the recording is complete), and
//! `--all-processes` shows every line in text. A failed call of an
//! NVIDIA path is not written twice: the path record's line says it.

use std::collections::{HashMap, HashSet, VecDeque};

use bytes::Bytes;
use nvprobe_model::decode::{Event, ProcKind};

/// A failed call the kernel side's path tracepoints report themselves: an
/// open, a lookup or a mknod of an NVIDIA path
/// (`nvprobe_common::NVIDIA_PATH_PREFIXES`). A chmod or unlink of one has
/// no other line.
fn repeats_a_path_record(p: &nvprobe_model::decode::ProcCall) -> bool {
    use nvprobe_model::decode::SysKind;
    matches!(
        p.failed,
        Some((SysKind::Open | SysKind::Lookup | SysKind::Mknod, _))
    ) && p.path.as_deref().is_some_and(nvidia_prefixed)
}

fn nvidia_prefixed(p: &str) -> bool {
    nvprobe_common::NVIDIA_PATH_PREFIXES
        .iter()
        .any(|pre| p.as_bytes().starts_with(pre))
}

/// The lines held for one process; older ones are left out.
pub const HOLD_LINES: usize = 8;
/// Processes whose lines are held; the one held longest is left out.
pub const HOLD_PROCS: usize = 4096;

/// What a step of the stream means to the filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// An NVIDIA call of the process (its lines are shown from now on).
    Call(u32),
    /// A lifecycle or signal line about a process.
    Life(Life),
    /// Nothing the filter looks at (a stat or access, a decode warning).
    Other,
    /// A record whose line another record already wrote (a failed call
    /// of an NVIDIA path, also the path record's line): left out of text.
    Repeat,
    /// An NVIDIA ioctl that failed with an errno: a Call, remembered by
    /// its thread, descriptor and errno ([`Echo`]).
    FailedIoctl(u32, Echo),
    /// A failed ioctl's call_failed record: left out of text when it
    /// repeats its thread's last failed NVIDIA ioctl, else a Failed line.
    IoctlFailed(u32, Echo),
    /// The loader's search for a library that is not there (a libcuda
    /// path, ENOENT): a Call, and at `--events verdicts` the verdict's
    /// evidence only (`libcuda_not_found` lists the paths).
    Lookup(u32),
}

/// A failed ioctl as both records of it say it: (tid, fd, errno).
pub type Echo = (u32, i32, i32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Life {
    Fork {
        parent: u32,
        child: u32,
    },
    Exec(u32),
    /// A failed system call of a process in start-up (call_failed).
    Failed(u32),
    Exit(u32),
    /// A signal generated for, or delivered to, `target`.
    Signal {
        target: u32,
    },
}

impl Step {
    pub fn of(ev: &Event) -> Self {
        match ev {
            Event::Proc(p) => match p.op {
                ProcKind::Fork => Step::Life(Life::Fork {
                    parent: p.proc.pid,
                    child: p.target_pid,
                }),
                ProcKind::Exec => Step::Life(Life::Exec(p.proc.pid)),
                ProcKind::Exit => Step::Life(Life::Exit(p.proc.pid)),
                ProcKind::Signal | ProcKind::SignalDelivered => Step::Life(Life::Signal {
                    target: p.target_pid,
                }),
                // A failed call of a followed process is not an NVIDIA
                // call (a shell that looked at /dev/nvidia0 and the
                // library searches of its commands); one that repeats an
                // NVIDIA path's own record is not shown twice.
                ProcKind::CallFailed if repeats_a_path_record(p) => Step::Repeat,
                ProcKind::CallFailed
                    if matches!(p.failed, Some((nvprobe_model::decode::SysKind::Ioctl, _))) =>
                {
                    let fd = p.arg(0).map_or(-1, |fd| fd as i32);
                    let errno = p.failed.map_or(0, |f| f.1);
                    Step::IoctlFailed(p.proc.pid, (p.proc.tid, fd, errno))
                }
                ProcKind::CallFailed => Step::Life(Life::Failed(p.proc.pid)),
                // The OOM killer's choice: as much the victim's as a call.
                ProcKind::OomVictim => Step::Call(p.target_pid),
                // The thread in cuInit ended alone: part of the start-up.
                ProcKind::ThreadExit => Step::Call(p.target_pid),
                ProcKind::Unknown => Step::Other,
            },
            Event::Stat(_) | Event::Access(_) => Step::Other,
            Event::Open(o) if o.ret == -i64::from(libc::ENOENT) && !nvidia_prefixed(&o.path) => {
                Step::Lookup(o.proc.pid)
            }
            Event::Ioctl(i) if i.ret < 0 => Step::FailedIoctl(
                i.proc.pid,
                (
                    i.proc.tid,
                    i.fd,
                    i.ret.saturating_neg().clamp(0, i64::from(i32::MAX)) as i32,
                ),
            ),
            _ => Step::Call(ev.proc().pid),
        }
    }
}

#[derive(Default)]
pub struct LifeLines {
    /// Processes that made an NVIDIA call.
    callers: HashSet<u32>,
    /// Children of callers.
    young: HashSet<u32>,
    held: HashMap<u32, Vec<Bytes>>,
    /// Pids in `held`, oldest first (some may have left it since).
    order: VecDeque<u32>,
    /// Lines left out, and the processes they were about.
    pub lines: u64,
    pub processes: u64,
}

impl LifeLines {
    fn shown(&self, pid: u32) -> bool {
        self.callers.contains(&pid) || self.young.contains(&pid)
    }

    /// The process made an NVIDIA call: the lines held for it, to be
    /// written before that call's.
    pub fn call(&mut self, pid: u32) -> Vec<Bytes> {
        self.callers.insert(pid);
        self.held.remove(&pid).unwrap_or_default()
    }

    /// A lifecycle line: returned when it is to be written now. An empty
    /// one (a level that writes no such line) only keeps the state.
    pub fn life(&mut self, l: Life, line: Bytes) -> Option<Bytes> {
        match l {
            Life::Fork { parent, child } => {
                if self.callers.contains(&parent) {
                    self.young.insert(child);
                    return Some(line);
                }
                self.hold(child, line);
                None
            }
            Life::Exec(pid) | Life::Failed(pid) => {
                if self.shown(pid) {
                    return Some(line);
                }
                self.hold(pid, line);
                None
            }
            Life::Exit(pid) => {
                // The pid may come back as another process.
                let shown = self.callers.remove(&pid) | self.young.remove(&pid);
                if shown {
                    return Some(line);
                }
                let held = self.held.remove(&pid).map_or(0, |h| h.len() as u64);
                let left = held + u64::from(!line.is_empty());
                if left > 0 {
                    self.lines += left;
                    self.processes += 1;
                }
                None
            }
            Life::Signal { target } => {
                if self.shown(target) {
                    return Some(line);
                }
                self.hold(target, line);
                None
            }
        }
    }

    fn hold(&mut self, pid: u32, line: Bytes) {
        if line.is_empty() {
            return;
        }
        if !self.held.contains_key(&pid) {
            while self.held.len() >= HOLD_PROCS {
                let Some(old) = self.order.pop_front() else {
                    break;
                };
                if let Some(h) = self.held.remove(&old) {
                    self.lines += h.len() as u64;
                    self.processes += 1;
                }
            }
            self.order.push_back(pid);
            if self.order.len() > 2 * HOLD_PROCS {
                let held = &self.held;
                self.order.retain(|p| held.contains_key(p) || *p == pid);
            }
        }
        let h = self.held.entry(pid).or_default();
        if h.len() >= HOLD_LINES {
            h.remove(0);
            self.lines += 1;
        }
        h.push(line);
    }

    /// The end of the stream: what is still held is left out.
    pub fn finish(&mut self) {
        for (_, h) in self.held.drain() {
            self.lines += h.len() as u64;
            self.processes += 1;
        }
        self.order.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[test]
    fn a_shell_that_never_calls_the_driver_is_left_out_and_counted() {
        let mut f = LifeLines::default();
        // bash[10] forks ls[11], which execs, gets a signal and exits.
        let fork = Life::Fork {
            parent: 10,
            child: 11,
        };
        assert_eq!(f.life(fork, b("fork")), None);
        assert_eq!(f.life(Life::Exec(11), b("exec")), None);
        assert_eq!(f.life(Life::Signal { target: 11 }, b("sig")), None);
        assert_eq!(f.life(Life::Exit(11), b("exit")), None);
        assert_eq!((f.lines, f.processes), (4, 1));
        // Its SIGCHLD to bash, and bash's own exit.
        assert_eq!(f.life(Life::Signal { target: 10 }, b("chld")), None);
        assert_eq!(f.life(Life::Exit(10), b("exit")), None);
        assert_eq!((f.lines, f.processes), (6, 2));
        assert!(f.held.is_empty());
    }

    #[test]
    fn a_process_that_calls_the_driver_shows_its_held_lines_first() {
        let mut f = LifeLines::default();
        let fork = Life::Fork {
            parent: 10,
            child: 20,
        };
        assert_eq!(f.life(fork, b("fork")), None);
        assert_eq!(f.life(Life::Exec(20), b("exec")), None);
        assert_eq!(f.call(20), vec![b("fork"), b("exec")]);
        assert_eq!(
            f.life(Life::Signal { target: 20 }, b("term")),
            Some(b("term"))
        );
        // A child of a caller shows (nvidia-modprobe's exit status), not
        // its own children.
        let child = Life::Fork {
            parent: 20,
            child: 21,
        };
        assert_eq!(f.life(child, b("fork")), Some(b("fork")));
        assert_eq!(f.life(Life::Exec(21), b("exec")), Some(b("exec")));
        let grandchild = Life::Fork {
            parent: 21,
            child: 22,
        };
        assert_eq!(f.life(grandchild, b("fork")), None);
        assert_eq!(f.life(Life::Exit(22), b("exit")), None);
        assert_eq!((f.lines, f.processes), (2, 1));
        assert_eq!(f.life(Life::Exit(21), b("exit")), Some(b("exit")));
        assert_eq!(f.life(Life::Exit(20), b("exit")), Some(b("exit")));
        // A new process on the same pid starts again unknown.
        assert_eq!(f.life(Life::Exec(20), b("exec")), None);
        f.finish();
        assert_eq!((f.lines, f.processes), (3, 2));
    }

    #[test]
    fn failed_calls_of_a_process_that_never_calls_the_driver_are_held() {
        let mut f = LifeLines::default();
        // sh[10] stat'ed a path (followed, not a caller): its failed calls
        // and those of the child it runs are held, then left out.
        assert_eq!(f.life(Life::Failed(10), b("stat")), None);
        let fork = Life::Fork {
            parent: 10,
            child: 11,
        };
        assert_eq!(f.life(fork, b("fork")), None);
        assert_eq!(f.life(Life::Failed(11), b("openat")), None);
        assert_eq!(f.life(Life::Exit(11), b("exit")), None);
        assert_eq!(f.life(Life::Exit(10), b("exit")), None);
        assert_eq!((f.lines, f.processes), (5, 2));
        // A caller's failed calls are written, its held ones first.
        assert_eq!(f.life(Life::Failed(20), b("ld.so")), None);
        assert_eq!(f.call(20), vec![b("ld.so")]);
        assert_eq!(f.life(Life::Failed(20), b("mmap")), Some(b("mmap")));
    }

    #[test]
    fn a_failed_call_of_an_nvidia_path_is_not_written_twice() {
        let p = |call: &str, path: &str| {
            let mut c: nvprobe_model::decode::ProcCall =
                serde_json::from_value(serde_json::json!({
                    "pid": 7, "tid": 7, "comm": "python3", "uid": 0,
                    "op": "call_failed", "target_pid": 7, "time_ns": 1,
                    "call": call, "errno": "ENOENT", "path": path,
                }))
                .expect("a call_failed record");
            // As the decoder sets it.
            c.failed = Some((nvprobe_model::decode::SysKind::of(call), libc::ENOENT));
            Event::Proc(c)
        };
        assert_eq!(Step::of(&p("openat", "/dev/nvidia-uvm")), Step::Repeat);
        assert_eq!(
            Step::of(&p("newfstatat", "/proc/driver/nvidia/params")),
            Step::Repeat
        );
        // Only the path tracepoints' calls have a line of their own.
        assert_eq!(
            Step::of(&p("chmod", "/dev/nvidia0")),
            Step::Life(Life::Failed(7))
        );
        assert_eq!(
            Step::of(&p("openat", "/usr/lib/libcuda.so.1")),
            Step::Life(Life::Failed(7))
        );
    }

    /// A failed ioctl's call_failed record carries what its ioctl record
    /// says (thread, descriptor, errno), so text can leave it out.
    #[test]
    fn a_failed_ioctls_call_failed_record_names_its_thread_descriptor_and_errno() {
        let mut c: nvprobe_model::decode::ProcCall = serde_json::from_value(serde_json::json!({
            "pid": 7, "tid": 9, "comm": "python3", "uid": 0,
            "op": "call_failed", "target_pid": 7, "time_ns": 1,
            "call": "ioctl", "errno": "EACCES", "args": [5, 3221768918u64],
        }))
        .expect("a call_failed record");
        c.failed = Some((nvprobe_model::decode::SysKind::Ioctl, libc::EACCES));
        assert_eq!(
            Step::of(&Event::Proc(c)),
            Step::IoctlFailed(7, (9, 5, libc::EACCES))
        );
    }

    #[test]
    fn what_is_held_stays_bounded() {
        let mut f = LifeLines::default();
        for i in 0..(HOLD_LINES as u32 + 3) {
            let _ = f.life(Life::Signal { target: 5 }, Bytes::from(format!("{i}")));
        }
        assert_eq!(f.held[&5].len(), HOLD_LINES);
        assert_eq!(f.held[&5][0], Bytes::from("3"));
        assert_eq!(f.lines, 3);
        for pid in 0..(3 * HOLD_PROCS as u32) {
            let _ = f.life(Life::Exec(1000 + pid), b("exec"));
            if pid % 2 == 0 {
                let _ = f.life(Life::Exit(1000 + pid), b("exit"));
            }
        }
        assert!(f.held.len() <= HOLD_PROCS);
        assert!(f.order.len() <= 2 * HOLD_PROCS + 1);
        f.finish();
        // Every line was either written or counted.
        let exits = (3 * HOLD_PROCS as u64).div_ceil(2);
        assert_eq!(
            f.lines,
            (HOLD_LINES as u64 + 3) + 3 * HOLD_PROCS as u64 + exits
        );
    }
}
