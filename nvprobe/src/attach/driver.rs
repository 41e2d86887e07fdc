//! Attaching the driver layer: for each hook of the table whose symbol
//! this kernel has, fentry/fexit (vmlinux functions, where TRACING
//! programs load) or a kprobe/kretprobe pair; prototypes checked against
//! the kernel's BTF first. Each refusal is reported once.

use std::path::Path;

use aya::Ebpf;

use super::settings::{ProbeState, Refusal, Settings};

/// kprobe/kretprobe pairs on each hook of the table whose symbol this
/// kernel has; each refusal is reported once and the others go on.
pub(super) fn attach_driver_layer(
    ebpf: &mut Ebpf,
    s: &Settings<'_>,
    tracefs: &Path,
    probes: &mut Vec<ProbeState>,
    refusals: &mut Vec<Refusal>,
) {
    let mut ftrace: Option<Option<std::collections::HashSet<String>>> = None;
    let Some(survey) = crate::hooks::survey(Path::new("/"), s.driver_version.as_ref()) else {
        return;
    };
    let mut vmlinux_btf: Option<Result<aya::Btf, String>> = None;
    // Where the kernel has BTF for the modules, check each hook's prototype
    // first: the ioctl entry points and rm_ioctl are read by argument
    // position, and a different prototype would be misread.
    let protos = crate::hooks::btf_prototypes(Path::new("/sys/kernel/btf")).unwrap_or_default();
    for (hook, present) in survey {
        if !present {
            continue;
        }
        let Some(i) = nvprobe_common::HOOKS
            .iter()
            .position(|h| h.name == hook.name)
        else {
            continue;
        };
        let btf_proto = protos
            .iter()
            .find(|(h, _)| h.name == hook.name)
            .and_then(|(_, b)| b.clone());
        let differs = btf_proto
            .as_ref()
            .is_some_and(|b| crate::hooks::known_form(hook, b).is_none());
        let reads_args = matches!(
            i as u32,
            nvprobe_common::HOOK_NV_IOCTL
                | nvprobe_common::HOOK_NV_FRONTEND_IOCTL
                | nvprobe_common::HOOK_RM_IOCTL
                | nvprobe_common::HOOK_UVM_IOCTL
        );
        if differs && reads_args {
            let err = format!(
                "this kernel's BTF gives `{}`, not the `{}` nvprobe reads its arguments by",
                btf_proto.as_deref().unwrap_or("?"),
                hook.prototype
            );
            refusals.push(Refusal {
                probe: hook.name.into(),
                reason: format!(
                    "{err}; not attached, so nvprobe misses {} inside the driver",
                    hook.why
                ),
            });
            probes.push(ProbeState {
                name: hook.name.into(),
                target: format!("kprobe {}:{}", hook.target.module(), hook.name),
                layer: "driver".into(),
                attached: false,
                error: Some(err),
            });
            continue;
        }
        // vmlinux functions: fentry/fexit first (cheaper, typed), where the
        // kernel allows TRACING programs; kprobes otherwise.
        let mut how = "kprobe";
        let mut fentry_err = None;
        if hook.target == crate::hooks::Target::Vmlinux {
            match attach_fentry_pair(ebpf, i, hook.name, &mut vmlinux_btf) {
                Ok(()) => how = "fentry",
                Err(e) => fentry_err = Some(e),
            }
        }
        let res = if how == "fentry" {
            Ok(())
        } else {
            (|| -> Result<(), String> {
                for prog in [
                    format!("nvprobe_drv_exit_{i}"),
                    format!("nvprobe_drv_enter_{i}"),
                ] {
                    let p: &mut aya::programs::KProbe = ebpf
                        .program_mut(&prog)
                        .ok_or_else(|| format!("program {prog} missing from the object"))?
                        .try_into()
                        .map_err(|e| format!("{prog}: {e}"))?;
                    p.load().map_err(|e| format!("loading {prog}: {e:#}"))?;
                    p.attach(hook.name, 0)
                        .map_err(|e| format!("attaching {prog} to {}: {e:#}", hook.name))?;
                }
                Ok(())
            })()
        };
        // Said plainly when the kernel refused a function that ftrace does
        // not know (the kernel logs "Could not probe notrace function").
        let res = res.map_err(|e| {
            let known = ftrace.get_or_insert_with(|| ftrace_functions(tracefs));
            match known {
                Some(set) if !set.contains(hook.name) => format!(
                    "{e}: {} is not an ftrace location (nvidia's RM core, nv-kernel.o, is \
built without ftrace entries) and this kernel refuses kprobes on such functions \
(CONFIG_KPROBE_EVENTS_ON_NOTRACE is off); the RM status comes from the ioctl's \
written-back parameters instead",
                    hook.name
                ),
                _ => e,
            }
        });
        if let Err(err) = &res {
            refusals.push(Refusal {
                probe: hook.name.into(),
                reason: format!(
                    "{err}; without it nvprobe misses {} inside the driver",
                    hook.why
                ),
            });
        }
        probes.push(ProbeState {
            name: hook.name.into(),
            target: format!(
                "{how} {}:{}{}{}",
                hook.target.module(),
                hook.name,
                match &fentry_err {
                    Some(e) if res.is_ok() => format!(" (fentry refused: {e})"),
                    _ => String::new(),
                },
                if differs {
                    " (its BTF prototype differs from the table's; only its return value is used)"
                } else {
                    ""
                }
            ),
            layer: "driver".into(),
            attached: res.is_ok(),
            error: res.err(),
        });
    }
}

/// The functions ftrace can trace (tracefs `available_filter_functions`,
/// "name [module]" per line), read once and only after a refusal; None
/// when the file cannot be read (at most 64 MiB).
fn ftrace_functions(tracefs: &Path) -> Option<std::collections::HashSet<String>> {
    use std::io::Read as _;
    let f = std::fs::File::open(tracefs.join("available_filter_functions")).ok()?;
    let mut text = String::new();
    f.take(64 << 20).read_to_string(&mut text).ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_owned)
            .collect(),
    )
}

/// fentry + fexit on a vmlinux function (programs nvprobe_drvf_*_{i}),
/// with the kernel's BTF parsed once for all of them.
fn attach_fentry_pair(
    ebpf: &mut Ebpf,
    i: usize,
    name: &str,
    btf: &mut Option<Result<aya::Btf, String>>,
) -> Result<(), String> {
    let btf = btf
        .get_or_insert_with(|| aya::Btf::from_sys_fs().map_err(|e| format!("vmlinux BTF: {e}")))
        .as_ref()
        .map_err(Clone::clone)?;
    // Exit first: an entry without its exit would leave DRV_INFLIGHT state.
    fentry_kind::<aya::programs::FExit>(ebpf, &format!("nvprobe_drvf_exit_{i}"), name, btf)?;
    fentry_kind::<aya::programs::FEntry>(ebpf, &format!("nvprobe_drvf_enter_{i}"), name, btf)?;
    Ok(())
}

/// A BTF-attached program (fentry or fexit): load on `name`, attach.
trait BtfTracing {
    fn load_on(&mut self, name: &str, btf: &aya::Btf) -> Result<(), aya::programs::ProgramError>;
    fn attach_now(&mut self) -> Result<(), aya::programs::ProgramError>;
}

impl BtfTracing for aya::programs::FEntry {
    fn load_on(&mut self, name: &str, btf: &aya::Btf) -> Result<(), aya::programs::ProgramError> {
        self.load(name, btf)
    }
    fn attach_now(&mut self) -> Result<(), aya::programs::ProgramError> {
        self.attach().map(|_| ())
    }
}

impl BtfTracing for aya::programs::FExit {
    fn load_on(&mut self, name: &str, btf: &aya::Btf) -> Result<(), aya::programs::ProgramError> {
        self.load(name, btf)
    }
    fn attach_now(&mut self) -> Result<(), aya::programs::ProgramError> {
        self.attach().map(|_| ())
    }
}

fn fentry_kind<'a, T>(
    ebpf: &'a mut Ebpf,
    prog: &str,
    name: &str,
    btf: &aya::Btf,
) -> Result<(), String>
where
    T: BtfTracing + 'a,
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    let p: &mut T = ebpf
        .program_mut(prog)
        .ok_or_else(|| format!("program {prog} missing from the object"))?
        .try_into()
        .map_err(|e| format!("{prog}: {e}"))?;
    p.load_on(name, btf)
        .map_err(|e| format!("loading {prog}: {e:#}"))?;
    p.attach_now()
        .map_err(|e| format!("attaching {prog}: {e:#}"))
}
