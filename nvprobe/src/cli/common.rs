//! What every subcommand shares: the exit codes ([`Fail`], [`exit`],
//! [`EXIT_CODES`], which every `--help` shows), [`print`] for standard
//! output (a reader that went away, `nvprobe schema | head -1`, ends
//! nvprobe quietly), the output flags and the parsers of common values.

use std::{
    io::{self, Write as _},
    path::{Path, PathBuf},
};

use clap::{Args, builder::TypedValueParser as _};
use nvprobe::{
    attach::StartError,
    decode::version::{DriverInfo, DriverVersion, VersionCtx},
    output::{Format, Level, OutputSpec, WriteFailed, parse_mode},
};

#[derive(Args)]
pub struct OutputArgs {
    /// NDJSON output (schema: `nvprobe schema`) instead of text: the same
    /// as --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// text (for people), json (NDJSON, schema v1: `nvprobe schema`) or
    /// otlp-json (one OTLP/JSON LogsData per line, for an OpenTelemetry
    /// collector's otlpjsonfile receiver; docs/LOG-PIPELINES.md).
    #[arg(long, value_name = "FORMAT", value_parser = parse_format())]
    pub format: Option<Format>,
    /// What is written: all (every call), failures (all but successful
    /// calls) or verdicts (start-up verdicts, stalls, signals that hit
    /// NVIDIA calls, failed calls, lost counts, the summary; in text, a
    /// start-up's failed system calls and the loader's lookups are in its
    /// verdict only). Everything is still counted in the summary.
    #[arg(long, value_name = "LEVEL", default_value = "all", value_parser = parse_level())]
    pub events: Level,
    /// Text: the fork, exec, exit, signal and failed-call lines of every
    /// process followed. By default text shows them for the processes that made an
    /// NVIDIA call, and for their children until they exec; the summary
    /// counts the lines left out. JSON and OTLP always hold every record.
    #[arg(long)]
    pub all_processes: bool,
    /// Write to FILE instead of stdout (`-`: stdout). FILE is created (mode
    /// 0600, see --output-mode) once start-up has succeeded; an existing
    /// file is refused unless --force is given, a symbolic link always.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// With -o: overwrite FILE if it exists (a regular file).
    #[arg(long, requires = "output")]
    pub force: bool,
    /// With -o: the permission bits of the file written, in octal.
    #[arg(long, value_name = "MODE", default_value = "600", value_parser = parse_mode, requires = "output")]
    pub output_mode: u32,
    /// Decode struct layouts as for this driver version (default: the
    /// running driver's, from /proc/driver/nvidia/version).
    #[arg(long, value_name = "VERSION")]
    pub driver_version: Option<DriverVersion>,
}

impl OutputArgs {
    pub fn format(&self) -> Format {
        match (self.json, self.format) {
            (_, Some(f)) => f,
            (true, None) => Format::Json,
            (false, None) => Format::Text,
        }
    }
}

/// The names `--format` takes, as clap lists them (in errors, and to the
/// shell completions, which then offer them rather than file names).
fn parse_format() -> impl clap::builder::TypedValueParser<Value = Format> {
    clap::builder::PossibleValuesParser::new(Format::NAMES)
        .map(|s| s.parse::<Format>().unwrap_or(Format::Text))
}

/// The names `--events` takes (see [`parse_format`]).
fn parse_level() -> impl clap::builder::TypedValueParser<Value = Level> {
    clap::builder::PossibleValuesParser::new(Level::NAMES)
        .map(|s| s.parse::<Level>().unwrap_or_default())
}

pub fn parse_ringbuf(s: &str) -> Result<u32, String> {
    let v: u32 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a byte count"))?;
    let page = 4096;
    if v < page || !v.is_power_of_two() {
        return Err(format!(
            "{v} must be a power of two of at least {page} (e.g. 16777216)"
        ));
    }
    Ok(v)
}

/// `nvprobe schema`'s flags.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SchemaArgs {
    /// The schema of `doctor --json`'s one document instead of the NDJSON
    /// records'.
    #[arg(long)]
    pub doctor: bool,
}

/// nvprobe's exit codes. Their meanings are [`EXIT_CODES`].
pub mod exit {
    pub const OK: u8 = 0;
    pub const RUNTIME: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const KERNEL: u8 = 3;
    pub const DENIED: u8 = 4;
    /// `doctor`: a check said FAIL (the host cannot run CUDA as it is),
    /// told apart from a runtime error.
    pub const CHECK_FAILED: u8 = 5;
}

/// One exit code and what it means, for `commands` (every subcommand when
/// empty).
pub struct ExitRow {
    pub code: u8,
    pub meaning: &'static str,
    pub commands: &'static [&'static str],
}

/// What each exit code means: the one table, shown by every `--help`
/// ([`exit_help`]).
#[rustfmt::skip]
pub const EXIT_CODES: &[ExitRow] = &[
    ExitRow { code: exit::OK, commands: &[], meaning: "success; also when the reader of nvprobe's output goes away (`nvprobe watch | head`, or `2>&1 | head`): nvprobe stops quietly (watch and top stop tracing; their probes go with them)" },
    ExitRow { code: exit::RUNTIME, commands: &[], meaning: "runtime error (a write that failed other than a closed pipe)" },
    ExitRow { code: exit::RUNTIME, commands: &["diff"], meaning: "the two start-ups differ, as diff(1) (0: they made the same calls with the same results)" },
    ExitRow { code: exit::USAGE, commands: &[], meaning: "bad usage or input: an unknown flag or value, a file that cannot be read or written" },
    ExitRow { code: exit::USAGE, commands: &["watch", "top"], meaning: "a --device file that is missing, a --pid of no running process" },
    ExitRow { code: exit::USAGE, commands: &["decode", "diff", "export"], meaning: "a file that is not a recording, or lines of it that could not be decoded (the rest is still decoded)" },
    ExitRow { code: exit::KERNEL, commands: &["watch", "top"], meaning: "the kernel lacks something nvprobe needs (syscall tracepoints, BTF, ring buffer, a tracefs that cannot be mounted)" },
    ExitRow { code: exit::DENIED, commands: &["watch", "top"], meaning: "not permitted (not root, bpf() refused)" },
    ExitRow { code: exit::CHECK_FAILED, commands: &["doctor"], meaning: "a check failed (FAIL; warnings alone exit 0)" },
];

/// A subcommand's examples: (command line, what it does). Each parses
/// (tests/tests/cli_help.rs runs them with --help).
pub fn examples(command: &str) -> &'static [(&'static str, &'static str)] {
    match command {
        "watch" => &[
            (
                "sudo nvprobe watch --events verdicts",
                "one verdict per CUDA start-up on this host, and its cause",
            ),
            (
                "sudo nvprobe watch --json --raw -o run.ndjson",
                "record everything, to decode, diff or export later",
            ),
            (
                "sudo nvprobe watch --comm python3 --hang-after 120",
                "python3 only; a call in flight for two minutes is a hang",
            ),
        ],
        "top" => &[("sudo nvprobe top", "the processes starting CUDA, live")],
        "decode" => &[
            ("nvprobe decode run.ndjson", "a recording as text"),
            (
                "nvprobe decode --events verdicts run.ndjson",
                "its verdicts only",
            ),
        ],
        "diff" => &[(
            "nvprobe diff good.ndjson bad.ndjson",
            "where two start-ups part (exit 1 when they differ)",
        )],
        "export" => &[(
            "nvprobe export run.ndjson -o run.perfetto-trace",
            "a Perfetto trace (open it at ui.perfetto.dev)",
        )],
        "schema" => &[
            ("nvprobe schema > nvprobe.schema.json", "the NDJSON schema"),
            (
                "nvprobe schema --doctor > doctor.schema.json",
                "the schema of doctor --json's document",
            ),
        ],
        "doctor" => &[
            (
                "sudo nvprobe doctor",
                "what on this host breaks CUDA or tracing",
            ),
            (
                "sudo nvprobe doctor --snapshot host.tar",
                "the same facts saved, to check elsewhere with --root",
            ),
        ],
        "hooks" => &[(
            "nvprobe hooks",
            "which driver functions this kernel can hook",
        )],
        "completions" => &[(
            "nvprobe completions bash > /etc/bash_completion.d/nvprobe",
            "bash completion",
        )],
        "manpage" => &[("nvprobe manpage watch | man -l -", "this page in man")],
        _ => &[],
    }
}

/// What a subcommand's --help ends with: its examples, then its exit codes.
pub fn after_help(command: &str) -> String {
    let ex = examples(command);
    let mut s = String::new();
    if !ex.is_empty() {
        s.push_str("Examples:\n");
        for (line, what) in ex {
            s.push_str(&format!("  {line}\n      {what}\n"));
        }
        s.push('\n');
    }
    s.push_str(&exit_help(Some(command)));
    s
}

/// The "Exit codes:" block of `--help`, a line per code: for one
/// subcommand, what the rows that apply to it say (joined by "; "); for
/// nvprobe itself (`None`), every row, those of some subcommands led by
/// their names.
pub fn exit_help(command: Option<&str>) -> String {
    let mut lines: Vec<(u8, String)> = Vec::new();
    for r in EXIT_CODES {
        let meaning = match command {
            Some(c) if r.commands.is_empty() || r.commands.contains(&c) => r.meaning.to_owned(),
            Some(_) => continue,
            None if r.commands.is_empty() => r.meaning.to_owned(),
            None => format!("{}: {}", r.commands.join(", "), r.meaning),
        };
        match lines.last_mut() {
            Some((code, text)) if *code == r.code => {
                text.push_str("; ");
                text.push_str(&meaning);
            }
            _ => lines.push((r.code, meaning)),
        }
    }
    let mut s = String::from("Exit codes:\n");
    for (code, text) in lines {
        s.push_str(&format!("  {code}  {text}\n"));
    }
    s
}

/// An error with the exit code it deserves.
#[derive(Debug)]
pub struct Fail(pub u8, pub anyhow::Error);

impl<E: Into<anyhow::Error>> From<E> for Fail {
    fn from(e: E) -> Self {
        Fail(exit::RUNTIME, e.into())
    }
}

/// Write TEXT to standard output, all of it, now. Every subcommand's own
/// output goes through here (`println!` panics on a closed pipe): a write
/// error keeps its `io::Error`, which `main` reads to end a closed pipe
/// quietly ([`closed_pipe`]).
pub fn print(text: &str) -> Result<(), Fail> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| {
            Fail(
                exit::RUNTIME,
                anyhow::Error::new(e).context("writing to standard output"),
            )
        })
}

/// Whether an error is the reader of nvprobe's output going away: an
/// `EPIPE` anywhere in its chain, as an `io::Error` or as the output's
/// [`WriteFailed`].
pub fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<WriteFailed>()
            .is_some_and(WriteFailed::is_broken_pipe)
            || c.downcast_ref::<io::Error>()
                .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

pub fn start_fail(e: StartError) -> Fail {
    let code = match e {
        StartError::NotRoot(_) | StartError::NoBpf(_) => exit::DENIED,
        StartError::NoRingBuf
        | StartError::Tracefs { .. }
        | StartError::NoSyscallTracepoints(_)
        | StartError::NoBtf { .. } => exit::KERNEL,
        StartError::Load(_) | StartError::Required { .. } => exit::KERNEL,
    };
    Fail(code, e.into())
}

/// How `decode`, `export` and `diff` end on a recording with lines that
/// could not be decoded (each named on stderr as it was met): exit 2,
/// once what the other lines hold has been written. BAD is (recording,
/// count) for each recording read.
pub fn undecodable(bad: &[(&str, u64)]) -> Result<(), Fail> {
    let parts: Vec<String> = bad
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{n} line(s) of {name}"))
        .collect();
    if parts.is_empty() {
        return Ok(());
    }
    Err(Fail(
        exit::USAGE,
        anyhow::anyhow!(
            "{} could not be decoded (named above) and were skipped: what was written comes from the other lines. Give a recording written whole by `nvprobe watch --json --raw` (not cut, joined with other text or edited)",
            parts.join(" and ")
        ),
    ))
}

/// Where the output goes, checked now (exit 2), opened after start-up.
pub fn output_spec(a: &OutputArgs, input: Option<(u64, u64)>) -> Result<OutputSpec, Fail> {
    let spec = OutputSpec {
        // `-o -` is stdout, as for export (never a file named "-").
        path: a.output.clone().filter(|p| p.as_os_str() != "-"),
        force: a.force,
        mode: a.output_mode,
        input,
    };
    spec.check().map_err(|e| Fail(exit::USAGE, e))?;
    Ok(spec)
}

pub fn version_ctx(arg: Option<DriverVersion>, driver: Option<&DriverInfo>) -> VersionCtx {
    VersionCtx::from_version(arg.or(driver.map(|d| d.version)))
}

/// The longest duration a flag takes (`--duration`, `--stall-after`): a
/// year, far beyond any trace, far below what a timer can hold.
pub const MAX_SECS: f64 = 365.0 * 24.0 * 3600.0;

/// Seconds as a number (`1.5`) or with a unit: `1.5s`, `500ms`, `2m`; at
/// most [`MAX_SECS`].
pub fn parse_secs(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * scale <= MAX_SECS => Ok(v * scale),
        Ok(v) if v.is_finite() && v > 0.0 => Err(format!(
            "{s:?} is too long: at most {MAX_SECS} seconds (365 days)"
        )),
        _ => Err(format!(
            "{s:?} is not a duration: give seconds (5, 0.5) or a number with ms, s or m (500ms, 2m)"
        )),
    }
}

/// The largest pid this kernel hands out (/proc/sys/kernel/pid_max; the
/// kernel's limit, 4194304, when it cannot be read).
fn pid_max() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4_194_304)
}

/// `--pid`: a process id this kernel can have (1 to pid_max - 1).
pub fn parse_pid(s: &str) -> Result<u32, String> {
    let v: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a process id"))?;
    let max = pid_max();
    if v == 0 {
        return Err("0 is not a process id (pids start at 1)".into());
    }
    if v >= max {
        return Err(format!(
            "{v} is not a process id here: this kernel's pids are below {max} (/proc/sys/kernel/pid_max)"
        ));
    }
    Ok(v)
}

use nvprobe::host::procfs_is_hosts;

/// What PROC says of one `--pid` that nvprobe cannot follow: none running,
/// a thread's id, an exited process. None: a running process (or nothing
/// could be read).
fn pid_problem(proc: &Path, pid: u32) -> Option<(bool, String)> {
    let status = match std::fs::read_to_string(proc.join(format!("{pid}/status"))) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Some((
                true,
                format!("no process {pid} is running (no /proc/{pid})"),
            ));
        }
        Err(_) => return None,
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let comm = field("Name").unwrap_or("?");
    if let Some(tgid) = field("Tgid").and_then(|t| t.parse::<u32>().ok())
        && tgid != pid
    {
        return Some((
            false,
            format!(
                "{pid} is a thread of process {tgid} ({comm}), not a process: --pid takes a process id (the thread-group id), here --pid {tgid}"
            ),
        ));
    }
    if field("State").is_some_and(|s| s.starts_with('Z') || s.starts_with('X')) {
        return Some((
            true,
            format!(
                "process {pid} ({comm}) has exited (its parent has not reaped it yet): it makes no more calls"
            ),
        ));
    }
    None
}

/// `--pid`s checked against the processes running now, as PROC (a procfs,
/// `/proc`) shows them: each must be a process that is running. A pid no
/// process has is refused rather than waited for: the kernel hands a free
/// pid to whichever process it makes next, so the one meant cannot be
/// told from another. Where PROC's pids are not the host's (nvprobe in a
/// container's pid namespace), every `--pid` is refused: the kernel side
/// filters on the host's pids.
pub fn check_pids(pids: &[u32], proc: &Path) -> Result<(), Fail> {
    if pids.is_empty() {
        return Ok(());
    }
    let list = pids
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if procfs_is_hosts(proc) == Some(false) {
        return Err(Fail(
            exit::USAGE,
            anyhow::anyhow!(
                "--pid {list}: nvprobe runs in a pid namespace other than the host's (a container's?), and the kernel side filters --pid on the host's process ids, which {} does not show: --pid would follow another process or none. Run nvprobe in the host's pid namespace (docker run --pid=host, hostPID: true in Kubernetes), or follow programs by name with --comm NAME",
                proc.display()
            ),
        ));
    }
    let problems: Vec<(bool, String)> = pids.iter().filter_map(|&p| pid_problem(proc, p)).collect();
    if problems.is_empty() {
        return Ok(());
    }
    let gone = problems.iter().any(|(gone, _)| *gone);
    let what: Vec<&str> = problems.iter().map(|(_, m)| m.as_str()).collect();
    Err(Fail(
        exit::USAGE,
        anyhow::anyhow!(
            "--pid: {}{}",
            what.join("; "),
            if gone {
                ". --pid follows processes that run when nvprobe starts: a pid that is free now goes to whichever process the kernel makes next, so nvprobe cannot wait for the one you mean. Give the pid of a running process as the host sees it (a pid seen inside a container is not: on the host, the NSpid line of /proc/PID/status gives both), or follow a program by name from its start with --comm NAME"
            } else {
                ""
            }
        ),
    ))
}

/// `--device PATH[=KIND]`: PATH must exist when nvprobe starts (the kernel
/// side knows it by its device and inode number); KIND is ctl, gpu or uvm,
/// or guessed from PATH's name (nvidiactl, nvidiaN, nvidia-uvm).
pub fn parse_device(s: &str) -> Result<nvprobe::host::ExtraDevice, String> {
    const KINDS: [&str; 3] = ["ctl", "gpu", "uvm"];
    let exists = |p: &str| !p.is_empty() && std::fs::symlink_metadata(p).is_ok();
    let (path, kind) = match s.rsplit_once('=') {
        Some((p, k)) if KINDS.contains(&k) => (p, Some(k)),
        // A file whose name has a '=' in it.
        Some(_) if exists(s) => (s, None),
        Some((p, k)) => {
            let fix = if exists(p) {
                format!("write {p}=ctl, {p}=gpu or {p}=uvm")
            } else {
                format!("write PATH=ctl, PATH=gpu or PATH=uvm (and {p:?} is no file either)")
            };
            return Err(format!(
                "{k:?} is not a kind of NVIDIA device: the kinds are ctl (nvidiactl), gpu (nvidiaN) and uvm (nvidia-uvm): {fix}"
            ));
        }
        None => (s, None),
    };
    if path.is_empty() {
        return Err(format!(
            "no file before '=': write --device PATH={}",
            kind.unwrap_or("ctl")
        ));
    }
    let m = std::fs::metadata(path).map_err(|e| {
        let why = match e.kind() {
            io::ErrorKind::NotFound => "no such file".to_owned(),
            io::ErrorKind::PermissionDenied => {
                format!("cannot look at it ({e}): nvprobe must stat it, run it as root")
            }
            _ => format!("cannot look at it ({e})"),
        };
        format!(
            "{path}: {why}. --device names a file that exists when nvprobe starts, one the traced programs open as an NVIDIA device (a node under another path, or a file standing in for one): check the path, or create the file first"
        )
    })?;
    if m.is_dir() {
        return Err(format!(
            "{path} is a directory: --device names the file the traced programs open, e.g. --device {}=ctl",
            Path::new(path).join("nvidiactl").display()
        ));
    }
    use nvprobe_common::DevKind;
    let kind = match kind {
        Some("ctl") => DevKind::Ctl,
        Some("gpu") => DevKind::Gpu,
        Some(_) => DevKind::Uvm,
        // Guessed from the file's own name (which has no '=' to split on).
        None => Path::new(path)
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.contains('='))
            .and_then(|n| n.parse::<nvprobe::host::ExtraDevice>().ok())
            .map(|d| d.kind)
            .ok_or_else(|| {
                format!(
                    "{path}: which NVIDIA device it stands for cannot be told from its name (nvidiactl, nvidiaN and nvidia-uvm can): add =ctl, =gpu or =uvm, e.g. --device {path}=ctl"
                )
            })?,
    };
    Ok(nvprobe::host::ExtraDevice {
        path: path.into(),
        kind,
    })
}

/// `--comm`: a non-empty process name, without NUL.
pub fn parse_comm(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("an empty name matches no process: give a process name (comm)".into());
    }
    if s.contains('\0') {
        return Err(format!("{s:?}: a process name has no NUL byte"));
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{
        MAX_SECS, check_pids, exit, parse_comm, parse_device, parse_pid, parse_secs, undecodable,
    };

    #[test]
    fn undecodable_lines_are_exit_2_with_each_recordings_count() {
        assert!(undecodable(&[("a", 0), ("b", 0)]).is_ok());
        let e = undecodable(&[("a.ndjson", 3), ("b.ndjson", 0)]).expect_err("bad");
        assert_eq!(e.0, 2);
        assert!(
            e.1.to_string()
                .starts_with("3 line(s) of a.ndjson could not be decoded (named above)"),
            "{}",
            e.1
        );
        let e = undecodable(&[("a", 1), ("b", 2)]).expect_err("bad");
        assert!(
            e.1.to_string()
                .starts_with("1 line(s) of a and 2 line(s) of b could not"),
            "{}",
            e.1
        );
    }

    #[test]
    fn durations_take_plain_seconds_or_units() {
        assert_eq!(parse_secs("5"), Ok(5.0));
        assert_eq!(parse_secs("0.5"), Ok(0.5));
        assert_eq!(parse_secs("1s"), Ok(1.0));
        assert_eq!(parse_secs("250ms"), Ok(0.25));
        assert_eq!(parse_secs("2m"), Ok(120.0));
        for bad in ["", "s", "abc", "-1", "inf", "NaN", "1h"] {
            let e = parse_secs(bad).expect_err(bad);
            assert!(e.contains("500ms"), "{e}");
        }
    }

    /// Durations that panicked once attached (exit 101): refused at parse
    /// time, saying the limit.
    #[test]
    fn durations_have_a_maximum() {
        assert!(parse_secs("365d").is_err());
        assert_eq!(parse_secs("31536000"), Ok(MAX_SECS));
        assert_eq!(parse_secs("525600m"), Ok(MAX_SECS));
        for bad in ["1e308", "1e19", "31536001", "525601m", "1e300ms"] {
            let e = parse_secs(bad).expect_err(bad);
            assert!(e.contains("at most 31536000 seconds"), "{bad}: {e}");
        }
        // Everything accepted fits a Duration and an Instant.
        let d = std::time::Duration::from_secs_f64(parse_secs("31536000").expect("max"));
        assert!(std::time::Instant::now().checked_add(d).is_some());
    }

    #[test]
    fn pids_and_names_are_checked() {
        assert_eq!(parse_pid("1"), Ok(1));
        assert!(parse_pid("0").expect_err("0").contains("pids start at 1"));
        assert!(parse_pid("99999999").expect_err("big").contains("pid_max"));
        assert!(parse_pid("-3").is_err());
        assert!(parse_comm("").expect_err("empty").contains("empty"));
        assert_eq!(
            parse_comm("nvidia-persistenced"),
            Ok("nvidia-persistenced".into())
        );
    }

    /// A /proc of pids 1 (the host's init) and 42 (a process with thread 43),
    /// and a zombie 50; `host`: pid 1's namespace is the initial one (the
    /// test stands it in with a link to this process's own namespace file
    /// when that is the host's, else it has none and only the pids count).
    fn fake_proc(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("nvprobe-proc-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        for (pid, tgid, state, name) in [
            (42, 42, "S (sleeping)", "python3"),
            (43, 42, "S (sleeping)", "python3"),
            (50, 50, "Z (zombie)", "defunct"),
        ] {
            std::fs::create_dir_all(d.join(pid.to_string())).expect("mkdir");
            std::fs::write(
                d.join(format!("{pid}/status")),
                format!("Name:\t{name}\nState:\t{state}\nTgid:\t{tgid}\nPid:\t{pid}\n"),
            )
            .expect("status");
        }
        d
    }

    #[test]
    fn pids_must_be_running_processes() {
        let d = fake_proc("pids");
        assert!(check_pids(&[], &d).is_ok());
        assert!(check_pids(&[42], &d).is_ok());
        let e = check_pids(&[30000], &d).expect_err("no such process");
        assert_eq!(e.0, exit::USAGE);
        let t = e.1.to_string();
        assert!(
            t.starts_with("--pid: no process 30000 is running (no /proc/30000). --pid follows processes that run when nvprobe starts"),
            "{t}"
        );
        assert!(t.contains("--comm NAME") && t.contains("NSpid"), "{t}");
        let t = check_pids(&[43], &d).expect_err("a thread").1.to_string();
        assert_eq!(
            t,
            "--pid: 43 is a thread of process 42 (python3), not a process: --pid takes a process id (the thread-group id), here --pid 42"
        );
        let t = check_pids(&[50, 30001], &d)
            .expect_err("gone")
            .1
            .to_string();
        assert!(
            t.starts_with("--pid: process 50 (defunct) has exited (its parent has not reaped it yet): it makes no more calls; no process 30001 is running"),
            "{t}"
        );
        // A /proc of another pid namespace: its pids are not the kernel's.
        std::fs::create_dir_all(d.join("1/ns")).expect("mkdir");
        std::fs::write(d.join("1/ns/pid"), "").expect("a file of another inode");
        let t = check_pids(&[42], &d).expect_err("other ns").1.to_string();
        assert!(
            t.starts_with("--pid 42: nvprobe runs in a pid namespace other than the host's"),
            "{t}"
        );
        assert!(
            t.contains("--pid=host") && t.contains("hostPID: true"),
            "{t}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn device_files_must_exist_and_say_their_kind() {
        let d = std::env::temp_dir().join(format!("nvprobe-dev-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        let ctl = d.join("nvidiactl");
        let other = d.join("stand-in");
        let eq = d.join("a=b");
        for f in [&ctl, &other, &eq] {
            std::fs::write(f, "").expect("file");
        }
        let s = |p: &Path| p.display().to_string();
        let dev = parse_device(&s(&ctl)).expect("guessed");
        assert_eq!(dev.kind, nvprobe_common::DevKind::Ctl);
        let dev = parse_device(&format!("{}=uvm", s(&other))).expect("explicit");
        assert_eq!(
            (dev.path, dev.kind),
            (other.clone(), nvprobe_common::DevKind::Uvm)
        );
        let dev = parse_device(&format!("{}=gpu", s(&eq))).expect("a name with =");
        assert_eq!(dev.path, eq);
        let e = parse_device(&s(&eq)).expect_err("no kind");
        assert!(e.contains("cannot be told from its name"), "{e}");
        let e = parse_device(&s(&other)).expect_err("no kind");
        assert_eq!(
            e,
            format!(
                "{0}: which NVIDIA device it stands for cannot be told from its name (nvidiactl, nvidiaN and nvidia-uvm can): add =ctl, =gpu or =uvm, e.g. --device {0}=ctl",
                s(&other)
            )
        );
        // A missing file says so, with or without its kind.
        let gone = d.join("gone");
        for arg in [s(&gone), format!("{}=ctl", s(&gone)), s(&d.join("nvidia0"))] {
            let e = parse_device(&arg).expect_err("missing");
            assert!(
                e.contains(": no such file. --device names a file that exists when nvprobe starts"),
                "{arg}: {e}"
            );
            assert!(!e.contains("FUSE") && !e.contains("test server"), "{e}");
        }
        let e = parse_device(&format!("{}=modeset", s(&other))).expect_err("kind");
        assert!(
            e.starts_with("\"modeset\" is not a kind of NVIDIA device"),
            "{e}"
        );
        assert!(
            e.ends_with(&format!("write {0}=ctl, {0}=gpu or {0}=uvm", s(&other))),
            "{e}"
        );
        let e = parse_device(&format!("{}=modeset", s(&gone))).expect_err("kind");
        assert!(e.contains("is no file either"), "{e}");
        let e = parse_device(&s(&d)).expect_err("a directory");
        assert!(e.contains("is a directory"), "{e}");
        let e = parse_device("=ctl").expect_err("empty");
        assert!(e.contains("no file before '='"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
