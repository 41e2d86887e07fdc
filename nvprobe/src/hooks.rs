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
mod tests {
    use super::*;

    #[test]
    fn numbered_as_the_kernel_side() {
        let names: Vec<&str> = HOOKS.iter().map(|h| h.name).collect();
        assert_eq!(names.len(), nvprobe_common::HOOKS.len());
        assert_eq!(
            HOOKS[nvprobe_common::HOOK_RM_IOCTL as usize].name,
            "rm_ioctl"
        );
        assert_eq!(
            HOOKS[nvprobe_common::HOOK_UVM_IOCTL as usize].name,
            "uvm_unlocked_ioctl_entry"
        );
        assert!(
            HOOKS[..nvprobe_common::HOOK_FIRST_VMLINUX as usize]
                .iter()
                .all(|h| h.target != Target::Vmlinux)
        );
        assert!(
            HOOKS[nvprobe_common::HOOK_FIRST_VMLINUX as usize..]
                .iter()
                .all(|h| h.target == Target::Vmlinux)
        );
        assert_eq!(HOOKS[2].returns, Returns::NvStatus);
        assert_eq!(HOOKS[5].returns, Returns::Bool);
        assert_eq!(HOOKS[12].returns, Returns::Void);
        assert_eq!(HOOKS[14].returns, Returns::Ptr);
        assert_eq!(HOOKS[0].returns, Returns::Errno);
    }

    /// The H200's 580.159.04 modules (tests/fixtures/gpu-host): every hook
    /// but the HMM-only one and request_free_mem_region (not in that
    /// kernel's kallsyms) is present.
    #[test]
    fn the_h200_has_the_hook_symbols() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hosts/healthy");
        let v: DriverVersion = "580.159.04".parse().expect("version");
        let s = survey(&root, Some(&v)).expect("kallsyms");
        assert!(
            !s.iter()
                .any(|(h, _)| h.name == "nvidia_frontend_unlocked_ioctl"),
            "≤535 only"
        );
        let missing: Vec<&str> = s.iter().filter(|(_, p)| !*p).map(|(h, _)| h.name).collect();
        assert_eq!(
            missing,
            ["uvm_hmm_va_space_initialize", "request_free_mem_region"]
        );
        assert_eq!(
            describe(&s),
            "14/16 driver-hook symbols in /proc/kallsyms (missing: uvm_hmm_va_space_initialize (HMM builds only), request_free_mem_region)"
        );
        let old: DriverVersion = "535.104.05".parse().expect("version");
        let s = survey(&root, Some(&old)).expect("kallsyms");
        assert!(describe(&s).ends_with("so the driver layer cannot cover the ioctls"));
        // Driver version unknown: both nvidia entry points apply, one is enough.
        let s = survey(&root, None).expect("kallsyms");
        let d = describe(&s);
        assert!(
            d.contains("nvidia_frontend_unlocked_ioctl (drivers <= 535 only)"),
            "{d}"
        );
        assert!(!d.contains("cannot cover"), "{d}");
    }

    /// `btf_prototypes` on a folder, on a thread of its own: a read that
    /// blocks fails the test (after a bound far past any real read) instead
    /// of hanging it.
    fn prototypes_of(dir: &Path) -> Result<usize, String> {
        let (tx, rx) = std::sync::mpsc::channel();
        let d = dir.to_path_buf();
        std::thread::spawn(move || {
            let _ = tx.send(btf_prototypes(&d).map(|v| v.len()));
        });
        rx.recv_timeout(std::time::Duration::from_secs(120))
            .expect("btf_prototypes returned (it blocked on the file)")
    }

    /// A private folder for a `--btf-dir`, removed when dropped.
    struct BtfDir(std::path::PathBuf);

    impl BtfDir {
        fn new() -> Self {
            let (d, _) = crate::safefs::private_temp_dir(&std::env::temp_dir(), "nvprobe-btfdir-")
                .expect("mkdtemp");
            Self(d)
        }
        fn fifo(&self, name: &str) -> std::path::PathBuf {
            let p = self.0.join(name);
            nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o644))
                .expect("mkfifo");
            p
        }
    }

    impl Drop for BtfDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Issue 27, item 5: a host without the driver says so per module,
    /// with the evidence; a BTF folder without a module's BTF says that.
    #[test]
    fn each_module_is_said_loaded_or_not() {
        let root = BtfDir::new();
        let btf = root.0.join("sys/kernel/btf");
        std::fs::create_dir_all(&btf).expect("mkdir");
        std::fs::create_dir_all(root.0.join("sys/module/nvidia")).expect("mkdir");
        std::fs::write(btf.join("nvidia"), empty_btf()).expect("btf");
        let nv = module_state(&root.0, &btf, "nvidia");
        assert_eq!((nv.loaded, nv.btf, nv.hooks), (Some(true), true, 6));
        assert_eq!(
            module_note(&nv, Path::new("/sys/kernel/btf"), true),
            "module nvidia: loaded; BTF /sys/kernel/btf/nvidia"
        );
        // No /proc/modules: a kernel that cannot load modules.
        let uvm = module_state(&root.0, &btf, "nvidia_uvm");
        assert_eq!((uvm.loaded, uvm.btf), (Some(false), false));
        assert_eq!(
            module_note(&uvm, Path::new("/sys/kernel/btf"), true),
            "module nvidia_uvm: not loaded on this host (no /sys/module/nvidia_uvm, and this kernel cannot load modules (no /proc/modules)): its 7 hooks below have no symbol in kallsyms and no BTF to check. No modprobe can load it here: use a kernel that loads modules (or has the driver built in), or check another host's BTF with --btf-dir DIR (a copy of its /sys/kernel/btf)"
        );
        std::fs::create_dir_all(root.0.join("proc")).expect("mkdir");
        std::fs::write(root.0.join("proc/modules"), "nvidia_uvm 1 0 - Live 0x0\n").expect("w");
        let uvm = module_state(&root.0, &btf, "nvidia_uvm");
        assert_eq!(uvm.loaded, Some(true));
        assert!(
            module_note(&uvm, &btf, true).contains("loaded (listed in /proc/modules, though /sys/module/nvidia_uvm is missing), but without BTF"),
            "{}",
            module_note(&uvm, &btf, true)
        );
        std::fs::write(root.0.join("proc/modules"), "other 1 0 - Live 0x0\n").expect("w");
        let uvm = module_state(&root.0, &btf, "nvidia_uvm");
        assert!(
            module_note(&uvm, Path::new("/copy"), false).starts_with(
                "module nvidia_uvm: no BTF in /copy (no /copy/nvidia_uvm): the prototypes of its 7 hooks cannot be checked; copy /sys/kernel/btf/nvidia_uvm there from a host where the module is loaded; not loaded on this host (no /sys/module/nvidia_uvm, not in /proc/modules)"
            ),
            "{}",
            module_note(&uvm, Path::new("/copy"), false)
        );
        // A kernel that loads modules: modprobe is the remedy.
        assert!(
            module_note(&uvm, Path::new("/sys/kernel/btf"), true)
                .contains("not in /proc/modules): its 7 hooks below have no symbol in kallsyms and no BTF to check. Load the driver (modprobe nvidia_uvm), or"),
            "{}",
            module_note(&uvm, Path::new("/sys/kernel/btf"), true)
        );
    }

    /// BTF that parses: a header and an empty string section.
    fn empty_btf() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0xEB9F_u16.to_le_bytes());
        b.extend_from_slice(&[1, 0]);
        for v in [24_u32, 0, 0, 0, 1] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.push(0);
        b
    }

    /// Issue 23, item 5: `hooks --btf-dir` reads as `doctor --root` does.
    /// A FIFO named vmlinux is refused at once (the old read waited for a
    /// writer until killed).
    #[test]
    fn a_fifo_in_a_btf_dir_does_not_block() {
        let d = BtfDir::new();
        let vmlinux = d.fifo("vmlinux");
        let e = prototypes_of(&d.0).expect_err("a FIFO is refused");
        assert!(
            e.starts_with(&format!(
                "{}: a FIFO, not a regular file: not read (",
                vmlinux.display()
            )),
            "{e}"
        );
        assert!(e.contains("cp /sys/kernel/btf/vmlinux DIR/"), "{e}");
        // In a module's place too: refused, not taken for a module without BTF.
        std::fs::remove_file(&vmlinux).expect("rm");
        std::fs::write(&vmlinux, empty_btf()).expect("write vmlinux");
        std::fs::write(d.0.join("nvidia_uvm"), empty_btf()).expect("write nvidia_uvm");
        assert_eq!(prototypes_of(&d.0), Ok(HOOKS.len()), "a BTF folder reads");
        d.fifo("nvidia");
        let e = prototypes_of(&d.0).expect_err("a FIFO module file is refused");
        assert!(e.contains("/nvidia: a FIFO, not a regular file"), "{e}");
    }

    /// A link to /dev/zero is not followed (the old read ran out of memory).
    #[test]
    fn a_link_out_of_a_btf_dir_is_not_followed() {
        let d = BtfDir::new();
        std::os::unix::fs::symlink("/dev/zero", d.0.join("vmlinux")).expect("ln");
        let e = prototypes_of(&d.0).expect_err("a link out is refused");
        assert!(
            e.contains("vmlinux is a link out of the tree (-> /dev/zero): not read"),
            "{e}"
        );
    }

    /// A sparse file over the bound is refused on its size, before any read
    /// (the old read took 2.1 GB for a 2 GiB one).
    #[test]
    fn a_btf_file_over_the_bound_is_refused_unread() {
        let d = BtfDir::new();
        let vmlinux = d.0.join("vmlinux");
        std::fs::File::create(&vmlinux)
            .and_then(|f| f.set_len(BTF_CAP + 1))
            .expect("a sparse file");
        let e = prototypes_of(&d.0).expect_err("too large");
        // The size named is the file's own, read off its inode: a read up to
        // the bound could not know it.
        assert!(
            e.starts_with(&format!(
                "{} is 67108865 bytes, more than the 64 MiB nvprobe reads of a BTF file: not read",
                vmlinux.display()
            )),
            "{e}"
        );
    }

    fn fixture_prototypes() -> Vec<(String, String, Option<String>)> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/gpu-host/h200-580.159.04-hook-prototypes.txt");
        std::fs::read_to_string(p)
            .expect("fixture")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let f: Vec<&str> = l.splitn(3, '\t').collect();
                (
                    f[0].to_owned(),
                    f[1].to_owned(),
                    (f[2] != "-").then(|| f[2].to_owned()),
                )
            })
            .collect()
    }

    /// The table's prototypes are the real driver's, as its BTF gives them
    /// (H200, 580.159.04), for every hook that has BTF.
    #[test]
    fn the_table_matches_the_real_btf() {
        let fx = fixture_prototypes();
        assert_eq!(fx.len(), HOOKS.len());
        let mut checked = 0;
        for (name, module, proto) in &fx {
            let h = HOOKS.iter().find(|h| h.name == name).expect("in the table");
            assert_eq!(h.target.module(), module);
            if let Some(p) = proto {
                assert_eq!(
                    parse_prototype(p),
                    parse_prototype(h.prototype),
                    "{name}: BTF has {p}, the table {}",
                    h.prototype
                );
                checked += 1;
            }
        }
        assert!(checked >= 11, "{checked}");
    }

    /// The real 535.261.03 module's BTF (the kernel tier's HMM kernel, whose
    /// tree gives the modules BTF): every hook it has is the table's
    /// current prototype or one of its older ones, and the older ones are
    /// what 535 has.
    #[test]
    fn the_table_knows_the_real_535_prototypes() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/vm-6.1-hmm-535-hook-prototypes.txt");
        let text = std::fs::read_to_string(p).expect("fixture");
        let mut older = Vec::new();
        let mut checked = 0;
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let f: Vec<&str> = l.splitn(3, '\t').collect();
            let h = HOOKS.iter().find(|h| h.name == f[0]).expect("in the table");
            assert_eq!(h.target.module(), f[1]);
            if f[2] == "-" {
                continue;
            }
            match known_form(h, f[2]) {
                Some("older") => older.push(h.name),
                Some(_) => {}
                None => panic!(
                    "{}: 535's BTF has {}, the table {}",
                    h.name, f[2], h.prototype
                ),
            }
            checked += 1;
        }
        assert_eq!(checked, 15);
        assert_eq!(
            older,
            ["uvm_va_space_register_gpu", "uvm_gpu_retain_by_uuid"]
        );
    }

    /// The definition of `name` in C source: from the start of its line to
    /// the closing parenthesis, without storage and inline keywords.
    fn c_definition(src: &str, name: &str) -> Option<String> {
        let pat = format!(" {name}(");
        let mut from = 0;
        while let Some(i) = src[from..].find(&pat) {
            let at = from + i;
            let line_start = src[..at].rfind('\n').map_or(0, |n| n + 1);
            let close = at + src[at..].find(')')?;
            let after = src[close + 1..].trim_start();
            let head = &src[line_start..at];
            if after.starts_with('{')
                && !head.trim_start().starts_with("return")
                && !head.contains('=')
            {
                let text = src[line_start..=close]
                    .replace("static ", "")
                    .replace("noinline ", "")
                    .replace("__init ", "");
                return Some(text);
            }
            from = at + pat.len();
        }
        None
    }

    /// The stand-in modules of the VM tier define each hooked function with
    /// the real prototype: the BTF's where it has one, the table's where
    /// the RM core has no BTF.
    #[test]
    fn the_stand_ins_match_the_real_prototypes() {
        let kmod = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/kmod");
        let nv = std::fs::read_to_string(kmod.join("nvidia.c")).expect("nvidia.c");
        let uvm = std::fs::read_to_string(kmod.join("nvidia-uvm.c")).expect("nvidia-uvm.c");
        let mut checked = 0;
        for (name, module, proto) in fixture_prototypes() {
            let src = match module.as_str() {
                "nvidia" => &nv,
                "nvidia_uvm" => &uvm,
                _ => continue,
            };
            let Some(def) = c_definition(src, &name) else {
                // Hooks the stand-ins do not carry: the <=535 frontend
                // entry point only.
                assert_eq!(
                    name, "nvidia_frontend_unlocked_ioctl",
                    "{name} missing from the stand-in"
                );
                continue;
            };
            let want = proto.unwrap_or_else(|| {
                HOOKS
                    .iter()
                    .find(|h| h.name == name)
                    .expect("hook")
                    .prototype
                    .to_owned()
            });
            assert_eq!(
                parse_prototype(&def),
                parse_prototype(&want),
                "{name}: the stand-in has {def}, the driver {want}"
            );
            checked += 1;
        }
        assert!(checked >= 12, "{checked}");
    }
}
