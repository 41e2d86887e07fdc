//! `nvprobe diff A B`: two start-ups side by side (nvprobe_model::diff).
//! Each recording is read by the model's replay (decoded again, or,
//! recorded without `--raw`, its events as written), so both sides get
//! this nvprobe's stages and verdicts.

use std::{
    io::{self, BufRead, BufReader, Write},
    path::{Path, PathBuf},
};

use clap::Args;
use nvprobe_model::{
    diff::{Collector, Side, diff},
    replay::{self, Item},
};

use super::common::Fail;

#[derive(Args)]
pub struct DiffArgs {
    /// The recording that works (`nvprobe watch --json`; with --raw its
    /// calls are decoded again, without it they are read as recorded).
    pub a: PathBuf,
    /// The recording to compare with it.
    pub b: PathBuf,
    /// The process to compare: the first --pid is A's, a second B's (one
    /// applies to both). Default: each recording's first CUDA start-up.
    #[arg(long, value_name = "PID", num_args = 1, action = clap::ArgAction::Append)]
    pub pid: Vec<u32>,
    /// One JSON document instead of text (it always holds every
    /// difference).
    #[arg(long)]
    pub json: bool,
    /// List every difference: the text shows the first 20 results that
    /// differ and 30 calls, then how many more there are.
    #[arg(long)]
    pub all: bool,
}

/// What takes a recording one item at a time, as the model's replay
/// hands them on.
pub(super) trait Records: Default {
    fn item(&mut self, mono_ns: u64, item: &Item<'_>);
}

impl Records for Collector {
    fn item(&mut self, _: u64, item: &Item<'_>) {
        Collector::item(self, item);
    }
}

impl Records for nvprobe::perfetto::Exporter {
    fn item(&mut self, mono_ns: u64, item: &Item<'_>) {
        nvprobe::perfetto::Exporter::item(self, mono_ns, item);
    }
}

fn open(path: &Path) -> Result<Box<dyn BufRead>, Fail> {
    let name = path.display().to_string();
    let (input, _) = super::decode::open_input(path, &name)?;
    Ok(Box::new(BufReader::with_capacity(1 << 16, input)))
}

/// One side of the comparison, and how many of its lines could not be
/// decoded.
fn load(path: &Path, label: &str, pid: Option<u32>) -> Result<(Side, u64), Fail> {
    let (collector, bad): (Collector, _) = decoded(path)?;
    let side = collector
        .side(label, pid)
        .map_err(|e| Fail(2, anyhow::anyhow!("{e}")))?;
    Ok((side, bad))
}

/// The recording at `path` read by this nvprobe's model (decoded again,
/// or, recorded without --raw, its events as written), fed to an `R`; and
/// how many of its lines were not records (each named on stderr, the
/// first hundred).
pub(super) fn decoded<R: Records>(path: &Path) -> Result<(R, u64), Fail> {
    let name = path.display().to_string();
    let mut c = R::default();
    let done = replay::replay(open(path)?, None, |t, item| c.item(t, &item))
        .map_err(|e| Fail(1, anyhow::anyhow!("reading {name}: {e}")))?;
    nvprobe::pipeline::replay::say_bad_lines(&name, &done, done.bad.len());
    Ok((c, done.bad_count + done.undecodable))
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
    let (side_a, bad_a) = load(&a.a, "A", pa)?;
    let (side_b, bad_b) = load(&a.b, "B", pb)?;
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
            d.text(a.all)
        )
    };
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
        r => r.map_err(|e| Fail(1, e.into()))?,
    }
    // As `decode` and `export`: the comparison of what could be read is
    // written, the lines that could not are an error.
    super::common::undecodable(&[
        (&a.a.display().to_string(), bad_a),
        (&a.b.display().to_string(), bad_b),
    ])?;
    // As diff(1): 1 when they differ, so a script can test it.
    if d.differs() {
        return Err(Fail(
            super::common::exit::RUNTIME,
            anyhow::anyhow!("the two start-ups differ (first divergence above)"),
        ));
    }
    Ok(())
}
