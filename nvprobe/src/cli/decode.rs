//! `nvprobe decode`: a `watch --json --raw` recording through the same
//! pipeline as a live run.

use std::{
    fs::{self, File},
    io::{self, BufReader, Read, Write as _},
    os::{fd::AsFd, unix::fs::FileTypeExt},
    path::{Path, PathBuf},
};

use clap::Args;
use nvprobe::output::{Clock, Output, WriteFailed, file_identity};
use nvprobe::pipeline::{PipeOpts, replay};
use nvprobe_model::replay::{Line, MAX_LINE};

use super::common::{Fail, OutputArgs, exit, output_spec};

const OUTPUT_HELP: &str = "Write to FILE instead of stdout. FILE is created (mode 0600, see --output-mode) once the recording has been opened and its first lines are records (nothing is created for a file that is not a recording); an existing file is refused unless --force is given, a symbolic link and the recording itself always";

const DRIVER_VERSION_HELP: &str = "Decode struct layouts as for this driver version instead of the one the recording was made with (its start record's: the driver where it was recorded; without a start record, or where that driver was unknown, the default layouts, marked \"assumed\")";

#[derive(Args)]
// OutputArgs' texts are watch's: what -o and --driver-version mean when a
// recording is replayed.
#[command(
    mut_arg("output", |a| a.help(OUTPUT_HELP)),
    mut_arg("driver_version", |a| a.help(DRIVER_VERSION_HELP))
)]
pub struct DecodeArgs {
    /// NDJSON file written by `nvprobe watch --json --raw`: a regular file,
    /// a pipe or FIFO (read as a stream, e.g. `<(zcat rec.ndjson.gz)`), or
    /// "-" for stdin. Lines longer than 1 MiB and lines that are not
    /// nvprobe records are counted and named on stderr (exit 2), the rest
    /// is decoded. A file with no record at all (watch's text output, an
    /// OTLP export, a compressed or binary file) is refused at once, saying
    /// what it looks like (exit 2).
    pub file: PathBuf,
    /// Print only each process's start-up verdict (its cuInit, and a first context that came after it) and the summary.
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
        exit::USAGE,
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
            .map_err(|e| {
                Fail(
                    exit::USAGE,
                    anyhow::anyhow!("cannot read standard input: {e}"),
                )
            })?;
        let m = f.metadata().map_err(|e| {
            Fail(
                exit::USAGE,
                anyhow::anyhow!("cannot read standard input: {e}"),
            )
        })?;
        check_kind("standard input", m.file_type(), true)?;
        let id = m.is_file().then(|| file_identity(&f)).flatten();
        return Ok((Box::new(f), id));
    }
    let cannot = |e: io::Error| Fail(exit::USAGE, anyhow::anyhow!("cannot open {name}: {e}"));
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
    let spec = output_spec(&a.out, id)?;
    // Its first lines are records: only now is the output created.
    let input = recording(input, &a.file)?;
    let format = a.out.format();
    let out = Output::opened(
        spec.open().map_err(|e| Fail(exit::USAGE, e))?,
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
        Err(e) => return Err(Fail(exit::RUNTIME, e)),
    };
    if r.without_raw > 0 {
        let _ = writeln!(
            io::stderr(),
            "nvprobe: note: {} event(s) had no raw record and were read as recorded (decoded by the nvprobe that recorded them); record with `watch --json --raw` to have each decoded again by this one",
            r.without_raw
        );
    }
    if let Some(level) = &r.as_recorded {
        let _ = writeln!(
            io::stderr(),
            "nvprobe: note: recorded with `--events {level}`: the kernel events its start-up verdicts rest on were counted, not written, so the verdicts are shown as the live run made them, not made again"
        );
    }
    if r.unknown_types > 0 {
        let _ = writeln!(
            io::stderr(),
            "nvprobe: {} record(s) of a type this nvprobe does not know (from a newer nvprobe?) were skipped",
            r.unknown_types
        );
    }
    super::common::undecodable(&[(&name, r.bad_lines)])
}

/// How much of an input is looked at for a first record: four of
/// nvprobe's longest lines ([`MAX_LINE`]), so that a record that begins
/// in the first three ends inside it.
const HEAD: usize = 4 * MAX_LINE;

/// How a recording is made, said whenever an input is not one.
const RECORD_HOW: &str = "decode reads what `nvprobe watch --json` writes (NDJSON, one record per line; with --raw its kernel records are decoded again): record with `sudo nvprobe watch --json --raw -o rec.ndjson`, then `nvprobe decode rec.ndjson`";

/// One line of an input's head, as decode would take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LineKind {
    Blank,
    /// A record this nvprobe reads (the start record, a kernel record, a
    /// record it makes again, …).
    Record,
    /// An nvprobe record of a type this nvprobe does not know.
    Newer,
    /// Not an nvprobe record.
    Bad,
}

fn line_kind(line: &[u8]) -> LineKind {
    let Ok(text) = std::str::from_utf8(line) else {
        return LineKind::Bad;
    };
    match Line::parse(text) {
        Line::Blank => LineKind::Blank,
        // A record of a type nvprobe writes that does not read (a raw field
        // cut short, a field edited): a damaged recording, whose lines the
        // replay names one by one.
        Line::Bad(_) if damaged_record(text) => LineKind::Record,
        Line::Bad(_) => LineKind::Bad,
        Line::Newer => LineKind::Newer,
        _ => LineKind::Record,
    }
}

/// A JSON object whose "type" is one of nvprobe's record types.
fn damaged_record(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| {
            v.get("type")?
                .as_str()
                .map(|t| nvprobe_model::render::schema::record_types().contains(t))
        })
        .unwrap_or(false)
}

/// The compressed formats a recording is often kept in, by their magic
/// bytes: (format, the tool that writes it out).
fn compression(head: &[u8]) -> Option<(&'static str, &'static str)> {
    #[rustfmt::skip]
    const MAGIC: &[(&[u8], &str, &str)] = &[
        (&[0x1f, 0x8b], "gzip", "zcat"),
        (&[0x28, 0xb5, 0x2f, 0xfd], "zstd", "zstdcat"),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0x00], "xz", "xzcat"),
        (b"BZh", "bzip2", "bzcat"),
    ];
    MAGIC
        .iter()
        .find(|(m, _, _)| head.starts_with(m))
        .map(|&(_, f, c)| (f, c))
}

/// What an input that holds no nvprobe record looks like, from its head.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Looks {
    Empty,
    Compressed(&'static str, &'static str),
    /// Binary data: the offset of a NUL byte, or of bytes that are not UTF-8.
    Binary(usize, &'static str),
    /// `nvprobe watch`'s text output.
    WatchText,
    /// `nvprobe doctor`'s text output.
    DoctorText,
    /// `nvprobe diff`'s text output.
    DiffText,
    /// `nvprobe hooks`' text output.
    HooksText,
    /// Prometheus metrics (`--metrics`' /metrics).
    Metrics,
    /// `--format otlp-json`.
    Otlp,
    /// One JSON document of another subcommand (`nvprobe doctor --json`).
    Document(&'static str),
    /// nvprobe records, all of types this nvprobe does not know.
    Newer,
    Json,
    Text,
}

/// A line of `watch`'s text output: "03:54:39.596297 python3[538] …", a
/// verdict ("== python3[440] …"), the summary's rule, the banner.
fn watch_text_line(l: &str) -> bool {
    let b = l.as_bytes();
    let clock = b.len() > 16
        && b[..15].iter().enumerate().all(|(i, c)| match i {
            2 | 5 => *c == b':',
            8 => *c == b'.',
            _ => c.is_ascii_digit(),
        })
        && b[15] == b' ';
    clock
        || (l.starts_with("== ") && l.contains('['))
        || l.starts_with("--- nvprobe summary")
        || (l.starts_with("nvprobe ") && l.contains(": tracing"))
}

/// A line of `doctor`'s text output: "ok   tracing lockdown …".
fn doctor_text_line(l: &str) -> bool {
    let mut w = l.split_whitespace();
    matches!(w.next(), Some("ok" | "WARN" | "FAIL"))
        && matches!(
            w.next(),
            Some("tracing" | "driver" | "nodes" | "libraries" | "container" | "kernel_log")
        )
}

fn looks(head: &[u8], newer: u64) -> Looks {
    if let Some((f, c)) = compression(head) {
        return Looks::Compressed(f, c);
    }
    if head.iter().all(u8::is_ascii_whitespace) {
        return Looks::Empty;
    }
    let sample = &head[..head.len().min(64 << 10)];
    if let Some(at) = sample.iter().position(|&b| b == 0) {
        return Looks::Binary(at, "a NUL byte");
    }
    if let Err(e) = std::str::from_utf8(sample)
        // Not a character cut at the sample's end.
        && e.error_len().is_some()
    {
        return Looks::Binary(e.valid_up_to(), "bytes that are not UTF-8");
    }
    let text = String::from_utf8_lossy(head);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(1000)
        .collect();
    let first = lines.first().copied().unwrap_or("");
    let json = serde_json::from_str::<serde_json::Value>(first);
    if let Ok(serde_json::Value::Array(_)) = json {
        return Looks::Json;
    }
    if let Ok(serde_json::Value::Object(o)) = json {
        return if o.contains_key("resourceLogs") {
            Looks::Otlp
        } else if newer > 0 {
            match o.get("type").and_then(|t| t.as_str()) {
                Some("doctor") => Looks::Document("nvprobe doctor --json"),
                Some("hooks") => Looks::Document("nvprobe hooks --json"),
                _ => Looks::Newer,
            }
        } else {
            Looks::Json
        };
    }
    if first.starts_with("A = ") && lines.get(1).is_some_and(|l| l.starts_with("B = ")) {
        Looks::DiffText
    } else if lines.iter().any(|l| {
        l.starts_with("module nvidia") || (l.contains(" kallsyms:") && l.contains(" btf:"))
    }) {
        Looks::HooksText
    } else if first.starts_with("# HELP ") || first.starts_with("# TYPE ") {
        Looks::Metrics
    } else if lines.iter().any(|l| watch_text_line(l)) {
        Looks::WatchText
    } else if lines.iter().any(|l| doctor_text_line(l)) {
        Looks::DoctorText
    } else {
        Looks::Text
    }
}

/// The refusal of an input with no record: what it looks like and what
/// decode needs. LINES: the lines looked at (not blank); WHOLE: the head
/// was the whole input.
fn not_a_recording(name: &str, file: &str, looks: &Looks, lines: u64, whole: bool) -> Fail {
    let n = |what: &str| {
        let what = if lines == 1 {
            what
        } else {
            &format!("{what}s")
        };
        if whole {
            format!("{lines} {what}")
        } else {
            format!("{lines} {what} in its first {} MiB", HEAD >> 20)
        }
    };
    let (what, todo) = match looks {
        Looks::Empty => ("it is empty".to_owned(), RECORD_HOW.to_owned()),
        Looks::Compressed(f, c) => (
            format!("it is {f}-compressed"),
            format!(
                "decompress it as it is read: `{c} {file} | nvprobe decode -` (or `nvprobe decode <({c} {file})`)"
            ),
        ),
        Looks::Binary(at, what) => (
            format!("it is not text (binary data: {what} at byte {at})"),
            RECORD_HOW.to_owned(),
        ),
        Looks::WatchText => (
            format!(
                "it is nvprobe's text output (`nvprobe watch` without --json; {}), which is written for people and cannot be decoded again",
                n("line")
            ),
            RECORD_HOW.to_owned(),
        ),
        Looks::DoctorText => (
            format!("it is the text output of `nvprobe doctor` ({})", n("line")),
            RECORD_HOW.to_owned(),
        ),
        Looks::DiffText => (
            format!("it is the output of `nvprobe diff` ({})", n("line")),
            RECORD_HOW.to_owned(),
        ),
        Looks::HooksText => (
            format!("it is the output of `nvprobe hooks` ({})", n("line")),
            RECORD_HOW.to_owned(),
        ),
        Looks::Metrics => (
            format!(
                "it is Prometheus metrics (`watch --metrics`' /metrics; {})",
                n("line")
            ),
            RECORD_HOW.to_owned(),
        ),
        Looks::Otlp => (
            format!(
                "it is an OTLP/JSON export (`--format otlp-json`; {} of LogsData), which holds decoded records for a log pipeline, not the records decode reads",
                n("line")
            ),
            RECORD_HOW.to_owned(),
        ),
        Looks::Document(cmd) => (
            format!("it is the output of `{cmd}`"),
            RECORD_HOW.to_owned(),
        ),
        Looks::Newer => (
            format!(
                "its records ({}) are all of types this nvprobe does not know (a newer nvprobe's?)",
                n("line")
            ),
            "decode it with the nvprobe that made it".to_owned(),
        ),
        Looks::Json => (
            format!(
                "it is JSON ({}), but not nvprobe records (each an object with \"v\" and \"type\", as `nvprobe schema` describes)",
                n("line")
            ),
            RECORD_HOW.to_owned(),
        ),
        Looks::Text => (
            format!(
                "it is text ({}), not nvprobe records (one JSON object per line)",
                n("line")
            ),
            RECORD_HOW.to_owned(),
        ),
    };
    Fail(
        exit::USAGE,
        anyhow::anyhow!("{name} is not an nvprobe recording: {what}; {todo}"),
    )
}

/// INPUT once its head has shown a record: the head given back in front of
/// the rest, byte for byte (bad lines among records are the replay's to
/// name and count). An input whose head has none (the whole input, or its
/// first [`HEAD`] bytes) is refused with what it looks like, said once, in
/// place of a complaint per line. Reading stops at the first record, so a
/// live pipe (`watch --json --raw | decode -`) is decoded as it comes.
fn recording(mut input: Box<dyn Read>, path: &Path) -> Result<Box<dyn Read>, Fail> {
    let (name, file) = if path.as_os_str() == "-" {
        ("standard input".to_owned(), "FILE".to_owned())
    } else {
        (path.display().to_string(), path.display().to_string())
    };
    let mut head: Vec<u8> = Vec::new();
    // Bytes of `head` whose lines were looked at; lines (not blank) seen.
    let (mut seen, mut lines, mut newer) = (0usize, 0u64, 0u64);
    let mut eof = false;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        // A compressed file: said from its magic, before its bytes are
        // taken for lines.
        if (head.len() >= 6 || eof) && compression(&head).is_some() {
            break;
        }
        while seen < head.len() {
            let end = match head[seen..].iter().position(|&b| b == b'\n') {
                Some(n) => seen + n,
                // The last line, without its newline.
                None if eof => head.len(),
                None => break,
            };
            let kind = line_kind(&head[seen..end]);
            seen = (end + 1).min(head.len());
            match kind {
                LineKind::Record => {
                    return Ok(Box::new(io::Cursor::new(head).chain(input)));
                }
                LineKind::Blank => {}
                LineKind::Newer => {
                    lines += 1;
                    newer += 1;
                }
                LineKind::Bad => lines += 1,
            }
        }
        if eof || head.len() >= HEAD {
            break;
        }
        match input.read(&mut buf) {
            Ok(0) => eof = true,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(Fail(exit::RUNTIME, anyhow::anyhow!("reading {name}: {e}")));
            }
        }
    }
    Err(not_a_recording(
        &name,
        &file,
        &looks(&head, newer),
        lines,
        eof,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(bytes: &[u8]) -> String {
        match recording(Box::new(io::Cursor::new(bytes.to_vec())), Path::new("rec")) {
            Ok(_) => panic!("taken for a recording"),
            Err(Fail(code, e)) => {
                assert_eq!(code, exit::USAGE);
                e.to_string()
            }
        }
    }

    #[test]
    fn what_an_input_with_no_record_looks_like() {
        let e = refusal(b"");
        assert!(e.starts_with("rec is not an nvprobe recording: it is empty; decode reads what `nvprobe watch --json` writes"), "{e}");
        // Each input, and what the refusal says it is (the magic decides,
        // whatever follows it).
        let cases: &[(&[u8], &str)] = &[
            (
                b"\x1f\x8b\x08\x00\x00\x00\n{\"v\":1,\"type\":\"cuinit\",\"pid\":1}\n",
                "it is gzip-compressed; decompress it as it is read: `zcat rec | nvprobe decode -`",
            ),
            (b"abc\n\x00\x01\n", "it is not text (binary data: a NUL byte at byte 4)"),
            (b"ok\n\xff\xfe\n", "bytes that are not UTF-8 at byte 3"),
            (
                b"03:54:39.596297 python3[538] close(8) = 0 <1.0\xc2\xb5s>\n\n--- nvprobe summary: 1 events ---\n",
                "it is nvprobe's text output (`nvprobe watch` without --json; 2 lines)",
            ),
            (
                b"{\"resourceLogs\":[]}\n{\"resourceLogs\":[]}\n",
                "it is an OTLP/JSON export (`--format otlp-json`; 2 lines of LogsData)",
            ),
            (
                b"{\"v\":1,\"type\":\"doctor\",\"checks\":[]}\n",
                "it is the output of `nvprobe doctor --json`; decode reads",
            ),
            (
                b"{\"v\":1,\"type\":\"from_the_future\"}\n",
                "are all of types this nvprobe does not know",
            ),
            (b"[1,2]\n", "it is JSON (1 line), but not nvprobe records"),
            (
                b"hello\nworld",
                "it is text (2 lines), not nvprobe records (one JSON object per line)",
            ),
            (
                b"# HELP nvprobe_verdicts_total x\n# TYPE nvprobe_verdicts_total counter\n",
                "it is Prometheus metrics (`watch --metrics`' /metrics; 2 lines)",
            ),
            (
                b"rm_ioctl                         nvidia     kallsyms:yes  btf:not in BTF\n",
                "it is the output of `nvprobe hooks` (1 line)",
            ),
            (
                b"ok   tracing bpf  the bpf() system call works\n",
                "the text output of `nvprobe doctor` (1 line)",
            ),
        ];
        for (input, says) in cases {
            let e = refusal(input);
            assert!(e.contains(says), "{e}");
        }
        let e = refusal(b"{\"v\":1,\"type\":\"from_the_future\"}\n");
        assert!(
            e.ends_with("decode it with the nvprobe that made it"),
            "{e}"
        );
    }

    /// Past the head, nothing more is read: the refusal says how much was
    /// looked at.
    #[test]
    fn a_long_input_with_no_record_is_judged_by_its_head() {
        let mut text = Vec::new();
        while text.len() < HEAD + 10 {
            text.extend_from_slice(b"12:00:00.000001 a[1] close(3) = 0 <1.0us>\n");
        }
        let e = refusal(&text);
        assert!(
            e.contains("lines in its first 4 MiB), which is written for people"),
            "{e}"
        );
    }

    /// Bad lines before the first record: given back whole, for the replay
    /// to name and count.
    #[test]
    fn the_head_is_given_back_byte_for_byte() {
        // A damaged record is a recording's: its lines are the replay's.
        let damaged = b"not json\n{\"type\":\"ioctl\",\"raw\":\"zz\"}\n";
        assert!(recording(Box::new(io::Cursor::new(damaged.to_vec())), Path::new("x")).is_ok());
        let mut text = b"junk\n\n".to_vec();
        text.extend_from_slice(b"{\"v\":1,\"type\":\"cuinit\",\"pid\":1}\nrest\n");
        let mut r = recording(Box::new(io::Cursor::new(text.clone())), Path::new("x"))
            .unwrap_or_else(|Fail(_, e)| panic!("{e}"));
        let mut back = Vec::new();
        r.read_to_end(&mut back).expect("read");
        assert_eq!(back, text);
    }
}
