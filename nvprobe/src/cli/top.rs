//! `nvprobe top`: `watch` shown as a live view: each process with its
//! class, stage, time in start-up, the call in flight, the last failure
//! and its state, what is most likely wrong first.

use std::time::Duration;

use clap::Args;

use super::common::{Fail, exit, parse_secs};
use super::watch::WatchArgs;

#[derive(Args)]
pub struct TopArgs {
    /// Plain-text tables, one every --interval, even on a terminal (the
    /// default when stdout is not one).
    #[arg(long)]
    pub plain: bool,
    /// Seconds between two views (default: 0.25 on a terminal, 2 as
    /// plain text).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub interval: Option<f64>,
    /// Everything `watch` takes; -o FILE also records the events as watch
    /// would write them (without -o none are written).
    #[command(flatten)]
    pub watch: WatchArgs,
}

pub fn run(a: TopArgs) -> Result<(), Fail> {
    let interval = match a.interval {
        Some(s) if !(s.is_finite() && (0.05..=3600.0).contains(&s)) => {
            return Err(Fail(
                exit::USAGE,
                anyhow::anyhow!("--interval must be between 0.05 and 3600 seconds"),
            ));
        }
        s => s.map(Duration::from_secs_f64),
    };
    let opts = nvprobe::top::draw::Opts::for_stdout(a.plain, interval);
    super::watch::run_with(a.watch, Some(opts))
}
