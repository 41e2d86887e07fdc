//! `nvprobe hooks`: the driver layer's hook table against a kernel's BTF.

use std::path::{Path, PathBuf};

use clap::Args;
use nvprobe::render;

use super::common::{Fail, exit};

/// This host's BTF folder, the default of --btf-dir.
const HOST_BTF: &str = "/sys/kernel/btf";

#[derive(Args)]
pub struct HooksArgs {
    /// Read BTF from DIR/vmlinux and DIR/<module> (a copy of
    /// /sys/kernel/btf from another host) instead of /sys/kernel/btf. Only
    /// regular files inside DIR are read (no link out of it, no FIFO or
    /// device), 64 MiB each at most; anything else is refused (exit 2).
    /// The kallsyms column is always this host's.
    #[arg(long, value_name = "DIR", default_value = HOST_BTF)]
    pub btf_dir: PathBuf,
    /// One JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One hook of the table, as `--json` says it.
#[derive(serde::Serialize)]
struct HookRow<'a> {
    name: &'static str,
    module: &'static str,
    required: bool,
    kallsyms: Option<bool>,
    assumed: &'static str,
    btf: &'a Option<String>,
    prototype_check: &'static str,
    /// "older": an earlier driver's prototype of the function.
    form: Option<&'static str>,
}

/// One module, as `--json` says it.
#[derive(serde::Serialize)]
struct ModuleRow<'a> {
    name: &'static str,
    loaded: Option<bool>,
    evidence: &'a str,
    btf: bool,
    hooks: usize,
    note: &'a str,
}

#[derive(serde::Serialize)]
struct HooksDoc<'a> {
    v: u32,
    #[serde(rename = "type")]
    kind: &'static str,
    btf_dir: String,
    modules: Vec<ModuleRow<'a>>,
    hooks: Vec<HookRow<'a>>,
}

pub fn run(a: HooksArgs) -> Result<(), Fail> {
    use nvprobe::hooks;
    // Bad input: a missing, unreadable or refused file (hooks::btf_prototypes
    // says which and why), or one that is not BTF.
    let protos = hooks::btf_prototypes(&a.btf_dir).map_err(|e| {
        Fail(
            exit::USAGE,
            anyhow::anyhow!(
                "{e}; --btf-dir needs vmlinux (and the nvidia, nvidia_uvm module BTF to check them)"
            ),
        )
    })?;
    let root = Path::new("/");
    let this_host = a.btf_dir == Path::new(HOST_BTF);
    // Each module said once, before its rows: a host without the driver
    // shows every module hook as absent, and this says why.
    let modules: Vec<hooks::ModuleState> = hooks::MODULES
        .iter()
        .map(|m| hooks::module_state(root, &a.btf_dir, m))
        .collect();
    let notes: Vec<String> = modules
        .iter()
        .map(|m| hooks::module_note(m, &a.btf_dir, this_host))
        .collect();
    let syms = hooks::kallsyms(root);
    let rows: Vec<HookRow<'_>> = protos
        .iter()
        .map(|(h, btf)| {
            let form = btf.as_deref().and_then(|b| hooks::known_form(h, b));
            // "not in BTF": the BTF was read and has no such function
            // (inlined, or the RM core, which has none); "no module BTF":
            // there was no BTF of its module to read.
            let module_btf = modules
                .iter()
                .find(|m| m.name == h.target.module())
                .is_none_or(|m| m.btf);
            HookRow {
                name: h.name,
                module: h.target.module(),
                required: h.required,
                kallsyms: syms
                    .as_ref()
                    .map(|s| s.contains(&(h.name.to_owned(), h.target.module().to_owned()))),
                assumed: h.prototype,
                btf,
                prototype_check: match (btf, form) {
                    (None, _) if !module_btf => "no module BTF",
                    (None, _) => "not in BTF",
                    (Some(_), Some(_)) => "matches",
                    (Some(_), None) => "differs",
                },
                form,
            }
        })
        .collect();
    if a.json {
        let doc = HooksDoc {
            v: render::SCHEMA_VERSION,
            kind: "hooks",
            btf_dir: a.btf_dir.display().to_string(),
            modules: modules
                .iter()
                .zip(&notes)
                .map(|(m, note)| ModuleRow {
                    name: m.name,
                    loaded: m.loaded,
                    evidence: &m.evidence,
                    btf: m.btf,
                    hooks: m.hooks,
                    note,
                })
                .collect(),
            hooks: rows,
        };
        let text = serde_json::to_string(&doc).map_err(|e| Fail(exit::RUNTIME, e.into()))?;
        return super::common::print(&format!("{text}\n"));
    }
    super::common::print(&hooks_text(&notes, &rows))
}

/// The table as text: the modules' notes, then a line per hook.
fn hooks_text(notes: &[String], rows: &[HookRow<'_>]) -> String {
    let mut text = String::new();
    for n in notes {
        text.push_str(n);
        text.push('\n');
    }
    for r in rows {
        text.push_str(&format!(
            "{:<32} {:<10} kallsyms:{:<4} btf:{}{}\n",
            r.name,
            r.module,
            r.kallsyms.map_or("?", |b| if b { "yes" } else { "no" }),
            r.prototype_check,
            if r.form == Some("older") {
                " (an earlier driver's prototype)"
            } else {
                ""
            }
        ));
        if let Some(b) = r.btf {
            text.push_str(&format!("    {b}\n"));
        }
        if r.prototype_check == "differs" {
            text.push_str(&format!("    assumed: {}\n", r.assumed));
        }
    }
    text
}
