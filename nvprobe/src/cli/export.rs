//! `nvprobe export --perfetto REC -o FILE`: a recording as a Perfetto trace
//! (nvprobe::perfetto), for ui.perfetto.dev or trace processor.

use std::{io::Write, path::PathBuf};

use clap::Args;
use nvprobe::output::{OutputSpec, parse_mode};

use super::Fail;

#[derive(Args)]
pub struct ExportArgs {
    /// The recording (`nvprobe watch --json --raw`; without --raw it is
    /// read as recorded).
    pub file: PathBuf,
    /// Write Perfetto's native protobuf trace format (TrackEvent): the only
    /// format for now.
    #[arg(long, required = true)]
    pub perfetto: bool,
    /// The trace file to create (0600, never through a link; an existing
    /// file only with --force).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Overwrite FILE if it exists (a regular file).
    #[arg(long)]
    pub force: bool,
    /// The permission bits of the file written, in octal.
    #[arg(long, value_name = "MODE", default_value = "600", value_parser = parse_mode)]
    pub output_mode: u32,
}

pub fn run(a: ExportArgs) -> Result<(), Fail> {
    let name = a.file.display().to_string();
    let input = {
        let (_, id) = super::decode::open_input(&a.file, &name)?;
        id
    };
    let spec = OutputSpec {
        path: Some(a.output.clone()),
        force: a.force,
        mode: a.output_mode,
        input,
    };
    spec.check().map_err(|e| Fail(2, e))?;
    let (exporter, bad): (nvprobe::perfetto::Exporter, _) = super::diff::decoded(&a.file)?;
    let opened = spec.open().map_err(|e| Fail(2, e))?;
    let mut w = std::io::BufWriter::new(opened.writer);
    let s = exporter
        .finish(&mut w)
        .and_then(|s| w.flush().map(|()| s))
        .map_err(|e| Fail(1, anyhow::anyhow!("writing {}: {e}", a.output.display())))?;
    eprintln!(
        "nvprobe: {}: {} processes, {} threads, {} GPUs, {} slices, {} instants{} (open it in ui.perfetto.dev)",
        a.output.display(),
        s.processes,
        s.threads,
        s.gpus,
        s.slices,
        s.instants,
        if s.cut > 0 {
            format!("; {} events past the first 2,000,000 not exported", s.cut)
        } else {
            String::new()
        }
    );
    // As `decode`: what could be read is written, the rest is an error.
    super::undecodable(&[(&name, bad)])
}
