//! The driver layer's probe table: the functions inside `nvidia`,
//! `nvidia_uvm` and vmlinux that nvprobe hooks where the kernel allows it
//! (fentry/fexit → kprobe/kretprobe → none), with the driver versions each
//! applies to and its assumed prototype (docs/NVIDIA-ABI.md §6, checked against
//! the 580.159.04 module BTF of the H200 machine).
//!
//! Static functions may be inlined: a hook is only attachable when its
//! symbol is in /proc/kallsyms (module symbols carry `[nvidia]`).

use std::{collections::HashSet, fs, path::Path};

use crate::decode::version::DriverVersion;

pub use nvprobe_common::hooks::{HOOKS, Hook, Returns, Target};

/// Whether a hook exists in driver `v` (unknown version: assume it does).
pub fn applies_to(h: &Hook, v: Option<&DriverVersion>) -> bool {
    v.is_none_or(|v| h.applies_to_major(v.major))
}

/// The hook-table symbols of /proc/kallsyms (under ROOT) as (name, module
/// or "vmlinux"), and ("*", module) for each module that shows any symbol.
/// Only those are kept of the kernel's ~200,000 lines.
pub fn kallsyms(root: &Path) -> Option<HashSet<(String, String)>> {
    let text = crate::host::kallsyms_text(root)?;
    let names: HashSet<&str> = HOOKS.iter().map(|h| h.name).collect();
    let mut out = HashSet::new();
    for l in text.lines() {
        let mut f = l.split_whitespace();
        let (Some(_), Some(_), Some(name)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let module = f
            .next()
            .map_or("vmlinux", |m| m.trim_matches(|c| c == '[' || c == ']'));
        if names.contains(name) {
            out.insert((name.to_owned(), module.to_owned()));
        }
        if module != "vmlinux" && !out.contains(&("*".to_owned(), module.to_owned())) {
            out.insert(("*".to_owned(), module.to_owned()));
        }
    }
    Some(out)
}

/// Each hook that applies to this driver version, and whether its symbol
/// is in kallsyms.
pub fn survey(root: &Path, v: Option<&DriverVersion>) -> Option<Vec<(&'static Hook, bool)>> {
    let syms = kallsyms(root)?;
    // Unprivileged readers see no module symbols at all: that is no answer.
    if !syms.iter().any(|(_, m)| m == "nvidia") {
        return None;
    }
    Some(
        HOOKS
            .iter()
            .filter(|h| applies_to(h, v))
            .map(|h| {
                (
                    h,
                    syms.contains(&(h.name.to_owned(), h.target.module().to_owned())),
                )
            })
            .collect(),
    )
}

/// Whether the present hooks cover the ioctls: one of the nvidia ioctl
/// entry points (>=545 or <=535 name) and the UVM one.
pub fn covers_ioctls(s: &[(&Hook, bool)]) -> bool {
    let has = |n: &str| s.iter().any(|(h, p)| *p && h.name == n);
    (has("nvidia_unlocked_ioctl") || has("nvidia_frontend_unlocked_ioctl"))
        && has("uvm_unlocked_ioctl_entry")
}

/// One line: "12/17 hook symbols present (missing: a, b)".
pub fn describe(s: &[(&Hook, bool)]) -> String {
    let have = s.iter().filter(|(_, p)| *p).count();
    let missing: Vec<String> = s
        .iter()
        .filter(|(_, p)| !*p)
        .map(|(h, _)| {
            let note = if h.hmm_only {
                " (HMM builds only)".to_owned()
            } else if let Some(u) = h.until {
                format!(" (drivers <= {u} only)")
            } else if let Some(v) = h.since {
                format!(" (drivers >= {v} only)")
            } else {
                String::new()
            };
            format!("{}{note}", h.name)
        })
        .collect();
    format!(
        "{have}/{} driver-hook symbols in /proc/kallsyms{}{}",
        s.len(),
        if missing.is_empty() {
            String::new()
        } else {
            format!(" (missing: {})", missing.join(", "))
        },
        if covers_ioctls(s) {
            ""
        } else {
            "; an ioctl entry point is missing, so the driver layer cannot cover the ioctls"
        }
    )
}

/// Why the driver layer is not attached on this host, or None when it
/// could be (kprobes present). Read from the kprobe PMU that a kprobe
/// attach needs.
pub fn unavailable_reason(root: &Path) -> Option<String> {
    if root
        .join("sys/bus/event_source/devices/kprobe/type")
        .exists()
        || listed(root, "sys/bus/event_source/devices", "kprobe")
    {
        return None;
    }
    Some(NO_KPROBES.to_owned())
}

/// Why a kernel without kprobes has no driver layer, and what gives one
/// (`doctor` says the same).
pub const NO_KPROBES: &str = "this kernel has no kprobes (no /sys/bus/event_source/devices/kprobe: CONFIG_KPROBES is \
off), and nvprobe reaches functions inside nvidia and nvidia_uvm through kprobes only: a kernel built with \
CONFIG_KPROBES=y (every major distribution's) gives the driver layer";

/// The start record's account of the driver layer.
pub fn start_state(
    root: &Path,
    v: Option<&DriverVersion>,
    attached: &[&str],
    wanted: bool,
) -> nvprobe_model::records::DriverLayerStart {
    let s = survey(root, v);
    let reason = if !wanted {
        Some("turned off with --layers".to_owned())
    } else if attached.is_empty() {
        Some(unavailable_reason(root).unwrap_or_else(|| {
            "no hook of the table could be attached (see the probe_refused warnings)".to_owned()
        }))
    } else {
        None
    };
    nvprobe_model::records::DriverLayerStart {
        attached: !attached.is_empty(),
        reason,
        hooks: s.as_ref().map(|s| {
            s.iter()
                .map(|(h, p)| nvprobe_model::records::HookState {
                    name: h.name.to_owned(),
                    module: h.target.module().to_owned(),
                    present: *p,
                    attached: attached.contains(&h.name),
                    required: h.required,
                })
                .collect()
        }),
    }
}

/// Which of the prototypes the table knows for `h` a BTF prototype is:
/// "current", "older" (an earlier driver's), or None (neither).
pub fn known_form(h: &Hook, btf: &str) -> Option<&'static str> {
    let b = parse_prototype(btf)?;
    if Some(&b) == parse_prototype(h.prototype).as_ref() {
        Some("current")
    } else if h
        .older
        .iter()
        .any(|o| parse_prototype(o).as_ref() == Some(&b))
    {
        Some("older")
    } else {
        None
    }
}

/// A C prototype: (return type, name, [(param type, param name)]).
pub type Prototype = (String, String, Vec<(String, String)>);

/// A C prototype split into its parts, types normalised as BTF spells them.
pub fn parse_prototype(p: &str) -> Option<Prototype> {
    let p = p.split_whitespace().collect::<Vec<_>>().join(" ");
    let open = p.find('(')?;
    let close = p.rfind(')')?;
    let head = p[..open].trim();
    // The name is the last identifier of the head; a '*' before it belongs
    // to the return type.
    let split = head.rfind(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    let (ret, name) = (head[..=split].trim(), head[split + 1..].trim());
    let params = p[open + 1..close]
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty() && *a != "void")
        .map(|a| {
            let cut = a
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            (normalize_type(&a[..cut]), a[cut..].to_owned())
        })
        .collect();
    Some((normalize_type(ret), name.to_owned(), params))
}

/// C type spellings as BTF has them ("unsigned long" is "long unsigned
/// int"), with one space before each '*' and none after.
pub fn normalize_type(t: &str) -> String {
    let t = t.replace('*', " * ");
    let words: Vec<&str> = t.split_whitespace().collect();
    let joined = words.join(" ");
    let base = joined.trim_end_matches(" *").trim_end_matches('*').trim();
    let stars = joined.matches('*').count();
    let base = match base {
        "unsigned long" => "long unsigned int",
        "unsigned" => "unsigned int",
        "long" => "long int",
        "unsigned long long" => "long long unsigned int",
        "long long" => "long long int",
        "unsigned char" => "unsigned char",
        other => other,
    };
    if stars == 0 {
        base.to_owned()
    } else {
        format!("{base} {}", "*".repeat(stars))
    }
}

/// The most of one BTF file `hooks --btf-dir` reads: a kernel's vmlinux
/// BTF is about 5-10 MiB, a module's far less.
pub const BTF_CAP: u64 = 64 << 20;

/// DIR/NAME, one BTF file of a `--btf-dir`, read as `doctor --root` reads a
/// tree: resolved inside DIR (a link out of it is not followed), a regular
/// file (a FIFO or a device never blocks or floods the read), and at most
/// [`BTF_CAP`], refused on its size before anything is read. Ok(None): DIR
/// has no such file.
fn read_btf_file(dir: &Path, name: &str) -> Result<Option<Vec<u8>>, String> {
    use crate::safefs::{self, SafeReadError as E};
    let at = dir.join(name);
    let refused = |e: &E| {
        let why = match e {
            E::LinkOutside { .. } => {
                "nvprobe reads only files inside --btf-dir: copy the file itself there, e.g. cp /sys/kernel/btf/NAME DIR/"
            }
            E::NotRegular(_) => {
                "nvprobe reads only regular files there, since a FIFO or a device could block it or never end: copy the BTF file itself, e.g. cp /sys/kernel/btf/NAME DIR/"
            }
            E::TooLarge(_) => "a kernel's BTF is far smaller: is this the right file?",
            E::PermissionDenied => "run nvprobe as a user who may read it, or fix its permissions",
            E::NotFound | E::Io(_) => "copy /sys/kernel/btf/NAME of the host to check there",
        }
        .replace("NAME", name);
        format!("{}: {e}: not read ({why})", at.display())
    };
    let f = match safefs::open_regular(dir, name) {
        Ok(f) => f,
        Err(E::NotFound) => return Ok(None),
        Err(e) => return Err(refused(&e)),
    };
    let size = f
        .metadata()
        .map_err(|e| format!("{}: {e}", at.display()))?
        .len();
    if size > BTF_CAP {
        return Err(format!(
            "{} is {}, more than the {} nvprobe reads of a BTF file: not read (a kernel's vmlinux BTF is about 5-10 MiB, a module's less: point --btf-dir at a copy of /sys/kernel/btf)",
            at.display(),
            safefs::size_words(size),
            safefs::size_words(BTF_CAP)
        ));
    }
    safefs::read_to_cap(f, BTF_CAP)
        .map(Some)
        .map_err(|e| refused(&e))
}

/// One line per hook of a BTF dump: "name<TAB>module<TAB>prototype", the
/// prototype as BTF gives it ("-" when the BTF has no such function).
/// The files are read by [`read_btf_file`].
pub fn btf_prototypes(dir: &Path) -> Result<Vec<(&'static Hook, Option<String>)>, String> {
    let vmlinux = read_btf_file(dir, "vmlinux")?
        .ok_or_else(|| format!("{}: no such file", dir.join("vmlinux").display()))?;
    let base = crate::btf::Btf::parse(&vmlinux).map_err(|e| format!("vmlinux: {e}"))?;
    let mut modules = std::collections::HashMap::new();
    for m in ["nvidia", "nvidia_uvm"] {
        if let Some(d) = read_btf_file(dir, m)? {
            let b = crate::btf::Btf::parse_split(&d, &base).map_err(|e| format!("{m}: {e}"))?;
            modules.insert(m, b);
        }
    }
    Ok(HOOKS
        .iter()
        .map(|h| {
            let btf = match h.target {
                Target::Vmlinux => Some(&base),
                t => modules.get(t.module()),
            };
            let proto = btf.and_then(|b| b.prototype(h.name)).map(|(ret, params)| {
                let ps: Vec<String> = params
                    .iter()
                    .map(|(t, n)| {
                        if t.ends_with('*') {
                            format!("{t}{n}")
                        } else {
                            format!("{t} {n}")
                        }
                    })
                    .collect();
                let sep = if ret.ends_with('*') { "" } else { " " };
                format!("{ret}{sep}{}({})", h.name, ps.join(", "))
            });
            (h, proto)
        })
        .collect())
}

/// The driver modules whose functions the table hooks.
pub const MODULES: [&str; 2] = ["nvidia", "nvidia_uvm"];

/// What a host and a BTF folder say of one driver module, for `nvprobe
/// hooks`: whether the module is loaded on the host, and whether the folder
/// has its BTF (the rows' kallsyms and btf columns follow from these).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleState {
    pub name: &'static str,
    /// Loaded (or built in) on the host; None: it cannot be told.
    pub loaded: Option<bool>,
    /// How that was told: the files looked at, in words.
    pub evidence: String,
    /// The folder has the module's BTF (a regular file DIR/NAME).
    pub btf: bool,
    /// The table's hooks inside the module.
    pub hooks: usize,
    /// The kernel cannot load modules (a /sys/module without
    /// /proc/modules): the driver must be built in, not modprobe'd.
    pub no_modules: bool,
}

/// NAME's state on the host at ROOT (`/sys/module/NAME`, else
/// `/proc/modules`) and in the BTF folder DIR.
pub fn module_state(root: &Path, dir: &Path, name: &'static str) -> ModuleState {
    let sys = root.join("sys/module");
    let no_modules = sys.is_dir() && !root.join("proc/modules").exists();
    let (loaded, evidence) = if sys.join(name).is_dir() {
        (Some(true), format!("/sys/module/{name} exists"))
    } else {
        match fs::read_to_string(root.join("proc/modules")) {
            Ok(t) => {
                let listed = t.lines().any(|l| l.split_whitespace().next() == Some(name));
                let e = if listed {
                    format!("listed in /proc/modules, though /sys/module/{name} is missing")
                } else {
                    format!("no /sys/module/{name}, not in /proc/modules")
                };
                (Some(listed), e)
            }
            Err(_) if sys.is_dir() => (
                Some(false),
                format!(
                    "no /sys/module/{name}, and this kernel cannot load modules (no /proc/modules)"
                ),
            ),
            Err(_) => (
                None,
                "no /sys/module and no /proc/modules to tell".to_owned(),
            ),
        }
    };
    ModuleState {
        name,
        loaded,
        evidence,
        btf: crate::safefs::open_regular(dir, name).is_ok(),
        hooks: HOOKS.iter().filter(|h| h.target.module() == name).count(),
        no_modules,
    }
}

/// One line on a module for `nvprobe hooks`, said before its table: what
/// its rows rest on, and what to do when they cannot say much. DIR is the
/// BTF folder read; `this_host`: it is the host's own /sys/kernel/btf.
pub fn module_note(m: &ModuleState, dir: &Path, this_host: bool) -> String {
    let name = m.name;
    let n = m.hooks;
    let btf_path = dir.join(name);
    if this_host {
        return match (m.loaded, m.btf) {
            (Some(false), _) => format!(
                "module {name}: not loaded on this host ({}): its {n} hooks below have no symbol in kallsyms and no BTF to check. {}, or check another host's BTF with --btf-dir DIR (a copy of its /sys/kernel/btf)",
                m.evidence,
                if m.no_modules {
                    "No modprobe can load it here: use a kernel that loads modules (or has the driver built in)".to_owned()
                } else {
                    format!("Load the driver (modprobe {name})")
                }
            ),
            (_, true) => format!("module {name}: loaded; BTF {}", btf_path.display()),
            (Some(true), false) => format!(
                "module {name}: loaded ({}), but without BTF (no {}: built without CONFIG_DEBUG_INFO_BTF_MODULES, or without pahole): the prototypes of its {n} hooks cannot be checked",
                m.evidence,
                btf_path.display()
            ),
            (None, false) => format!(
                "module {name}: no BTF (no {}), and whether it is loaded cannot be told ({})",
                btf_path.display(),
                m.evidence
            ),
        };
    }
    let here = match m.loaded {
        Some(false) => format!(
            "; not loaded on this host ({}), so this host's kallsyms has none of its hooks",
            m.evidence
        ),
        _ => String::new(),
    };
    if m.btf {
        format!("module {name}: BTF {}{here}", btf_path.display())
    } else {
        format!(
            "module {name}: no BTF in {} (no {}): the prototypes of its {n} hooks cannot be checked; copy /sys/kernel/btf/{name} there from a host where the module is loaded{here}",
            dir.display(),
            btf_path.display()
        )
    }
}

/// A name in a snapshot's listing of a directory (`ROOT/DIR.list`, one
/// name per line), for directories whose files are not copied.
pub(crate) fn listed(root: &Path, dir: &str, name: &str) -> bool {
    fs::read_to_string(root.join(format!("{dir}.list")))
        .is_ok_and(|t| t.lines().any(|l| l.trim() == name))
}

#[cfg(test)]
mod tests;
