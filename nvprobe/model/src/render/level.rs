//! How much of the stream is shipped (`--events`), and how serious each
//! record is (its `severity`, in OpenTelemetry's text and number).
//!
//! Always-on use cannot ship every driver call (a steady training loop
//! writes megabytes a minute): `failures` drops successful calls, and
//! `verdicts` keeps only what answers "what went wrong on this node":
//! start-up verdicts, stalls, signals that hit NVIDIA calls, failed calls,
//! lost counts, warnings, the start record and the summary. Every level
//! still counts everything in the summary.

use std::str::FromStr;

use serde::Serialize;

use super::note::Note;
use crate::{
    correlate::{Class, DiagSeverity, Outcome, Record, faults::KernelLog},
    decode::Event,
    kmsg::{LogKind, xid::XidAction},
};

/// What `--events` ships.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Every event and record.
    #[default]
    All,
    /// Everything but successful calls: failed calls, process events,
    /// milestones, verdicts, identities and the collector's records.
    Failures,
    /// Start-up verdicts, stalls, signals that hit an NVIDIA call, failed
    /// calls (not failed path lookups: stat, access), lost counts,
    /// warnings, the start record and the summary.
    Verdicts,
}

impl Level {
    pub const NAMES: [&'static str; 3] = ["all", "failures", "verdicts"];

    pub fn as_str(self) -> &'static str {
        match self {
            Level::All => "all",
            Level::Failures => "failures",
            Level::Verdicts => "verdicts",
        }
    }

    /// Whether successful calls are left out (the kernel may drop them
    /// for processes past their verdict).
    pub fn quiet(self) -> bool {
        self != Level::All
    }

    pub fn event(self, ev: &Event) -> bool {
        match self {
            Level::All => true,
            Level::Failures => !ev.ok() || matches!(ev, Event::Proc(_)),
            // A stat or access that failed is a lookup (libcuda probes
            // /dev/char/195:255 and the like on every start-up), not a
            // call into the driver: the verdict says when one mattered.
            Level::Verdicts => !ev.ok() && !matches!(ev, Event::Stat(_) | Event::Access(_)),
        }
    }

    pub fn record(self, r: &Record) -> bool {
        match (self, r) {
            (Level::All | Level::Failures, _) => true,
            (Level::Verdicts, Record::Cuinit(_) | Record::FirstContext(_)) => true,
            // A signal between calls explains nothing about the driver.
            (Level::Verdicts, Record::Signal(s)) => {
                s.outcome != crate::correlate::SigOutcome::InUserSpace
            }
            (Level::Verdicts, Record::Stage { .. } | Record::Breakdown(_)) => false,
            // The driver's own lines are few, and what a node agent is for.
            (Level::Verdicts, Record::KernelLog(_) | Record::Fault(_)) => true,
        }
    }

    pub fn note(self, n: &Note<'_>) -> bool {
        match (self, n) {
            (Level::All | Level::Failures, _) => true,
            (Level::Verdicts, Note::Process(_)) => false,
            (Level::Verdicts, _) => true,
        }
    }
}

impl FromStr for Level {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "all" => Ok(Level::All),
            "failures" => Ok(Level::Failures),
            "verdicts" => Ok(Level::Verdicts),
            _ => Err(format!(
                "unknown event level {s:?} (use {})",
                Level::NAMES.join(", ")
            )),
        }
    }
}

/// OpenTelemetry's severity (logs data model): the text nvprobe writes and
/// its SeverityNumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Debug,
    Info,
    Warn,
    Error,
}

impl Severity {
    pub fn text(self) -> &'static str {
        match self {
            Severity::Debug => "debug",
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Error => "error",
        }
    }

    /// SeverityNumber: DEBUG 5, INFO 9, WARN 13, ERROR 17.
    pub fn number(self) -> u8 {
        match self {
            Severity::Debug => 5,
            Severity::Info => 9,
            Severity::Warn => 13,
            Severity::Error => 17,
        }
    }

    /// A driver call or process event: a failed call is a warning (many
    /// are probes a start-up gets past; its verdict says whether it
    /// mattered), a CUDA call that returned an error is an error.
    pub fn of_event(ev: &Event) -> Self {
        match ev {
            Event::Cuda(_) if !ev.ok() => Severity::Error,
            Event::Proc(p) if matches!(p.op, crate::decode::ProcKind::Signal) => Severity::Info,
            _ if !ev.ok() => Severity::Warn,
            _ => Severity::Debug,
        }
    }

    /// A correlator record: a verdict that failed is an error, one with a
    /// problem it got past a warning.
    pub fn of_record(r: &Record) -> Self {
        match r {
            Record::Stage { .. } | Record::Breakdown(_) => Severity::Info,
            Record::Signal(_) => Severity::Warn,
            Record::FirstContext(c) if c.ok => Severity::Info,
            Record::FirstContext(_) => Severity::Error,
            Record::KernelLog(k) => log_severity(k),
            Record::Fault(_) => Severity::Error,
            Record::Cuinit(v) => match v.result {
                // Nothing wrong, or only facts said (a CPU quota).
                Outcome::Ok
                    if v.diagnoses
                        .iter()
                        .all(|d| d.severity == crate::correlate::DiagSeverity::Info) =>
                {
                    Severity::Info
                }
                Outcome::Ok => Severity::Warn,
                // A process that exited or was still starting when tracing
                // stopped, without a failed cuInit.
                Outcome::Exited | Outcome::Incomplete if v.class != Class::Cuda => Severity::Info,
                Outcome::Exited | Outcome::Incomplete
                    if v.diagnoses
                        .iter()
                        .all(|d| d.severity != DiagSeverity::Error) =>
                {
                    Severity::Warn
                }
                _ => Severity::Error,
            },
        }
    }

    pub fn of_note(n: &Note<'_>) -> Self {
        match n {
            Note::Start(_) | Note::Summary(_) | Note::Process(_) | Note::HangEnd(_) => {
                Severity::Info
            }
            Note::Hang(_) => Severity::Error,
            Note::Stall(_) | Note::Warning { .. } | Note::Lost { .. } => Severity::Warn,
        }
    }
}

/// The kernel-log line's severity: the Xid table's, else the kernel's level.
fn log_severity(k: &KernelLog) -> Severity {
    match k.meaning.as_ref().map(|m| m.action) {
        Some(XidAction::DrainNode | XidAction::ResetGpu | XidAction::DriverFault) => {
            Severity::Error
        }
        Some(XidAction::FixProgram | XidAction::RestartApp) => Severity::Warn,
        Some(XidAction::Informational) => Severity::Info,
        None if k.kind == LogKind::GpuLost || k.line.level <= 3 => Severity::Error,
        None if k.line.level == 4 || k.kind != LogKind::Other => Severity::Warn,
        None => Severity::Info,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_say_their_names() {
        for n in Level::NAMES {
            assert_eq!(n.parse::<Level>().expect("level").as_str(), n);
        }
        let e = "everything".parse::<Level>().unwrap_err();
        assert!(e.contains("all, failures, verdicts"), "{e}");
        assert!(!Level::All.quiet() && Level::Verdicts.quiet() && Level::Failures.quiet());
    }

    #[test]
    fn severity_numbers_are_opentelemetrys() {
        let s = [
            Severity::Debug,
            Severity::Info,
            Severity::Warn,
            Severity::Error,
        ];
        assert_eq!(s.map(Severity::number), [5, 9, 13, 17]);
        assert_eq!(s.map(Severity::text), ["debug", "info", "warn", "error"]);
    }
}
