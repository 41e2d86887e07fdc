//! The subcommands, one file each. Every error becomes an exit code here,
//! in one place ([`Fail`]):
//!
//! 0 success; 1 runtime error; 2 bad usage or input; 3 the kernel lacks
//! something nvprobe needs; 4 not permitted (not root, BPF refused).

pub mod decode;
pub mod doctor;
pub mod hooks;
pub mod watch;

use std::{
    fs::File,
    io::{self, Write},
    path::PathBuf,
};

use anyhow::Context as _;
use clap::Args;
use nvprobe::{
    attach::StartError,
    decode::version::{DriverInfo, DriverVersion, VersionCtx},
};

#[derive(Args)]
pub struct OutputArgs {
    /// NDJSON output (schema: `nvprobe schema`) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Write to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Decode struct layouts as for this driver version (default: the
    /// running driver's, from /proc/driver/nvidia/version).
    #[arg(long, value_name = "VERSION")]
    pub driver_version: Option<DriverVersion>,
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

pub fn open_output(path: &Option<PathBuf>) -> anyhow::Result<Box<dyn Write + Send>> {
    Ok(match path {
        Some(p) => Box::new(
            File::create(p)
                .with_context(|| format!("cannot create output file {}", p.display()))?,
        ),
        None => Box::new(io::stdout()),
    })
}

pub fn version_ctx(arg: Option<DriverVersion>, driver: Option<&DriverInfo>) -> VersionCtx {
    VersionCtx::from_version(arg.or(driver.map(|d| d.version)))
}

/// Seconds as a number (`1.5`) or with a unit: `1.5s`, `500ms`, `2m`.
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
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * scale),
        _ => Err(format!(
            "{s:?} is not a duration: give seconds (5, 0.5) or a number with ms, s or m (500ms, 2m)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_secs;

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
}
