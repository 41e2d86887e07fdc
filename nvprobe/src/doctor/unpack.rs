//! `doctor --root FILE.tar[.gz]`: the archive unpacked into a private
//! folder (`mkdtemp`, 0700), for the checks to read as a host tree.
//!
//! Nothing in the archive can reach outside that folder or exhaust the
//! machine:
//!
//! - paths: an absolute path or one with `..` is not unpacked; every
//!   folder on the way is created or opened one component at a time with
//!   `O_NOFOLLOW` (a link in the archive is never written through), every
//!   file with `O_CREAT|O_EXCL|O_NOFOLLOW` (an entry given twice keeps its
//!   first copy);
//! - entries: regular files and folders; links whose target stays inside
//!   (a hard link becomes a copy); not devices, FIFOs, sparse files or a
//!   link pointing out (each is noted, and doctor reports it like a tree's
//!   file that it did not read);
//! - sizes: at most [`UNPACK_CAP`] unpacked in all, [`MAX_FILES`] entries,
//!   [`STREAM_CAP`] of tar stream read (a gzip bomb stops there), long
//!   names and pax headers of at most a few KiB (the `tar` crate reads its
//!   GNU long names and pax headers whole: entries are taken raw here).

use std::{
    fs::File,
    io::{self, Read},
    os::{fd::AsFd as _, unix::ffi::OsStrExt as _},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};

use crate::safefs::{self, SafeReadError};

/// What an archive may unpack to, in all.
pub const UNPACK_CAP: u64 = 512 << 20;
/// The most entries (files, folders, links) an archive may hold.
pub const MAX_FILES: usize = 20_000;
/// The most of the (decompressed) tar stream that is read.
pub const STREAM_CAP: u64 = UNPACK_CAP + (128 << 20);
const NAME_CAP: u64 = 4096;
const PAX_CAP: u64 = 64 << 10;

/// The caps of one unpack.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Bytes unpacked in all.
    pub total: u64,
    /// Entries.
    pub files: usize,
    /// Bytes of tar stream read.
    pub stream: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            total: UNPACK_CAP,
            files: MAX_FILES,
            stream: STREAM_CAP,
        }
    }
}

/// A reader that fails once more than its cap has been read through it.
struct Capped<R> {
    inner: R,
    left: u64,
    cap: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            let mut one = [0u8; 1];
            return match self.inner.read(&mut one)? {
                0 => Ok(0),
                _ => Err(io::Error::other(format!(
                    "the tar stream is longer than {} bytes",
                    self.cap
                ))),
            };
        }
        let n = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let got = self.inner.read(&mut buf[..n])?;
        self.left -= got as u64;
        Ok(got)
    }
}

/// Unpack ARCHIVE (`.tar`, else gzip) into a new private folder under the
/// temporary directory; the caller removes it.
pub fn unpack(archive: &Path) -> anyhow::Result<PathBuf> {
    unpack_in(archive, &std::env::temp_dir())
}

/// [`unpack`] into a private folder made in PARENT.
pub fn unpack_in(archive: &Path, parent: &Path) -> anyhow::Result<PathBuf> {
    unpack_with(archive, parent, Limits::default())
}

/// [`unpack_in`] with other caps.
pub fn unpack_with(archive: &Path, parent: &Path, limits: Limits) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(archive)
        .with_context(|| format!("--root {}", archive.display()))?;
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        bail!("--root {}: not a regular file", archive.display());
    }
    let (dir, fd) = safefs::private_temp_dir(parent, "nvprobe-root-")
        .with_context(|| format!("creating a private folder in {}", parent.display()))?;
    let plain = archive.to_string_lossy().ends_with(".tar");
    let stream: Box<dyn Read> = if plain {
        Box::new(f)
    } else {
        Box::new(flate2::read::GzDecoder::new(f))
    };
    let mut u = Unpacker {
        dir: &dir,
        fd: fd.as_fd(),
        limits,
        total: 0,
        files: 0,
    };
    let res = u.run(stream);
    if let Err(e) = res {
        let _ = std::fs::remove_dir_all(&dir);
        let _ = safefs::take_notes(&dir);
        return Err(e.context(format!(
            "--root {}: not a readable snapshot archive",
            archive.display()
        )));
    }
    Ok(dir)
}

struct Unpacker<'a> {
    dir: &'a Path,
    fd: std::os::fd::BorrowedFd<'a>,
    limits: Limits,
    total: u64,
    files: usize,
}

/// At most CAP bytes of an extension entry; more is an error.
fn small(r: impl Read, cap: u64, what: &str) -> anyhow::Result<Vec<u8>> {
    safefs::read_to_cap(r, cap).map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

/// The `path` and `linkpath` of a pax header; Err when it sets `size`
/// (a file that large is over the cap anyway, and the header's own size
/// would no longer say where the next entry starts).
/// The path and link name a pax header gives.
type PaxNames = (Option<Vec<u8>>, Option<Vec<u8>>);

fn pax(data: &[u8]) -> anyhow::Result<PaxNames> {
    let (mut path, mut link) = (None, None);
    let mut rest = data;
    while !rest.is_empty() {
        // "LEN key=value\n", LEN counting the whole record.
        let sp = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| anyhow::anyhow!("a malformed pax record"))?;
        let len: usize = std::str::from_utf8(&rest[..sp])
            .ok()
            .and_then(|l| l.parse().ok())
            .filter(|&l| l > sp + 1 && l <= rest.len())
            .ok_or_else(|| anyhow::anyhow!("a malformed pax record"))?;
        let rec = &rest[sp + 1..len];
        let rec = rec.strip_suffix(b"\n").unwrap_or(rec);
        if let Some(eq) = rec.iter().position(|&b| b == b'=') {
            let (k, v) = (&rec[..eq], &rec[eq + 1..]);
            match k {
                b"path" => path = Some(v.to_vec()),
                b"linkpath" => link = Some(v.to_vec()),
                b"size" | b"GNU.sparse.size" | b"GNU.sparse.map" => {
                    bail!("a pax header that sets the size (sparse or over 8 GiB)")
                }
                _ => {}
            }
        }
        rest = &rest[len..];
    }
    Ok((path, link))
}

/// The plain relative path an entry names, or why it is not unpacked.
fn entry_path(name: &[u8]) -> Result<PathBuf, &'static str> {
    if name.starts_with(b"/") {
        return Err("an archive entry with an absolute path");
    }
    let mut p = PathBuf::new();
    for c in name.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return Err("an archive entry with `..` in its path"),
            c => p.push(std::ffi::OsStr::from_bytes(c)),
        }
    }
    Ok(p)
}

/// Whether link REL -> TARGET stays inside the folder (read as written:
/// no absolute target, no `..` above the top).
fn link_inside(rel: &Path, target: &[u8]) -> bool {
    if target.is_empty() || target.starts_with(b"/") {
        return false;
    }
    let mut depth = rel.components().count().saturating_sub(1) as i64;
    for c in target.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => depth += 1,
        }
    }
    true
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Unpacker<'_> {
    fn note(&self, rel: &str, e: SafeReadError) {
        safefs::note(self.dir, rel, &e);
    }

    fn not_unpacked(&self, rel: &str, err: &io::Error) {
        self.note(
            rel,
            SafeReadError::Io(format!("an archive entry not unpacked ({err})")),
        );
    }

    fn run(&mut self, stream: Box<dyn Read>) -> anyhow::Result<()> {
        let mut ar = tar::Archive::new(Capped {
            inner: stream,
            left: self.limits.stream,
            cap: self.limits.stream,
        });
        let (mut long_name, mut long_link, mut pax_hdr) = (None, None, None);
        let mut headers = 0usize;
        for e in ar.entries()?.raw(true) {
            let mut e = e?;
            headers += 1;
            if headers > 4 * self.limits.files {
                bail!("more than {} entries", self.limits.files);
            }
            use tar::EntryType as T;
            let t = e.header().entry_type();
            match t {
                T::GNULongName => {
                    long_name = Some(small(&mut e, NAME_CAP, "a long name")?);
                    continue;
                }
                T::GNULongLink => {
                    long_link = Some(small(&mut e, NAME_CAP, "a long link name")?);
                    continue;
                }
                T::XHeader => {
                    pax_hdr = Some(small(&mut e, PAX_CAP, "a pax header")?);
                    continue;
                }
                T::XGlobalHeader => {
                    small(&mut e, PAX_CAP, "a pax global header")?;
                    continue;
                }
                _ => {}
            }
            let (pax_path, pax_link) = match pax_hdr.take() {
                Some(d) => pax(&d)?,
                None => (None, None),
            };
            let trim = |mut v: Vec<u8>| {
                while v.last() == Some(&0) {
                    v.pop();
                }
                v
            };
            let name = pax_path
                .or(long_name.take().map(trim))
                .unwrap_or_else(|| e.path_bytes().into_owned());
            let link = pax_link
                .or(long_link.take().map(trim))
                .or_else(|| e.link_name_bytes().map(|l| l.into_owned()));
            self.files += 1;
            if self.files > self.limits.files {
                bail!("more than {} entries", self.limits.files);
            }
            let rel = match entry_path(&name) {
                Ok(r) => r,
                Err(why) => {
                    self.note(&lossy(&name), SafeReadError::Io(why.to_owned()));
                    continue;
                }
            };
            let shown = rel.to_string_lossy().into_owned();
            if rel.as_os_str().is_empty() {
                continue;
            }
            let size = e.header().entry_size()?;
            match t {
                T::Regular | T::Continuous => self.file(&rel, &shown, &mut e, size)?,
                T::Directory => {
                    if let Err(err) = safefs::mkdirs_at(self.fd, &rel) {
                        self.not_unpacked(&shown, &err);
                    }
                }
                T::Symlink => {
                    let target = link.unwrap_or_default();
                    if !link_inside(&rel, &target) {
                        self.note(
                            &shown,
                            SafeReadError::LinkOutside {
                                link: shown.clone(),
                                target: lossy(&target),
                            },
                        );
                    } else if let Err(err) = safefs::symlink_at(
                        self.fd,
                        &rel,
                        Path::new(std::ffi::OsStr::from_bytes(&target)),
                    ) {
                        self.not_unpacked(&shown, &err);
                    }
                }
                T::Link => self.hard_link(&rel, &shown, &link.unwrap_or_default())?,
                T::Char | T::Block | T::Fifo => self.note(
                    &shown,
                    SafeReadError::NotRegular(match t {
                        T::Char => "a character device",
                        T::Block => "a block device",
                        _ => "a FIFO",
                    }),
                ),
                _ => self.note(
                    &shown,
                    SafeReadError::Io(format!(
                        "an archive entry of type {:?} (not unpacked)",
                        t.as_byte() as char
                    )),
                ),
            }
        }
        if long_name.is_some() || long_link.is_some() || pax_hdr.is_some() {
            bail!("a long name or pax header with no entry after it");
        }
        Ok(())
    }

    /// Count SIZE more bytes against the cap.
    fn take(&mut self, size: u64) -> anyhow::Result<()> {
        self.total = self.total.saturating_add(size);
        if self.total > self.limits.total {
            bail!(
                "the archive unpacks to more than {}",
                safefs::size_words(self.limits.total)
            );
        }
        Ok(())
    }

    fn file(&mut self, rel: &Path, shown: &str, data: impl Read, size: u64) -> anyhow::Result<()> {
        self.take(size)?;
        let mut f = match safefs::create_file_at(self.fd, rel) {
            Ok(f) => f,
            Err(err) => {
                self.not_unpacked(shown, &err);
                // The data is skipped with the entry.
                return Ok(());
            }
        };
        let n =
            io::copy(&mut data.take(size), &mut f).with_context(|| format!("unpacking {shown}"))?;
        if n != size {
            bail!("{shown}: the archive ends inside this file");
        }
        Ok(())
    }

    /// A hard link to an entry unpacked before: a copy of it.
    fn hard_link(&mut self, rel: &Path, shown: &str, target: &[u8]) -> anyhow::Result<()> {
        let Ok(t) = entry_path(target) else {
            self.note(
                shown,
                SafeReadError::LinkOutside {
                    link: shown.to_owned(),
                    target: lossy(target),
                },
            );
            return Ok(());
        };
        let left = self.limits.total.saturating_sub(self.total);
        let data = match safefs::read_capped(self.dir, &t, left) {
            Ok(d) => d,
            Err(SafeReadError::TooLarge(_)) => {
                bail!(
                    "the archive unpacks to more than {}",
                    safefs::size_words(self.limits.total)
                )
            }
            Err(err) => {
                self.note(
                    shown,
                    SafeReadError::Io(format!(
                        "an archive entry not unpacked (a hard link to {}: {err})",
                        lossy(target)
                    )),
                );
                return Ok(());
            }
        };
        self.file(rel, shown, &data[..], data.len() as u64)
    }
}

#[cfg(test)]
mod tests;
