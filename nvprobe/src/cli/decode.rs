//! `nvprobe decode`: a `watch --json --raw` recording through the same
//! pipeline as a live run.

use std::{
    fs::File,
    io::{self, BufRead, BufReader},
    path::PathBuf,
};

use anyhow::Context as _;
use clap::Args;
use nvprobe::{
    output::{Clock, Format, Output},
    pipeline::{PipeOpts, replay},
};

use super::{Fail, OutputArgs, open_output};

#[derive(Args)]
pub struct DecodeArgs {
    /// NDJSON file written by `nvprobe watch --json --raw` ("-" for stdin).
    pub file: PathBuf,
    /// Print only each process's cuInit verdict and the summary.
    #[arg(long)]
    pub summary_only: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn run(a: DecodeArgs) -> Result<(), Fail> {
    let name = a.file.display().to_string();
    let reader: Box<dyn BufRead> = if a.file.as_os_str() == "-" {
        Box::new(BufReader::new(io::stdin()))
    } else {
        Box::new(BufReader::new(
            File::open(&a.file)
                .with_context(|| format!("cannot open {name}"))
                .map_err(|e| Fail(2, e))?,
        ))
    };
    let format = if a.out.json {
        Format::Json
    } else {
        Format::Text
    };
    let out = Output::new(
        open_output(&a.out.output).map_err(|e| Fail(2, e))?,
        format,
        Clock::fixed(0),
    );
    let opts = PipeOpts {
        workers: 1,
        summary_only: a.summary_only,
        host_facts: false,
    };
    let r = replay::run(reader, &name, out, a.out.driver_version, &opts)?;
    if r.without_raw > 0 {
        eprintln!(
            "nvprobe: {} event(s) had no raw record and were skipped: record with `watch --json --raw` to decode again",
            r.without_raw
        );
    }
    if r.bad_lines > 0 {
        return Err(Fail(
            2,
            anyhow::anyhow!("{} line(s) of {name} could not be decoded", r.bad_lines),
        ));
    }
    Ok(())
}
