//! The NVIDIA descriptors a start-up opened, and those taken from under
//! it: closed (close, close_range) or replaced (dup2, dup3 from another
//! file) while they were still its own, and the first call of the
//! start-up that then failed on one.

/// How a descriptor went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GoneBy {
    /// close(fd).
    Close,
    /// close_range(first, last).
    CloseRange { first: u32, last: u32 },
    /// dup2 or dup3 onto it from `from`, a descriptor of another file.
    Replaced { call: &'static str, from: i32 },
    /// No record of how: a call failed with EBADF on a descriptor the
    /// process opened to an NVIDIA node and was never seen closing.
    Unseen,
}

/// What a close or dup record changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FdChange {
    /// A new number for an NVIDIA file (a dup of one): whatever the
    /// number was before is no longer.
    New(i64),
    /// NVIDIA descriptors taken from the process (`first..=last`): a
    /// close, a close_range, a dup2/dup3 onto one from another file.
    Gone { range: (i64, i64), by: GoneBy },
}

/// An NVIDIA node the process holds open at `fd`.
#[derive(Clone, Debug)]
struct Held {
    fd: i64,
    path: String,
    opened_ns: u64,
}

/// A descriptor that went.
#[derive(Clone, Debug)]
pub(crate) struct Gone {
    pub(crate) fd: i64,
    /// The node it held.
    pub(crate) path: String,
    pub(crate) opened_ns: u64,
    pub(crate) by: GoneBy,
    /// The thread that took it (0: unseen).
    pub(crate) tid: u32,
    pub(crate) comm: String,
    pub(crate) at_ns: u64,
}

/// The first failed call of the start-up on a descriptor that went.
#[derive(Clone, Debug)]
pub(crate) struct UsedGone {
    pub(crate) gone: Gone,
    /// The call's name.
    pub(crate) call: String,
    pub(crate) errno: i32,
    pub(crate) tid: u32,
    pub(crate) at_ns: u64,
    /// It failed after cuInit had returned CUDA_SUCCESS (in the first
    /// context).
    pub(crate) after_init: bool,
}

/// Descriptors held and gone: bounded (a process opening thousands of
/// NVIDIA files keeps the newest).
#[derive(Clone, Debug, Default)]
pub(crate) struct NvFds {
    held: Vec<Held>,
    gone: Vec<Gone>,
    pub(crate) used: Option<UsedGone>,
}

const HELD_KEPT: usize = 64;
const GONE_KEPT: usize = 8;

/// Who took a descriptor, where a record says so: the thread, its name,
/// and when its call began (a call on the descriptor that failed while
/// the taking call ran is its doing too).
pub(crate) type Taker<'a> = (u32, &'a str, u64);

impl NvFds {
    /// An open gave `fd`, a descriptor of the NVIDIA node `path`.
    pub(crate) fn opened(&mut self, fd: i64, path: &str, at_ns: u64) {
        self.held.retain(|h| h.fd != fd);
        self.gone.retain(|g| g.fd != fd);
        if self.held.len() == HELD_KEPT {
            self.held.remove(0);
        }
        self.held.push(Held {
            fd,
            path: path.to_owned(),
            opened_ns: at_ns,
        });
    }

    /// A close or dup record of thread `who`.
    pub(crate) fn change(&mut self, c: FdChange, who: Taker<'_>) {
        match c {
            FdChange::New(fd) => self.forget(fd),
            FdChange::Gone { range, by } => self.went(range, by, who),
        }
    }

    /// `fd` is a file of another kind now: whatever it was is no longer.
    pub(crate) fn forget(&mut self, fd: i64) {
        self.held.retain(|h| h.fd != fd);
        self.gone.retain(|g| g.fd != fd);
    }

    /// A call took the descriptors `first..=last` from the process.
    pub(crate) fn went(
        &mut self,
        (first, last): (i64, i64),
        by: GoneBy,
        (tid, comm, at_ns): Taker<'_>,
    ) {
        // A failure on one of them already said as unseen, from a call
        // that failed while this one ran (its record came first): this is
        // what took it.
        if let Some(u) = self.used.as_mut()
            && u.gone.by == GoneBy::Unseen
            && (first..=last).contains(&u.gone.fd)
            && at_ns <= u.at_ns
        {
            u.gone.by = by;
            u.gone.tid = tid;
            u.gone.comm = comm.to_owned();
            u.gone.at_ns = at_ns;
        }
        let mut i = 0;
        while i < self.held.len() {
            let h = &self.held[i];
            if h.fd < first || h.fd > last {
                i += 1;
                continue;
            }
            let h = self.held.remove(i);
            self.gone.retain(|g| g.fd != h.fd);
            if self.gone.len() == GONE_KEPT {
                self.gone.remove(0);
            }
            self.gone.push(Gone {
                fd: h.fd,
                path: h.path,
                opened_ns: h.opened_ns,
                by,
                tid,
                comm: comm.to_owned(),
                at_ns,
            });
        }
    }

    /// Whether the process opened `path` again after `at_ns` (and holds it).
    pub(crate) fn reopened(&self, path: &str, at_ns: u64) -> bool {
        self.held
            .iter()
            .any(|h| h.path == path && h.opened_ns > at_ns)
    }

    /// A call of the start-up on `fd` failed with `errno`: the first such
    /// call on a descriptor that went (EBADF after a close; any error of
    /// a call on a file a dup replaced), or with EBADF on one held and
    /// never seen going. A close(2) by the thread that then used the
    /// number is its own doing (libcuda's clean-up after a failure frees
    /// what it held on a descriptor it has closed), not a taking.
    pub(crate) fn failed_on(&mut self, fd: i64, call: &str, errno: i32, (tid, at_ns): (u32, u64)) {
        if self.used.is_some() || fd < 0 {
            return;
        }
        let gone = self
            .gone
            .iter()
            .rev()
            .find(|g| g.fd == fd && g.at_ns <= at_ns)
            .filter(|g| !(g.by == GoneBy::Close && g.tid == tid))
            .filter(|g| errno == libc::EBADF || matches!(g.by, GoneBy::Replaced { .. }))
            .cloned()
            .or_else(|| {
                let h = self
                    .held
                    .iter()
                    .find(|h| h.fd == fd && h.opened_ns <= at_ns);
                h.filter(|_| errno == libc::EBADF).map(|h| Gone {
                    fd,
                    path: h.path.clone(),
                    opened_ns: h.opened_ns,
                    by: GoneBy::Unseen,
                    tid: 0,
                    comm: String::new(),
                    at_ns,
                })
            });
        if let Some(gone) = gone {
            self.used = Some(UsedGone {
                gone,
                call: call.to_owned(),
                errno,
                tid,
                at_ns,
                after_init: false,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(tid: u32, at_ns: u64) -> Taker<'static> {
        (tid, "python3", at_ns)
    }

    #[test]
    fn a_closed_range_takes_the_nvidia_descriptors_in_it_and_the_next_ebadf_names_it() {
        let mut f = NvFds::default();
        f.opened(8, "/dev/nvidiactl", 10);
        f.opened(12, "/dev/nvidia0", 20);
        f.opened(300, "/dev/nvidia-uvm", 30);
        f.went(
            (3, 199),
            GoneBy::CloseRange {
                first: 3,
                last: 199,
            },
            who(784, 40),
        );
        // Never an NVIDIA descriptor: nothing.
        f.failed_on(250, "ioctl", libc::EBADF, (783, 45));
        assert!(f.used.is_none());
        // Another errno on a closed one: not this.
        f.failed_on(8, "ioctl", libc::EINVAL, (783, 46));
        assert!(f.used.is_none());
        f.failed_on(12, "ioctl", libc::EBADF, (783, 50));
        let u = f.used.as_ref().expect("used");
        assert_eq!(
            (
                u.gone.fd,
                u.gone.path.as_str(),
                u.gone.tid,
                u.gone.at_ns,
                u.at_ns
            ),
            (12, "/dev/nvidia0", 784, 40, 50)
        );
        // The first is kept.
        f.failed_on(8, "ioctl", libc::EBADF, (783, 60));
        assert_eq!(f.used.as_ref().map(|u| u.gone.fd), Some(12));
    }

    #[test]
    fn a_replaced_descriptor_is_named_for_any_error_and_a_reopened_one_for_none() {
        let mut f = NvFds::default();
        f.opened(8, "/dev/nvidiactl", 10);
        f.went(
            (8, 8),
            GoneBy::Replaced {
                call: "dup2",
                from: 9,
            },
            who(784, 20),
        );
        f.opened(8, "/dev/nvidiactl", 30);
        f.failed_on(8, "ioctl", libc::ENOTTY, (783, 40));
        assert!(f.used.is_none(), "the number was opened again");
        f.went(
            (8, 8),
            GoneBy::Replaced {
                call: "dup2",
                from: 9,
            },
            who(784, 50),
        );
        // A failure from before it went is not its.
        f.failed_on(8, "ioctl", libc::ENOTTY, (783, 45));
        assert!(f.used.is_none());
        f.failed_on(8, "ioctl", libc::ENOTTY, (783, 60));
        assert_eq!(
            f.used.as_ref().map(|u| (u.errno, u.gone.by)),
            Some((
                libc::ENOTTY,
                GoneBy::Replaced {
                    call: "dup2",
                    from: 9
                }
            ))
        );
    }

    #[test]
    fn ebadf_on_a_held_descriptor_never_seen_closing_is_unseen() {
        let mut f = NvFds::default();
        f.opened(8, "/dev/nvidiactl", 10);
        f.failed_on(9, "ioctl", libc::EBADF, (783, 20));
        assert!(f.used.is_none(), "never an NVIDIA descriptor");
        f.failed_on(8, "ioctl", libc::ENOTTY, (783, 20));
        assert!(f.used.is_none(), "held, and not EBADF");
        f.failed_on(8, "ioctl", libc::EBADF, (783, 30));
        assert_eq!(f.used.as_ref().map(|u| u.gone.by), Some(GoneBy::Unseen));
    }

    #[test]
    fn a_close_whose_record_came_after_the_failure_it_caused_is_named() {
        let mut f = NvFds::default();
        f.opened(8, "/dev/nvidiactl", 10);
        // The failure's record first (the close_range still ran), then
        // the close_range's, which began before the failure.
        f.failed_on(8, "ioctl", libc::EBADF, (783, 50));
        assert_eq!(f.used.as_ref().map(|u| u.gone.by), Some(GoneBy::Unseen));
        let range = GoneBy::CloseRange {
            first: 3,
            last: 199,
        };
        f.went((3, 199), range, who(784, 45));
        assert_eq!(
            f.used
                .as_ref()
                .map(|u| (u.gone.by, u.gone.tid, u.gone.at_ns)),
            Some((range, 784, 45))
        );
    }

    #[test]
    fn the_tables_stay_bounded() {
        let mut f = NvFds::default();
        for fd in 0..1000 {
            f.opened(fd, "/dev/nvidia0", fd as u64);
        }
        assert_eq!(f.held.len(), HELD_KEPT);
        f.went((0, 2000), GoneBy::Close, who(1, 5000));
        assert_eq!(f.gone.len(), GONE_KEPT);
        assert!(f.held.is_empty());
    }
}
