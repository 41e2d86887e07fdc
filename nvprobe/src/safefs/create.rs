//! Creating what nvprobe writes as root: new folders and files only
//! (O_EXCL, O_NOFOLLOW), 0700/0600 whatever the umask, inside a private
//! folder, never through a link.

use std::{
    ffi::{CString, OsStr, OsString},
    fs::File,
    io,
    os::{
        fd::{AsFd, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd},
        unix::ffi::OsStrExt as _,
    },
    path::{Component, Path, PathBuf},
};

use super::sys::{SafeReadError, fd_path, file_kind, fstat, openat_raw};

fn io_last() -> io::Error {
    io::Error::last_os_error()
}

fn io_of(e: SafeReadError) -> io::Error {
    match e {
        SafeReadError::NotFound => io::Error::from(io::ErrorKind::NotFound),
        SafeReadError::PermissionDenied => io::Error::from(io::ErrorKind::PermissionDenied),
        e => io::Error::other(e.to_string()),
    }
}

/// Give the file or folder an `O_PATH` (or any) descriptor holds exactly
/// MODE, whatever the umask made of it.
fn set_mode(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    let p = fd_path(fd);
    // SAFETY: NUL-terminated path (the descriptor's own inode).
    if unsafe { libc::chmod(p.as_ptr(), mode) } == 0 {
        return Ok(());
    }
    // SAFETY: valid descriptor (works when it is not O_PATH).
    if unsafe { libc::fchmod(fd.as_raw_fd(), mode) } == 0 {
        return Ok(());
    }
    Err(io_last())
}

/// A new folder at PATH, mode 0700: Err when anything (a file, a folder, a
/// link) is there already. Returns its `O_PATH` descriptor.
pub fn create_new_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: NUL-terminated path.
    if unsafe { libc::mkdir(c.as_ptr(), 0o700) } != 0 {
        return Err(io_last());
    }
    // SAFETY: as above; the result is ours.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io_last());
    }
    // SAFETY: just opened.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    own_folder(fd.as_fd())?;
    set_mode(fd.as_fd(), 0o700)?;
    Ok(fd)
}

/// The folder is ours (made by this process's user), not one put in its
/// place.
fn own_folder(fd: BorrowedFd<'_>) -> io::Result<()> {
    let st = fstat(fd).map_err(io_of)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_uid != me {
        return Err(io::Error::other(
            "the new folder was replaced by another one",
        ));
    }
    Ok(())
}

/// A new file at PATH, mode 0600, opened for writing: Err when anything is
/// there already (a link is not followed).
pub fn create_new_file(path: &Path) -> io::Result<File> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: NUL-terminated path; the result is ours.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io_last());
    }
    // SAFETY: just opened.
    let f = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    set_mode(f.as_fd(), 0o600)?;
    Ok(f)
}

/// A private folder in PARENT (`mkdtemp`: PREFIX + 6 random characters,
/// mode 0700, ours): its path and `O_PATH` descriptor.
pub fn private_temp_dir(parent: &Path, prefix: &str) -> io::Result<(PathBuf, OwnedFd)> {
    let template = parent.join(format!("{prefix}XXXXXX"));
    let path = nix::unistd::mkdtemp(&template).map_err(io::Error::from)?;
    let c = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: NUL-terminated path; the result is ours.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io_last());
    }
    // SAFETY: just opened.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    own_folder(fd.as_fd())?;
    set_mode(fd.as_fd(), 0o700)?;
    Ok((path, fd))
}

/// The plain components of a relative path to create: Err for an absolute
/// path, `..`, or nothing at all.
pub fn plain_components(rel: &Path) -> io::Result<Vec<OsString>> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n.to_os_string()),
            Component::CurDir => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{}: not a plain relative path", rel.display()),
                ));
            }
        }
    }
    Ok(out)
}

fn io_at(dir: BorrowedFd<'_>, name: &OsStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    openat_raw(dir, name, flags, mode).map_err(|e| match e {
        SafeReadError::Io(_) | SafeReadError::LinkOutside { .. } => {
            io::Error::other(format!("{}: {e}", name.to_string_lossy()))
        }
        e => io_of(e),
    })
}

/// One folder below DIR: opened when it is a folder (not a link), made
/// (0700) when absent.
fn subdir(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = libc::O_PATH | libc::O_NOFOLLOW;
    let fd = match io_at(dir, name, flags, 0) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let c = CString::new(name.as_bytes()).map_err(io::Error::other)?;
            // SAFETY: valid descriptor and path.
            if unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o700) } != 0
                && io_last().raw_os_error() != Some(libc::EEXIST)
            {
                return Err(io_last());
            }
            let fd = io_at(dir, name, flags, 0)?;
            set_mode(fd.as_fd(), 0o700)?;
            fd
        }
        Err(e) => return Err(e),
    };
    let st = fstat(fd.as_fd()).map_err(io_of)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(io::Error::other(format!(
            "{} is {}, not a folder: not followed",
            name.to_string_lossy(),
            file_kind(st.st_mode)
        )));
    }
    Ok(fd)
}

/// The folders of REL below DIR, each made (0700) when absent, never
/// through a link. Returns the last one's descriptor.
pub fn mkdirs_at(dir: BorrowedFd<'_>, rel: &Path) -> io::Result<OwnedFd> {
    let mut cur = dir.try_clone_to_owned()?;
    for c in plain_components(rel)? {
        cur = subdir(cur.as_fd(), &c)?;
    }
    Ok(cur)
}

/// The folder of REL and its last name; Err for an empty path.
fn parent_and_name(dir: BorrowedFd<'_>, rel: &Path) -> io::Result<(OwnedFd, OsString)> {
    let mut comps = plain_components(rel)?;
    let name = comps
        .pop()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "an empty path"))?;
    let mut cur = dir.try_clone_to_owned()?;
    for c in comps {
        cur = subdir(cur.as_fd(), &c)?;
    }
    Ok((cur, name))
}

/// A new file REL below DIR (its folders made as needed, never through a
/// link), mode 0600, opened for writing; Err when something is there.
pub fn create_file_at(dir: BorrowedFd<'_>, rel: &Path) -> io::Result<File> {
    let (parent, name) = parent_and_name(dir, rel)?;
    let fd = io_at(
        parent.as_fd(),
        &name,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
        0o600,
    )?;
    let f = File::from(fd);
    set_mode(f.as_fd(), 0o600)?;
    Ok(f)
}

/// A new link REL below DIR pointing at TARGET (which the caller checked).
pub fn symlink_at(dir: BorrowedFd<'_>, rel: &Path, target: &Path) -> io::Result<()> {
    let (parent, name) = parent_and_name(dir, rel)?;
    let (t, n) = (
        CString::new(target.as_os_str().as_bytes()).map_err(io::Error::other)?,
        CString::new(name.as_bytes()).map_err(io::Error::other)?,
    );
    // SAFETY: valid descriptor and paths.
    if unsafe { libc::symlinkat(t.as_ptr(), parent.as_raw_fd(), n.as_ptr()) } != 0 {
        return Err(io_last());
    }
    Ok(())
}
