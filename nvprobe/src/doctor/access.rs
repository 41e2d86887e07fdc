//! Who may open the NVIDIA nodes: the permission bits for a given user
//! (the invoking one, the one behind sudo, or `--user`), and on a live host
//! a real open of `/dev/nvidiactl` and `/dev/nvidia-uvm-tools` in a forked
//! child, as that user, with a timeout. `/dev/nvidiaN` is never opened:
//! that starts the GPU's initialisation.

use std::{ffi::CString, os::fd::AsRawFd as _, path::Path, time::Duration};

use crate::safefs;

use nix::{
    poll::{PollFd, PollFlags, PollTimeout, poll},
    sys::{
        signal::{Signal, kill},
        wait::{WaitPidFlag, waitpid},
    },
    unistd::{ForkResult, Gid, Uid, fork, pipe},
};

/// The user the access checks are for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups, with the primary one.
    pub groups: Vec<u32>,
}

impl User {
    /// Whether this user may open a node read-write, by its mode bits
    /// (root passes: CAP_DAC_OVERRIDE).
    pub fn may_rw(&self, mode: u32, uid: u32, gid: u32) -> bool {
        if self.uid == 0 {
            return true;
        }
        let bits = if self.uid == uid {
            mode >> 6
        } else if self.groups.contains(&gid) {
            mode >> 3
        } else {
            mode
        };
        bits & 0o6 == 0o6
    }
}

/// passwd/group entries from ROOT/etc (for `--root`).
fn from_tree(root: &Path, spec: &str) -> Result<User, String> {
    let passwd = safefs::read_capped(root, "etc/passwd", safefs::CAP)
        .and_then(|d| {
            String::from_utf8(d).map_err(|_| safefs::SafeReadError::Io("not UTF-8 text".into()))
        })
        .map_err(|e| {
            format!(
                "--user {spec}: cannot read {}/etc/passwd: {e}",
                root.display()
            )
        })?;
    let entry = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 4 && (f[0] == spec || f[2] == spec))
        .ok_or_else(|| {
            format!(
                "--user {spec}: no such user in {}/etc/passwd",
                root.display()
            )
        })?;
    let uid: u32 = entry[2]
        .parse()
        .map_err(|_| format!("--user {spec}: bad uid in passwd"))?;
    let gid: u32 = entry[3]
        .parse()
        .map_err(|_| format!("--user {spec}: bad gid in passwd"))?;
    let name = entry[0].to_owned();
    let mut groups = vec![gid];
    if let Some(g) = safefs::read_text(root, "etc/group", safefs::CAP) {
        for f in g.lines().map(|l| l.split(':').collect::<Vec<_>>()) {
            if f.len() >= 4
                && f[3].split(',').any(|m| m == name)
                && let Ok(id) = f[2].parse()
            {
                groups.push(id);
            }
        }
    }
    Ok(User {
        name,
        uid,
        gid,
        groups,
    })
}

fn from_system(spec: &str) -> Result<User, String> {
    let u = match spec.parse::<u32>() {
        Ok(uid) => nix::unistd::User::from_uid(Uid::from_raw(uid)),
        Err(_) => nix::unistd::User::from_name(spec),
    }
    .map_err(|e| format!("--user {spec}: {e}"))?
    .ok_or_else(|| format!("--user {spec}: no such user on this host"))?;
    let cname = CString::new(u.name.clone()).map_err(|_| format!("--user {spec}: bad name"))?;
    let groups = nix::unistd::getgrouplist(&cname, u.gid)
        .map(|g| g.into_iter().map(Gid::as_raw).collect())
        .unwrap_or_else(|_| vec![u.gid.as_raw()]);
    Ok(User {
        name: u.name,
        uid: u.uid.as_raw(),
        gid: u.gid.as_raw(),
        groups,
    })
}

/// The user to check for: `--user`, else on a live host the invoking user
/// (the one behind sudo when there is one); none for a tree without
/// `--user`.
pub fn resolve(root: &Path, live: bool, spec: Option<&str>) -> Result<Option<User>, String> {
    match (spec, live) {
        (Some(s), true) => from_system(s).map(Some),
        (Some(s), false) => from_tree(root, s).map(Some),
        (None, false) => Ok(None),
        (None, true) => {
            let sudo = std::env::var("SUDO_UID")
                .ok()
                .filter(|_| nix::unistd::getuid().is_root());
            let who = sudo
                .clone()
                .unwrap_or_else(|| nix::unistd::getuid().as_raw().to_string());
            let uid: u32 = who
                .parse()
                .map_err(|_| format!("SUDO_UID {who}: not a uid"))?;
            match nix::unistd::User::from_uid(Uid::from_raw(uid)) {
                Ok(Some(_)) => from_system(&who).map(Some),
                Err(e) if e != nix::errno::Errno::ENOENT => {
                    Err(format!("looking up uid {uid}: {e}"))
                }
                // No passwd entry for the invoking uid, or no passwd at all
                // (glibc says ENOENT: a minimal container or initramfs):
                // its ids as they are.
                Ok(None) | Err(_) => {
                    let (gid, groups) = match sudo {
                        Some(_) => {
                            let gid = std::env::var("SUDO_GID")
                                .ok()
                                .and_then(|g| g.parse().ok())
                                .unwrap_or(uid);
                            (gid, vec![gid])
                        }
                        None => (
                            nix::unistd::getgid().as_raw(),
                            nix::unistd::getgroups()
                                .map(|g| g.into_iter().map(Gid::as_raw).collect())
                                .unwrap_or_default(),
                        ),
                    };
                    Ok(Some(User {
                        name: format!("uid {uid}"),
                        uid,
                        gid,
                        groups,
                    }))
                }
            }
        }
    }
}

/// What a real open said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    Ok,
    Errno(nix::errno::Errno),
    TimedOut,
    /// The test itself could not run (fork, pipe).
    NotRun(String),
}

/// Open PATH read-write in a forked child running as `user` (when we are
/// root), report the errno, never wait longer than `timeout`. The child
/// only makes system calls between fork and _exit.
pub fn try_open(path: &str, user: Option<&User>, timeout: Duration) -> Opened {
    let Ok(cpath) = CString::new(path) else {
        return Opened::NotRun("path has a NUL byte".into());
    };
    let drop_to = user.filter(|u| u.uid != 0 && nix::unistd::geteuid().is_root());
    let groups: Vec<libc::gid_t> = drop_to.map(|u| u.groups.clone()).unwrap_or_default();
    let (rd, wr) = match pipe() {
        Ok(p) => p,
        Err(e) => return Opened::NotRun(format!("pipe: {e}")),
    };
    // SAFETY: the child calls only async-signal-safe system calls (setgroups,
    // setgid, setuid, open, write, _exit) on data prepared before the fork.
    match unsafe { fork() } {
        Err(e) => Opened::NotRun(format!("fork: {e}")),
        Ok(ForkResult::Child) => {
            let code: i32 = unsafe {
                let mut ok = true;
                if let Some(u) = drop_to {
                    ok = libc::setgroups(groups.len(), groups.as_ptr()) == 0
                        && libc::setgid(u.gid) == 0
                        && libc::setuid(u.uid) == 0;
                }
                if !ok {
                    -1_000_000
                } else {
                    let fd = libc::open(
                        cpath.as_ptr(),
                        libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY,
                    );
                    if fd >= 0 {
                        libc::close(fd);
                        0
                    } else {
                        *libc::__errno_location()
                    }
                }
            };
            let bytes = code.to_ne_bytes();
            // SAFETY: write to the pipe and leave without running destructors.
            unsafe {
                libc::write(wr.as_raw_fd(), bytes.as_ptr().cast(), bytes.len());
                libc::_exit(0);
            }
        }
        Ok(ForkResult::Parent { child }) => {
            drop(wr);
            let mut fds = [PollFd::new(
                std::os::fd::AsFd::as_fd(&rd),
                PollFlags::POLLIN,
            )];
            let ms = timeout.as_millis().min(u128::from(u16::MAX)) as u16;
            let ready = poll(&mut fds, PollTimeout::from(ms)).unwrap_or(0);
            let mut buf = [0u8; 4];
            let got = ready > 0 && nix::unistd::read(&rd, &mut buf).ok() == Some(4);
            if !got {
                let _ = kill(child, Signal::SIGKILL);
                let _ = waitpid(child, Some(WaitPidFlag::WNOHANG));
                return Opened::TimedOut;
            }
            let _ = waitpid(child, None);
            match i32::from_ne_bytes(buf) {
                0 => Opened::Ok,
                -1_000_000 => Opened::NotRun("could not switch to the user".into()),
                e => Opened::Errno(nix::errno::Errno::from_raw(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_bits_for_owner_group_and_others() {
        let u = User {
            name: "ann".into(),
            uid: 1000,
            gid: 1000,
            groups: vec![1000, 44],
        };
        assert!(u.may_rw(0o666, 0, 0));
        assert!(!u.may_rw(0o660, 0, 0), "not in group 0");
        assert!(u.may_rw(0o660, 0, 44), "via video");
        assert!(u.may_rw(0o600, 1000, 0), "owner");
        assert!(!u.may_rw(0o640, 0, 44), "group has read only");
        let root = User { uid: 0, ..u };
        assert!(root.may_rw(0o000, 5, 5));
    }

    #[test]
    fn open_test_reports_errno_and_success() {
        assert_eq!(
            try_open("/dev/null", None, Duration::from_secs(2)),
            Opened::Ok
        );
        assert_eq!(
            try_open("/nonexistent/nvidiactl", None, Duration::from_secs(2)),
            Opened::Errno(nix::errno::Errno::ENOENT)
        );
    }
}
