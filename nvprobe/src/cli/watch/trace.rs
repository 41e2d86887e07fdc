//! `watch --perfetto FILE`: the trace file, checked before start-up,
//! created once start-up has succeeded (as -o's: 0600, never over an
//! existing path without --force, never through a link), and written
//! through that descriptor when the run stops. Created only at the stop, a
//! link planted at FILE meanwhile cost the whole timeline.

use std::{io::Write, path::PathBuf};

use nvprobe::{output::OutputSpec, perfetto::Timeline};

use crate::cli::common::Fail;

/// FILE, checked: a path -o would refuse is a usage error before anything
/// attaches.
pub(super) struct TraceSpec(OutputSpec);

impl TraceSpec {
    pub(super) fn check(path: PathBuf, force: bool, mode: u32) -> Result<Self, Fail> {
        let s = OutputSpec {
            path: Some(path),
            force,
            mode,
            input: None,
        };
        s.check().map_err(|e| Fail(2, e))?;
        Ok(Self(s))
    }

    /// Create FILE now (start-up has succeeded): what was planted at the
    /// path since the check is refused as -o refuses it (exit 2).
    pub(super) fn open(&self) -> Result<TraceFile, Fail> {
        let opened = self
            .0
            .open()
            .map_err(|e| Fail(2, e.context("--perfetto")))?;
        Ok(TraceFile {
            writer: opened.writer,
            timeline: Timeline::default(),
        })
    }
}

/// The trace file, open, and the timeline the run fills.
pub(super) struct TraceFile {
    writer: Box<dyn Write + Send>,
    timeline: Timeline,
}

impl TraceFile {
    /// The observer to give the pipeline.
    pub(super) fn timeline(&self) -> Timeline {
        self.timeline.clone()
    }

    /// The run has stopped: its timeline into the file opened at start.
    pub(super) fn write(self) -> Result<(), Fail> {
        let exporter = self.timeline.take();
        let mut w = std::io::BufWriter::new(self.writer);
        let s = exporter
            .finish(&mut w)
            .and_then(|s| w.flush().map(|()| s))
            .map_err(|e| Fail(1, anyhow::anyhow!("writing the Perfetto trace: {e}")))?;
        eprintln!(
            "nvprobe: Perfetto trace: {} processes, {} threads, {} slices, {} instants{}",
            s.processes,
            s.threads,
            s.slices,
            s.instants,
            if s.cut > 0 {
                format!(" ({} events not exported)", s.cut)
            } else {
                String::new()
            }
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt as _, symlink};

    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let t = std::env::temp_dir().join(format!("nvprobe-trace-{tag}-XXXXXX"));
        nix::unistd::mkdtemp(&t).expect("mkdtemp")
    }

    fn mode(p: &std::path::Path) -> u32 {
        std::fs::symlink_metadata(p)
            .expect("stat")
            .permissions()
            .mode()
            & 0o7777
    }

    /// Opened at start: the file is there, 0600, empty until the run
    /// stops; then the trace is written into it.
    #[test]
    fn the_trace_file_is_created_at_start_and_written_at_the_end() {
        let d = tmp("open");
        let p = d.join("run.pftrace");
        let spec = TraceSpec::check(p.clone(), false, 0o600).expect("check");
        assert!(!p.exists(), "nothing is created by the check");
        let f = spec.open().unwrap_or_else(|e| panic!("open: {:#}", e.1));
        assert_eq!(mode(&p), 0o600);
        assert_eq!(std::fs::metadata(&p).expect("stat").len(), 0);
        // What the pipeline gives the observer: a recorded run's items.
        let rec = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/h200-580.159.04-uvm-masked.ndjson");
        let text = std::fs::read(rec).expect("fixture");
        let t = f.timeline();
        nvprobe_model::replay::replay(&text[..], None, |ns, item| {
            t.0.lock().expect("lock").item(ns, &item);
        })
        .expect("replay");
        f.write().unwrap_or_else(|e| panic!("write: {:#}", e.1));
        assert!(
            std::fs::metadata(&p).expect("stat").len() > 0,
            "the timeline written"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A link at the path: refused by the check (before start-up), and,
    /// planted after the check, by the open at start (exit 2, as -o), the
    /// file it points to left alone.
    #[test]
    fn a_link_at_the_path_is_refused_before_and_at_start() {
        let d = tmp("link");
        let (p, target) = (d.join("run.pftrace"), d.join("elsewhere"));
        symlink(&target, &p).expect("symlink");
        let e = TraceSpec::check(p.clone(), false, 0o600)
            .err()
            .expect("a link is refused");
        assert_eq!(e.0, 2);
        assert!(e.1.to_string().contains("is a symbolic link"), "{:#}", e.1);
        std::fs::remove_file(&p).expect("rm");
        let spec = TraceSpec::check(p.clone(), false, 0o600).expect("check");
        symlink(&target, &p).expect("symlink");
        let e = spec.open().err().expect("a link planted meanwhile");
        assert_eq!(e.0, 2);
        let msg = format!("{:#}", e.1);
        assert!(
            msg.starts_with("--perfetto: refusing to write to")
                && msg.contains("it is a symbolic link"),
            "{msg}"
        );
        assert!(!target.exists(), "nothing written through the link");
        let _ = std::fs::remove_dir_all(&d);
    }
}
