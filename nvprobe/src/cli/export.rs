//! `nvprobe export --perfetto REC -o FILE`: a recording as a Perfetto trace
//! (nvprobe::perfetto), for ui.perfetto.dev or trace processor.

use std::{
    io::{self, IsTerminal as _, Write},
    path::{Path, PathBuf},
};

use clap::Args;
use nvprobe::output::{OutputSpec, parse_mode};

use super::common::{Fail, exit};

#[derive(Args)]
pub struct ExportArgs {
    /// The recording (`nvprobe watch --json --raw`; without --raw it is
    /// read as recorded).
    pub file: PathBuf,
    /// Write Perfetto's native protobuf trace format (TrackEvent): the
    /// only format, and the default (the flag may be left out).
    #[arg(long)]
    pub perfetto: bool,
    /// The trace file to create (0600, never through a link; an existing
    /// file only with --force), or - for standard output (a pipe or a
    /// file, not a terminal: the trace is binary).
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
    let to_stdout = a.output == Path::new("-");
    if to_stdout && io::stdout().is_terminal() {
        return Err(Fail(
            exit::USAGE,
            anyhow::anyhow!(
                "-o -: standard output is a terminal, and a Perfetto trace is binary: redirect it (-o - > run.pftrace, or into a pipe) or give -o FILE"
            ),
        ));
    }
    let spec = OutputSpec {
        path: (!to_stdout).then(|| a.output.clone()),
        force: a.force,
        mode: a.output_mode,
        input,
    };
    spec.check().map_err(|e| Fail(exit::USAGE, e))?;
    let (exporter, bad): (nvprobe::perfetto::Exporter, _) = super::diff::decoded(&a.file)?;
    let opened = spec.open().map_err(|e| Fail(exit::USAGE, e))?;
    let target = if to_stdout {
        "standard output".to_owned()
    } else {
        a.output.display().to_string()
    };
    let mut w = io::BufWriter::new(opened.writer);
    // The io::Error is kept: a reader that went away (`-o - | head -c1`)
    // ends export quietly (main).
    let s = exporter
        .finish(&mut w)
        .and_then(|s| w.flush().map(|()| s))
        .map_err(|e| {
            Fail(
                exit::RUNTIME,
                anyhow::Error::new(e).context(format!("writing {target}")),
            )
        })?;
    let _ = writeln!(
        io::stderr(),
        "nvprobe: {target}: {} processes, {} threads, {} GPU{}, {} slices, {} instants{} (open it in ui.perfetto.dev)",
        s.processes,
        s.threads,
        s.gpus,
        if s.gpus == 1 { "" } else { "s" },
        s.slices,
        s.instants,
        if s.cut > 0 {
            format!("; {} events past the first 2,000,000 not exported", s.cut)
        } else {
            String::new()
        }
    );
    // As `decode`: what could be read is written, the rest is an error.
    super::common::undecodable(&[(&name, bad)])
}
