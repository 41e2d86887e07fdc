//! `nvprobe diff A B`: two start-ups side by side (nvprobe_model::diff).
//! Each recording is decoded again through the replay pipeline (so both
//! sides get this nvprobe's names, stages and verdicts); a recording made
//! without `--raw` is read as it was written.

use std::{
    io::{self, BufRead, BufReader, Write},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use clap::Args;
use nvprobe::output::{Clock, Format, Level, Output};
use nvprobe::pipeline::{PipeOpts, replay};
use nvprobe_model::diff::{Collector, Side, diff};

use super::Fail;

#[derive(Args)]
pub struct DiffArgs {
    /// The recording that works (`nvprobe watch --json --raw`; without
    /// --raw it is read as recorded).
    pub a: PathBuf,
    /// The recording to compare with it.
    pub b: PathBuf,
    /// The process to compare: the first --pid is A's, a second B's (one
    /// applies to both). Default: each recording's first CUDA start-up.
    #[arg(long, value_name = "PID", num_args = 1, action = clap::ArgAction::Append)]
    pub pid: Vec<u32>,
    /// One JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What takes decoded records one by one.
pub(super) trait Records: Default + Send + 'static {
    fn record(&mut self, v: &serde_json::Value);
}

impl Records for Collector {
    fn record(&mut self, v: &serde_json::Value) {
        Collector::record(self, v);
    }
}

impl Records for nvprobe::perfetto::Exporter {
    fn record(&mut self, v: &serde_json::Value) {
        nvprobe::perfetto::Exporter::record(self, v);
    }
}

/// Decoded lines in, records out.
#[derive(Default)]
struct Sink<R>(Arc<Mutex<(Vec<u8>, R)>>);

impl<R> Clone for Sink<R> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<R: Records> Write for Sink<R> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let mut g = self.0.lock().map_err(|_| io::Error::other("poisoned"))?;
        let (partial, c) = &mut *g;
        partial.extend_from_slice(b);
        while let Some(nl) = partial.iter().position(|&x| x == b'\n') {
            let line: Vec<u8> = partial.drain(..=nl).collect();
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line) {
                c.record(&v);
            }
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn open(path: &Path) -> Result<Box<dyn BufRead>, Fail> {
    let name = path.display().to_string();
    let (input, _) = super::decode::open_input(path, &name)?;
    Ok(Box::new(BufReader::with_capacity(1 << 16, input)))
}

fn load(path: &Path, label: &str, pid: Option<u32>) -> Result<Side, Fail> {
    let (collector, _): (Collector, _) = decoded(path)?;
    collector
        .side(label, pid)
        .map_err(|e| Fail(2, anyhow::anyhow!("{e}")))
}

/// The recording at `path` decoded again by this nvprobe (or, recorded
/// without --raw, its records as written), fed to an `R`; and how many of
/// its lines were not records (each named on stderr).
pub(super) fn decoded<R: Records>(path: &Path) -> Result<(R, u64), Fail> {
    let sink = Sink::<R>::default();
    let out = Output::new(Box::new(sink.clone()), Format::Json, Clock::fixed(0));
    let opts = PipeOpts {
        workers: 1,
        summary_only: false,
        level: Level::All,
        observers: Vec::new(),
        host_facts: false,
    };
    let name = path.display().to_string();
    let r = replay::run(open(path)?, &name, out, None, &opts).map_err(|e| Fail(1, e))?;
    if r.without_raw > 0 {
        // Recorded without --raw: the decoded records as they were written.
        let mut c = R::default();
        let mut lines = open(path)?;
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = io::Read::take(&mut lines, 1 << 20)
                .read_until(b'\n', &mut line)
                .map_err(|e| Fail(2, anyhow::anyhow!("reading {name}: {e}")))?;
            if n == 0 {
                break;
            }
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line) {
                c.record(&v);
            }
        }
        Ok((c, r.bad_lines))
    } else {
        let mut g = sink
            .0
            .lock()
            .map_err(|_| Fail(1, anyhow::anyhow!("poisoned")))?;
        Ok((std::mem::take(&mut g.1), r.bad_lines))
    }
}

pub fn run(a: DiffArgs) -> Result<(), Fail> {
    if a.pid.len() > 2 {
        return Err(Fail(
            2,
            anyhow::anyhow!("--pid: at most two (A's, then B's)"),
        ));
    }
    let (pa, pb) = (
        a.pid.first().copied(),
        a.pid.get(1).or(a.pid.first()).copied(),
    );
    let side_a = load(&a.a, "A", pa)?;
    let side_b = load(&a.b, "B", pb)?;
    let d = diff(&side_a, &side_b);
    let text = if a.json {
        let mut s = serde_json::to_string(&d).map_err(|e| Fail(1, e.into()))?;
        s.push('\n');
        s
    } else {
        format!(
            "A = {}\nB = {}\n{}",
            a.a.display(),
            a.b.display(),
            d.to_text()
        )
    };
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => r.map_err(|e| Fail(1, e.into())),
    }
}
