//! nvprobe command line: parse, run one subcommand (`cli/`), turn its
//! error into the documented exit code.

mod cli;

use std::{io, process::ExitCode};

use clap::{Parser, Subcommand};

use cli::Fail;

#[derive(Parser)]
#[command(
    name = "nvprobe",
    version,
    about = "Trace NVIDIA GPU driver calls system-wide with eBPF: decoded escapes, UVM commands and NV_STATUS",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Trace every process's calls to /dev/nvidia* (needs root).
    Watch(cli::watch::WatchArgs),
    /// A live view of every process starting CUDA: class, stage, time in
    /// start-up, the call in flight, the last failure; what is most likely
    /// wrong first (needs root; takes watch's options; q quits).
    Top(cli::top::TopArgs),
    /// Decode a recording made with `watch --json --raw` (no root needed).
    Decode(cli::decode::DecodeArgs),
    /// Compare two start-ups: where they part, calls only one made, results
    /// that differ, time per stage, verdicts (no root).
    Diff(cli::diff::DiffArgs),
    /// Export a recording as a Perfetto trace (--perfetto -o FILE; no root).
    Export(cli::export::ExportArgs),
    /// Print the JSON Schema of the NDJSON output.
    Schema,
    /// Check this host (or a host tree) for what breaks CUDA start-up and
    /// tracing: kernel tracing ability (probes loaded), driver, nvidia_uvm
    /// and HMM, GPUs, device nodes and access, libraries, container. Exit 1
    /// when a check fails.
    Doctor(cli::doctor::DoctorArgs),
    /// The driver layer's hook table: each function, its module, whether
    /// this kernel has it (kallsyms), and the prototype in the module's BTF
    /// against the one nvprobe assumes.
    Hooks(cli::hooks::HooksArgs),
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Watch(a) => cli::watch::run(a),
        Cmd::Top(a) => cli::top::run(a),
        Cmd::Decode(a) => cli::decode::run(a),
        Cmd::Diff(a) => cli::diff::run(a),
        Cmd::Export(a) => cli::export::run(a),
        Cmd::Doctor(a) => cli::doctor::run(a),
        Cmd::Hooks(a) => cli::hooks::run(a),
        Cmd::Schema => {
            let s = serde_json::to_string_pretty(&nvprobe_model::render::schema::schema())
                .unwrap_or_default();
            println!("{s}");
            Ok(())
        }
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(code, e)) => {
            // A closed pipe (`nvprobe watch | head`) is a normal way to stop.
            if e.downcast_ref::<io::Error>()
                .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("nvprobe: error: {e:#}");
            ExitCode::from(code)
        }
    }
}
