//! Where rendered bytes go: a writer thread behind a buffer, so the
//! collector's threads never wait in write(2). Rendering itself is the
//! model's (`nvprobe_model::render`).

use std::{
    io::{self, Write},
    os::fd::{AsFd, OwnedFd},
    sync::{Arc, OnceLock},
};

pub use self::file::{Opened, OutputSpec};
use bytes::BytesMut;
pub use nvprobe_model::render::{Clock, Format, Level, Note, Renderer};
use nvprobe_model::{correlate::Record, decode::Event};

/// Writes filled buffers on its own thread, so that the collector's thread
/// spends its time decoding, not in write(2) (about half of the cost per
/// event when NDJSON goes to a file).
/// What the writer thread is handed.
enum Msg {
    Data(bytes::Bytes),
    /// SIGHUP: write to a newly opened file from here on (logrotate).
    Reopen,
}

/// Opens the output file again (its path, anew): see [`OutputSpec::reopen`].
pub type ReopenFn = Box<dyn FnMut() -> anyhow::Result<Box<dyn Write + Send>> + Send>;

/// Asks the writer thread to reopen its file, in order with what was
/// written before. It does not keep the writer alive: once the output
/// finishes, a request does nothing.
#[derive(Clone)]
pub struct Reopener(ReopenTx);

type ReopenTx = Arc<std::sync::Mutex<Option<std::sync::mpsc::SyncSender<Msg>>>>;

impl Reopener {
    /// Queue the reopen; false when the writer's queue is full (ask again
    /// later). True when it is queued, or the writer is gone.
    pub fn request(&self) -> bool {
        match self.0.lock().ok().and_then(|g| g.clone()) {
            Some(tx) => !matches!(
                tx.try_send(Msg::Reopen),
                Err(std::sync::mpsc::TrySendError::Full(_))
            ),
            None => true,
        }
    }
}

struct WriterThread {
    tx: Option<std::sync::mpsc::SyncSender<Msg>>,
    /// The sender reopen requests use (None once finishing, or when the
    /// output is not a file).
    reopen_tx: ReopenTx,
    handle: Option<std::thread::JoinHandle<io::Result<()>>>,
    failed: std::sync::Arc<std::sync::Mutex<Option<io::Error>>>,
    health: Health,
}

impl WriterThread {
    fn spawn(mut w: Box<dyn Write + Send>, health: Health, mut reopen: Option<ReopenFn>) -> Self {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(16);
        let reopen_tx = Arc::new(std::sync::Mutex::new(reopen.is_some().then(|| tx.clone())));
        let failed = std::sync::Arc::new(std::sync::Mutex::new(None));
        let f2 = failed.clone();
        let h2 = health.clone();
        let handle = std::thread::Builder::new()
            .name("nvprobe-writer".into())
            .spawn(move || {
                for m in rx {
                    let b = match m {
                        Msg::Data(b) => b,
                        Msg::Reopen => {
                            let Some(open) = reopen.as_mut() else {
                                continue;
                            };
                            // What went before ends in the old file.
                            let _ = w.flush();
                            match open() {
                                Ok(n) => w = n,
                                // The old file is kept: nothing is lost.
                                Err(e) => eprintln!(
                                    "nvprobe: warning: SIGHUP: {e:#}; still writing to the file opened before"
                                ),
                            }
                            continue;
                        }
                    };
                    if let Err(e) = w.write_all(&b).and_then(|()| w.flush()) {
                        let kind = e.kind();
                        h2.set(&e);
                        if let Ok(mut g) = f2.lock() {
                            *g = Some(e);
                        }
                        return Err(io::Error::from(kind));
                    }
                }
                w.flush().inspect_err(|e| h2.set(e))
            })
            .ok();
        Self {
            tx: Some(tx),
            reopen_tx,
            handle,
            failed,
            health,
        }
    }

    fn check(&self) -> io::Result<()> {
        match self.failed.lock().ok().and_then(|mut g| g.take()) {
            Some(e) => Err(e),
            None => match self.health.broken() {
                // Reported once already: say it again, as the same kind.
                Some(f) => Err(io::Error::new(f.kind, f.message)),
                None => Ok(()),
            },
        }
    }

    fn send(&self, b: bytes::Bytes) -> io::Result<()> {
        self.check()?;
        match &self.tx {
            Some(tx) => tx.send(Msg::Data(b)).map_err(|_| {
                self.check()
                    .err()
                    .unwrap_or_else(|| io::Error::other("the output writer thread stopped"))
            }),
            None => Ok(()),
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        if let Ok(mut g) = self.reopen_tx.lock() {
            g.take();
        }
        drop(self.tx.take());
        if let Some(h) = self.handle.take() {
            h.join()
                .map_err(|_| io::Error::other("the output writer thread panicked"))??;
        }
        self.check()
    }
}

impl Drop for WriterThread {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// The first write error of an output, as its kind and its text.
#[derive(Clone, Debug)]
pub struct WriteFailure {
    pub kind: io::ErrorKind,
    pub message: String,
}

/// The output failed: nvprobe stops (a closed pipe is a normal way to stop,
/// any other write error is not).
#[derive(Debug, thiserror::Error)]
#[error("writing the output failed: {}", .0.message)]
pub struct WriteFailed(pub WriteFailure);

impl WriteFailed {
    /// The reader went away (`nvprobe watch | head`): stop, exit 0.
    pub fn is_broken_pipe(&self) -> bool {
        self.0.kind == io::ErrorKind::BrokenPipe
    }
}

/// Whether an output still works, for the loops that feed it: the writer
/// thread's first error, and for a pipe, whether its reader is gone (seen
/// even when nothing is being written).
#[derive(Clone, Default)]
pub struct Health {
    failed: Arc<OnceLock<WriteFailure>>,
    /// A copy of the pipe's write end (a copy: the writer may close its own).
    pipe: Option<Arc<OwnedFd>>,
}

impl Health {
    fn set(&self, e: &io::Error) {
        let _ = self.failed.set(WriteFailure {
            kind: e.kind(),
            message: e.to_string(),
        });
    }

    /// The output's failure, if it failed or its pipe has no reader left.
    pub fn broken(&self) -> Option<WriteFailure> {
        if let Some(f) = self.failed.get() {
            return Some(f.clone());
        }
        let fd = self.pipe.as_ref()?;
        let mut fds = [nix::poll::PollFd::new(
            fd.as_fd(),
            nix::poll::PollFlags::empty(),
        )];
        // A pipe whose every reader has closed polls POLLERR.
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO) {
            Ok(n)
                if n > 0
                    && fds[0]
                        .revents()
                        .is_some_and(|r| r.contains(nix::poll::PollFlags::POLLERR)) =>
            {
                self.set(&io::Error::from(io::ErrorKind::BrokenPipe));
                self.failed.get().cloned()
            }
            _ => None,
        }
    }

    /// The failure as an error to return.
    pub fn error(&self) -> Option<WriteFailed> {
        self.broken().map(WriteFailed)
    }
}

/// A renderer, a buffer, and the writer thread behind them.
pub struct Output {
    w: WriterThread,
    r: Renderer,
    buf: BytesMut,
}

impl Output {
    pub fn new(w: Box<dyn Write + Send>, format: Format, clock: Clock) -> Self {
        Self::with_health(w, Health::default(), None, format, clock)
    }

    /// An output opened by [`OutputSpec::open`] (its pipe watched).
    pub fn opened(o: Opened, format: Format, clock: Clock) -> Self {
        let health = Health {
            failed: Arc::default(),
            pipe: o.pipe.map(Arc::new),
        };
        Self::with_health(o.writer, health, o.reopen, format, clock)
    }

    fn with_health(
        w: Box<dyn Write + Send>,
        health: Health,
        reopen: Option<ReopenFn>,
        format: Format,
        clock: Clock,
    ) -> Self {
        Self {
            w: WriterThread::spawn(w, health, reopen),
            r: Renderer::new(format, clock),
            buf: BytesMut::with_capacity(1 << 16),
        }
    }

    /// A handle that reopens the output file (SIGHUP), when it is one.
    pub fn reopener(&self) -> Option<Reopener> {
        let on = self.w.reopen_tx.lock().is_ok_and(|g| g.is_some());
        on.then(|| Reopener(self.w.reopen_tx.clone()))
    }

    /// A handle that says whether this output still works.
    pub fn health(&self) -> Health {
        self.w.health.clone()
    }

    pub fn format(&self) -> Format {
        self.r.format()
    }

    /// Use another wall clock from now on (replays use the recording's).
    pub fn set_clock(&mut self, clock: Clock) {
        self.r.set_clock(clock);
    }

    /// A process exited: its OTLP resource is no longer needed.
    pub fn forget_process(&self, pid: u32, exit_ns: u64) {
        self.r.resources().forget(pid, exit_ns);
    }

    /// A renderer like this output's, for another thread.
    /// Whether its format shows lifecycle lines only for NVIDIA processes
    /// (text: `pipeline/lifelines.rs`).
    pub fn selective(&self) -> bool {
        self.r.selective()
    }

    pub fn renderer(&self) -> Renderer {
        self.r.clone()
    }

    pub fn event(&mut self, mono_ns: u64, ev: &Event) -> io::Result<()> {
        self.r.event(&mut self.buf, mono_ns, ev)?;
        self.maybe_flush()
    }

    pub fn note(&mut self, mono_ns: u64, note: &Note<'_>) -> io::Result<()> {
        self.r.note(&mut self.buf, mono_ns, note)?;
        self.maybe_flush()
    }

    /// A record of the per-process correlator (stage, cuinit, signal,
    /// breakdown), stamped with the time of the event that produced it.
    pub fn record(&mut self, mono_ns: u64, rec: &Record) -> io::Result<()> {
        self.r.record(&mut self.buf, mono_ns, rec)?;
        self.maybe_flush()
    }

    /// Bytes another thread rendered, in order after what is buffered.
    pub fn rendered(&mut self, b: bytes::Bytes) -> io::Result<()> {
        if b.is_empty() {
            return Ok(());
        }
        self.flush()?;
        self.w.send(b)
    }

    fn maybe_flush(&mut self) -> io::Result<()> {
        if self.buf.len() >= 1 << 16 {
            self.flush()?;
        }
        Ok(())
    }

    /// Hand what is buffered to the writer thread.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            let b = self.buf.split().freeze();
            self.w.send(b)?;
        }
        self.w.check()
    }

    /// Flush, wait until everything is written, and report a write error.
    pub fn finish(&mut self) -> io::Result<()> {
        self.flush()?;
        self.w.finish()
    }
}

/// `-o FILE`: where nvprobe (root) may write, and how.
mod file {
    use std::{
        fs::{self, File, Metadata},
        io::{self, Write},
        os::{
            fd::{AsFd, OwnedFd},
            unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt},
        },
        path::{Path, PathBuf},
    };

    use anyhow::{Context as _, bail};

    /// The output of `watch` or `decode`: stdout, or a file checked before
    /// start-up (nothing is created or truncated then) and opened only once
    /// start-up has succeeded. A file is never reached through a symbolic
    /// link (O_NOFOLLOW), never the input, and an existing regular file is
    /// overwritten only with `force`; a file nvprobe creates or overwrites
    /// gets `mode` whatever the umask. Character devices and FIFOs are
    /// written as they are (no truncation, no mode change), opened without
    /// blocking (a FIFO without a reader is refused); block devices and
    /// sockets are refused.
    #[derive(Clone, Debug)]
    pub struct OutputSpec {
        pub path: Option<PathBuf>,
        /// Overwrite an existing regular file.
        pub force: bool,
        /// Permission bits of a file nvprobe creates or overwrites.
        pub mode: u32,
        /// The input (decode's recording) as (st_dev, st_ino): never written.
        pub input: Option<(u64, u64)>,
    }

    impl Default for OutputSpec {
        fn default() -> Self {
            Self {
                path: None,
                force: false,
                mode: 0o600,
                input: None,
            }
        }
    }

    /// An output opened: its writer, and a copy of its fd when it is a pipe
    /// (to see its reader go away).
    pub struct Opened {
        pub writer: Box<dyn Write + Send>,
        pub pipe: Option<OwnedFd>,
        /// A regular file's: opens its path again (SIGHUP).
        pub reopen: Option<super::ReopenFn>,
    }

    impl Opened {
        /// Nowhere: `top` without -o shows the events, writes none.
        pub fn sink() -> Self {
            Self {
                writer: Box::new(io::sink()),
                pipe: None,
                reopen: None,
            }
        }
    }

    fn pipe_copy(fd: std::os::fd::BorrowedFd<'_>) -> Option<OwnedFd> {
        let st = nix::sys::stat::fstat(fd).ok()?;
        let fifo = nix::sys::stat::SFlag::from_bits_truncate(st.st_mode)
            .contains(nix::sys::stat::SFlag::S_IFIFO);
        fifo.then(|| fd.try_clone_to_owned().ok()).flatten()
    }

    impl OutputSpec {
        /// What can be refused before start-up, touching nothing.
        pub fn check(&self) -> anyhow::Result<()> {
            let Some(p) = &self.path else { return Ok(()) };
            match fs::symlink_metadata(p) {
                Ok(m) => self.judge(p, &m),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let dir = p
                        .parent()
                        .filter(|d| !d.as_os_str().is_empty())
                        .unwrap_or(Path::new("."));
                    match fs::metadata(dir) {
                        Ok(m) if m.is_dir() => Ok(()),
                        Ok(_) => bail!(
                            "cannot create output file {}: {} is not a directory",
                            p.display(),
                            dir.display()
                        ),
                        Err(e) => bail!(
                            "cannot create output file {}: {}: {e}",
                            p.display(),
                            dir.display()
                        ),
                    }
                }
                Err(e) => bail!("cannot create output file {}: {e}", p.display()),
            }
        }

        /// Whether an existing path may be written.
        fn judge(&self, p: &Path, m: &Metadata) -> anyhow::Result<()> {
            let ft = m.file_type();
            let p = p.display();
            if ft.is_symlink() {
                bail!(
                    "refusing to write to {p}: it is a symbolic link (nvprobe does not follow links for its output: give the file itself)"
                );
            }
            if self.input == Some((m.dev(), m.ino())) {
                bail!("refusing to write to {p}: it is the input being decoded");
            }
            if ft.is_dir() {
                bail!("cannot create output file {p}: it is a directory");
            }
            if ft.is_block_device() {
                bail!(
                    "refusing to write to {p}: it is a block device (nvprobe writes regular files, FIFOs and character devices such as /dev/null)"
                );
            }
            if ft.is_socket() {
                bail!(
                    "cannot write to {p}: it is a socket (nvprobe writes regular files, FIFOs and character devices)"
                );
            }
            if ft.is_file() {
                if !self.force {
                    bail!(
                        "{p} exists: refusing to overwrite it (give --force to overwrite it, or another -o FILE)"
                    );
                }
                if m.nlink() > 1 {
                    bail!(
                        "refusing to overwrite {p}: it has {} hard links (another name shares its contents)",
                        m.nlink()
                    );
                }
            }
            Ok(())
        }

        /// Open the output (create, or overwrite with `force`). Call it
        /// once start-up has succeeded.
        pub fn open(&self) -> anyhow::Result<Opened> {
            let Some(p) = &self.path else {
                return Ok(Opened {
                    writer: Box::new(io::stdout()),
                    pipe: pipe_copy(io::stdout().as_fd()),
                    reopen: None,
                });
            };
            let existing = fs::symlink_metadata(p).ok();
            if let Some(m) = &existing {
                self.judge(p, m)?;
            }
            let mut o = fs::OpenOptions::new();
            // Never blocked in open() (a FIFO nobody reads yet, a device
            // that waits): a stop must not wait on it. Cleared once open.
            o.write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
                .mode(self.mode);
            match &existing {
                // Created here, or refused if it appeared meanwhile.
                None => o.create_new(true),
                Some(m) if m.is_file() => o.create(true),
                // A character device or a FIFO: written as it is.
                Some(_) => &mut o,
            };
            let f = o.open(p).map_err(|e| match e.raw_os_error() {
                Some(libc::EEXIST) => anyhow::anyhow!(
                    "{} exists: refusing to overwrite it (give --force to overwrite it, or another -o FILE)",
                    p.display()
                ),
                Some(libc::ELOOP) => anyhow::anyhow!(
                    "refusing to write to {}: it is a symbolic link (nvprobe does not follow links for its output: give the file itself)",
                    p.display()
                ),
                // O_NONBLOCK's answer for a FIFO without a reader.
                Some(libc::ENXIO) if existing.as_ref().is_some_and(|m| m.file_type().is_fifo()) => anyhow::anyhow!(
                    "cannot write to {}: it is a FIFO and no process has it open for reading (start its reader first)",
                    p.display()
                ),
                _ => anyhow::anyhow!("cannot create output file {}: {e}", p.display()),
            })?;
            // Writes block as they do on any output (a slow reader holds
            // the writer back; the summary counts nothing lost).
            nix::fcntl::fcntl(
                f.as_fd(),
                nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
            )
            .with_context(|| format!("{}: fcntl", p.display()))?;
            let m = f.metadata()?;
            let mut fresh = self.clone();
            // The file opened is judged again: what the path named may have
            // changed since it was looked at.
            fresh.force = true;
            fresh.judge(p, &m)?;
            if m.is_file() {
                f.set_permissions(fs::Permissions::from_mode(self.mode))?;
                f.set_len(0)?;
            }
            let pipe = pipe_copy(f.as_fd());
            let reopen: Option<super::ReopenFn> = m.is_file().then(|| {
                let spec = self.clone();
                Box::new(move || spec.reopen()) as super::ReopenFn
            });
            Ok(Opened {
                writer: Box::new(f),
                pipe,
                reopen,
            })
        }

        /// The file at the output's path again (SIGHUP, after logrotate
        /// moved it away): a new file (exclusive, not following links,
        /// with the output's mode), or the regular file found there (made
        /// by `logrotate`'s `create`, or the same file when nothing moved
        /// it), appended to. A link, a file with other names, anything but
        /// a regular file is refused.
        pub fn reopen(&self) -> anyhow::Result<Box<dyn Write + Send>> {
            let p = self.path.as_deref().context("stdout is not reopened")?;
            // Looked at before it is opened: a FIFO would block the open,
            // a file another user made would get root's records.
            if let Ok(m) = fs::symlink_metadata(p) {
                if m.file_type().is_symlink() {
                    bail!(
                        "refusing to reopen {}: it is a symbolic link (nvprobe does not follow links for its output)",
                        p.display()
                    );
                }
                if !m.is_file() {
                    bail!(
                        "refusing to reopen {}: it is not a regular file",
                        p.display()
                    );
                }
            }
            let me = nix::unistd::geteuid().as_raw();
            let mut o = fs::OpenOptions::new();
            o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
                .mode(self.mode);
            let f = match o.clone().write(true).create_new(true).open(p) {
                Ok(f) => {
                    f.set_permissions(fs::Permissions::from_mode(self.mode))?;
                    f
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                    o.append(true).open(p).map_err(|e| match e.raw_os_error() {
                        Some(libc::ELOOP) => anyhow::anyhow!(
                            "refusing to reopen {}: it is a symbolic link (nvprobe does not follow links for its output)",
                            p.display()
                        ),
                        _ => anyhow::anyhow!("reopening {}: {e}", p.display()),
                    })?
                }
                Err(e) => {
                    return Err(anyhow::anyhow!("cannot create output file {}: {e}", p.display()));
                }
            };
            let m = f.metadata()?;
            if m.uid() != me {
                bail!(
                    "refusing to reopen {}: it belongs to uid {}, not to nvprobe's uid {me}",
                    p.display(),
                    m.uid()
                );
            }
            if !m.is_file() {
                bail!(
                    "refusing to reopen {}: it is not a regular file",
                    p.display()
                );
            }
            if m.nlink() > 1 {
                bail!(
                    "refusing to reopen {}: it has {} hard links (another name shares its contents)",
                    p.display(),
                    m.nlink()
                );
            }
            Ok(Box::new(f))
        }
    }

    /// `--output-mode`: octal permission bits (`600`, `0640`, `0o644`).
    pub fn parse_mode(s: &str) -> Result<u32, String> {
        let t = s.trim();
        let digits = t.strip_prefix("0o").unwrap_or(t);
        match u32::from_str_radix(digits, 8) {
            Ok(m) if m <= 0o777 && !digits.is_empty() => Ok(m),
            _ => Err(format!(
                "{s:?} is not a file mode: give octal permission bits, 0 to 777 (e.g. 600 or 0640)"
            )),
        }
    }

    /// The (st_dev, st_ino) of an open file.
    pub fn identity(f: &File) -> Option<(u64, u64)> {
        f.metadata().ok().map(|m| (m.dev(), m.ino()))
    }

    #[cfg(test)]
    mod tests {
        use std::os::unix::fs::{PermissionsExt, symlink};

        use super::*;

        /// A folder of the test's own (mkdtemp, 0700), removed when the
        /// test ends.
        struct Tmp(PathBuf);
        impl std::ops::Deref for Tmp {
            type Target = Path;
            fn deref(&self) -> &Path {
                &self.0
            }
        }
        impl Drop for Tmp {
            fn drop(&mut self) {
                let _ = fs::remove_dir_all(&self.0);
            }
        }
        fn tmp(tag: &str) -> Tmp {
            let t = std::env::temp_dir().join(format!("nvprobe-outfile-{tag}-XXXXXX"));
            Tmp(nix::unistd::mkdtemp(&t).expect("mkdtemp"))
        }

        fn spec(p: &Path) -> OutputSpec {
            OutputSpec {
                path: Some(p.to_path_buf()),
                ..Default::default()
            }
        }

        #[test]
        fn modes_are_octal_bits() {
            assert_eq!(parse_mode("600"), Ok(0o600));
            assert_eq!(parse_mode("0640"), Ok(0o640));
            assert_eq!(parse_mode("0o644"), Ok(0o644));
            for bad in ["", "8", "1777", "rw", "0o"] {
                assert!(parse_mode(bad).is_err(), "{bad}");
            }
        }

        /// The mode is set on the file, not left to the umask (which
        /// takes 0o022 off here: 0o666 would come out 0o644).
        #[test]
        fn new_and_overwritten_files_get_the_mode_whatever_the_umask() {
            let d = tmp("mode");
            let p = d.join("out");
            let mut s = spec(&p);
            s.mode = 0o666;
            drop(s.open().expect("open"));
            let mode = |p: &Path| fs::metadata(p).expect("meta").permissions().mode() & 0o7777;
            assert_eq!(mode(&p), 0o666);
            fs::write(&p, "old contents").expect("write");
            s.mode = 0o600;
            s.force = true;
            drop(s.open().expect("overwrite"));
            assert_eq!(mode(&p), 0o600);
            assert_eq!(fs::read_to_string(&p).expect("read"), "");
        }

        #[test]
        fn refuses_links_existing_files_and_the_input() {
            let d = tmp("refuse");
            let target = d.join("target");
            fs::write(&target, "keep").expect("write");
            let link = d.join("link");
            symlink(&target, &link).expect("symlink");
            let e = spec(&link).check().expect_err("symlink").to_string();
            assert!(e.contains("symbolic link"), "{e}");
            let mut forced = spec(&link);
            forced.force = true;
            assert!(forced.open().is_err());
            let e = spec(&target).check().expect_err("exists").to_string();
            assert!(e.contains("--force"), "{e}");
            assert!(spec(&target).open().is_err());
            let mut same = spec(&target);
            same.force = true;
            same.input = identity(&File::open(&target).expect("open"));
            let e = same.open().err().expect("input").to_string();
            assert!(e.contains("the input"), "{e}");
            let hard = d.join("hard");
            fs::hard_link(&target, &hard).expect("link");
            let mut h = spec(&hard);
            h.force = true;
            assert!(h.open().is_err());
            assert_eq!(fs::read_to_string(&target).expect("read"), "keep");
            let mut ok = spec(&d.join("fresh"));
            ok.force = true;
            ok.open().expect("new file with --force");
        }
    }
}

pub use self::file::{identity as file_identity, parse_mode};
