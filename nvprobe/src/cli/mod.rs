//! The subcommands, one file each. Every error becomes an exit code here,
//! in one place ([`Fail`]):
//!
//! 0 success; 1 runtime error; 2 bad usage or input; 3 the kernel lacks
//! something nvprobe needs; 4 not permitted (not root, BPF refused).

pub mod decode;
pub mod diff;
pub mod doctor;
pub mod export;
pub mod hooks;
pub mod top;
pub mod watch;

use std::path::PathBuf;

use clap::Args;
use nvprobe::{
    attach::StartError,
    decode::version::{DriverInfo, DriverVersion, VersionCtx},
    output::{Format, Level, OutputSpec, parse_mode},
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
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    pub format: Option<Format>,
    /// What is written: all (every call), failures (all but successful
    /// calls) or verdicts (start-up verdicts, stalls, signals that hit
    /// NVIDIA calls, failed calls, lost counts, the summary). Everything
    /// is still counted in the summary.
    #[arg(long, value_name = "LEVEL", default_value = "all", value_parser = parse_level)]
    pub events: Level,
    /// Text: the fork, exec, exit and signal lines of every process
    /// followed. By default text shows them for the processes that made an
    /// NVIDIA call, and for their children until they exec; the summary
    /// counts the lines left out. JSON and OTLP always hold every record.
    #[arg(long)]
    pub all_processes: bool,
    /// Write to FILE instead of stdout. FILE is created (mode 0600, see
    /// --output-mode) once start-up has succeeded; an existing file is
    /// refused unless --force is given, a symbolic link always.
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

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
}

fn parse_level(s: &str) -> Result<Level, String> {
    s.parse()
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

/// An error with the exit code it deserves.
#[derive(Debug)]
pub struct Fail(pub u8, pub anyhow::Error);

impl<E: Into<anyhow::Error>> From<E> for Fail {
    fn from(e: E) -> Self {
        Fail(1, e.into())
    }
}

pub fn start_fail(e: StartError) -> Fail {
    let code = match e {
        StartError::NotRoot(_) | StartError::NoBpf(_) => 4,
        StartError::NoRingBuf
        | StartError::Tracefs { .. }
        | StartError::NoSyscallTracepoints(_)
        | StartError::NoBtf { .. } => 3,
        StartError::Load(_) | StartError::Required { .. } => 3,
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
        2,
        anyhow::anyhow!(
            "{} could not be decoded (named above) and were skipped: what was written comes from the other lines. Give a recording written whole by `nvprobe watch --json --raw` (not cut, joined with other text or edited)",
            parts.join(" and ")
        ),
    ))
}

/// Where the output goes, checked now (exit 2), opened after start-up.
pub fn output_spec(a: &OutputArgs, input: Option<(u64, u64)>) -> Result<OutputSpec, Fail> {
    let spec = OutputSpec {
        path: a.output.clone(),
        force: a.force,
        mode: a.output_mode,
        input,
    };
    spec.check().map_err(|e| Fail(2, e))?;
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
    use super::{MAX_SECS, parse_comm, parse_pid, parse_secs, undecodable};

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
}
