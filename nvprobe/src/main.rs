//! nvprobe command line.
//!
//! Exit codes: 0 success; 1 runtime error; 2 bad usage or input;
//! 3 the kernel lacks something nvprobe needs; 4 not permitted (not root,
//! BPF refused).

use std::{
    collections::HashSet,
    fs::File,
    io::{self, BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use nvprobe::{
    attach::{self, Settings, StartError},
    collect::{self, Filters, RunOpts},
    decode::{
        self, Context,
        version::{DriverInfo, DriverVersion, VersionCtx, version_warning},
    },
    host::{self, ExtraDevice},
    output::{self, Clock, Format, Note, Output},
    summary::Stats,
};
use serde_json::{Value, json};

#[derive(Parser)]
#[command(
    name = "nvprobe",
    version,
    about = "Trace NVIDIA GPU driver calls system-wide with eBPF: decoded escapes, UVM commands and NV_STATUS",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Trace every process's calls to /dev/nvidia* (needs root).
    Watch(WatchArgs),
    /// Decode a recording made with `watch --json --raw` (no root needed).
    Decode(DecodeArgs),
    /// Print the JSON Schema of the NDJSON output.
    Schema,
    /// Check this host (or a host tree) for what breaks CUDA start-up and
    /// tracing: kernel tracing ability (probes loaded), driver, nvidia_uvm
    /// and HMM, GPUs, device nodes and access, libraries, container. Exit 1
    /// when a check fails.
    Doctor(DoctorArgs),
    /// The driver layer's hook table: each function, its module, whether
    /// this kernel has it (kallsyms), and the prototype in the module's BTF
    /// against the one nvprobe assumes.
    Hooks(HooksArgs),
}

#[derive(Args)]
struct HooksArgs {
    /// Read BTF from DIR/vmlinux and DIR/<module> (a copy of
    /// /sys/kernel/btf from another host) instead of /sys/kernel/btf.
    #[arg(long, value_name = "DIR", default_value = "/sys/kernel/btf")]
    btf_dir: PathBuf,
    /// One JSON document instead of text.
    #[arg(long)]
    json: bool,
}

fn hooks_cmd(a: HooksArgs) -> Result<(), Fail> {
    use nvprobe::hooks;
    let protos = hooks::btf_prototypes(&a.btf_dir).map_err(|e| {
        Fail(
            2,
            anyhow::anyhow!(
                "{e}: --btf-dir needs vmlinux (and the nvidia, nvidia_uvm module BTF to check them)"
            ),
        )
    })?;
    let syms = hooks::kallsyms(Path::new("/"));
    let mut rows = Vec::new();
    for (h, btf) in &protos {
        let in_kallsyms = syms
            .as_ref()
            .map(|s| s.contains(&(h.name.to_owned(), h.target.module().to_owned())));
        let check = match btf {
            None => "not in BTF".to_owned(),
            Some(b) if hooks::parse_prototype(b) == hooks::parse_prototype(h.prototype) => {
                "matches".to_owned()
            }
            Some(_) => "differs".to_owned(),
        };
        rows.push(serde_json::json!({
            "name": h.name,
            "module": h.target.module(),
            "required": h.required,
            "kallsyms": in_kallsyms,
            "assumed": h.prototype,
            "btf": btf,
            "prototype_check": check,
        }));
        if !a.json {
            println!(
                "{:<32} {:<10} kallsyms:{:<4} btf:{}",
                h.name,
                h.target.module(),
                in_kallsyms.map_or("?", |b| if b { "yes" } else { "no" }),
                check
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
            serde_json::json!({ "v": output::SCHEMA_VERSION, "type": "hooks", "btf_dir": a.btf_dir.display().to_string(), "hooks": rows })
        );
    }
    Ok(())
}

#[derive(Args)]
struct DoctorArgs {
    /// Read /proc, /sys, /dev and the library paths under DIR instead of /
    /// (a host tree or a snapshot folder or .tar/.tar.gz; nodes may be
    /// listed in DIR/dev.manifest). Only file evidence is available then.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Check device access for this user (name or uid) instead of the
    /// invoking one (the user behind sudo).
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// Also write the files doctor reads to OUT (a new folder, or a .tar /
    /// .tar.gz file) for someone else to check with --root.
    #[arg(long, value_name = "OUT")]
    snapshot: Option<PathBuf>,
    /// One JSON document instead of text.
    #[arg(long)]
    json: bool,
}

fn doctor(a: DoctorArgs) -> Result<(), Fail> {
    use nvprobe::doctor::{self, Verdict};
    let given = a.root.clone();
    let mut unpacked = None;
    let root = match &given {
        None => PathBuf::from("/"),
        Some(p) if p.is_file() => {
            let d = doctor::snapshot::unpack(p).map_err(|e| Fail(2, e))?;
            unpacked = Some(d.clone());
            d
        }
        Some(p) if p.is_dir() => p.clone(),
        Some(p) => {
            return Err(Fail(
                2,
                anyhow::anyhow!("--root {}: no such folder or snapshot archive", p.display()),
            ));
        }
    };
    if a.snapshot.is_some() && given.is_some() {
        return Err(Fail(
            2,
            anyhow::anyhow!("--snapshot captures this host: it cannot be combined with --root"),
        ));
    }
    let live = given.is_none();
    let opts = doctor::Options {
        root: root.clone(),
        live,
        user: a.user.clone(),
        watch_startup: false,
    };
    let res = doctor::run_with(&opts);
    if let Some(d) = &unpacked {
        let _ = std::fs::remove_dir_all(d);
    }
    let checks = res.map_err(|e| Fail(2, anyhow::anyhow!(e)))?;
    if let Some(out) = &a.snapshot {
        let n = doctor::snapshot::write(out, &checks).map_err(|e| {
            Fail(
                2,
                e.context(format!(
                    "--snapshot {}: could not write the snapshot",
                    out.display()
                )),
            )
        })?;
        eprintln!(
            "nvprobe: wrote a snapshot of this host to {} ({n} files); check it elsewhere with: nvprobe doctor --root {}",
            out.display(),
            out.display()
        );
    }
    let worst = checks
        .iter()
        .map(|c| c.verdict)
        .max()
        .unwrap_or(Verdict::Ok);
    let scope = if live {
        if nix::unistd::geteuid().is_root() {
            "this host: the kernel was asked (probes loaded), files read, opens tried".to_owned()
        } else {
            "this host, not as root: kernel tracing checks skipped; files read, opens tried"
                .to_owned()
        }
    } else {
        format!(
            "the tree {}: file evidence only (no probes loaded, no opens tried)",
            given.as_deref().unwrap_or(&root).display()
        )
    };
    if a.json {
        let doc = serde_json::json!({
            "v": output::SCHEMA_VERSION,
            "type": "doctor",
            "root": given.as_deref().unwrap_or(&root).display().to_string(),
            "scope": scope,
            "result": worst,
            "checks": checks,
        });
        println!("{doc}");
    } else {
        print!("{}", doctor::text(&checks));
        println!("({scope})");
    }
    if worst == Verdict::Fail {
        return Err(Fail(
            1,
            anyhow::anyhow!("a check failed: see FAIL above and its hint"),
        ));
    }
    Ok(())
}

#[derive(Args)]
struct OutputArgs {
    /// NDJSON output (schema: `nvprobe schema`) instead of text.
    #[arg(long)]
    json: bool,
    /// Write to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Decode struct layouts as for this driver version (default: the
    /// running driver's, from /proc/driver/nvidia/version).
    #[arg(long, value_name = "VERSION")]
    driver_version: Option<DriverVersion>,
}

#[derive(Args)]
struct WatchArgs {
    /// The layers to use, comma-separated: syscall (ioctls and opens at the
    /// system calls), process (signals, exits, forks), cuda (libcuda
    /// uprobes), driver (kprobes inside nvidia/nvidia_uvm, where the kernel
    /// has kprobes). Default: every layer this kernel allows.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = ["syscall", "process", "cuda", "driver"])]
    layers: Vec<String>,
    /// Only this process (thread-group id); repeatable. Filtered in the kernel.
    #[arg(long, value_name = "PID")]
    pid: Vec<u32>,
    /// Only processes with this name (comm); repeatable.
    #[arg(long, value_name = "COMM")]
    comm: Vec<String>,
    /// Treat PATH as an NVIDIA device file of KIND (ctl, gpu or uvm), for odd
    /// setups and tests; repeatable. KIND is guessed from names like nvidiactl.
    #[arg(long, value_name = "PATH[=KIND]")]
    device: Vec<ExtraDevice>,
    /// Keep each kernel record (hex) in the JSON, so `nvprobe decode` can
    /// decode the recording again later.
    #[arg(long)]
    raw: bool,
    /// Ring buffer size in bytes (a power of two, at least one page).
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024 * 1024, value_parser = parse_ringbuf)]
    ringbuf_size: u32,
    /// Print only each process's cuInit verdict and the summary.
    #[arg(long)]
    summary_only: bool,
    /// Report an NVIDIA ioctl or a cuInit still running after this many
    /// seconds (then again at 2x, 4x, …), with what the thread is doing. 0
    /// turns stall reports off.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_secs)]
    stall_after: f64,
    /// Measure each BPF program's run count and time (BPF_ENABLE_STATS) and
    /// report them in the summary: what nvprobe costs the traced host.
    #[arg(long)]
    bpf_stats: bool,
    /// Stop after this many seconds (default: run until Ctrl-C / SIGTERM).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    duration: Option<f64>,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Args)]
struct DecodeArgs {
    /// NDJSON file written by `nvprobe watch --json --raw` ("-" for stdin).
    file: PathBuf,
    /// Print only each process's cuInit verdict and the summary.
    #[arg(long)]
    summary_only: bool,
    #[command(flatten)]
    out: OutputArgs,
}

fn parse_ringbuf(s: &str) -> Result<u32, String> {
    let v: u32 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a byte count"))?;
    let page = 4096;
    if v < page || !v.is_power_of_two() {
        return Err(format!(
            "{v} must be a power of two of at least {page} (e.g. 16777216)"
        ));
    }
    Ok(v)
}

/// An error with the exit code it deserves.
struct Fail(u8, anyhow::Error);

impl<E: Into<anyhow::Error>> From<E> for Fail {
    fn from(e: E) -> Self {
        Fail(1, e.into())
    }
}

fn start_fail(e: StartError) -> Fail {
    let code = match e {
        StartError::NotRoot(_) | StartError::NoBpf(_) => 4,
        StartError::NoRingBuf
        | StartError::Tracefs { .. }
        | StartError::NoSyscallTracepoints(_)
        | StartError::NoBtf { .. } => 3,
        StartError::Load(_) | StartError::Required { .. } => 3,
    };
    Fail(code, e.into())
}

fn open_output(path: &Option<PathBuf>) -> anyhow::Result<Box<dyn Write + Send>> {
    Ok(match path {
        Some(p) => Box::new(
            File::create(p)
                .with_context(|| format!("cannot create output file {}", p.display()))?,
        ),
        None => Box::new(io::stdout()),
    })
}

fn version_ctx(arg: Option<DriverVersion>, driver: Option<&DriverInfo>) -> VersionCtx {
    VersionCtx::from_version(arg.or(driver.map(|d| d.version)))
}

/// Seconds as a number (`1.5`) or with a unit: `1.5s`, `500ms`, `2m`.
fn parse_secs(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * scale),
        _ => Err(format!(
            "{s:?} is not a duration: give seconds (5, 0.5) or a number with ms, s or m (500ms, 2m)"
        )),
    }
}

fn watch(a: WatchArgs) -> Result<(), Fail> {
    if !(a.stall_after.is_finite() && a.stall_after >= 0.0) {
        return Err(Fail(
            2,
            anyhow::anyhow!(
                "--stall-after must be a number of seconds (0 turns stall reports off)"
            ),
        ));
    }
    if let Some(d) = a.duration
        && !(d.is_finite() && d > 0.0)
    {
        return Err(Fail(
            2,
            anyhow::anyhow!("--duration must be a positive number of seconds"),
        ));
    }
    let mut extra = Vec::new();
    for d in &a.device {
        let id = host::file_identity(&d.path).map_err(|e| Fail(2, e))?;
        extra.push((d.clone(), id));
    }
    attach::check_root().map_err(start_fail)?;

    let root = Path::new("/");
    let driver = host::driver_info(root);
    let vctx = version_ctx(a.out.driver_version, driver.as_ref());
    let majors = host::majors(root);
    let nodes = host::device_nodes(root);

    attach::check_bpf().map_err(start_fail)?;
    let (tracefs, mounted) = attach::ensure_tracefs().map_err(start_fail)?;
    attach::check_syscall_tracepoints(&tracefs).map_err(start_fail)?;
    let cfg = attach::kernel_config().map_err(start_fail)?;

    let format = if a.out.json {
        Format::Json
    } else {
        Format::Text
    };
    let clock = Clock::now();
    let mut out = Output::new(
        open_output(&a.out.output).map_err(|e| Fail(2, e))?,
        format,
        clock,
    );

    let layer = |l: &str| a.layers.is_empty() || a.layers.iter().any(|x| x == l);
    let settings = Settings {
        driver_layer: layer("driver"),
        // By default the driver layer takes the NVIDIA ioctls over where it
        // can; naming syscall in --layers keeps them at the syscalls.
        driver_ioctls: layer("driver") && (a.layers.is_empty() || !layer("syscall")),
        syscall_layer: layer("syscall"),
        process_layer: layer("process"),
        driver_version: driver.as_ref().map(|d| d.version),
        uvm_major: majors.uvm.unwrap_or(0),
        caps_major: majors.caps.unwrap_or(0),
        pids: &a.pid,
        extra: &extra,
        ringbuf_bytes: a.ringbuf_size,
        version: vctx,
    };
    let mut loaded =
        attach::load_and_attach(cfg, &settings, tracefs.clone()).map_err(start_fail)?;

    let mut ctx = Context::new(vctx);
    ctx.keep_raw = a.raw;
    ctx.uvm_major = settings.uvm_major;
    ctx.caps_major = settings.caps_major;
    ctx.nodes = nodes.into_iter().map(|(k, v)| (k, v.into())).collect();
    for (d, id) in &extra {
        ctx.extra.insert(*id, d.path.display().to_string().into());
    }

    // libcuda uprobes: the copies on this host and in running processes.
    let mut libcuda = nvprobe::uprobes::Libcuda::default();
    let mut libcuda_errors = Vec::new();
    let mut candidates = if layer("cuda") {
        nvprobe::uprobes::static_candidates()
    } else {
        Vec::new()
    };
    if layer("cuda") {
        candidates.extend(nvprobe::uprobes::mapped_by_all());
    }
    for path in candidates {
        if let Err(e) = libcuda.attach(&mut loaded.ebpf, &path) {
            libcuda_errors.push(e);
        }
    }
    let start = json!({
        "tool_version": env!("CARGO_PKG_VERSION"),
        "kernel": nix::sys::utsname::uname().map(|u| u.release().to_string_lossy().into_owned()).unwrap_or_default(),
        "driver": driver,
        "decode_version": vctx.version.to_string(),
        "layouts": if vctx.known { "known" } else { "assumed" },
        "nvidia_major": majors.nvidia,
        "uvm_major": majors.uvm,
        "caps_major": majors.caps,
        "nodes": ctx.nodes.iter().map(|(k, v)| (format!("{}:{}", nvprobe_common::kdev_major(*k), nvprobe_common::kdev_minor(*k)), json!(v))).collect::<serde_json::Map<_, _>>(),
        "extra_devices": extra.iter().map(|(d, (sdev, ino))| json!({"path": d.path.display().to_string(), "kind": decode::dev_kind_name(d.kind), "sdev": sdev, "ino": ino})).collect::<Vec<_>>(),
        "probes": loaded.probes,
        "ringbuf_bytes": a.ringbuf_size,
        "filters": { "pid": a.pid, "comm": a.comm },
        "tracefs": tracefs.display().to_string(),
        "tracefs_mounted_by_nvprobe": mounted,
        "libcuda": libcuda.attached(),
        "ioctls_in_driver": loaded.ioctls_in_driver,
        "driver_layer": nvprobe::hooks::start_json(
            Path::new("/"),
            driver.as_ref().map(|d| &d.version),
            &loaded.probes.iter().filter(|p| p.layer == "driver" && p.attached).map(|p| p.name.as_str()).collect::<Vec<_>>(),
            layer("driver"),
        ),
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let stop = {
        let _in_rt = rt.enter();
        collect::StopSignals::install()?
    };
    let now = Clock::mono_now();
    out.note(now, &Note::Start(&start))?;

    let attached = loaded.probes.iter().filter(|p| p.attached).count();
    let mut warnings: Vec<(&str, String)> = Vec::new();
    match a.out.driver_version {
        // An explicit version the tables do not cover still warns.
        Some(v) if !vctx.known => warnings.push((
            "driver_version",
            format!("--driver-version {v} is outside the versions nvprobe's tables cover: statuses are decoded with the newest layouts and marked \"assumed\""),
        )),
        Some(_) => {}
        None => {
            if let Some(w) = version_warning(driver.as_ref()) {
                warnings.push(("driver_version", w));
            }
        }
    }
    // The driver layer (hooks inside nvidia/nvidia_uvm): said once, with
    // the hook symbols this driver has; tracing goes on at the syscalls.
    let drv_attached: Vec<&str> = loaded
        .probes
        .iter()
        .filter(|p| p.layer == "driver" && p.attached)
        .map(|p| p.name.as_str())
        .collect();
    if !drv_attached.is_empty() {
        // Attached: say once which hooks of the table this driver lacks.
        let v = driver.as_ref().map(|d| &d.version);
        if let Some(s) = nvprobe::hooks::survey(Path::new("/"), v)
            && s.iter().any(|(_, p)| !*p)
        {
            warnings.push((
                "driver_layer",
                format!(
                    "driver layer attached ({} hooks); {}",
                    drv_attached.len(),
                    nvprobe::hooks::describe(&s)
                ),
            ));
        }
    } else if layer("driver") {
        let v = driver.as_ref().map(|d| &d.version);
        let survey = nvprobe::hooks::survey(Path::new("/"), v);
        let hooks = match &survey {
            None if !Path::new("/sys/module/nvidia").exists() => {
                "no nvidia module is loaded".to_owned()
            }
            None => "module symbols are not readable in /proc/kallsyms".to_owned(),
            Some(s) => nvprobe::hooks::describe(s),
        };
        let reason = nvprobe::hooks::unavailable_reason(Path::new("/")).unwrap_or_else(|| {
            if survey.is_some_and(|s| s.iter().any(|(_, p)| *p)) {
                "the kernel refused every hook (see the probe_refused warnings)".to_owned()
            } else {
                "no hook of the table is in /proc/kallsyms".to_owned()
            }
        });
        warnings.push((
            "driver_layer",
            format!(
                "driver layer not attached: {reason}; {hooks}; the syscall layer traces every call"
            ),
        ));
    }
    if !layer("syscall") && !loaded.ioctls_in_driver {
        return Err(Fail(
            3,
            anyhow::anyhow!(
                "--layers without syscall needs the driver layer's ioctl hooks (nvidia_unlocked_ioctl and uvm_unlocked_ioctl_entry), and they are not attached here: add syscall to --layers"
            ),
        ));
    }
    // The host checks of `nvprobe doctor` (files only: the probes above
    // answer for the kernel), so that the trace says what it runs on.
    let host = nvprobe::doctor::run_with(&nvprobe::doctor::Options {
        watch_startup: true,
        live: true,
        ..nvprobe::doctor::Options::tree(Path::new("/"))
    })
    .unwrap_or_default();
    for c in host
        .iter()
        .filter(|c| c.verdict != nvprobe::doctor::Verdict::Ok)
    {
        warnings.push((
            "host_check",
            format!(
                "host check {} {}/{}: {}{}",
                if c.verdict == nvprobe::doctor::Verdict::Fail {
                    "FAIL"
                } else {
                    "WARN"
                },
                c.area,
                c.id,
                c.evidence,
                c.hint
                    .as_ref()
                    .map_or_else(String::new, |h| format!(" (hint: {h})"))
            ),
        ));
    }
    for r in &loaded.refusals {
        warnings.push((
            "probe_refused",
            format!("probe {} not attached: {}", r.probe, r.reason),
        ));
    }
    for (id, msg) in &warnings {
        eprintln!("nvprobe: warning: {msg}");
        if format == Format::Json || a.out.output.is_some() {
            out.note(now, &Note::Warning { id, message: msg })?;
        }
    }
    eprintln!(
        "nvprobe {}: tracing NVIDIA driver calls ({}; decoding as {}{}); {attached}/{} probes attached{}{}. Ctrl-C to stop.",
        env!("CARGO_PKG_VERSION"),
        driver.as_ref().map_or_else(
            || "no NVIDIA driver loaded".to_owned(),
            |d| format!("driver {} {}", d.version, d.flavor)
        ),
        vctx.version,
        if vctx.known { "" } else { ", assumed" },
        loaded.probes.len(),
        if loaded.ioctls_in_driver {
            "; NVIDIA ioctls traced inside the driver (kprobes), no ioctl syscall tracepoint"
        } else {
            ""
        },
        if mounted { "; mounted tracefs" } else { "" },
    );
    out.flush()?;

    let filters = Filters {
        comms: a.comm.iter().cloned().collect::<HashSet<_>>(),
    };
    // Stats are collected while this fd is open.
    let _stats_fd = if a.bpf_stats {
        match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
            Ok(fd) => Some(fd),
            Err(e) => {
                eprintln!(
                    "nvprobe: warning: --bpf-stats: the kernel refused BPF_ENABLE_STATS ({e}); no BPF cost figures"
                );
                None
            }
        }
    } else {
        None
    };
    let opts = RunOpts {
        duration: a.duration.map(Duration::from_secs_f64),
        tick: Duration::from_millis(20),
        lost_every: 10,
        // The main thread drains the ring buffer; these decode and render.
        workers: std::thread::available_parallelism()
            .map_or(1, |n| n.get().saturating_sub(1))
            .clamp(1, 4),
        bpf_stats: _stats_fd.is_some(),
        summary_only: a.summary_only,
        stall_after: (a.stall_after > 0.0).then(|| Duration::from_secs_f64(a.stall_after)),
        cuda_layer: layer("cuda"),
        stall_every: 25,
    };
    let summary = rt.block_on(collect::run(
        &mut loaded.ebpf,
        &mut libcuda,
        std::sync::Arc::new(ctx),
        std::sync::Arc::new(filters),
        out,
        &opts,
        stop,
    ))?;
    drop(loaded);
    let total: u64 = summary.events.values().sum();
    if format == Format::Json || a.out.output.is_some() {
        eprintln!(
            "nvprobe: stopped after {:.1} s: {total} events, {} failed, {} lost, {} processes",
            summary.duration_s,
            summary.failed,
            summary.lost.total,
            summary.processes.len()
        );
    }
    if summary.lost.total > 0 {
        eprintln!(
            "nvprobe: {} events were lost because the ring buffer was full; raise --ringbuf-size or narrow with --pid",
            summary.lost.total
        );
    }
    Ok(())
}

/// Re-decode a `--json --raw` recording.
fn decode_file(a: DecodeArgs) -> Result<(), Fail> {
    let reader: Box<dyn BufRead> = if a.file.as_os_str() == "-" {
        Box::new(BufReader::new(io::stdin()))
    } else {
        Box::new(BufReader::new(
            File::open(&a.file)
                .with_context(|| format!("cannot open {}", a.file.display()))
                .map_err(|e| Fail(2, e))?,
        ))
    };
    let format = if a.out.json {
        Format::Json
    } else {
        Format::Text
    };
    let mut out = Output::new(
        open_output(&a.out.output).map_err(|e| Fail(2, e))?,
        format,
        Clock::fixed(0),
    );
    let mut ctx: Option<Context> = None;
    let mut stats = Stats::default();
    let mut corr = nvprobe::correlate::Correlator::default();
    let mut recs = Vec::new();
    let (mut bad, mut without_raw, mut lineno) = (0u64, 0u64, 0u64);
    let (mut recorded_duration, mut recorded_lost) = (None, None);
    for line in reader.lines() {
        lineno += 1;
        let line = line.with_context(|| format!("reading line {lineno}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                eprintln!(
                    "nvprobe: {}:{lineno}: not a JSON record: {e}",
                    a.file.display()
                );
                bad += 1;
                continue;
            }
        };
        if v["type"] == "start" {
            ctx = Some(context_from_start(&v, a.out.driver_version));
            // Show the recording's wall clock, not this machine's.
            if let (Some(t), Some(m)) = (v["time"].as_str(), v["mono_ns"].as_u64())
                && let Ok(wall) = humantime::parse_rfc3339(t)
                && let Ok(d) = wall.duration_since(std::time::UNIX_EPOCH)
            {
                out.set_clock(Clock::fixed(d.as_nanos() as i128 - i128::from(m)));
            }
            continue;
        }
        // What only the live run could know: how long it ran, what the ring
        // buffer lost, the stall reports read from /proc at the time.
        if v["type"] == "summary" {
            recorded_duration = v["duration_s"].as_f64();
            recorded_lost = serde_json::from_value(v["lost"].clone()).ok();
            continue;
        }
        if v["type"] == "stall" {
            match serde_json::from_value::<nvprobe::stall::StallReport>(v.clone()) {
                Ok(r) => {
                    let t = v["mono_ns"].as_u64().unwrap_or(0);
                    out.note(t, &Note::Stall(&r))?;
                }
                Err(e) => {
                    eprintln!(
                        "nvprobe: {}:{lineno}: bad stall record: {e}",
                        a.file.display()
                    );
                    bad += 1;
                }
            }
            continue;
        }
        let Some(raw) = v.get("raw").and_then(Value::as_str) else {
            // Kernel events need their raw record; the live correlator's
            // stage/cuinit records are made again here.
            let kernel_event = matches!(
                v["type"].as_str(),
                Some("ioctl" | "open" | "stat" | "access" | "close" | "dup" | "mmap" | "proc")
            );
            if kernel_event {
                without_raw += 1;
            }
            continue;
        };
        let ctx = ctx.get_or_insert_with(|| {
            eprintln!("nvprobe: {}: no start record before the first event; decoding with default layouts", a.file.display());
            let mut c = Context::new(VersionCtx::from_version(a.out.driver_version));
            c.keep_raw = true;
            c
        });
        let Some(bytes) = decode::hex_decode(raw) else {
            eprintln!(
                "nvprobe: {}:{lineno}: raw field is not hex",
                a.file.display()
            );
            bad += 1;
            continue;
        };
        match decode::decode(&bytes, ctx) {
            Ok(ev) => {
                if !matches!(ev, decode::Event::Proc(_)) {
                    stats.record(&ev);
                }
                let t = v["mono_ns"]
                    .as_u64()
                    .or_else(|| decode::record_ktime(&bytes))
                    .unwrap_or(0);
                if !a.summary_only {
                    out.event(t, &ev)?;
                }
                corr.observe(&ev, &mut recs);
                for r in recs.drain(..) {
                    if !a.summary_only || matches!(r, nvprobe::correlate::Record::Cuinit(_)) {
                        out.record(&r)?;
                    }
                }
            }
            Err(e) => {
                eprintln!("nvprobe: {}:{lineno}: {e}", a.file.display());
                stats.decode_error();
                bad += 1;
            }
        }
    }
    corr.finish(&mut recs);
    for r in recs.drain(..) {
        out.record(&r)?;
    }
    let summary = stats.finish(
        recorded_duration.unwrap_or(0.0),
        recorded_lost.unwrap_or_default(),
    );
    out.note(0, &Note::Summary(&summary))?;
    out.finish()?;
    if without_raw > 0 {
        eprintln!(
            "nvprobe: {without_raw} event(s) had no raw record and were skipped: record with `watch --json --raw` to decode again"
        );
    }
    if bad > 0 {
        return Err(Fail(
            2,
            anyhow::anyhow!("{bad} line(s) of {} could not be decoded", a.file.display()),
        ));
    }
    Ok(())
}

fn context_from_start(v: &Value, arg: Option<DriverVersion>) -> Context {
    let recorded: Option<DriverVersion> = v["decode_version"].as_str().and_then(|s| s.parse().ok());
    let known = v["layouts"] == "known";
    let vctx = match arg {
        Some(a) => VersionCtx::from_version(Some(a)),
        None if known => VersionCtx::from_version(recorded),
        None => VersionCtx::assumed(),
    };
    let mut ctx = Context::new(vctx);
    ctx.keep_raw = true;
    ctx.uvm_major = v["uvm_major"].as_u64().unwrap_or(0) as u32;
    ctx.caps_major = v["caps_major"].as_u64().unwrap_or(0) as u32;
    if let Some(nodes) = v["nodes"].as_object() {
        for (k, p) in nodes {
            if let (Some((ma, mi)), Some(p)) = (k.split_once(':'), p.as_str())
                && let (Ok(ma), Ok(mi)) = (ma.parse(), mi.parse())
            {
                ctx.nodes
                    .insert(nvprobe_common::kdev_make(ma, mi), p.into());
            }
        }
    }
    if let Some(extra) = v["extra_devices"].as_array() {
        for e in extra {
            if let (Some(s), Some(i), Some(p)) =
                (e["sdev"].as_u64(), e["ino"].as_u64(), e["path"].as_str())
            {
                ctx.extra.insert((s as u32, i), p.into());
            }
        }
    }
    ctx
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Watch(a) => watch(a),
        Cmd::Decode(a) => decode_file(a),
        Cmd::Doctor(a) => doctor(a),
        Cmd::Hooks(a) => hooks_cmd(a),
        Cmd::Schema => {
            let s = serde_json::to_string_pretty(&output::schema::schema()).unwrap_or_default();
            println!("{s}");
            Ok(())
        }
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(code, e)) => {
            // A closed pipe (`nvprobe watch | head`) is a normal way to stop.
            if e.downcast_ref::<io::Error>()
                .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("nvprobe: error: {e:#}");
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_secs;

    #[test]
    fn durations_take_plain_seconds_or_units() {
        assert_eq!(parse_secs("5"), Ok(5.0));
        assert_eq!(parse_secs("0.5"), Ok(0.5));
        assert_eq!(parse_secs("1s"), Ok(1.0));
        assert_eq!(parse_secs("250ms"), Ok(0.25));
        assert_eq!(parse_secs("2m"), Ok(120.0));
        for bad in ["", "s", "abc", "-1", "inf", "NaN", "1h"] {
            let e = parse_secs(bad).expect_err(bad);
            assert!(e.contains("500ms"), "{e}");
        }
    }
}
