//! Which probes run, the checks before loading, and attaching with
//! fallbacks. Every hook is declared once in [`PROBES`]. A required probe
//! that cannot attach stops the tool with a reason; an optional one is
//! reported once and the tool carries on.

use std::{
    io,
    path::{Path, PathBuf},
};

use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap as BpfHashMap, MapType},
    programs::TracePoint,
};
use nvprobe_common::{Config, ExtraKey};

use crate::{
    btf::{Btf, kernel_offsets},
    decode::{uvm, version::VersionCtx},
    host::ExtraDevice,
};

/// The eBPF object, built by build.rs (aya-build) and embedded.
pub(crate) static EBPF_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/nvprobe-bpf"));

/// One syscall tracepoint pair: the entry program and the exit program.
pub struct Probe {
    pub syscall: &'static str,
    pub enter: &'static str,
    pub exit: &'static str,
    /// Without a required probe nvprobe has nothing to show.
    pub required: bool,
    pub what: &'static str,
}

const fn p(
    syscall: &'static str,
    enter: &'static str,
    exit: &'static str,
    required: bool,
    what: &'static str,
) -> Probe {
    Probe {
        syscall,
        enter,
        exit,
        required,
        what,
    }
}

/// The syscall layer. Assumed prototypes are in nvprobe-ebpf/src/main.rs.
pub const PROBES: &[Probe] = &[
    p(
        "ioctl",
        "nvprobe_ioctl_enter",
        "nvprobe_ioctl_exit",
        true,
        "NVIDIA escapes and UVM commands",
    ),
    p(
        "openat",
        "nvprobe_openat_enter",
        "nvprobe_exit",
        false,
        "opens of NVIDIA nodes",
    ),
    p(
        "open",
        "nvprobe_open_enter",
        "nvprobe_exit",
        false,
        "opens (legacy open(2))",
    ),
    p(
        "openat2",
        "nvprobe_openat2_enter",
        "nvprobe_exit",
        false,
        "opens (openat2)",
    ),
    p(
        "close",
        "nvprobe_close_enter",
        "nvprobe_exit",
        false,
        "closes of NVIDIA fds",
    ),
    p(
        "dup",
        "nvprobe_dup_enter",
        "nvprobe_exit",
        false,
        "dup of NVIDIA fds",
    ),
    p(
        "dup2",
        "nvprobe_dup2_enter",
        "nvprobe_exit",
        false,
        "dup2 of NVIDIA fds",
    ),
    p(
        "dup3",
        "nvprobe_dup3_enter",
        "nvprobe_exit",
        false,
        "dup3 of NVIDIA fds",
    ),
    p(
        "fcntl",
        "nvprobe_fcntl_enter",
        "nvprobe_exit",
        false,
        "fcntl(F_DUPFD*) of NVIDIA fds",
    ),
    p(
        "mmap",
        "nvprobe_mmap_enter",
        "nvprobe_exit",
        false,
        "mmaps of NVIDIA fds",
    ),
    p(
        "newstat",
        "nvprobe_stat_enter",
        "nvprobe_exit",
        false,
        "stat of NVIDIA paths",
    ),
    p(
        "newlstat",
        "nvprobe_lstat_enter",
        "nvprobe_exit",
        false,
        "lstat of NVIDIA paths",
    ),
    p(
        "newfstatat",
        "nvprobe_fstatat_enter",
        "nvprobe_exit",
        false,
        "fstatat of NVIDIA paths",
    ),
    p(
        "statx",
        "nvprobe_statx_enter",
        "nvprobe_exit",
        false,
        "statx of NVIDIA paths",
    ),
    p(
        "access",
        "nvprobe_access_enter",
        "nvprobe_exit",
        false,
        "access of NVIDIA paths",
    ),
    p(
        "faccessat",
        "nvprobe_faccessat_enter",
        "nvprobe_exit",
        false,
        "faccessat of NVIDIA paths",
    ),
    p(
        "faccessat2",
        "nvprobe_faccessat2_enter",
        "nvprobe_exit",
        false,
        "faccessat2 of NVIDIA paths",
    ),
];

/// Where a single (non-syscall) program attaches.
pub enum Hook {
    TracePoint(&'static str, &'static str),
    RawTracePoint(&'static str),
}

/// The process layer: exit, exec and signals of processes that use NVIDIA
/// devices (for cuInit verdicts). All optional.
pub const PROC_PROBES: &[(&str, Hook, &str)] = &[
    (
        "nvprobe_proc_exit",
        Hook::TracePoint("sched", "sched_process_exit"),
        "how processes end",
    ),
    (
        "nvprobe_proc_exec",
        Hook::TracePoint("sched", "sched_process_exec"),
        "execs",
    ),
    (
        "nvprobe_signal_generate",
        Hook::RawTracePoint("signal_generate"),
        "who sends signals",
    ),
    (
        "nvprobe_signal_deliver",
        Hook::TracePoint("signal", "signal_deliver"),
        "signal delivery",
    ),
    (
        "nvprobe_proc_fork",
        Hook::RawTracePoint("sched_process_fork"),
        "helpers and workers forked by NVIDIA processes",
    ),
];

/// A reason nvprobe cannot start, with what the user should do. Each maps
/// to an exit code (see `main.rs`).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "nvprobe must run as root (euid is {0}): it loads BPF programs and reads other processes' \
         ioctl arguments. Run it with sudo."
    )]
    NotRoot(u32),
    #[error(
        "the kernel refused the bpf() system call ({0}). BPF may be disabled (CONFIG_BPF_SYSCALL), \
         blocked by a seccomp profile (containers: run privileged or allow bpf), or by lockdown."
    )]
    NoBpf(String),
    #[error(
        "this kernel has no BPF ring buffer (BPF_MAP_TYPE_RINGBUF needs Linux 5.8 or newer); \
         nvprobe needs it to deliver events"
    )]
    NoRingBuf,
    #[error(
        "tracefs is not mounted and mounting it at {path} failed: {err}. Mount it by hand: mount -t tracefs tracefs {path}"
    )]
    Tracefs { path: String, err: String },
    #[error(
        "this kernel has no syscall tracepoints ({0} is missing; CONFIG_FTRACE_SYSCALLS is off). \
         nvprobe's syscall layer needs them"
    )]
    NoSyscallTracepoints(String),
    #[error(
        "cannot read kernel BTF from {path}: {err}. nvprobe needs CONFIG_DEBUG_INFO_BTF=y to find \
         the struct offsets it uses to resolve file descriptors in the kernel"
    )]
    NoBtf { path: String, err: String },
    #[error("loading the BPF programs failed: {0}")]
    Load(String),
    #[error("attaching the required {syscall} probe failed: {err}")]
    Required { syscall: String, err: String },
}

pub use nvprobe_model::records::ProbeState;

/// A probe the kernel refused; reported once, then tracing goes on.
#[derive(Clone, Debug)]
pub struct Refusal {
    pub probe: String,
    pub reason: String,
}

pub struct Settings<'a> {
    /// Attach the driver layer (kprobes in nvidia/nvidia_uvm) when the
    /// kernel allows it.
    pub driver_layer: bool,
    /// Let the driver layer's ioctl entry points make the ioctl records and
    /// leave the ioctl syscall tracepoints off when they attach (other
    /// processes' ioctls then run no BPF program).
    pub driver_ioctls: bool,
    /// The syscall tracepoints (ioctl, opens, stats...).
    pub syscall_layer: bool,
    /// Exits, execs, signals, forks.
    pub process_layer: bool,
    pub driver_version: Option<crate::decode::version::DriverVersion>,
    pub uvm_major: u32,
    pub caps_major: u32,
    pub pids: &'a [u32],
    pub extra: &'a [(ExtraDevice, (u32, u64))],
    pub ringbuf_bytes: u32,
    pub version: VersionCtx,
}

pub struct Loaded {
    pub ebpf: Ebpf,
    pub probes: Vec<ProbeState>,
    pub refusals: Vec<Refusal>,
    pub tracefs: PathBuf,
    /// The NVIDIA ioctls are traced by the driver layer's kprobes, and the
    /// ioctl syscall tracepoints were left off.
    pub ioctls_in_driver: bool,
}

pub fn check_root() -> Result<(), StartError> {
    let euid = nix::unistd::geteuid().as_raw();
    if euid != 0 {
        return Err(StartError::NotRoot(euid));
    }
    Ok(())
}

pub fn check_bpf() -> Result<(), StartError> {
    match aya::sys::is_map_supported(MapType::RingBuf) {
        Ok(true) => Ok(()),
        Ok(false) => match aya::sys::is_map_supported(MapType::Array) {
            Ok(true) => Err(StartError::NoRingBuf),
            Ok(false) => Err(StartError::NoBpf("no map type can be created".into())),
            Err(e) => Err(StartError::NoBpf(e.to_string())),
        },
        Err(e) => Err(StartError::NoBpf(e.to_string())),
    }
}

const TRACEFS_PATHS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

fn tracefs_ready(p: &Path) -> bool {
    p.join("events").is_dir()
}

/// Find tracefs, mounting it at /sys/kernel/tracing when it is not mounted
/// (a fresh container or VM often has it unmounted). Must run before the
/// first tracepoint attach: aya looks for tracefs once.
pub fn ensure_tracefs() -> Result<(PathBuf, bool), StartError> {
    for p in TRACEFS_PATHS {
        if tracefs_ready(Path::new(p)) {
            return Ok((PathBuf::from(p), false));
        }
    }
    let target = Path::new(TRACEFS_PATHS[0]);
    let res = nix::mount::mount(
        Some("tracefs"),
        target,
        Some("tracefs"),
        nix::mount::MsFlags::MS_NOSUID
            | nix::mount::MsFlags::MS_NODEV
            | nix::mount::MsFlags::MS_NOEXEC,
        None::<&str>,
    );
    match res {
        Ok(()) if tracefs_ready(target) => Ok((target.to_path_buf(), true)),
        Ok(()) => Err(StartError::Tracefs {
            path: target.display().to_string(),
            err: "mounted, but it has no events directory".into(),
        }),
        Err(e) => Err(StartError::Tracefs {
            path: target.display().to_string(),
            err: e.desc().to_owned(),
        }),
    }
}

pub fn check_syscall_tracepoints(tracefs: &Path) -> Result<(), StartError> {
    let p = tracefs.join("events/syscalls/sys_enter_ioctl");
    if !p.is_dir() {
        return Err(StartError::NoSyscallTracepoints(p.display().to_string()));
    }
    Ok(())
}

pub fn kernel_config() -> Result<Config, StartError> {
    let path = Path::new("/sys/kernel/btf/vmlinux");
    let btf = Btf::from_file(path).map_err(|e| StartError::NoBtf {
        path: path.display().to_string(),
        err: e.to_string(),
    })?;
    kernel_offsets(&btf).map_err(|e| StartError::NoBtf {
        path: path.display().to_string(),
        err: e.to_string(),
    })
}

/// Load the object with this host's configuration and attach the probe
/// table. The caller has run the checks above.
pub fn load_and_attach(
    mut cfg: Config,
    s: &Settings<'_>,
    tracefs: PathBuf,
) -> Result<Loaded, StartError> {
    cfg.uvm_major = s.uvm_major;
    cfg.caps_major = s.caps_major;
    cfg.pid_filter = u32::from(!s.pids.is_empty());
    cfg.extra_files = s.extra.len() as u32;
    cfg.self_tgid = std::process::id();
    cfg.wakeup_bytes = (s.ringbuf_bytes / 8).min(1 << 20);
    cfg.drv_ioctls = u32::from(s.driver_ioctls);

    let mut ebpf = EbpfLoader::new()
        .override_global("CONFIG", &cfg, true)
        .map_max_entries("EVENTS", s.ringbuf_bytes)
        .load(EBPF_OBJECT)
        .map_err(|e| StartError::Load(format!("{e:#}")))?;

    if let Err(e) = aya_log::EbpfLogger::init(&mut ebpf) {
        log::debug!("no BPF-side logger: {e}");
    }

    fill_maps(&mut ebpf, s).map_err(|e| StartError::Load(format!("{e:#}")))?;

    let mut probes = Vec::new();
    let mut refusals = Vec::new();
    let mut loaded_progs: Vec<&'static str> = Vec::new();
    // The driver layer first: when its ioctl entry points attach (and the
    // kernel side was told to use them), the ioctl tracepoints stay off.
    if s.driver_layer && crate::hooks::unavailable_reason(Path::new("/")).is_none() {
        attach_driver_layer(&mut ebpf, s, &mut probes, &mut refusals);
    }
    let hooked = |n: &str| {
        probes
            .iter()
            .any(|p| p.layer == "driver" && p.attached && p.name == n)
    };
    let ioctls_in_driver = s.driver_ioctls
        && hooked("uvm_unlocked_ioctl_entry")
        && (hooked("nvidia_unlocked_ioctl") || hooked("nvidia_frontend_unlocked_ioctl"));
    for pr in PROBES
        .iter()
        .filter(|_| s.syscall_layer)
        .filter(|pr| !(ioctls_in_driver && pr.syscall == "ioctl"))
    {
        let enter_tp = format!("sys_enter_{}", pr.syscall);
        let exit_tp = format!("sys_exit_{}", pr.syscall);
        let res = (|| -> Result<(), String> {
            if !tracefs.join("events/syscalls").join(&enter_tp).is_dir() {
                return Err(format!(
                    "tracepoint syscalls/{enter_tp} does not exist on this kernel"
                ));
            }
            // Exit first: an entry without its exit would fill INFLIGHT.
            for (prog, tp) in [(pr.exit, &exit_tp), (pr.enter, &enter_tp)] {
                let program: &mut TracePoint = ebpf
                    .program_mut(prog)
                    .ok_or_else(|| format!("program {prog} missing from the object"))?
                    .try_into()
                    .map_err(|e| format!("{prog}: {e}"))?;
                if !loaded_progs.contains(&prog) {
                    program
                        .load()
                        .map_err(|e| format!("loading {prog}: {e:#}"))?;
                    loaded_progs.push(prog);
                }
                program
                    .attach("syscalls", tp)
                    .map_err(|e| format!("attaching syscalls/{tp}: {e:#}"))?;
            }
            Ok(())
        })();
        let target = format!("syscalls/sys_{{enter,exit}}_{}", pr.syscall);
        match res {
            Ok(()) => probes.push(ProbeState {
                name: pr.syscall.into(),
                target,
                layer: "syscall".into(),
                attached: true,
                error: None,
            }),
            Err(err) if pr.required => {
                return Err(StartError::Required {
                    syscall: pr.syscall.into(),
                    err,
                });
            }
            Err(err) => {
                refusals.push(Refusal {
                    probe: pr.syscall.into(),
                    reason: format!("{err}; without it nvprobe misses {}", pr.what),
                });
                probes.push(ProbeState {
                    name: pr.syscall.into(),
                    target,
                    layer: "syscall".into(),
                    attached: false,
                    error: Some(err),
                });
            }
        }
    }
    for (prog, hook, what) in PROC_PROBES.iter().filter(|_| s.process_layer) {
        let (target, res) = match hook {
            Hook::TracePoint(cat, name) => (
                format!("{cat}/{name}"),
                (|| -> Result<(), String> {
                    let p: &mut TracePoint = ebpf
                        .program_mut(prog)
                        .ok_or_else(|| format!("program {prog} missing from the object"))?
                        .try_into()
                        .map_err(|e| format!("{prog}: {e}"))?;
                    p.load().map_err(|e| format!("loading {prog}: {e:#}"))?;
                    p.attach(cat, name)
                        .map(|_| ())
                        .map_err(|e| format!("attaching {cat}/{name}: {e:#}"))
                })(),
            ),
            Hook::RawTracePoint(name) => (
                format!("raw_tracepoint/{name}"),
                (|| -> Result<(), String> {
                    let p: &mut aya::programs::RawTracePoint = ebpf
                        .program_mut(prog)
                        .ok_or_else(|| format!("program {prog} missing from the object"))?
                        .try_into()
                        .map_err(|e| format!("{prog}: {e}"))?;
                    p.load().map_err(|e| format!("loading {prog}: {e:#}"))?;
                    p.attach(name)
                        .map(|_| ())
                        .map_err(|e| format!("attaching raw tracepoint {name}: {e:#}"))
                })(),
            ),
        };
        if let Err(err) = &res {
            refusals.push(Refusal {
                probe: (*prog).into(),
                reason: format!(
                    "{err}; without it nvprobe misses {what}, and cuInit verdicts lose it"
                ),
            });
        }
        probes.push(ProbeState {
            name: (*prog).into(),
            target,
            layer: "process".into(),
            attached: res.is_ok(),
            error: res.err(),
        });
    }
    Ok(Loaded {
        ebpf,
        probes,
        refusals,
        tracefs,
        ioctls_in_driver,
    })
}

/// kprobe/kretprobe pairs on each hook of the table whose symbol this
/// kernel has; each refusal is reported once and the others go on.
fn attach_driver_layer(
    ebpf: &mut Ebpf,
    s: &Settings<'_>,
    probes: &mut Vec<ProbeState>,
    refusals: &mut Vec<Refusal>,
) {
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
        let differs = btf_proto.as_ref().is_some_and(|b| {
            crate::hooks::parse_prototype(b) != crate::hooks::parse_prototype(hook.prototype)
        });
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

fn fill_maps(ebpf: &mut Ebpf, s: &Settings<'_>) -> anyhow::Result<()> {
    let mut sizes: BpfHashMap<_, u32, u32> = BpfHashMap::try_from(
        ebpf.map_mut("UVM_SIZES")
            .ok_or_else(|| io::Error::other("UVM_SIZES missing"))?,
    )?;
    for (cmd, size) in uvm::sizes(&s.version) {
        sizes.insert(cmd, size, 0)?;
    }
    let mut pids: BpfHashMap<_, u32, u8> = BpfHashMap::try_from(
        ebpf.map_mut("PID_FILTER")
            .ok_or_else(|| io::Error::other("PID_FILTER missing"))?,
    )?;
    for &pid in s.pids {
        pids.insert(pid, 1, 0)?;
    }
    let mut extra: BpfHashMap<_, ExtraKey, u8> = BpfHashMap::try_from(
        ebpf.map_mut("EXTRA_FILES")
            .ok_or_else(|| io::Error::other("EXTRA_FILES missing"))?,
    )?;
    for (dev, (sdev, ino)) in s.extra {
        extra.insert(
            ExtraKey {
                sdev: *sdev,
                _pad: 0,
                ino: *ino,
            },
            dev.kind as u8,
            0,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod object_tests {
    use object::{Object as _, ObjectSymbol as _, SymbolKind};

    /// Every program in the embedded eBPF object is in a probe table (or is
    /// one of the libcuda uprobe programs): a program that is built but
    /// never attached is silently absent at run time.
    #[test]
    fn every_bpf_program_is_attached_by_some_table() {
        let obj = object::File::parse(super::EBPF_OBJECT).expect("the embedded object is ELF");
        let mut tabled: Vec<&str> = super::PROBES
            .iter()
            .flat_map(|p| [p.enter, p.exit])
            .chain(super::PROC_PROBES.iter().map(|(name, _, _)| *name))
            .collect();
        tabled.extend(crate::uprobes::PROGRAMS);
        tabled.extend(crate::doctor::kernel::PROGRAMS);
        let driver: Vec<String> = (0..nvprobe_common::HOOKS.len())
            .flat_map(|i| {
                [
                    format!("nvprobe_drv_enter_{i}"),
                    format!("nvprobe_drv_exit_{i}"),
                ]
            })
            .chain(
                (nvprobe_common::HOOK_FIRST_VMLINUX as usize..nvprobe_common::HOOKS.len())
                    .flat_map(|i| {
                        [
                            format!("nvprobe_drvf_enter_{i}"),
                            format!("nvprobe_drvf_exit_{i}"),
                        ]
                    }),
            )
            .collect();
        tabled.extend(driver.iter().map(String::as_str));
        let programs: Vec<String> = obj
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.is_global())
            .filter_map(|s| s.name().ok().map(str::to_owned))
            .filter(|n| n.starts_with("nvprobe_") || n.starts_with("doctor_"))
            .collect();
        assert!(programs.len() >= 20, "{programs:?}");
        for p in &programs {
            assert!(
                tabled.contains(&p.as_str()),
                "{p} is built but not attached anywhere"
            );
        }
    }
}
