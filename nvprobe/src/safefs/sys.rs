//! The raw calls under the safe reads and creates: openat(2) and fstat(2)
//! on descriptors, a path's components, and the error every one of them
//! gives (what, where, and why).

use std::{
    ffi::{CString, OsStr, OsString},
    io,
    os::{
        fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd},
        unix::ffi::OsStrExt as _,
    },
    path::{Component, Path},
};

/// Why a file was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SafeReadError {
    NotFound,
    /// A folder, FIFO, device node or socket (what it is, in words).
    NotRegular(&'static str),
    /// A link on the way points out of the tree: the link (relative to the
    /// root) and its target.
    LinkOutside {
        link: String,
        target: String,
    },
    /// Larger than the cap (bytes).
    TooLarge(u64),
    PermissionDenied,
    Io(String),
}

impl std::fmt::Display for SafeReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound => write!(f, "no such file"),
            Self::NotRegular(k) => write!(f, "{k}, not a regular file"),
            Self::LinkOutside { link, target } => {
                write!(f, "{link} is a link out of the tree (-> {target})")
            }
            Self::TooLarge(cap) => write!(f, "larger than {}", size_words(*cap)),
            Self::PermissionDenied => write!(f, "permission denied (EACCES)"),
            Self::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SafeReadError {}

/// "16 MiB", or "65536 bytes" for a size that is not whole MiB.
pub fn size_words(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

impl SafeReadError {
    /// From an errno of open/read.
    pub fn from_errno(e: i32) -> Self {
        match e {
            libc::ENOENT | libc::ENOTDIR => Self::NotFound,
            libc::EACCES | libc::EPERM => Self::PermissionDenied,
            e => Self::Io(io::Error::from_raw_os_error(e).to_string()),
        }
    }

    pub(super) fn from_io(e: &io::Error) -> Self {
        match e.raw_os_error() {
            Some(n) => Self::from_errno(n),
            None => Self::Io(e.to_string()),
        }
    }

    /// The sentence for file REL (relative to the root): "kmsg.txt is a
    /// link out of the tree (-> /root/secret): not read".
    pub fn describe(&self, rel: &str) -> String {
        match self {
            Self::NotFound => format!("{rel}: no such file"),
            Self::NotRegular(k) => format!("{rel} is {k}, not a regular file: not read"),
            Self::LinkOutside { link, target } if link == rel => {
                format!("{rel} is a link out of the tree (-> {target}): not read")
            }
            Self::LinkOutside { link, target } => {
                format!("{rel}: {link} is a link out of the tree (-> {target}): not read")
            }
            Self::TooLarge(cap) => format!(
                "{rel} is larger than {}, what doctor reads of it: not read",
                size_words(*cap)
            ),
            Self::PermissionDenied => format!("{rel}: permission denied (EACCES): not read"),
            Self::Io(e) => format!("{rel}: {e}: not read"),
        }
    }
}

pub(super) type Result<T> = std::result::Result<T, SafeReadError>;

pub(super) fn cstr(p: &OsStr) -> Result<CString> {
    CString::new(p.as_bytes()).map_err(|_| SafeReadError::Io("a NUL byte in the path".into()))
}

pub(super) fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

pub(super) fn openat_raw(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    flags: i32,
    mode: u32,
) -> Result<OwnedFd> {
    let c = cstr(name)?;
    // SAFETY: a valid descriptor and NUL-terminated path; the result is a
    // new descriptor we own.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        return Err(SafeReadError::from_errno(errno()));
    }
    // SAFETY: just opened, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(super) fn fstat(fd: BorrowedFd<'_>) -> Result<libc::stat> {
    // SAFETY: zeroed stat is a valid out-buffer for fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor and buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(SafeReadError::from_errno(errno()));
    }
    Ok(st)
}

pub(super) fn file_kind(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a folder",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        libc::S_IFLNK => "a link",
        _ => "a special file",
    }
}

/// The relative path REL as components; `..` is refused (callers never
/// need it; a tree's links may still use it, inside the tree).
pub(super) fn components(rel: &Path) -> Result<Vec<OsString>> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                return Err(SafeReadError::Io("a path with `..`".into()));
            }
            Component::Normal(n) => out.push(n.to_os_string()),
        }
    }
    Ok(out)
}

/// `/proc/self/fd/N` of a descriptor: opening it opens that same inode.
pub fn fd_path(fd: BorrowedFd<'_>) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL")
}
