//! Tracing ability of this kernel, asked of the kernel itself: doctor loads
//! its own small self-test object and attaches its one program of each kind
//! nvprobe uses, makes it fire, and reads its hit counter. Nothing is guessed from the kernel version.
//!
//! With `--root` only files are available (the tree's kernel config, BTF
//! and event-source listings); those checks say that they are file
//! evidence.

use std::{
    fs,
    path::{Path, PathBuf},
};

use aya::{
    Btf, EbpfLoader,
    maps::{Array, MapType},
    programs::{
        FEntry, KProbe, RawTracePoint, TracePoint, UProbe,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope},
    },
};
use nvprobe_common::{
    SELFTEST_FENTRY, SELFTEST_KPROBE, SELFTEST_RAW_TRACEPOINT, SELFTEST_TRACEPOINT, SELFTEST_UPROBE,
};

use super::check::{Check, Verdict, check};
use crate::safefs;

/// What each probe kind came to, for the layer summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ability {
    pub bpf: Option<bool>,
    pub btf: Option<bool>,
    pub tracefs: Option<bool>,
    pub tracepoint: Option<bool>,
    pub raw_tracepoint: Option<bool>,
    pub uprobe: Option<bool>,
    pub kprobe: Option<bool>,
    pub fentry: Option<bool>,
    /// Lockdown "confidentiality" forbids reading kernel memory from BPF.
    pub confidential: bool,
}

/// The syscall entry function of this architecture that ioctl(2) runs
/// (in vmlinux BTF on x86-64 and arm64, so fentry can take it too).
fn ioctl_fn() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "__arm64_sys_ioctl",
        "s390x" => "__s390x_sys_ioctl",
        _ => "__x64_sys_ioctl",
    }
}

/// The libc that this process runs, from its own maps.
fn own_libc() -> Option<PathBuf> {
    let maps = fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        let p = l.split_whitespace().nth(5)?;
        let name = Path::new(p).file_name()?.to_str()?;
        (name.starts_with("libc.so") || name.starts_with("libc-")).then(|| PathBuf::from(p))
    })
}

fn trigger() {
    // SAFETY: getppid has no preconditions; ioctl(FIONREAD) on /dev/null
    // writes an int we own (or fails with ENOTTY: the entry still runs).
    // getppid goes through libc, so the uprobe on libc's getppid fires.
    unsafe {
        libc::getppid();
        if let Ok(f) = std::fs::File::open("/dev/null") {
            let mut n: libc::c_int = 0;
            libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&f), libc::FIONREAD, &mut n);
        }
    }
}

/// Why a probe kind is refused, in words, with the kernel's error.
fn explain(kind: &str, err: &str) -> String {
    let lower = err.to_ascii_lowercase();
    let why = if kind == "kprobe"
        && (lower.contains("event_source/devices/kprobe") || lower.contains("kprobe/type"))
    {
        "no kprobe PMU (/sys/bus/event_source/devices/kprobe is missing: CONFIG_KPROBES is off)"
    } else if lower.contains("operation not permitted") || lower.contains("eperm") {
        "the kernel refused it with EPERM (a security policy: LSM, lockdown or a sandbox)"
    } else if lower.contains("not supported") || lower.contains("einval") {
        "this kernel does not support it"
    } else if lower.contains("no such file") {
        "the kernel has no such attach point"
    } else {
        "the kernel refused it"
    };
    let err = err
        .trim_end()
        .trim_end_matches("Verifier output:")
        .trim_end();
    format!("{why}: {err}")
}

/// The programs of the self-test object (nvprobe-ebpf/src/selftest_main.rs).
pub const PROGRAMS: [&str; 5] = [
    "doctor_tracepoint",
    "doctor_raw_tracepoint",
    "doctor_uprobe",
    "doctor_kprobe",
    "doctor_fentry",
];

/// What has to happen before doctor starts threads: tracefs (mounted in a
/// private mount namespace when the host has none: unshare(CLONE_NEWNS)
/// needs a single-threaded process).
pub struct Prepared {
    tracefs: (Option<&'static Path>, bool),
    /// This process's libc, found before the unshare: after it, the
    /// kernel names the files mapped before it from the namespace they
    /// were mapped in (under a chroot: the host's path, not the root's).
    libc: Option<PathBuf>,
}

pub fn prepare() -> Prepared {
    let found = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.join("events").is_dir());
    // Not mounted (a fresh VM or container): mount it in a private mount
    // namespace of this process only, to test tracepoints without changing
    // the host (watch mounts it for real when it starts).
    let libc = own_libc();
    let private = found.is_none() && private_tracefs().is_ok();
    Prepared {
        tracefs: (found, private),
        libc,
    }
}

/// doctor's own small BPF object (nvprobe-ebpf/src/selftest_main.rs):
/// one program of each kind, each counting its hits in SELFTEST_HITS.
pub(crate) static SELFTEST_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/nvprobe-selftest"));

/// Ask the kernel. Needs root; the caller checks.
pub fn live(prep: &Prepared, out: &mut Vec<Check>) -> Ability {
    let t0 = std::time::Instant::now();
    // aya's parse of vmlinux BTF (for the fentry test) is the slowest step:
    // run it beside the others.
    let aya_btf =
        std::thread::spawn(|| Btf::from_sys_fs().map_err(|e| format!("vmlinux BTF: {e}")));
    let mut a = Ability::default();
    lockdown(Path::new("/"), out, &mut a);
    let Some(mut ebpf) = load_selftest(out, &mut a) else {
        btf_checks(Path::new("/"), out, &mut a);
        return a;
    };
    btf_checks(Path::new("/"), out, &mut a);
    let tracefs = tracefs_check(prep, out, &mut a);
    let aya_btf: Result<Btf, String> = aya_btf
        .join()
        .unwrap_or_else(|_| Err("vmlinux BTF: the parser thread failed".into()));
    let tried = try_probes(
        &mut ebpf,
        (tracefs.is_some(), prep.libc.as_deref()),
        &aya_btf,
    );
    report_probes(tried, out, &mut a);
    returns_check(out, &mut a);
    // The uprobe (on libc, mapped by every process) is removed here, on this
    // thread: a removal still running when the process exits runs with
    // SIGKILL pending (exit_group zaps the other threads), fails, and the
    // kernel leaks the uprobe in every process that maps libc ("failed to
    // unregister, leaking uprobe", seen twice in a `cargo xtask test`).
    if let Ok(p) = prog::<UProbe>(&mut ebpf, "doctor_uprobe") {
        let _ = p.unload();
    }
    // Closing the other probes waits for RCU grace periods (tens of ms
    // each) and cannot leak: hand that to a thread, and to process exit if
    // it is still running.
    std::thread::spawn(move || {
        drop(ebpf);
        drop(aya_btf);
    });
    log::debug!("doctor: kernel probes took {:?}", t0.elapsed());
    a
}

/// Whether return probes are safe in seccomp-filtered processes (the
/// uretprobe system call's window, `uretprobe_gate`): where they are not,
/// watch hooks no libcuda.
fn returns_check(out: &mut Vec<Check>, a: &mut Ability) {
    use crate::uretprobe_gate::{Gate, closed_reason, probe, release};
    out.push(match probe() {
        Gate::Filtered => {
            if a.uprobe == Some(true) {
                a.uprobe = Some(false);
            }
            check(
                "tracing",
                "uretprobe_seccomp",
                Verdict::Warn,
                closed_reason(&release()),
                Some(if crate::uretprobe_gate::forced() {
                    "unset NVPROBE_URETPROBE_GATE where this kernel's return probes are known to be safe; until then verdicts rest on driver calls, and NCCL's collectives are seen at their entries only"
                } else {
                    "update the kernel to Linux 6.12.14, 6.13.3, 6.14 or later (or one whose vendor backported the fix); until then verdicts rest on driver calls, and NCCL's collectives are seen at their entries only"
                }),
            )
        }
        Gate::PassesFilters => check(
            "tracing",
            "uretprobe_seccomp",
            Verdict::Ok,
            "return probes pass seccomp filters (the kernel lets the uretprobe system call through)",
            None,
        ),
        Gate::NoSyscall => check(
            "tracing",
            "uretprobe_seccomp",
            Verdict::Ok,
            "return probes trap into the kernel (no uretprobe system call): seccomp filters never see them",
            None,
        ),
    });
}

/// The bpf() check: the map types nvprobe needs, and the self-test object
/// loaded (its map created).
fn load_selftest(out: &mut Vec<Check>, a: &mut Ability) -> Option<aya::Ebpf> {
    let maps = [
        MapType::RingBuf,
        MapType::Array,
        MapType::Hash,
        MapType::LruHash,
    ];
    let missing: Vec<String> = maps
        .iter()
        .filter(|m| !matches!(aya::sys::is_map_supported(**m), Ok(true)))
        .map(|m| format!("{m:?}"))
        .collect();
    let loaded = if missing.is_empty() {
        EbpfLoader::new()
            .load(SELFTEST_OBJECT)
            .map_err(|e| e.to_string())
    } else {
        Err(format!("map types not available: {}", missing.join(", ")))
    };
    match loaded {
        Ok(e) => {
            a.bpf = Some(true);
            out.push(check(
                "tracing",
                "bpf",
                Verdict::Ok,
                "the bpf() system call works: maps (ring buffer, arrays, hashes) were created",
                None,
            ));
            Some(e)
        }
        Err(e) => {
            a.bpf = Some(false);
            out.push(check(
                "tracing",
                "bpf",
                Verdict::Fail,
                format!("the kernel refused to create nvprobe's maps: {e}"),
                Some("BPF is disabled (CONFIG_BPF_SYSCALL), blocked by seccomp (containers: run privileged or allow bpf), or by kernel.unprivileged_bpf_disabled for non-root"),
            ));
            None
        }
    }
}

/// Where tracefs is (or that it mounts in a private namespace).
fn tracefs_check(prep: &Prepared, out: &mut Vec<Check>, a: &mut Ability) -> Option<&'static Path> {
    let (found, private) = prep.tracefs;
    let tracefs = found.or(private.then(|| Path::new("/sys/kernel/tracing")));
    a.tracefs = Some(tracefs.is_some());
    out.push(match (found, private) {
        (Some(p), _) => check(
            "tracing",
            "tracefs",
            Verdict::Ok,
            format!("tracefs is mounted at {}", p.display()),
            None,
        ),
        (None, true) => check(
            "tracing",
            "tracefs",
            Verdict::Ok,
            "tracefs is not mounted on this host; it mounts (tested in a private mount namespace), and nvprobe watch mounts it at /sys/kernel/tracing when it starts",
            None,
        ),
        (None, false) => check(
            "tracing",
            "tracefs",
            Verdict::Warn,
            "tracefs is not mounted (no /sys/kernel/tracing/events), and mounting it in a private mount namespace failed",
            Some("nvprobe watch tries to mount it at /sys/kernel/tracing when it starts; if that fails too: mount -t tracefs tracefs /sys/kernel/tracing"),
        ),
    });
    tracefs
}

/// What each probe kind came to: None when not tried.
struct Tried {
    tracepoint: Option<Result<String, String>>,
    raw: Result<String, String>,
    uprobe: Result<String, String>,
    kprobe: Result<String, String>,
    fentry: Result<String, String>,
}

/// Attach `prog` (by `attach`), trigger it, and count its hits. The link
/// lives until the object is dropped.
fn run_probe(
    ebpf: &mut aya::Ebpf,
    kind: &str,
    slot: u32,
    attach: &dyn Fn(&mut aya::Ebpf) -> Result<String, String>,
) -> Result<String, String> {
    let target = attach(ebpf)?;
    for _ in 0..3 {
        trigger();
    }
    let n = ebpf
        .map(nvprobe_common::maps::SELFTEST_HITS)
        .and_then(|m| Array::<_, u64>::try_from(m).ok())
        .and_then(|arr| arr.get(&slot, 0).ok())
        .unwrap_or(0);
    if n == 0 {
        return Err(format!(
            "{kind} on {target} attached but never fired when it was triggered"
        ));
    }
    Ok(format!("{target}: attached and fired ({n} hits)"))
}

fn try_probes(
    ebpf: &mut aya::Ebpf,
    (tracefs, libc): (bool, Option<&Path>),
    btf: &Result<Btf, String>,
) -> Tried {
    let tracepoint = tracefs.then(|| {
        run_probe(ebpf, "tracepoint", SELFTEST_TRACEPOINT, &|e| {
            let p: &mut TracePoint = prog(e, "doctor_tracepoint")?;
            p.load().map_err(|e| format!("load: {e}"))?;
            p.attach("syscalls", "sys_enter_getppid")
                .map_err(|e| format!("attach syscalls/sys_enter_getppid: {e}"))?;
            Ok("tracepoint syscalls/sys_enter_getppid".into())
        })
    });
    let raw = run_probe(ebpf, "raw tracepoint", SELFTEST_RAW_TRACEPOINT, &|e| {
        let p: &mut RawTracePoint = prog(e, "doctor_raw_tracepoint")?;
        p.load().map_err(|e| format!("load: {e}"))?;
        p.attach("sys_enter")
            .map_err(|e| format!("attach sys_enter: {e}"))?;
        Ok("raw tracepoint sys_enter".into())
    });
    let uprobe = match libc {
        None => Err("cannot find this process's libc in /proc/self/maps to probe".into()),
        Some(libc) => run_probe(ebpf, "uprobe", SELFTEST_UPROBE, &|e| {
            let p: &mut UProbe = prog(e, "doctor_uprobe")?;
            p.load().map_err(|e| format!("load: {e}"))?;
            let point = UProbeAttachPoint {
                location: UProbeAttachLocation::Symbol("getppid"),
                cookie: None,
            };
            p.attach(point, libc, UProbeScope::AllProcesses)
                .map_err(|e| format!("attach {}:getppid: {e:#}", libc.display()))?;
            Ok(format!("uprobe {}:getppid", libc.display()))
        }),
    };
    let kprobe = run_probe(ebpf, "kprobe", SELFTEST_KPROBE, &|e| {
        let p: &mut KProbe = prog(e, "doctor_kprobe")?;
        p.load().map_err(|e| format!("load: {e}"))?;
        p.attach(ioctl_fn(), 0)
            .map_err(|e| format!("attach {}: {e:#}", ioctl_fn()))?;
        Ok(format!("kprobe {}", ioctl_fn()))
    });
    let fentry = run_probe(ebpf, "fentry", SELFTEST_FENTRY, &|e| {
        let btf = btf.as_ref().map_err(Clone::clone)?;
        let p: &mut FEntry = prog(e, "doctor_fentry")?;
        p.load(ioctl_fn(), btf)
            .map_err(|e| format!("load on {}: {e:#}", ioctl_fn()))?;
        p.attach().map_err(|e| format!("attach: {e:#}"))?;
        Ok(format!("fentry {}", ioctl_fn()))
    });
    Tried {
        tracepoint,
        raw,
        uprobe,
        kprobe,
        fentry,
    }
}

/// One check per probe kind, with what a refusal costs nvprobe.
fn report_probes(t: Tried, out: &mut Vec<Check>, a: &mut Ability) {
    let mut report = |id: &'static str,
                      r: Option<Result<String, String>>,
                      fail: Verdict,
                      hint: &str|
     -> Option<bool> {
        match r {
            None => {
                out.push(check(
                    "tracing",
                    id,
                    Verdict::Warn,
                    format!(
                        "{}: not tried (tracefs is not mounted)",
                        id.replace('_', " ")
                    ),
                    Some(hint),
                ));
                None
            }
            Some(Ok(ev)) => {
                out.push(check("tracing", id, Verdict::Ok, ev, None));
                Some(true)
            }
            Some(Err(e)) => {
                out.push(check("tracing", id, fail, explain(id, &e), Some(hint)));
                Some(false)
            }
        }
    };
    a.tracepoint = report(
        "tracepoint",
        t.tracepoint,
        Verdict::Fail,
        "nvprobe's syscall and process layers need tracepoints (CONFIG_FTRACE_SYSCALLS, CONFIG_TRACEPOINTS)",
    );
    a.raw_tracepoint = report(
        "raw_tracepoint",
        Some(t.raw),
        Verdict::Warn,
        "without raw tracepoints nvprobe does not see signal senders and forks",
    );
    a.uprobe = report(
        "uprobe",
        Some(t.uprobe),
        Verdict::Warn,
        "without uprobes nvprobe cannot see cuInit's own return (CONFIG_UPROBE_EVENTS); verdicts rest on driver calls alone",
    );
    a.kprobe = report(
        "kprobe",
        Some(t.kprobe),
        Verdict::Warn,
        "without kprobes the driver layer (hooks inside nvidia and nvidia_uvm) is unavailable: no in-driver times or function names; the syscall layer still sees every call",
    );
    a.fentry = report(
        "fentry",
        Some(t.fentry),
        Verdict::Warn,
        "without fentry the kernel's HMM entry points can only be hooked with kprobes; nvprobe falls back to them where the kernel has kprobes",
    );
}

fn private_tracefs() -> nix::Result<()> {
    use nix::mount::{MsFlags, mount};
    crate::attach::own_mount_namespace(MsFlags::MS_PRIVATE).map_err(|(_, e)| e)?;
    mount(
        Some("tracefs"),
        "/sys/kernel/tracing",
        Some("tracefs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
}

fn prog<'a, T>(e: &'a mut aya::Ebpf, name: &str) -> Result<&'a mut T, String>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program>,
{
    e.program_mut(name)
        .ok_or_else(|| format!("the eBPF object has no {name} program"))?
        .try_into()
        .map_err(|_| format!("{name} has an unexpected program type"))
}

/// BTF of vmlinux (nvprobe reads struct offsets from it) and of the NVIDIA
/// modules (only module fentry would need it).
fn btf_checks(root: &Path, out: &mut Vec<Check>, a: &mut Ability) {
    let vmlinux = root.join("sys/kernel/btf/vmlinux");
    let live = root == Path::new("/");
    if live {
        match crate::btf::Btf::from_file(&vmlinux).map(|b| crate::btf::kernel_offsets(&b)) {
            Ok(Ok(_)) => {
                a.btf = Some(true);
                out.push(check(
                    "tracing",
                    "btf",
                    Verdict::Ok,
                    "/sys/kernel/btf/vmlinux parses and has the task/file offsets nvprobe reads",
                    None,
                ));
            }
            Ok(Err(e)) | Err(e) => {
                a.btf = Some(false);
                out.push(check(
                    "tracing",
                    "btf",
                    Verdict::Fail,
                    format!("/sys/kernel/btf/vmlinux: {e}"),
                    Some("nvprobe needs kernel BTF (CONFIG_DEBUG_INFO_BTF=y) to resolve file descriptors in the kernel"),
                ));
            }
        }
    } else {
        let have = safefs::exists(root, "sys/kernel/btf/vmlinux")
            || listed(root, "sys/kernel/btf", "vmlinux");
        a.btf = Some(have);
        out.push(if have {
            check(
                "tracing",
                "btf",
                Verdict::Ok,
                "/sys/kernel/btf/vmlinux is present (file evidence)",
                None,
            )
        } else {
            check(
                "tracing",
                "btf",
                Verdict::Fail,
                "/sys/kernel/btf/vmlinux is absent (file evidence)",
                Some("nvprobe needs kernel BTF (CONFIG_DEBUG_INFO_BTF=y) to resolve file descriptors in the kernel"),
            )
        });
    }
    for m in ["nvidia", "nvidia_uvm"] {
        if live && !safefs::exists(root, format!("sys/module/{m}")) {
            continue;
        }
        let p = format!("sys/kernel/btf/{m}");
        let present = if live {
            safefs::read_capped(root, &p, safefs::KALLSYMS_CAP)
                .ok()
                .is_some_and(|d| d.len() > 24 && d[..2] == [0x9f, 0xeb])
        } else {
            safefs::exists(root, &p) || listed(root, "sys/kernel/btf", m)
        };
        out.push(check(
            "tracing",
            if m == "nvidia" { "btf_nvidia" } else { "btf_nvidia_uvm" },
            Verdict::Ok,
            if present {
                format!("/sys/kernel/btf/{m} is present: the module's function prototypes can be checked")
            } else {
                format!("/sys/kernel/btf/{m} is absent (usual for DKMS builds): nvprobe hooks the module with kprobes, which need no BTF")
            },
            None,
        ));
    }
}

/// Lockdown mode: securityfs when mounted, else the kernel config's forced
/// mode and the command line.
fn lockdown(root: &Path, out: &mut Vec<Check>, a: &mut Ability) {
    let (mode, source) = if let Some(t) =
        safefs::read_text(root, "sys/kernel/security/lockdown", safefs::CAP)
        && let Some(m) = t
            .split_whitespace()
            .find(|w| w.starts_with('['))
            .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_owned())
    {
        (Some(m), "/sys/kernel/security/lockdown")
    } else {
        let cmdline = safefs::read_text(root, "proc/cmdline", safefs::CAP).unwrap_or_default();
        let from_cmd = cmdline
            .split_whitespace()
            .find_map(|w| w.strip_prefix("lockdown="))
            .map(str::to_owned);
        let cfg = super::driver::kernel_config(root);
        let forced = cfg.as_deref().and_then(|c| {
            [
                (
                    "CONFIG_LOCK_DOWN_KERNEL_FORCE_CONFIDENTIALITY=y",
                    "confidentiality",
                ),
                ("CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY=y", "integrity"),
                ("CONFIG_LOCK_DOWN_KERNEL_FORCE_NONE=y", "none"),
            ]
            .into_iter()
            .find(|(k, _)| c.lines().any(|l| l == *k))
            .map(|(_, v)| v.to_owned())
        });
        match (from_cmd, forced) {
            (Some(m), _) => (Some(m), "the kernel command line (lockdown=)"),
            (None, Some(m)) => (
                Some(m),
                "the kernel config (CONFIG_LOCK_DOWN_KERNEL_FORCE_*)",
            ),
            (None, None) => (None, ""),
        }
    };
    a.confidential = mode.as_deref() == Some("confidentiality");
    out.push(match mode.as_deref() {
        Some("confidentiality") => check(
            "tracing",
            "lockdown",
            Verdict::Fail,
            format!("lockdown is confidentiality (from {source})"),
            Some("BPF programs may not read kernel memory in this mode: nvprobe cannot resolve file descriptors. Boot without lockdown=confidentiality (Secure Boot may force it)"),
        ),
        Some(m) => check(
            "tracing",
            "lockdown",
            Verdict::Ok,
            format!(
                "lockdown is {m} (from {source}){}",
                if m == "integrity" {
                    ": BPF may read kernel memory, not write user memory; nvprobe only reads"
                } else {
                    ""
                }
            ),
            None,
        ),
        None => check(
            "tracing",
            "lockdown",
            Verdict::Ok,
            "lockdown mode unknown (securityfs not mounted, no forced mode in the kernel config): assumed none",
            None,
        ),
    });
}

/// A name in a snapshot's listing of a directory (`ROOT/DIR.list`, one
/// name per line), for directories whose files are not copied (what
/// `hooks::listed` does, read through `safefs`).
pub(super) fn listed(root: &Path, dir: &str, name: &str) -> bool {
    safefs::read_text(root, &format!("{dir}.list"), safefs::CAP)
        .is_some_and(|t| t.lines().any(|l| l.trim() == name))
}

/// File evidence for `--root`: the tree's kernel config and listings.
pub fn from_files(root: &Path, out: &mut Vec<Check>) -> Ability {
    let mut a = Ability::default();
    lockdown(root, out, &mut a);
    btf_checks(root, out, &mut a);
    let cfg = super::driver::kernel_config(root);
    let set = |k: &str| {
        cfg.as_deref()
            .map(|c| c.lines().any(|l| l == format!("{k}=y")))
    };
    let pmu = |name: &str| {
        safefs::exists(root, format!("sys/bus/event_source/devices/{name}"))
            || listed(root, "sys/bus/event_source/devices", name)
    };
    let has_listing = safefs::exists(root, "sys/bus/event_source/devices")
        || safefs::exists(root, "sys/bus/event_source/devices.list");
    let mut file_check = |id: &'static str,
                          what: &str,
                          ok: Option<bool>,
                          evidence: String,
                          bad: Verdict,
                          hint: &str|
     -> Option<bool> {
        out.push(match ok {
            Some(true) => check(
                "tracing",
                id,
                Verdict::Ok,
                format!(
                    "{what}: {} (file evidence)",
                    evidence
                        .replace("{}", "=y")
                        .replace("PMU {not}in", "PMU in")
                ),
                None,
            ),
            Some(false) => check(
                "tracing",
                id,
                bad,
                format!(
                    "{what}: {} (file evidence)",
                    evidence
                        .replace("{}", " is not set")
                        .replace("PMU {not}in", "PMU is not in")
                ),
                Some(hint),
            ),
            None => check(
                "tracing",
                id,
                Verdict::Warn,
                format!("{what}: unknown (the tree has no kernel config or event-source listing)"),
                Some("run doctor on the host itself (as root) to ask the kernel"),
            ),
        });
        ok
    };
    a.bpf = file_check(
        "bpf",
        "BPF syscall",
        set("CONFIG_BPF_SYSCALL"),
        "CONFIG_BPF_SYSCALL{}".into(),
        Verdict::Fail,
        "nvprobe needs CONFIG_BPF_SYSCALL=y",
    );
    a.tracepoint = file_check(
        "tracepoint",
        "syscall tracepoints",
        set("CONFIG_FTRACE_SYSCALLS"),
        "CONFIG_FTRACE_SYSCALLS{}".into(),
        Verdict::Fail,
        "nvprobe's syscall layer needs CONFIG_FTRACE_SYSCALLS=y",
    );
    a.raw_tracepoint = a.tracepoint;
    let up = if has_listing {
        Some(pmu("uprobe"))
    } else {
        set("CONFIG_UPROBE_EVENTS")
    };
    a.uprobe = file_check(
        "uprobe",
        "uprobes",
        up,
        if has_listing {
            "uprobe PMU {not}in /sys/bus/event_source/devices".into()
        } else {
            "CONFIG_UPROBE_EVENTS{}".into()
        },
        Verdict::Warn,
        "without uprobes nvprobe cannot see cuInit's own return",
    );
    let kp = if has_listing {
        Some(pmu("kprobe"))
    } else {
        set("CONFIG_KPROBES")
    };
    a.kprobe = file_check(
        "kprobe",
        "kprobes",
        kp,
        if has_listing {
            "kprobe PMU {not}in /sys/bus/event_source/devices".into()
        } else {
            "CONFIG_KPROBES{}".into()
        },
        Verdict::Warn,
        "without kprobes the driver layer (hooks inside nvidia and nvidia_uvm) is unavailable",
    );
    out.push(check(
        "tracing",
        "fentry",
        Verdict::Warn,
        "fentry: unknown from files (whether the kernel loads TRACING programs is a policy question; run doctor on the host)",
        None,
    ));
    a
}

/// Which nvprobe layers will work, from what the checks found.
pub fn layers(a: &Ability, out: &mut Vec<Check>) {
    let yes = |v: Option<bool>| v == Some(true);
    let syscall = yes(a.bpf) && yes(a.btf) && a.tracepoint != Some(false) && !a.confidential;
    let process = syscall && a.raw_tracepoint != Some(false);
    let cuda = yes(a.bpf) && yes(a.uprobe);
    let driver = yes(a.bpf) && yes(a.kprobe);
    let say = |b: bool, unknown: bool| {
        if b {
            "yes"
        } else if unknown {
            "unknown"
        } else {
            "no"
        }
    };
    let evidence = format!(
        "syscall layer (ioctls, opens on /dev/nvidia*): {}; process layer (signals, exits, forks): {}; libcuda uprobes (cuInit's own result): {}; driver layer (kprobes inside nvidia/nvidia_uvm): {}",
        say(syscall, a.tracepoint.is_none()),
        say(process, a.raw_tracepoint.is_none()),
        say(cuda, a.uprobe.is_none()),
        say(driver, a.kprobe.is_none()),
    );
    out.push(if !syscall {
        check(
            "tracing",
            "layers",
            Verdict::Fail,
            evidence,
            Some("nvprobe watch cannot trace on this kernel: see the failed checks above"),
        )
    } else if !(process && cuda && driver) {
        check(
            "tracing",
            "layers",
            Verdict::Warn,
            evidence,
            Some("nvprobe watch runs with the layers marked yes and says once which it lacks"),
        )
    } else {
        check("tracing", "layers", Verdict::Ok, evidence, None)
    });
}
