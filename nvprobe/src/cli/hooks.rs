//! `nvprobe hooks`: the driver layer's hook table against a kernel's BTF.

use std::path::{Path, PathBuf};

use clap::Args;
use nvprobe::render;

use super::Fail;

#[derive(Args)]
pub struct HooksArgs {
    /// Read BTF from DIR/vmlinux and DIR/<module> (a copy of
    /// /sys/kernel/btf from another host) instead of /sys/kernel/btf. Only
    /// regular files inside DIR are read (no link out of it, no FIFO or
    /// device), 64 MiB each at most; anything else is refused (exit 2).
    #[arg(long, value_name = "DIR", default_value = "/sys/kernel/btf")]
    pub btf_dir: PathBuf,
    /// One JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: HooksArgs) -> Result<(), Fail> {
    use nvprobe::hooks;
    // Bad input: a missing, unreadable or refused file (hooks::btf_prototypes
    // says which and why), or one that is not BTF.
    let protos = hooks::btf_prototypes(&a.btf_dir).map_err(|e| {
        Fail(
            2,
            anyhow::anyhow!(
                "{e}; --btf-dir needs vmlinux (and the nvidia, nvidia_uvm module BTF to check them)"
            ),
        )
    })?;
    let syms = hooks::kallsyms(Path::new("/"));
    let mut rows = Vec::new();
    for (h, btf) in &protos {
        let in_kallsyms = syms
            .as_ref()
            .map(|s| s.contains(&(h.name.to_owned(), h.target.module().to_owned())));
        let form = btf.as_deref().and_then(|b| hooks::known_form(h, b));
        let check = match (btf, form) {
            (None, _) => "not in BTF",
            (Some(_), Some(_)) => "matches",
            (Some(_), None) => "differs",
        };
        rows.push(serde_json::json!({
            "name": h.name,
            "module": h.target.module(),
            "required": h.required,
            "kallsyms": in_kallsyms,
            "assumed": h.prototype,
            "btf": btf,
            "prototype_check": check,
            // "older": an earlier driver's prototype of the function.
            "form": form,
        }));
        if !a.json {
            println!(
                "{:<32} {:<10} kallsyms:{:<4} btf:{}{}",
                h.name,
                h.target.module(),
                in_kallsyms.map_or("?", |b| if b { "yes" } else { "no" }),
                check,
                if form == Some("older") {
                    " (an earlier driver's prototype)"
                } else {
                    ""
                }
            );
            if let Some(b) = btf {
                println!("    {b}");
            }
            if check == "differs" {
                println!("    assumed: {}", h.prototype);
            }
        }
    }
    if a.json {
        println!(
            "{}",
            serde_json::json!({ "v": render::SCHEMA_VERSION, "type": "hooks", "btf_dir": a.btf_dir.display().to_string(), "hooks": rows })
        );
    }
    Ok(())
}
