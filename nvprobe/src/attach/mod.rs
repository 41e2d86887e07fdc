//! Loading and attaching, in phases: prepare (this host's configuration
//! for the object's globals) → load (the object, its maps filled) → attach
//! (driver layer first, then the syscall and process tracepoints; the
//! table is in [`table`]).

pub mod caps;
mod checks;
mod driver;
use fast::{
    COUNTING_EXIT, COUNTING_EXIT_SINCE, counting_exit_verifies, fd_cache_on, first_line, set_fd_gen,
};
pub use fast::{EXIT_ENV, exit_forced};
mod fast;
pub mod holders;
pub mod keep;
pub mod multi;
mod settings;
pub mod sys;
pub mod table;

use std::{
    io,
    os::fd::{AsFd, OwnedFd},
    path::{Path, PathBuf},
};

use aya::{Ebpf, EbpfLoader, maps::HashMap as BpfHashMap, programs::TracePoint};
use nvprobe_common::{Config, ExtraKey, maps};

use self::table::EBPF_OBJECT;
pub use self::{
    checks::{
        StartError, Tracefs, check_bpf, check_root, check_syscall_tracepoints, ensure_tracefs,
        kernel_config, own_mount_namespace,
    },
    table::{Hook, IOCTL_EXIT_COMPAT, PROBES, PROC_PROBES, Probe},
};
use crate::decode::{uvm, version::VersionCtx};

pub use self::settings::{ProbeState, Refusal, Settings};

pub struct Loaded {
    pub ebpf: Ebpf,
    /// The tracepoints' links (pinned by `keep::Keep::pin_all` like aya's
    /// own; closed with this value otherwise).
    pub links: Vec<OwnedFd>,
    pub probes: Vec<ProbeState>,
    pub refusals: Vec<Refusal>,
    pub tracefs: PathBuf,
    /// The NVIDIA ioctls are traced by the driver layer's kprobes, and the
    /// ioctl syscall tracepoints were left off.
    pub ioctls_in_driver: bool,
    /// What the descriptor programs' gate needs to open
    /// ([`holders::open_gate_after_scan`], once the capabilities are
    /// dropped); None when a probe it needs is missing.
    pub gate: Option<holders::Devices>,
}

impl Loaded {
    /// Detach every probe, all programs at once. Each tracepoint's last
    /// detach waits for an RCU grace period (`tracepoint_synchronize_unregister`;
    /// for the syscall tracepoints, RCU Tasks Trace), which a flood of
    /// syscalls on many CPUs stretches to a second or more: one after the
    /// other, two dozen of them kept a stopping nvprobe for 38 s on the
    /// 16-vCPU H200 host. Side by side they wait for the same grace periods.
    pub fn detach_all(&mut self) {
        use aya::programs::Program;
        std::thread::scope(|s| {
            for (_, p) in self.ebpf.programs_mut() {
                s.spawn(move || {
                    let _ = match p {
                        Program::TracePoint(p) => p.unload(),
                        Program::RawTracePoint(p) => p.unload(),
                        Program::BtfTracePoint(p) => p.unload(),
                        Program::KProbe(p) => p.unload(),
                        Program::UProbe(p) => p.unload(),
                        Program::FEntry(p) => p.unload(),
                        Program::FExit(p) => p.unload(),
                        // Other kinds are not used; dropped with the object.
                        _ => Ok(()),
                    };
                });
            }
        });
    }
}

/// Run a start-up step that waits for the kernel; if it takes more than a
/// second, say what nvprobe is waiting for (every attach and detach of a
/// perf event on the host takes one kernel lock, which another tool's
/// removals can hold for minutes).
pub fn patience<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let what = what.to_owned();
    let watcher = std::thread::Builder::new()
        .name("nvprobe-patience".into())
        .spawn(move || {
            let t0 = std::time::Instant::now();
            let mut next = std::time::Duration::from_secs(1);
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                rx.recv_timeout(next.saturating_sub(t0.elapsed()))
            {
                eprintln!(
                    "nvprobe: still {what} after {:.0} s: the kernel has not answered yet (its tracing lock may be held by another tool's attach or detach, e.g. an earlier tracer's uprobe removals)",
                    t0.elapsed().as_secs_f64()
                );
                next += std::time::Duration::from_secs(5);
            }
        })
        .ok();
    let r = f();
    drop(tx);
    if let Some(w) = watcher {
        let _ = w.join();
    }
    r
}

/// Load the object with this host's configuration and attach the probe
/// table. The caller has run the checks in [`checks`].
pub fn load_and_attach(
    cfg: Config,
    s: &Settings<'_>,
    tracefs: PathBuf,
) -> Result<Loaded, StartError> {
    let cfg = prepare(cfg, s);
    let mut ebpf = load(&cfg, s)?;
    let mut att = Attached::default();
    // The driver layer first: when its ioctl entry points attach (and the
    // kernel side was told to use them), the ioctl tracepoints stay off.
    if s.driver_layer && crate::hooks::unavailable_reason(Path::new("/")).is_none() {
        driver::attach_driver_layer(&mut ebpf, s, &tracefs, &mut att.probes, &mut att.refusals);
    }
    let hooked = |n: &str| {
        att.probes
            .iter()
            .any(|p| p.layer == "driver" && p.attached && p.name == n)
    };
    let ioctls_in_driver = s.driver_ioctls
        && hooked("uvm_unlocked_ioctl_entry")
        && (hooked("nvidia_unlocked_ioctl") || hooked("nvidia_frontend_unlocked_ioctl"));
    if ioctls_in_driver && s.quiet {
        // The driver layer's ioctl records are made by the exit as it was.
        att.refusals.push(Refusal {
            probe: "ioctl_exit".into(),
            reason: format!(
                "{COUNTING_EXIT} (the driver layer makes the ioctl records here; --layers syscall,process makes the syscall layer make them)"
            ),
        });
    }
    if s.syscall_layer {
        attach_syscall_layer(&mut ebpf, &tracefs, ioctls_in_driver, &mut att)?;
    }
    if s.process_layer {
        attach_process_layer(&mut ebpf, &tracefs, &mut att);
    }
    if fd_cache_on(&att.probes) {
        set_fd_gen(&mut ebpf, 0).map_err(|e| StartError::Load(format!("{e:#}")))?;
    }
    let gate = fast::fd_gate_on(&att.probes).then(|| holders::Devices {
        uvm_major: s.uvm_major,
        caps_major: s.caps_major,
        extra: s.extra.iter().map(|(_, id)| *id).collect(),
        quiet: s.quiet,
        pids: s.pids.to_vec(),
    });
    Ok(Loaded {
        ebpf,
        links: att.links,
        probes: att.probes,
        refusals: att.refusals,
        tracefs,
        ioctls_in_driver,
        gate,
    })
}

/// Phase 1: the object's globals for this host and these settings.
fn prepare(mut cfg: Config, s: &Settings<'_>) -> Config {
    cfg.uvm_major = s.uvm_major;
    cfg.caps_major = s.caps_major;
    cfg.pid_filter = u32::from(!s.pids.is_empty());
    cfg.extra_files = s.extra.len() as u32;
    // The kernel's number for this process: the programs compare it with
    // bpf_get_current_pid_tgid, which process::id() matches only in the
    // initial pid namespace.
    cfg.self_tgid = match sys::host_tgid() {
        Ok(t) => t,
        Err(e) => {
            if crate::host::procfs_is_hosts(std::path::Path::new("/proc")) == Some(false) {
                eprintln!(
                    "nvprobe: warning: nvprobe's own process id as the kernel numbers it could not be learnt ({e}), and it runs in a pid namespace other than the host's: its own calls may be traced"
                );
            }
            std::process::id()
        }
    };
    // Benchmarks only: parts of the ioctl programs switched off
    // (tests/scripts/bench-percall-tax.py); said, since the trace is then
    // not one.
    if let Some(bits) = std::env::var("NVPROBE_BENCH_SKIP")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|b| *b != 0)
    {
        eprintln!(
            "nvprobe: warning: NVPROBE_BENCH_SKIP={bits}: the ioctl programs run with parts switched off, for a benchmark: this is not a trace"
        );
        cfg.bench_skip = bits;
    }
    cfg.wakeup_bytes = (s.ringbuf_bytes / 8).min(1 << 20);
    cfg.drv_ioctls = u32::from(s.driver_ioctls);
    cfg.quiet = u32::from(s.quiet);
    // Calls timed in ticks save the clock only where the counting exit
    // runs (the older exit sends every call of a process not yet quiet),
    // and the driver layer's spans need the calls' fine starts.
    let driver_spans = s.driver_layer && crate::hooks::unavailable_reason(Path::new("/")).is_none();
    cfg.coarse_tick_ns = if s.coarse_starts && counting_exit_verifies() && !driver_spans {
        coarse_tick_ns()
    } else {
        0
    };
    cfg.rm_params = u32::from(!rm_params_entries(&s.version).is_empty());
    cfg
}

/// The coarse clock's tick, when it is one a call's start may be read
/// from (at most 10 ms: HZ 100); 0, the fine clock, otherwise.
fn coarse_tick_ns() -> u32 {
    use nix::time::{ClockId, clock_getres};
    match clock_getres(ClockId::CLOCK_MONOTONIC_COARSE) {
        Ok(t) => {
            let ns = t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64;
            if (1..=10_000_000).contains(&ns) {
                ns as u32
            } else {
                0
            }
        }
        Err(_) => 0,
    }
}

fn rm_params_entries(v: &VersionCtx) -> Vec<(u32, u32)> {
    let mut e = crate::decode::rmparams::kernel_entries(v);
    e.truncate(nvprobe_common::rm_params::MAX_ENTRIES as usize);
    e
}

/// Phase 2: load the object (maps created, ring buffer sized) and fill the
/// maps user space owns.
fn load(cfg: &Config, s: &Settings<'_>) -> Result<Ebpf, StartError> {
    let mut ebpf = EbpfLoader::new()
        .override_global("CONFIG", cfg, true)
        .map_max_entries(maps::EVENTS, s.ringbuf_bytes)
        .load(EBPF_OBJECT)
        .map_err(|e| StartError::Load(format!("{e:#}")))?;
    if let Err(e) = aya_log::EbpfLogger::init(&mut ebpf) {
        log::debug!("no BPF-side logger: {e}");
    }
    fill_maps(&mut ebpf, s).map_err(|e| StartError::Load(format!("{e:#}")))?;
    Ok(ebpf)
}

/// What the attach phase has done so far.
#[derive(Default)]
struct Attached {
    probes: Vec<ProbeState>,
    refusals: Vec<Refusal>,
    /// Programs loaded (the shared exit program serves many syscalls).
    loaded: Vec<&'static str>,
    /// The tracepoints' BPF links (made here, not by aya).
    links: Vec<OwnedFd>,
}

/// A tracepoint program of the object, loaded once: a descriptor of it
/// (the attach is made with it, off aya, see [`attach_tracepoints`]).
fn tracepoint(
    ebpf: &mut Ebpf,
    prog: &'static str,
    loaded: &mut Vec<&'static str>,
) -> Result<OwnedFd, String> {
    let program: &mut TracePoint = ebpf
        .program_mut(prog)
        .ok_or_else(|| format!("program {prog} missing from the object"))?
        .try_into()
        .map_err(|e| format!("{prog}: {e}"))?;
    if !loaded.contains(&prog) {
        program
            .load()
            .map_err(|e| format!("loading {prog}: {e:#}"))?;
        loaded.push(prog);
    }
    program
        .fd()
        .map_err(|e| format!("{prog}: {e}"))?
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("{prog}: {e}"))
}

/// One chain of tracepoint attaches, made in order: (program, category,
/// tracepoint).
type Chain = Vec<(OwnedFd, &'static str, String)>;

/// Attach each chain's tracepoints in order, the chains side by side (a
/// thread each). Every perf-event attach takes the kernel's tracing lock,
/// which a tracer's removals (an nvprobe that stopped a moment ago) hold
/// for a grace period each; one after the other, each attach waited for
/// one removal (2.7 s for the 43 of a restart on the H200), while waiting
/// in the lock's queue together they all get it between two removals.
/// Returns each chain's links, or the first error.
fn attach_tracepoints(tracefs: &Path, chains: Vec<Chain>) -> Vec<Result<Vec<OwnedFd>, String>> {
    let one = |prog: &OwnedFd, cat: &str, name: &str| -> Result<OwnedFd, String> {
        let id_file = tracefs.join("events").join(cat).join(name).join("id");
        let id = std::fs::read_to_string(&id_file)
            .map_err(|e| format!("tracepoint {cat}/{name}: {}: {e}", id_file.display()))?
            .trim()
            .parse::<u64>()
            .map_err(|e| format!("tracepoint {cat}/{name}: bad id ({e})"))?;
        let event = sys::perf_tracepoint(id)
            .map_err(|e| format!("attaching {cat}/{name}: perf_event_open: {e}"))?;
        sys::perf_event_link(prog.as_fd(), event, 0)
            .map_err(|e| format!("attaching {cat}/{name}: BPF link: {e}"))
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = chains
            .iter()
            .map(|chain| {
                s.spawn(move || {
                    chain
                        .iter()
                        .map(|(prog, cat, name)| one(prog, cat, name))
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("the attaching thread panicked".into()))
            })
            .collect()
    })
}

/// Phase 3a: the syscall tracepoint pairs (the ioctl pair stays off when
/// the driver layer makes the ioctl records).
fn attach_syscall_layer(
    ebpf: &mut Ebpf,
    tracefs: &Path,
    ioctls_in_driver: bool,
    att: &mut Attached,
) -> Result<(), StartError> {
    let probes: Vec<&Probe> = PROBES
        .iter()
        .filter(|pr| !(ioctls_in_driver && pr.syscall == "ioctl"))
        .collect();
    // Programs loaded first (the verifier), then every pair at once.
    let mut chains: Vec<Result<Chain, String>> = Vec::new();
    for pr in &probes {
        let enter_tp = format!("sys_enter_{}", pr.syscall);
        let exit_tp = format!("sys_exit_{}", pr.syscall);
        chains.push((|| -> Result<Chain, String> {
            if !tracefs.join("events/syscalls").join(&enter_tp).is_dir() {
                return Err(format!(
                    "tracepoint syscalls/{enter_tp} does not exist on this kernel"
                ));
            }
            // Exit first: an entry without its exit would fill INFLIGHT.
            if pr.syscall == "ioctl" && !counting_exit_verifies() {
                let reason = if exit_forced() == Ok(Some(false)) {
                    format!(
                        "{COUNTING_EXIT}: {EXIT_ENV}=simple in nvprobe's environment attaches the simpler one; unset it to have the counting exit where the kernel takes it"
                    )
                } else {
                    format!(
                        "{COUNTING_EXIT}: kernels before {}.{} take minutes to verify it and then refuse it as too complex (measured on 6.1); the simpler one is attached ({EXIT_ENV}=counting tries it anyway, for a kernel whose vendor brought a newer verifier)",
                        COUNTING_EXIT_SINCE.0, COUNTING_EXIT_SINCE.1
                    )
                };
                att.refusals.push(Refusal {
                    probe: "ioctl_exit".into(),
                    reason,
                });
                return Ok(vec![
                    (
                        tracepoint(ebpf, IOCTL_EXIT_COMPAT, &mut att.loaded)?,
                        "syscalls",
                        exit_tp,
                    ),
                    (
                        tracepoint(ebpf, pr.enter, &mut att.loaded)?,
                        "syscalls",
                        enter_tp,
                    ),
                ]);
            }
            let exit = match tracepoint(ebpf, pr.exit, &mut att.loaded) {
                Err(e) if pr.syscall == "ioctl" => {
                    // A verifier that finds the counting exit too complex
                    // (Linux 6.1's): the one before it, said once.
                    let fd = tracepoint(ebpf, IOCTL_EXIT_COMPAT, &mut att.loaded)
                        .map_err(|e2| format!("{e}; and the simpler exit: {e2}"))?;
                    att.refusals.push(Refusal {
                        probe: "ioctl_exit".into(),
                        reason: format!(
                            "{COUNTING_EXIT}: this kernel's verifier refused it ({}); the simpler one is attached",
                            first_line(&e)
                        ),
                    });
                    fd
                }
                r => r?,
            };
            Ok(vec![
                (exit, "syscalls", exit_tp),
                (
                    tracepoint(ebpf, pr.enter, &mut att.loaded)?,
                    "syscalls",
                    enter_tp,
                ),
            ])
        })());
    }
    let ready: Vec<Chain> = chains
        .iter_mut()
        .filter_map(|c| c.as_mut().ok().map(std::mem::take))
        .collect();
    let mut attached = attach_tracepoints(tracefs, ready).into_iter();
    for (pr, chain) in probes.iter().zip(chains) {
        let res = chain.and_then(|_| {
            attached
                .next()
                .unwrap_or_else(|| Err("not attached".into()))
        });
        let res = res.map(|links| att.links.extend(links));
        let target = format!("syscalls/sys_{{enter,exit}}_{}", pr.syscall);
        if let Err(err) = &res {
            if pr.required {
                return Err(StartError::Required {
                    syscall: pr.syscall.into(),
                    err: err.clone(),
                });
            }
            att.refusals.push(Refusal {
                probe: pr.syscall.into(),
                reason: format!("{err}; without it nvprobe misses {}", pr.what),
            });
        }
        att.probes.push(ProbeState {
            name: pr.syscall.into(),
            target,
            layer: "syscall".into(),
            attached: res.is_ok(),
            error: res.err(),
        });
    }
    Ok(())
}

/// Phase 3b: the process layer (all optional).
fn attach_process_layer(ebpf: &mut Ebpf, tracefs: &Path, att: &mut Attached) {
    for (prog, hook, what) in PROC_PROBES {
        let (target, res) = match hook {
            Hook::TracePoint(cat, name) => (
                format!("{cat}/{name}"),
                tracepoint(ebpf, prog, &mut att.loaded).and_then(|p| {
                    let mut r =
                        attach_tracepoints(tracefs, vec![vec![(p, *cat, (*name).to_owned())]]);
                    r.pop()
                        .unwrap_or_else(|| Err("not attached".into()))
                        .map(|links| att.links.extend(links))
                }),
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
            att.refusals.push(Refusal {
                probe: (*prog).into(),
                reason: format!(
                    "{err}; without it nvprobe misses {what}, and cuInit verdicts lose it"
                ),
            });
        }
        att.probes.push(ProbeState {
            name: (*prog).into(),
            target,
            layer: "process".into(),
            attached: res.is_ok(),
            error: res.err(),
        });
    }
}

fn fill_maps(ebpf: &mut Ebpf, s: &Settings<'_>) -> anyhow::Result<()> {
    // The per-thread fd cache stays off until the probes that keep it
    // true are attached (`fd_cache_on`).
    set_fd_gen(ebpf, nvprobe_common::fastpath::FD_GEN_OFF)?;
    let mut sizes: BpfHashMap<_, u32, u32> = BpfHashMap::try_from(
        ebpf.map_mut(maps::UVM_SIZES)
            .ok_or_else(|| io::Error::other("UVM_SIZES missing"))?,
    )?;
    for (cmd, size) in uvm::sizes(&s.version) {
        sizes.insert(cmd, size, 0)?;
    }
    // Where each call keeps its NV_STATUS, for the kernel to tell the
    // successful calls of quiet processes (--events failures|verdicts).
    let mut status: BpfHashMap<_, u32, u32> = BpfHashMap::try_from(
        ebpf.map_mut(maps::STATUS_AT)
            .ok_or_else(|| io::Error::other("STATUS_AT missing"))?,
    )?;
    let mut entries = crate::decode::escape::status_at_entries(&s.version);
    entries.extend(uvm::status_at_entries(&s.version));
    let entries: Vec<(u32, u32)> = entries
        .into_iter()
        .take(nvprobe_common::status_at::MAX_ENTRIES as usize)
        .collect();
    for &(key, off) in &entries {
        status.insert(key, off, 0)?;
    }
    // The same by call slot, one size each (the most common: the first
    // listed), for the kernel's common case without a hash lookup.
    let uvm_sizes: std::collections::HashMap<u32, u32> = uvm::sizes(&s.version).collect();
    let mut slots: aya::maps::Array<_, u32> = aya::maps::Array::try_from(
        ebpf.map_mut(maps::STATUS_SLOTS)
            .ok_or_else(|| io::Error::other("STATUS_SLOTS missing"))?,
    )?;
    let mut filled = std::collections::HashSet::new();
    for &(key, off) in &entries {
        use nvprobe_common::fastpath::{NO_SLOT, call_slot, status_slot_value};
        let xfer = key & 0xc000_0000 == 0x8000_0000;
        let (slot, size) = if xfer {
            continue; // the same (escape, size) as a direct key
        } else if nvprobe_common::ioctl::is_escape(key) {
            (call_slot(key, false, 0), (key >> 16) & 0x3fff)
        } else {
            (
                call_slot(key, false, 0),
                uvm_sizes.get(&key).copied().unwrap_or(0),
            )
        };
        if slot == NO_SLOT || size == 0 || !filled.insert(slot) {
            continue;
        }
        slots.set(slot, status_slot_value(size, off), 0)?;
    }
    // The RM controls whose parameters the kernel copies (the driver's
    // build version, GPU UUIDs and names, …: decode/rmparams.rs).
    let mut rm: BpfHashMap<_, u32, u32> = BpfHashMap::try_from(
        ebpf.map_mut(maps::RM_PARAMS)
            .ok_or_else(|| io::Error::other("RM_PARAMS missing"))?,
    )?;
    let copied = rm_params_entries(&s.version);
    for &(control, v) in &copied {
        rm.insert(control, v, 0)?;
    }
    // Which successful calls --events failures|verdicts sends (the rest are
    // counted in the kernel), and which RM controls' buckets hold a copied
    // or a sent control.
    let copied: Vec<u32> = copied.iter().map(|(c, _)| *c).collect();
    let tables = nvprobe_model::correlate::needs::ship_tables(&copied);
    for (name, table) in [
        (maps::SHIP_CALLS, &tables.calls),
        (maps::SHIP_CONTROLS, &tables.controls),
    ] {
        let mut a: aya::maps::Array<_, u8> = aya::maps::Array::try_from(
            ebpf.map_mut(name)
                .ok_or_else(|| io::Error::other(format!("{name} missing")))?,
        )?;
        for (i, b) in table.iter().enumerate() {
            if *b != 0 {
                a.set(i as u32, *b, 0)?;
            }
        }
    }
    let mut pids: BpfHashMap<_, u32, u8> = BpfHashMap::try_from(
        ebpf.map_mut(maps::PID_FILTER)
            .ok_or_else(|| io::Error::other("PID_FILTER missing"))?,
    )?;
    for &pid in s.pids {
        pids.insert(pid, 1, 0)?;
    }
    let mut extra: BpfHashMap<_, ExtraKey, u8> = BpfHashMap::try_from(
        ebpf.map_mut(maps::EXTRA_FILES)
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

    fn programs(obj: &[u8], prefix: &str) -> Vec<String> {
        let obj = object::File::parse(obj).expect("the embedded object is ELF");
        obj.symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.is_global())
            .filter_map(|s| s.name().ok().map(str::to_owned))
            .filter(|n| n.starts_with(prefix))
            .collect()
    }

    /// Every program in the embedded eBPF object is in the probe table: a
    /// program that is built but never attached is silently absent at run
    /// time.
    #[test]
    fn every_bpf_program_is_attached_by_some_table() {
        let tabled = super::table::all_programs();
        let built = programs(super::EBPF_OBJECT, "nvprobe_");
        assert!(built.len() >= 20, "{built:?}");
        for p in &built {
            assert!(tabled.contains(p), "{p} is built but not attached anywhere");
        }
        assert!(programs(super::EBPF_OBJECT, "doctor_").is_empty());
    }

    /// doctor's self-test object holds exactly its probes.
    #[test]
    fn the_selftest_object_holds_doctors_probes() {
        let mut got = programs(crate::doctor::kernel::SELFTEST_OBJECT, "doctor_");
        got.sort();
        let mut want: Vec<String> = crate::doctor::kernel::PROGRAMS
            .iter()
            .map(|p| (*p).to_owned())
            .collect();
        want.sort();
        assert_eq!(got, want);
    }
}
