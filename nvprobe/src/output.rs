//! Where rendered bytes go: a writer thread behind a buffer, so the
//! collector's threads never wait in write(2). Rendering itself is the
//! model's (`nvprobe_model::render`).

use std::io::{self, Write};

use bytes::BytesMut;
pub use nvprobe_model::render::{Clock, Format, Note, Renderer};
use nvprobe_model::{correlate::Record, decode::Event};

/// Writes filled buffers on its own thread, so that the collector's thread
/// spends its time decoding, not in write(2) (about half of the cost per
/// event when NDJSON goes to a file).
struct WriterThread {
    tx: Option<std::sync::mpsc::SyncSender<bytes::Bytes>>,
    handle: Option<std::thread::JoinHandle<io::Result<()>>>,
    failed: std::sync::Arc<std::sync::Mutex<Option<io::Error>>>,
}

impl WriterThread {
    fn spawn(mut w: Box<dyn Write + Send>) -> Self {
        let (tx, rx) = std::sync::mpsc::sync_channel::<bytes::Bytes>(64);
        let failed = std::sync::Arc::new(std::sync::Mutex::new(None));
        let f2 = failed.clone();
        let handle = std::thread::Builder::new()
            .name("nvprobe-writer".into())
            .spawn(move || {
                for b in rx {
                    if let Err(e) = w.write_all(&b).and_then(|()| w.flush()) {
                        let kind = e.kind();
                        if let Ok(mut g) = f2.lock() {
                            *g = Some(e);
                        }
                        return Err(io::Error::from(kind));
                    }
                }
                w.flush()
            })
            .ok();
        Self {
            tx: Some(tx),
            handle,
            failed,
        }
    }

    fn check(&self) -> io::Result<()> {
        match self.failed.lock().ok().and_then(|mut g| g.take()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn send(&self, b: bytes::Bytes) -> io::Result<()> {
        self.check()?;
        match &self.tx {
            Some(tx) => tx.send(b).map_err(|_| {
                self.check()
                    .err()
                    .unwrap_or_else(|| io::Error::other("the output writer thread stopped"))
            }),
            None => Ok(()),
        }
    }

    fn finish(&mut self) -> io::Result<()> {
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

/// A renderer, a buffer, and the writer thread behind them.
pub struct Output {
    w: WriterThread,
    r: Renderer,
    buf: BytesMut,
}

impl Output {
    pub fn new(w: Box<dyn Write + Send>, format: Format, clock: Clock) -> Self {
        Self {
            w: WriterThread::spawn(w),
            r: Renderer::new(format, clock),
            buf: BytesMut::with_capacity(1 << 16),
        }
    }

    pub fn format(&self) -> Format {
        self.r.format()
    }

    /// Use another wall clock from now on (replays use the recording's).
    pub fn set_clock(&mut self, clock: Clock) {
        self.r.set_clock(clock);
    }

    /// A renderer like this output's, for another thread.
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
