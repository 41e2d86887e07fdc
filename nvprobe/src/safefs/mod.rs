//! Safe file helpers: every file `doctor` reads from a host tree, and every
//! file it writes as root, goes through here.
//!
//! Reading (`read_capped` and friends) resolves a path *inside* a root:
//!
//! - A host tree (`--root DIR`, or an unpacked archive): a link whose
//!   target is absolute or climbs above the root is "a link out of the
//!   tree" and is not followed (`openat2` with `RESOLVE_BENEATH |
//!   RESOLVE_NO_MAGICLINKS`; where the kernel has no `openat2`, a walk of
//!   one component at a time from descriptors, `O_NOFOLLOW`, that does the
//!   same). Links that stay inside are followed. RESOLVE_BENEATH rather than
//!   RESOLVE_IN_ROOT: IN_ROOT would quietly read `ROOT/root/secret` for a
//!   link to `/root/secret`, a file the link does not name; BENEATH lets
//!   doctor say that the link points out of the tree.
//! - The host itself (root `/`): ordinary resolution, magic links refused.
//!
//! The file is first opened with `O_PATH` (no open of a device, no wait on
//! a FIFO), must be a regular file (`fstat`), and is then reopened for
//! reading through its descriptor (`/proc/self/fd/N`, the same inode) with
//! `O_NONBLOCK`. Every read has a cap ([`CAP`], [`KALLSYMS_CAP`],
//! [`LIB_CAP`], [`GUNZIP_CAP`]); a larger file is [`SafeReadError::TooLarge`].
//!
//! Problems with a tree's files (a link out, not a regular file, too
//! large, permission denied) are noted per root ([`note`]); doctor reports
//! them as checks ([`take_notes`]). A missing file is not a problem.
//!
//! Writing: [`create_new_dir`] and [`create_new_file`] never reuse or
//! follow an existing path (`O_CREAT|O_EXCL|O_NOFOLLOW`, `mkdir`), and set
//! 0700 / 0600 whatever the umask; [`private_temp_dir`] is `mkdtemp`;
//! [`create_file_at`], [`mkdirs_at`] and [`symlink_at`] create paths below
//! a folder descriptor one component at a time, never through a link.

use std::{
    collections::BTreeMap,
    ffi::{CString, OsStr, OsString},
    fs::File,
    io::{self, Read as _},
    os::{
        fd::{AsFd, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd},
        unix::ffi::{OsStrExt as _, OsStringExt as _},
    },
    path::{Path, PathBuf},
    sync::Mutex,
};

/// The most of one file that is read, unless the file has its own cap.
pub const CAP: u64 = 16 << 20;
/// /proc/kallsyms (a large kernel's is about 20 MiB).
pub const KALLSYMS_CAP: u64 = 64 << 20;
/// A driver library (libcuda 580 is 96 MB).
pub const LIB_CAP: u64 = 256 << 20;
/// What a `.gz` file (the kernel config) may unpack to.
pub const GUNZIP_CAP: u64 = 16 << 20;

/// Whether ROOT is the host itself (ordinary resolution) rather than a
/// tree (nothing leaves it).
fn is_host(root: &Path) -> bool {
    root == Path::new("/")
}

fn open_root(root: &Path) -> Result<OwnedFd> {
    let c = cstr(root.as_os_str())?;
    // SAFETY: NUL-terminated path; the result is ours.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(SafeReadError::from_errno(errno()));
    }
    // SAFETY: just opened.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// openat2(2); Err(errno) when it fails (ENOSYS where the kernel lacks it).
fn openat2(
    dir: BorrowedFd<'_>,
    rel: &OsStr,
    flags: i32,
    resolve: u64,
) -> std::result::Result<OwnedFd, i32> {
    let c = CString::new(rel.as_bytes()).map_err(|_| libc::EINVAL)?;
    // SAFETY: open_how is plain data.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = resolve;
    // SAFETY: valid descriptor, path and open_how of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: a new descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// How `resolve_at` may resolve: openat2 first, or the walk only (tests).
#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    Auto,
    #[cfg_attr(not(test), allow(dead_code))]
    WalkOnly,
}

/// An `O_PATH` descriptor of REL resolved inside ROOT (see the module
/// comment): no link out of a tree is followed.
pub fn resolve(root: &Path, rel: impl AsRef<Path>) -> Result<OwnedFd> {
    let r = open_root(root)?;
    resolve_at(r.as_fd(), rel.as_ref(), is_host(root), How::Auto)
}

fn resolve_at(root: BorrowedFd<'_>, rel: &Path, host: bool, how: How) -> Result<OwnedFd> {
    let comps = components(rel)?;
    if how == How::Auto {
        let joined: PathBuf = comps.iter().collect();
        let joined = if comps.is_empty() {
            OsString::from(".")
        } else {
            joined.into_os_string()
        };
        let resolve = if host {
            libc::RESOLVE_NO_MAGICLINKS
        } else {
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS
        };
        match openat2(root, &joined, libc::O_PATH, resolve) {
            Ok(fd) => return Ok(fd),
            Err(libc::ENOENT | libc::ENOTDIR) => return Err(SafeReadError::NotFound),
            Err(libc::EACCES) => return Err(SafeReadError::PermissionDenied),
            // EXDEV (a link out), ELOOP (a loop or a magic link), ENOSYS,
            // EPERM (a seccomp filter), EINVAL, EAGAIN: the walk decides
            // and says which link.
            Err(_) => {}
        }
    }
    walk(root, comps, host)
}

/// The component walk: each step an `openat(O_PATH|O_NOFOLLOW)` from the
/// folder before it; links are read and their targets walked in turn (at
/// most 40), `..` goes back to the folder it came from. In a tree an
/// absolute link, or a `..` above the root, is `LinkOutside`.
fn walk(root: BorrowedFd<'_>, comps: Vec<OsString>, host: bool) -> Result<OwnedFd> {
    let dup = || {
        root.try_clone_to_owned()
            .map_err(|e| SafeReadError::from_io(&e))
    };
    let mut stack: Vec<OwnedFd> = vec![dup()?];
    let mut names: Vec<OsString> = Vec::new();
    let mut todo: Vec<OsString> = comps.into_iter().rev().collect();
    let mut hops = 0;
    let mut via: Option<(String, String)> = None;
    let shown = |names: &[OsString], last: &OsStr| {
        let mut p: PathBuf = names.iter().collect();
        p.push(last);
        p.to_string_lossy().into_owned()
    };
    while let Some(c) = todo.pop() {
        if c.is_empty() || c == "." {
            continue;
        }
        if c == ".." {
            if stack.len() > 1 {
                stack.pop();
                names.pop();
            } else if !host {
                let (link, target) = via
                    .clone()
                    .unwrap_or_else(|| (String::new(), String::from("..")));
                return Err(SafeReadError::LinkOutside { link, target });
            }
            continue;
        }
        let top = stack.last().expect("the root stays").as_fd();
        let fd = openat_raw(top, &c, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
        let st = fstat(fd.as_fd())?;
        if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
            hops += 1;
            if hops > 40 {
                return Err(SafeReadError::from_errno(libc::ELOOP));
            }
            let target = readlink_fd(fd.as_fd())?;
            let link = shown(&names, &c);
            if target.as_bytes().starts_with(b"/") {
                if !host {
                    return Err(SafeReadError::LinkOutside {
                        link,
                        target: target.to_string_lossy().into_owned(),
                    });
                }
                stack.truncate(1);
                names.clear();
            }
            via = Some((link, target.to_string_lossy().into_owned()));
            todo.extend(
                target
                    .as_bytes()
                    .split(|&b| b == b'/')
                    .rev()
                    .map(|s| OsString::from_vec(s.to_vec())),
            );
            continue;
        }
        if !todo.is_empty() && st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(SafeReadError::NotFound);
        }
        stack.push(fd);
        names.push(c);
    }
    Ok(stack.pop().expect("the root stays"))
}

/// The target of the link an `O_PATH|O_NOFOLLOW` descriptor holds.
fn readlink_fd(fd: BorrowedFd<'_>) -> Result<OsString> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: an empty path with an O_PATH descriptor reads that link;
    // the buffer is ours and its length given.
    let n = unsafe {
        libc::readlinkat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(SafeReadError::from_errno(errno()));
    }
    buf.truncate(n as usize);
    Ok(OsString::from_vec(buf))
}

/// An `O_PATH` descriptor of REL inside ROOT that is a regular file.
pub fn resolve_regular(root: &Path, rel: impl AsRef<Path>) -> Result<OwnedFd> {
    let fd = resolve(root, rel)?;
    let st = fstat(fd.as_fd())?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(SafeReadError::NotRegular(file_kind(st.st_mode)));
    }
    Ok(fd)
}

/// REL inside ROOT, a regular file, opened for reading (`O_NONBLOCK`).
pub fn open_regular(root: &Path, rel: impl AsRef<Path>) -> Result<File> {
    let p = resolve_regular(root, rel)?;
    reopen(p.as_fd())
}

/// Open for reading the regular file an `O_PATH` descriptor holds.
fn reopen(p: BorrowedFd<'_>) -> Result<File> {
    let path = fd_path(p);
    // SAFETY: NUL-terminated path; the result is ours.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(SafeReadError::from_errno(errno()));
    }
    // SAFETY: just opened.
    let f = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let (a, b) = (fstat(p)?, fstat(f.as_fd())?);
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) || b.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(SafeReadError::Io(
            "the file changed while it was opened".into(),
        ));
    }
    Ok(f)
}

/// At most CAP bytes of R; more is `TooLarge`.
pub fn read_to_cap(r: impl io::Read, cap: u64) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    r.take(cap.saturating_add(1))
        .read_to_end(&mut v)
        .map_err(|e| SafeReadError::from_io(&e))?;
    if v.len() as u64 > cap {
        return Err(SafeReadError::TooLarge(cap));
    }
    Ok(v)
}

/// ROOT/REL, resolved inside ROOT, a regular file of at most CAP bytes. A
/// file whose size says more is refused before any read (a sparse file is
/// not read up to the cap first); one that says less (procfs and sysfs
/// files say 0 or 4096) is still read only up to the cap.
pub fn read_capped(root: &Path, rel: impl AsRef<Path>, cap: u64) -> Result<Vec<u8>> {
    let f = open_regular(root, rel)?;
    if fstat(f.as_fd())?.st_size as u64 > cap {
        return Err(SafeReadError::TooLarge(cap));
    }
    read_to_cap(f, cap)
}

/// ROOT/REL as a process whose root directory is ROOT (`/proc/PID/root`)
/// sees it: an absolute link, or `..`, resolves inside ROOT, as the
/// kernel resolves it for that process (`RESOLVE_IN_ROOT`, magic links
/// refused), so a container's `/etc/ld.so.preload -> /etc/real` is read
/// as its loader reads it. A regular file of at most CAP bytes. Where the
/// kernel has no `openat2`, as [`read_capped`] (no link out followed).
pub fn read_seen_in(root: &Path, rel: &str, cap: u64) -> Result<Vec<u8>> {
    let r = open_root(root)?;
    let comps = components(Path::new(rel))?;
    let joined: PathBuf = comps.iter().collect();
    let fd = match openat2(
        r.as_fd(),
        joined.as_os_str(),
        libc::O_PATH,
        libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS,
    ) {
        Ok(fd) => fd,
        Err(libc::ENOENT | libc::ENOTDIR) => return Err(SafeReadError::NotFound),
        Err(libc::EACCES) => return Err(SafeReadError::PermissionDenied),
        Err(_) => walk(r.as_fd(), comps, false)?,
    };
    let st = fstat(fd.as_fd())?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(SafeReadError::NotRegular(file_kind(st.st_mode)));
    }
    let f = reopen(fd.as_fd())?;
    if fstat(f.as_fd())?.st_size as u64 > cap {
        return Err(SafeReadError::TooLarge(cap));
    }
    read_to_cap(f, cap)
}

/// [`read_capped`], and a problem noted for the root (see [`note`]).
pub fn read_noted(root: &Path, rel: &str, cap: u64) -> Result<Vec<u8>> {
    let r = read_capped(root, rel, cap);
    if let Err(e) = &r {
        note(root, rel, e);
    }
    r
}

/// [`read_noted`] as UTF-8 text; None when it cannot be read (noted).
pub fn read_text(root: &Path, rel: &str, cap: u64) -> Option<String> {
    let d = read_noted(root, rel, cap).ok()?;
    match String::from_utf8(d) {
        Ok(s) => Some(s),
        Err(_) => {
            note(root, rel, &SafeReadError::Io("not UTF-8 text".into()));
            None
        }
    }
}

/// A gzip file of at most CAP bytes, unpacked to at most UNPACKED bytes
/// (noted).
pub fn read_gz_noted(root: &Path, rel: &str, cap: u64, unpacked: u64) -> Result<Vec<u8>> {
    let d = read_noted(root, rel, cap)?;
    let r = read_to_cap(flate2::read::GzDecoder::new(&d[..]), unpacked);
    if let Err(e) = &r {
        note(root, rel, e);
    }
    r
}

/// Whether ROOT/REL exists (resolved inside ROOT; a link out does not).
pub fn exists(root: &Path, rel: impl AsRef<Path>) -> bool {
    resolve(root, rel).is_ok()
}

/// stat() of ROOT/REL, resolved inside ROOT.
pub fn stat(root: &Path, rel: impl AsRef<Path>) -> Result<libc::stat> {
    let fd = resolve(root, rel)?;
    fstat(fd.as_fd())
}

/// The names in folder ROOT/REL (resolved inside ROOT), in the order the
/// file system gives them, without `.` and `..`.
pub fn read_dir(root: &Path, rel: impl AsRef<Path>) -> Result<Vec<OsString>> {
    let p = resolve(root, rel)?;
    let st = fstat(p.as_fd())?;
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(SafeReadError::NotRegular(file_kind(st.st_mode)));
    }
    let d = openat_raw(
        p.as_fd(),
        OsStr::new("."),
        libc::O_RDONLY | libc::O_DIRECTORY,
        0,
    )?;
    let dir = nix::dir::Dir::from_fd(d).map_err(|e| SafeReadError::from_errno(e as i32))?;
    let mut out = Vec::new();
    for e in dir {
        let e = e.map_err(|e| SafeReadError::from_errno(e as i32))?;
        let n = e.file_name().to_bytes();
        if n != b"." && n != b".." {
            out.push(OsString::from_vec(n.to_vec()));
        }
    }
    Ok(out)
}

/// [`read_dir`], a problem noted; names as (lossy) strings.
pub fn read_dir_noted(root: &Path, rel: &str) -> Option<Vec<String>> {
    match read_dir(root, rel) {
        Ok(v) => Some(
            v.into_iter()
                .map(|n| n.to_string_lossy().into_owned())
                .collect(),
        ),
        Err(e) => {
            note(root, rel, &e);
            None
        }
    }
}

/// The target of link ROOT/REL (its folder resolved inside ROOT).
pub fn read_link(root: &Path, rel: impl AsRef<Path>) -> Result<PathBuf> {
    let rel = rel.as_ref();
    let name = rel.file_name().ok_or(SafeReadError::NotFound)?;
    let dir = resolve(root, rel.parent().unwrap_or(Path::new("")))?;
    let fd = openat_raw(dir.as_fd(), name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
    let st = fstat(fd.as_fd())?;
    if st.st_mode & libc::S_IFMT != libc::S_IFLNK {
        return Err(SafeReadError::NotRegular(file_kind(st.st_mode)));
    }
    readlink_fd(fd.as_fd()).map(PathBuf::from)
}

/// Where the file an open descriptor holds is, relative to ROOT ("/usr/lib/
/// libcuda.so.1"), from /proc/self/fd; None when that is not inside ROOT.
pub fn shown_path(root: &Path, fd: BorrowedFd<'_>) -> Option<String> {
    let real = std::fs::read_link(fd_path(fd).to_str().ok()?).ok()?;
    let root = std::fs::canonicalize(root).ok()?;
    let rel = real.strip_prefix(&root).ok()?;
    Some(format!("/{}", rel.display()))
}

// ---- problems per root ----

type Notes = BTreeMap<PathBuf, BTreeMap<String, SafeReadError>>;

fn notes() -> &'static Mutex<Notes> {
    static N: std::sync::OnceLock<Mutex<Notes>> = std::sync::OnceLock::new();
    N.get_or_init(Default::default)
}

/// Remember that REL of tree ROOT could not be read for a reason other than
/// its absence (the host's own files are not noted).
pub fn note(root: &Path, rel: &str, e: &SafeReadError) {
    if is_host(root) || *e == SafeReadError::NotFound {
        return;
    }
    notes()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(root.to_path_buf())
        .or_default()
        .entry(rel.trim_start_matches('/').to_owned())
        .or_insert_with(|| e.clone());
}

/// The problems noted for ROOT, by path, and forget them.
pub fn take_notes(root: &Path) -> Vec<(String, SafeReadError)> {
    notes()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(root)
        .map(|m| m.into_iter().collect())
        .unwrap_or_default()
}

mod create;
mod sys;

pub use create::*;
pub use sys::fd_path;
use sys::{Result, components, cstr, errno, file_kind, fstat, openat_raw};
pub use sys::{SafeReadError, size_words};

#[cfg(test)]
mod tests;
