//! nvprobe command line: parse, run one subcommand (`cli/`), turn its
//! error into the documented exit code.

// Output goes through cli::print: `println!` panics when the reader has
// gone (`nvprobe schema | head -1`).
#![deny(clippy::print_stdout)]

mod cli;

use std::{
    io::{self, Write as _},
    os::fd::AsRawFd as _,
    process::ExitCode,
    sync::atomic::{AtomicBool, Ordering},
};

use clap::{Parser, Subcommand};

use cli::Fail;

#[derive(Parser)]
#[command(
    name = "nvprobe",
    version = env!("NVPROBE_VERSION_LINE"),
    about = "Trace NVIDIA GPU driver calls system-wide with eBPF: decoded escapes, UVM commands and NV_STATUS",
    long_about = None,
    after_help = cli::exit_help(None)
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Trace every process's calls to /dev/nvidia* (needs root).
    #[command(after_help = cli::after_help("watch"))]
    Watch(cli::watch::WatchArgs),
    /// A live view of every process starting CUDA: class, stage, time in
    /// start-up, the call in flight, the last failure; what is most likely
    /// wrong first (needs root; takes watch's options; q quits).
    #[command(after_help = cli::after_help("top"))]
    Top(cli::top::TopArgs),
    /// Decode a recording made with `watch --json --raw` (no root needed).
    #[command(after_help = cli::after_help("decode"))]
    Decode(cli::decode::DecodeArgs),
    /// Compare two start-ups: where they part, calls only one made, results
    /// that differ, time per stage, verdicts (no root).
    #[command(after_help = cli::after_help("diff"))]
    Diff(cli::diff::DiffArgs),
    /// Export a recording as a Perfetto trace (--perfetto -o FILE; no root).
    #[command(after_help = cli::after_help("export"))]
    Export(cli::export::ExportArgs),
    /// Print the JSON Schema of the NDJSON output (--doctor: of `doctor
    /// --json`'s document).
    #[command(after_help = cli::after_help("schema"))]
    Schema(cli::SchemaArgs),
    /// Check this host (or a host tree) for what breaks CUDA start-up and
    /// tracing: kernel tracing ability (probes loaded), driver, nvidia_uvm
    /// and HMM, GPUs, device nodes and access, libraries, container. Exit 5
    /// when a check fails.
    #[command(after_help = cli::after_help("doctor"))]
    Doctor(cli::doctor::DoctorArgs),
    /// The driver layer's hook table: each function, its module, whether
    /// this kernel has it (kallsyms), and the prototype in the module's BTF
    /// against the one nvprobe assumes.
    #[command(after_help = cli::after_help("hooks"))]
    Hooks(cli::hooks::HooksArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish or
    /// powershell; the package installs bash's, zsh's and fish's).
    #[command(after_help = cli::after_help("completions"))]
    Completions(cli::generate::CompletionsArgs),
    /// Print the manual page (roff) of nvprobe or of one subcommand
    /// (`nvprobe manpage watch | man -l -`; the package installs them all).
    #[command(after_help = cli::after_help("manpage"))]
    Manpage(cli::generate::ManpageArgs),
}

/// Set once a write to standard output or error panicked because its
/// reader had gone (`nvprobe watch 2>&1 | head`).
static READER_GONE: AtomicBool = AtomicBool::new(false);

/// `println!` and `eprintln!` (the library's own messages included) panic
/// when their pipe has no reader left. Such a panic is the end of a run
/// like any closed pipe: the stream is pointed at /dev/null (so that
/// unwinding, which detaches the probes, writes nowhere), nothing is said,
/// and `main` ends with exit 0.
fn quiet_when_the_reader_goes() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("");
        let fd = if msg.starts_with("failed printing to stderr") {
            2
        } else if msg.starts_with("failed printing to stdout") {
            1
        } else {
            return prev(info);
        };
        if !msg.contains("Broken pipe") {
            return prev(info);
        }
        if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
            // SAFETY: dup2 on two open descriptors; fd 1 or 2 is replaced.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
        READER_GONE.store(true, Ordering::Relaxed);
    }));
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    quiet_when_the_reader_goes();
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli.cmd)));
    let res = match run {
        Ok(r) => r,
        Err(_) if READER_GONE.load(Ordering::Relaxed) => return ExitCode::SUCCESS,
        Err(panic) => std::panic::resume_unwind(panic),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`nvprobe schema | head -1`): a normal way
        // to stop, said by nothing but exit 0 (see cli::EXIT_CODES); also
        // when one of nvprobe's threads met it in a `println!`, and the
        // run ended with the error that made.
        Err(Fail(_, e)) if cli::closed_pipe(&e) || READER_GONE.load(Ordering::Relaxed) => {
            ExitCode::SUCCESS
        }
        Err(Fail(code, e)) => {
            // Not eprintln!, which panics when stderr is a closed pipe too.
            let _ = writeln!(io::stderr(), "nvprobe: error: {e:#}");
            ExitCode::from(code)
        }
    }
}

fn run(cmd: Cmd) -> Result<(), Fail> {
    match cmd {
        Cmd::Watch(a) => cli::watch::run(a),
        Cmd::Top(a) => cli::top::run(a),
        Cmd::Decode(a) => cli::decode::run(a),
        Cmd::Diff(a) => cli::diff::run(a),
        Cmd::Export(a) => cli::export::run(a),
        Cmd::Doctor(a) => cli::doctor::run(a),
        Cmd::Hooks(a) => cli::hooks::run(a),
        Cmd::Completions(a) => cli::generate::completions(a),
        Cmd::Manpage(a) => cli::generate::manpage(a),
        Cmd::Schema(a) => {
            let schema = if a.doctor {
                nvprobe::doctor::report_schema()
            } else {
                nvprobe_model::render::schema::schema()
            };
            let s = serde_json::to_string_pretty(&schema).unwrap_or_default();
            cli::print(&format!("{s}\n"))
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use super::{Cli, cli};

    /// Each command's help, short and long, as clap writes it.
    fn helps() -> Vec<(Option<String>, String)> {
        let mut top = Cli::command();
        top.build();
        let mut out = vec![
            (None, top.clone().render_help().to_string()),
            (None, top.clone().render_long_help().to_string()),
        ];
        // clap's own `help` subcommand aside.
        for sub in top.get_subcommands().filter(|s| s.get_name() != "help") {
            let name = sub.get_name().to_owned();
            let mut s = sub.clone();
            out.push((Some(name.clone()), s.render_help().to_string()));
            out.push((Some(name), s.render_long_help().to_string()));
        }
        out
    }

    /// The exit codes `--help` shows are the table's, for each command the
    /// rows that apply to it, and the codes nvprobe ends with are in it.
    #[test]
    fn every_help_shows_the_exit_code_table() {
        for (cmd, text) in helps() {
            let block = cli::exit_help(cmd.as_deref());
            assert!(text.contains(&block), "{cmd:?}: no {block:?} in\n{text}");
            let codes: Vec<u8> = block
                .lines()
                .skip(1)
                .map(|l| l.trim_start()[..1].parse().expect("a code"))
                .collect();
            let mut want: Vec<u8> = cli::EXIT_CODES
                .iter()
                .filter(|r| {
                    cmd.as_deref()
                        .is_none_or(|c| r.commands.is_empty() || r.commands.contains(&c))
                })
                .map(|r| r.code)
                .collect();
            want.dedup();
            assert_eq!(codes, want, "{cmd:?}");
        }
        let all = cli::exit_help(None);
        for r in cli::EXIT_CODES {
            assert!(all.contains(r.meaning), "{}", r.meaning);
        }
        // What clap ends a usage error with, and what each start-up
        // failure becomes, are codes of the table.
        let e = Cli::try_parse_from(["nvprobe", "watch", "--no-such-flag"])
            .err()
            .expect("refused");
        assert_eq!(e.exit_code(), i32::from(cli::exit::USAGE));
        let codes: Vec<u8> = cli::EXIT_CODES.iter().map(|r| r.code).collect();
        for c in [
            cli::exit::OK,
            cli::exit::RUNTIME,
            cli::exit::USAGE,
            cli::exit::KERNEL,
            cli::exit::DENIED,
        ] {
            assert!(codes.contains(&c), "{c}");
        }
        let start = cli::start_fail(nvprobe::attach::StartError::NoRingBuf);
        assert_eq!(start.0, cli::exit::KERNEL);
    }

    /// Doc comments are rustdoc's: a link (`[`STARTUP`]`, `[Fail]`) must
    /// not reach --help.
    #[test]
    fn no_help_has_rustdoc_syntax() {
        for (cmd, text) in helps() {
            for bad in ["[`", "`]", "[crate::", "[Self", "](", "///"] {
                assert!(!text.contains(bad), "{cmd:?} help has {bad:?}:\n{text}");
            }
        }
    }

    /// The count --libcuda-hooks' help gives is the set's.
    #[test]
    fn the_startup_set_is_counted_right() {
        let n = format!("{} functions", nvprobe::uprobes::STARTUP.len());
        let watch = helps()
            .into_iter()
            .filter(|(c, _)| c.as_deref() == Some("watch"))
            .map(|(_, t)| t)
            .collect::<String>();
        assert!(watch.matches(&n).count() >= 2, "{n} not in\n{watch}");
    }
}
