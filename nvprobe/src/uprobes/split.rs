//! uprobe_multi links over a file's functions: whether the kernel makes
//! them at all, and the halving search for functions it cannot probe.

use std::os::fd::{BorrowedFd, OwnedFd};

/// A function to hook: its name, its file offset, its cookie, and
/// whether its return is hooked too (a libnccl collective's is not).
pub(super) type Point = (&'static str, u64, u64, bool);

/// Does this kernel make uprobe_multi links? Older kernels load a program
/// with that expected attach type all the same (nothing checks it for
/// kprobe programs) and refuse each link with EINVAL, which a single bad
/// offset also gets; so ask as libbpf does: a link on "/" fails with EBADF
/// (not a regular file) where uprobe_multi exists, with anything else
/// where it does not.
pub(super) fn multi_supported(prog: BorrowedFd<'_>) -> Result<(), String> {
    match crate::attach::sys::uprobe_multi_link(prog, "/", &[(0, 0)], true) {
        Err(e) if e.raw_os_error() == Some(libc::EBADF) => Ok(()),
        Err(e) => Err(format!("this kernel makes no uprobe_multi links ({e})")),
        Ok(_) => Err("this kernel made a uprobe_multi link on \"/\"".into()),
    }
}

/// Links of one program over as many of a file's functions as the kernel
/// takes (see `Libcuda::attach_multi`).
pub(super) struct Split<'a> {
    pub(super) prog: BorrowedFd<'a>,
    pub(super) path: &'a str,
    pub(super) ret: bool,
    /// Refused links still allowed (each costs the kernel a grace period).
    pub(super) tries_left: u32,
    pub(super) links: Vec<OwnedFd>,
    /// The function sets of `links`, in order.
    pub(super) taken: Vec<Vec<Point>>,
    pub(super) last_err: Option<std::io::Error>,
}

impl Split<'_> {
    pub(super) fn take(&mut self, set: &[Point]) {
        if set.is_empty() || self.tries_left == 0 {
            return;
        }
        let pts: Vec<(u64, u64)> = set.iter().map(|p| (p.1, p.2)).collect();
        match crate::attach::sys::uprobe_multi_link(self.prog, self.path, &pts, self.ret) {
            Ok(l) => {
                self.links.push(l);
                self.taken.push(set.to_vec());
            }
            Err(e) => {
                self.tries_left -= 1;
                let whole_kernel = matches!(
                    e.raw_os_error(),
                    Some(libc::EPERM | libc::EACCES | libc::EOPNOTSUPP | libc::ENOSYS)
                );
                if whole_kernel {
                    self.last_err = Some(e);
                    return;
                }
                if let [(name, ..)] = set {
                    // One function the kernel cannot probe: said, left out.
                    self.last_err = Some(std::io::Error::new(e.kind(), format!("{name}: {e}")));
                    return;
                }
                self.last_err = Some(e);
                let (a, b) = set.split_at(set.len() / 2);
                self.take(a);
                self.take(b);
            }
        }
    }
}
