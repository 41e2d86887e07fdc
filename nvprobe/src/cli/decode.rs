//! `nvprobe decode`: a `watch --json --raw` recording through the same
//! pipeline as a live run.

use std::{
    fs::{self, File},
    io::{self, BufReader, Read},
    os::{fd::AsFd, unix::fs::FileTypeExt},
    path::{Path, PathBuf},
};

use clap::Args;
use nvprobe::output::{Clock, Output, WriteFailed, file_identity};
use nvprobe::pipeline::{PipeOpts, replay};

use super::{Fail, OutputArgs, output_spec};

#[derive(Args)]
pub struct DecodeArgs {
    /// NDJSON file written by `nvprobe watch --json --raw`: a regular file,
    /// a pipe or FIFO (read as a stream, e.g. `<(zcat rec.ndjson.gz)`), or
    /// "-" for stdin. Lines longer than 1 MiB and lines that are not
    /// nvprobe records are counted and named on stderr (exit 2), the rest
    /// is decoded.
    pub file: PathBuf,
    /// Print only each process's cuInit verdict and the summary.
    #[arg(long)]
    pub summary_only: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// What an input must be: a file, a pipe, a FIFO (not a directory, a
/// device or a socket: nothing there is a recording). Standard input may
/// also be a terminal or a socket, not a directory.
fn check_kind(what: &str, ft: fs::FileType, stdin: bool) -> Result<(), Fail> {
    let why = if ft.is_dir() {
        "is a directory"
    } else if stdin {
        return Ok(());
    } else if ft.is_char_device() || ft.is_block_device() {
        "is a device"
    } else if ft.is_socket() {
        "is a socket"
    } else {
        return Ok(());
    };
    Err(Fail(
        2,
        anyhow::anyhow!(
            "{what} {why}, not a recording: give a file written by `nvprobe watch --json --raw` (or a pipe, or - for stdin)"
        ),
    ))
}

/// The recording, and its (st_dev, st_ino) when it is a file (which the
/// output must never be).
type Input = (Box<dyn Read>, Option<(u64, u64)>);

pub(super) fn open_input(path: &Path, name: &str) -> Result<Input, Fail> {
    if path.as_os_str() == "-" {
        let f = io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map(File::from)
            .map_err(|e| Fail(2, anyhow::anyhow!("cannot read standard input: {e}")))?;
        let m = f
            .metadata()
            .map_err(|e| Fail(2, anyhow::anyhow!("cannot read standard input: {e}")))?;
        check_kind("standard input", m.file_type(), true)?;
        let id = m.is_file().then(|| file_identity(&f)).flatten();
        return Ok((Box::new(f), id));
    }
    let cannot = |e: io::Error| Fail(2, anyhow::anyhow!("cannot open {name}: {e}"));
    // Looked at before it is opened (opening a device can do things).
    check_kind(name, fs::metadata(path).map_err(cannot)?.file_type(), false)?;
    let f = File::open(path).map_err(cannot)?;
    let m = f.metadata().map_err(cannot)?;
    check_kind(name, m.file_type(), false)?;
    let id = m.is_file().then(|| file_identity(&f)).flatten();
    Ok((Box::new(f), id))
}

pub fn run(a: DecodeArgs) -> Result<(), Fail> {
    let name = a.file.display().to_string();
    let (input, id) = open_input(&a.file, &name)?;
    // The input is open and may be read: only now is the output created.
    let spec = output_spec(&a.out, id)?;
    let format = a.out.format();
    let out = Output::opened(
        spec.open().map_err(|e| Fail(2, e))?,
        format,
        Clock::fixed(0),
    );
    let opts = PipeOpts {
        workers: 1,
        summary_only: a.summary_only,
        level: a.out.events,
        observers: Vec::new(),
        host_facts: false,
        all_processes: a.out.all_processes,
    };
    let reader = BufReader::with_capacity(1 << 16, input);
    let r = match replay::run(reader, &name, out, a.out.driver_version, &opts) {
        Ok(r) => r,
        // The reader went away (`nvprobe decode … | head`): a normal end.
        Err(e)
            if e.downcast_ref::<WriteFailed>()
                .is_some_and(WriteFailed::is_broken_pipe) =>
        {
            return Ok(());
        }
        Err(e) => return Err(Fail(1, e)),
    };
    if r.without_raw > 0 {
        eprintln!(
            "nvprobe: {} event(s) had no raw record and were skipped: record with `watch --json --raw` to decode again",
            r.without_raw
        );
    }
    if r.unknown_types > 0 {
        eprintln!(
            "nvprobe: {} record(s) of a type this nvprobe does not know (from a newer nvprobe?) were skipped",
            r.unknown_types
        );
    }
    super::undecodable(&[(&name, r.bad_lines)])
}
