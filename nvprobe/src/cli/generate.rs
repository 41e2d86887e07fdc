//! `nvprobe completions SHELL` and `nvprobe manpage [COMMAND]`: the shell
//! completion scripts and the manual pages, made from the command line's own
//! definition (clap's `Command`), so that they cannot drift from what
//! nvprobe takes. `cargo xtask dist` puts both into the package; a copied
//! binary makes them itself.

use clap::{Args, Command, CommandFactory as _};
use clap_mangen::roff::{Roff, bold, roman};

use super::common as cli;
use super::common::{Fail, exit};

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Args)]
pub struct ManpageArgs {
    /// The subcommand whose page to write (default: nvprobe's own page).
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
}

/// `nvprobe completions SHELL`: the script on standard output.
pub fn completions(a: CompletionsArgs) -> Result<(), Fail> {
    cli::print(&completion_script(a.shell))
}

/// `nvprobe manpage [COMMAND]`: the page (roff) on standard output.
pub fn manpage(a: ManpageArgs) -> Result<(), Fail> {
    let page = match a.command.as_deref() {
        None => page(None),
        Some(c) if subcommands().iter().any(|s| s == c) => page(Some(c)),
        Some(c) => {
            return Err(Fail(
                exit::USAGE,
                anyhow::anyhow!(
                    "{c:?} is not a subcommand of nvprobe; the pages are nvprobe's own (no COMMAND) and {}",
                    subcommands().join(", ")
                ),
            ));
        }
    };
    cli::print(&page)
}

/// nvprobe's command line as the pages and scripts describe it: built,
/// without clap's own `help` subcommand (every subcommand has `--help`).
fn command() -> Command {
    let mut c = crate::Cli::command().disable_help_subcommand(true);
    c.build();
    c
}

/// The subcommands that have a page, in the order `--help` lists them.
pub fn subcommands() -> Vec<String> {
    command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_owned())
        .collect()
}

pub fn completion_script(shell: clap_complete::Shell) -> String {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut command(), "nvprobe", &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The manual page (section 1) of nvprobe (`None`) or of one subcommand:
/// clap_mangen's NAME, SYNOPSIS, DESCRIPTION, OPTIONS (and SUBCOMMANDS),
/// then EXIT STATUS from the exit-code table `--help` shows too, and SEE
/// ALSO. Dated by the build (SOURCE_DATE_EPOCH when set), so that a
/// package's pages are the same from one build of a commit to the next.
pub fn page(sub: Option<&str>) -> String {
    let top = command();
    let cmd = match sub {
        None => top.clone(),
        Some(s) => top
            .find_subcommand(s)
            .cloned()
            .unwrap_or_else(|| panic!("no subcommand {s}")),
    };
    let name = cmd
        .get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_owned();
    // The exit codes get a section of their own (not clap_mangen's EXTRA),
    // and the version is in the page's footer.
    let cmd = cmd.after_help(None::<&str>).version(None::<&str>);
    let man = clap_mangen::Man::new(cmd)
        .title(name.to_uppercase())
        .section("1")
        .date(env!("NVPROBE_BUILD_DATE"))
        .source(format!("nvprobe {}", env!("CARGO_PKG_VERSION")))
        .manual("nvprobe");
    let mut out = Vec::new();
    man.render(&mut out)
        .expect("rendering into memory does not fail");
    let mut r = Roff::new();
    // The examples `--help` shows, then its exit codes.
    if let Some(s) = sub
        && !cli::examples(s).is_empty()
    {
        r.control("SH", ["EXAMPLES"]);
        for (line, what) in cli::examples(s) {
            r.control("TP", []);
            r.text([bold(*line)]);
            r.text([roman(*what)]);
        }
    }
    // The lines `--help` ends with, one per code.
    r.control("SH", ["EXIT STATUS"]);
    for line in cli::exit_help(sub).lines().skip(1) {
        let (code, meaning) = line
            .trim_start()
            .split_once("  ")
            .expect("exit_help writes CODE  MEANING");
        r.control("TP", []);
        r.text([bold(code)]);
        r.text([roman(meaning)]);
    }
    r.control("SH", ["SEE ALSO"]);
    let mut refs: Vec<String> = match sub {
        None => subcommands()
            .iter()
            .map(|s| format!("nvprobe-{s}"))
            .collect(),
        Some(s) => std::iter::once("nvprobe".to_owned())
            .chain(
                subcommands()
                    .iter()
                    .filter(|o| *o != s)
                    .map(|o| format!("nvprobe-{o}")),
            )
            .collect(),
    };
    let last = refs.pop();
    for p in refs {
        r.text([bold(p), roman("(1),")]);
    }
    if let Some(p) = last {
        r.text([bold(p), roman("(1)")]);
    }
    r.control("PP", []);
    r.text([roman(
        "The README and the guides (output schema, log pipelines, failure catalogue, deployment) are in /usr/share/doc/nvprobe with the Debian package, in share/doc/nvprobe of the tarball.",
    )]);
    let mut text = String::from_utf8_lossy(&out).into_owned();
    text.push_str(&r.to_roff());
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `nvprobe --help` lists under "Commands:", read from the help
    /// text itself (not from the code that writes the pages).
    fn listed_in_help() -> Vec<String> {
        let help = crate::Cli::command().render_help().to_string();
        let start = help.find("Commands:").expect("a Commands: block");
        help[start..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter(|l| !l[2..].starts_with(' '))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| *n != "help")
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_subcommand_in_help_has_a_page_with_its_flags() {
        let listed = listed_in_help();
        assert!(listed.len() >= 10, "{listed:?}");
        assert_eq!(subcommands(), listed);
        let top = command();
        for name in &listed {
            let p = page(Some(name));
            assert!(
                p.contains(&format!(".TH NVPROBE-{} 1 ", name.to_uppercase())),
                "{name}: {}",
                &p[..200.min(p.len())]
            );
            // whatis needs "name \- description" in NAME.
            assert!(
                p.contains(&format!("nvprobe\\-{name} \\- ")),
                "{name}:\n{p}"
            );
            let sub = top.find_subcommand(name).expect("sub");
            for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
                if let Some(long) = arg.get_long() {
                    let roffed = format!("\\-\\-{}", long.replace('-', "\\-"));
                    assert!(p.contains(&roffed), "{name}'s page lacks --{long}");
                }
            }
            assert!(p.contains(".SH \"EXIT STATUS\""), "{name}:\n{p}");
            assert!(!p.contains(".SH EXTRA"), "{name}");
        }
    }

    #[test]
    fn the_pages_say_each_commands_exit_codes() {
        let watch = page(Some("watch"));
        // 3 and 4 are watch's and top's; decode has neither.
        for code in ["\\fB0\\fR", "\\fB2\\fR", "\\fB3\\fR", "\\fB4\\fR"] {
            assert!(watch.contains(code), "{code} in watch's page");
        }
        let decode = page(Some("decode"));
        assert!(!decode.contains("\\fB3\\fR") && !decode.contains("\\fB4\\fR"));
        assert!(decode.contains("a file that is not a recording"));
        // One paragraph per code, as --help has a line per code.
        assert_eq!(watch.matches("\\fB2\\fR").count(), 1, "{watch}");
        for line in cli::exit_help(Some("watch")).lines().skip(1) {
            let meaning = line.trim_start().split_once("  ").expect("code").1;
            let roffed = meaning.replace('-', "\\-");
            assert!(watch.contains(&roffed), "{meaning:?} in\n{watch}");
        }
        let top = page(None);
        assert!(top.contains(".SH SUBCOMMANDS"), "{top}");
        assert!(top.contains("nvprobe\\-watch(1)"), "{top}");
        assert!(top.contains("\\fBnvprobe\\-watch\\fR(1),"), "{top}");
        assert!(
            !top.contains("nvprobe\\-help"),
            "clap's help subcommand has no page"
        );
    }

    #[test]
    fn completion_scripts_name_every_subcommand() {
        let bash = completion_script(clap_complete::Shell::Bash);
        assert!(bash.contains("complete -F _nvprobe"), "{bash}");
        for s in subcommands() {
            assert!(bash.contains(&format!("nvprobe,{s})")), "bash: {s}");
        }
        let zsh = completion_script(clap_complete::Shell::Zsh);
        assert!(zsh.starts_with("#compdef nvprobe"), "{zsh}");
        let fish = completion_script(clap_complete::Shell::Fish);
        assert!(fish.contains("complete -c nvprobe"), "{fish}");
        // A flag of a subcommand is offered under it.
        assert!(bash.contains("--device"), "bash: watch's --device");
    }

    #[test]
    fn an_unknown_command_has_no_page() {
        let e = manpage(ManpageArgs {
            command: Some("nosuch".into()),
        })
        .expect_err("refused");
        assert_eq!(e.0, exit::USAGE);
        let t = e.1.to_string();
        assert!(
            t.starts_with("\"nosuch\" is not a subcommand of nvprobe"),
            "{t}"
        );
        assert!(t.contains("watch, top, decode"), "{t}");
    }
}
