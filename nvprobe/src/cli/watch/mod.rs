//! `nvprobe watch`: check the kernel, attach every layer it allows, and
//! run the live pipeline until Ctrl-C, SIGTERM or `--duration`.

mod args;
mod start;
mod trace;
use args::Host;
pub use args::WatchArgs;
use start::{banner, probes_line, start_record, warnings};

use std::{path::Path, sync::Arc, time::Duration};

use anyhow::Context as _;
use nvprobe::{
    attach::{self, Loaded, Settings},
    decode::Context,
    host::{self},
    output::{Clock, Format, Note, Output, WriteFailed},
    pipeline::{
        Filters, PipeOpts,
        live::{self, RunOpts, StopSignals},
    },
    uprobes::{Hooks, Libcuda},
};

use super::common::{Fail, output_spec, start_fail};

pub fn run(a: WatchArgs) -> Result<(), Fail> {
    run_with(a, None)
}

/// `watch`, or with `view` set, `top`: the same run, shown as a live view
/// (events are written only with -o).
pub fn run_with(a: WatchArgs, view: Option<nvprobe::top::draw::Opts>) -> Result<(), Fail> {
    a.validate()?;
    // Checked now, created only once start-up has succeeded.
    let spec = output_spec(&a.out, None)?;
    // Taken now: a port in use is a usage error before anything attaches.
    let listeners = bind(&a)?;
    let trace_spec = a
        .perfetto
        .clone()
        .map(|p| trace::TraceSpec::check(p, a.out.force, a.out.output_mode))
        .transpose()?;
    let extra = extra_devices(&a)?;
    let (h, tracefs, cfg) = preflight(&a, extra)?;
    let format = a.out.format();
    let settings = settings_of(&a, &h);
    let mut loaded = attach::patience("attaching the probes", || {
        attach::load_and_attach(cfg, &settings, tracefs.path.clone())
    })
    .map_err(start_fail)?;
    let ctx = decode_context(&a, &h, &settings);
    let (keep, libcuda, held) = hook_and_hold(&a, &mut loaded);
    let mut start = start_record(
        &a,
        &h,
        &ctx,
        &loaded,
        &libcuda,
        (&tracefs.at, tracefs.mounted),
    );
    start.probe_removal = held.removal.clone();
    let warnings = warnings(&a, &h, &loaded)?;
    let (rt, stop) = runtime()?;
    let metrics = serve(&rt, listeners, &a, &h, &start)?;
    // Start-up succeeded: only now are the output file and the trace file
    // created (the trace is written into this descriptor at the stop).
    let opened = if view.is_some() && a.out.output.is_none() {
        nvprobe::output::Opened::sink()
    } else {
        spec.open().map_err(|e| Fail(2, e))?
    };
    let trace = trace_spec
        .as_ref()
        .map(trace::TraceSpec::open)
        .transpose()?;
    // Attached, listening, the output open: keep only the capabilities
    // still used, before any thread is made (they inherit the sets).
    // CAP_SYS_ADMIN only while something needs it: /proc/PID/stack in
    // stall reports, or libcuda uprobes made as perf events (uprobe_multi
    // refused, or not known yet because no copy was hooked at start).
    // The kernel log is opened now, while CAP_SYSLOG is held (the check is
    // at open where kernel.dmesg_restrict is 1).
    let kmsg = nvprobe::pipeline::kmsg::KernelLog::open();
    start.capabilities_kept = keep_capabilities(&a, &start, &kmsg);
    let mut out = Output::opened(opened, format, Clock::now());
    announce(
        &a,
        (&h, &loaded, tracefs.mounted),
        &start,
        &warnings,
        &mut out,
    )?;
    // Stats are collected while this fd is open.
    let stats_fd = a.bpf_stats.then(enable_bpf_stats).flatten();
    let mut opts = run_opts(&a, stats_fd.is_some(), metrics);
    opts.gate = open_gate(&mut loaded);
    // Followed from a thread made after the capabilities were dropped.
    follow_kernel_log(kmsg, &mut opts, &mut out, &a)?;
    if let Some(t) = &trace {
        opts.pipe.observers.push(Arc::new(t.timeline()));
    }
    let drawer = start_view(view, &a, probes_line(&loaded, &libcuda), &mut opts)?;
    let filters = Filters::by_comm(&a.comm);
    opts.own_programs = libcuda.programs();
    let attacher = a
        .layer("cuda")
        .then(|| nvprobe::uprobes::attacher::Attacher::spawn(libcuda))
        .transpose()
        .context("starting the hooking thread")?;
    let res = rt.block_on(live::run(
        &mut loaded.ebpf,
        attacher.as_ref(),
        Arc::new(ctx),
        Arc::new(filters),
        out,
        &opts,
        stop,
    ));
    // The terminal back first.
    if let Some(d) = drawer {
        d.finish();
    }
    let libcuda = attacher.and_then(|t| t.finish());
    leave_probes(libcuda, held.unpinned, keep.is_err(), &mut loaded);
    // Otherwise nvprobe holds no probe: dropping the object costs nothing;
    // the kernel removes them once the private bpffs goes with nvprobe.
    drop(loaded);
    ended(res, trace, &a)
}

/// A `--device` file and its identity (device, inode).
type ExtraFile = (host::ExtraDevice, (u32, u64));

/// The `--device` files, with their identities now.
fn extra_devices(a: &WatchArgs) -> Result<Vec<ExtraFile>, Fail> {
    let mut extra = Vec::new();
    for d in &a.device {
        // parse_device found the file: this fails only if it went since.
        let id = host::file_identity(&d.path).map_err(|e| {
            Fail(
                2,
                anyhow::anyhow!(
                    "--device {}: {} (it was there when the arguments were read): it must stay while nvprobe runs",
                    d.path.display(),
                    e.root_cause()
                ),
            )
        })?;
        extra.push((d.clone(), id));
    }
    Ok(extra)
}

/// What the attach phases are given.
fn settings_of<'a>(a: &'a WatchArgs, h: &'a Host) -> Settings<'a> {
    Settings {
        driver_layer: a.layer("driver"),
        // By default the driver layer takes the NVIDIA ioctls over where it
        // can; naming syscall in --layers keeps them at the syscalls.
        driver_ioctls: a.layer("driver") && (a.layers.is_empty() || !a.layer("syscall")),
        syscall_layer: a.layer("syscall"),
        process_layer: a.layer("process"),
        driver_version: h.driver.as_ref().map(|d| d.version),
        uvm_major: h.majors.uvm.unwrap_or(0),
        caps_major: h.majors.caps.unwrap_or(0),
        pids: &a.pid,
        extra: &h.extra,
        ringbuf_bytes: a.ringbuf_size,
        version: h.vctx,
        quiet: a.out.events.quiet(),
        // --metrics shows the sent calls' latency: their starts are read.
        coarse_starts: a.out.events == nvprobe_model::render::level::Level::Verdicts
            && a.metrics.is_none(),
    }
}

/// The libcuda hooks, or none (the cuda layer off, or its programs
/// refused: said once as a refusal).
fn libcuda_layer(
    a: &WatchArgs,
    loaded: &mut Loaded,
    keep: Option<Arc<attach::keep::Keep>>,
) -> Libcuda {
    if a.layer("cuda") {
        let unsafe_returns = returns_unsafe();
        if let Some(why) = &unsafe_returns {
            loaded.refusals.push(attach::Refusal {
                probe: "libcuda uprobes".into(),
                reason: format!("{why}; without them verdicts rest on driver calls alone"),
            });
        }
        match Libcuda::new(a.libcuda_hooks, &loaded.ebpf, keep) {
            Ok(mut l) => {
                if unsafe_returns.is_some() {
                    l.entries_only();
                }
                l
            }
            Err(e) => {
                loaded.refusals.push(attach::Refusal {
                    probe: "libcuda uprobes".into(),
                    reason: format!("{e}; without them verdicts rest on driver calls alone"),
                });
                Libcuda::off(a.libcuda_hooks)
            }
        }
    } else {
        Libcuda::off(a.libcuda_hooks)
    }
}

/// Why return probes would crash seccomp-filtered processes on this
/// kernel (the uretprobe system call's window), or None.
fn returns_unsafe() -> Option<String> {
    use nvprobe::uretprobe_gate::{Gate, closed_reason, probe, release};
    (probe() == Gate::Filtered).then(|| closed_reason(&release()))
}

/// The `--metrics` registry, served on the runtime from now on.
fn serve_metrics(
    rt: &tokio::runtime::Runtime,
    l: std::net::TcpListener,
    a: &WatchArgs,
    h: &Host,
    start: &nvprobe::records::StartRecord,
) -> Result<Arc<nvprobe::metrics::Metrics>, Fail> {
    let m = Arc::new(nvprobe::metrics::Metrics::new(
        vec![
            ("version".into(), env!("CARGO_PKG_VERSION").into()),
            ("kernel".into(), start.kernel.clone()),
            (
                "driver".into(),
                h.driver
                    .as_ref()
                    .map_or_else(|| "none".into(), |d| d.version.to_string()),
            ),
        ],
        a.ringbuf_size,
    ));
    let _in_rt = rt.enter();
    let l = tokio::net::TcpListener::from_std(l)
        .context("serving --metrics")
        .map_err(|e| Fail(1, e))?;
    rt.spawn(nvprobe::metrics::serve(l, m.clone()));
    Ok(m)
}

/// What `--metrics` and `--health` bound, served on the runtime from now
/// on: the registry, when there is one.
fn serve(
    rt: &tokio::runtime::Runtime,
    (metrics, health): Listeners,
    a: &WatchArgs,
    h: &Host,
    start: &nvprobe::records::StartRecord,
) -> Result<Option<Arc<nvprobe::metrics::Metrics>>, Fail> {
    if let Some(l) = health {
        let _in_rt = rt.enter();
        let l = tokio::net::TcpListener::from_std(l)
            .context("serving --health")
            .map_err(|e| Fail(1, e))?;
        rt.spawn(nvprobe::metrics::serve(
            l,
            Arc::new(nvprobe::metrics::HealthOnly),
        ));
    }
    metrics
        .map(|l| serve_metrics(rt, l, a, h, start))
        .transpose()
}

/// The kernel log, followed from a thread made after the capabilities
/// were dropped; when it cannot be, said once.
fn follow_kernel_log(
    kmsg: Result<nvprobe::pipeline::kmsg::Opened, String>,
    opts: &mut RunOpts,
    out: &mut Output,
    a: &WatchArgs,
) -> Result<(), Fail> {
    let format = a.out.format();
    let note = kmsg
        .as_ref()
        .ok()
        .and_then(nvprobe::pipeline::kmsg::Opened::note);
    if let Some(n) = note {
        eprintln!("nvprobe: note: {n}");
        if format.structured() || a.out.output.is_some() {
            out.note(
                Clock::mono_now(),
                &Note::Warning {
                    id: "kernel_log_syslog",
                    message: &n,
                },
            )
            .map_err(write_fail)?;
        }
    }
    match kmsg.and_then(nvprobe::pipeline::kmsg::Opened::follow) {
        Ok(k) => opts.kernel_log = Some(std::sync::Mutex::new(k)),
        Err(e) => {
            let msg = format!(
                "the kernel log cannot be followed ({e}): no kernel_log records, and fault verdicts name no Xid"
            );
            eprintln!("nvprobe: warning: {msg}");
            if format.structured() || a.out.output.is_some() {
                out.note(
                    Clock::mono_now(),
                    &Note::Warning {
                        id: "kernel_log_unavailable",
                        message: &msg,
                    },
                )
                .map_err(write_fail)?;
            }
        }
    }
    Ok(())
}

/// What was not left to the kernel (no private bpffs, a pin refused, an
/// event that is no link on a kernel before 5.15): a child that outlives
/// nvprobe holds every descriptor and closes them once nvprobe has
/// exited (removals are slow, and a removal by a task with SIGKILL
/// pending leaks its uprobe). nvprobe's own copies then cost nothing.
fn leave_probes(
    libcuda: Option<Libcuda>,
    unpinned_before: usize,
    no_keep: bool,
    loaded: &mut Loaded,
) {
    let mut left = libcuda.map(|mut l| l.take_links()).unwrap_or_default();
    let unpinned = left.len() + unpinned_before;
    if no_keep || unpinned > 0 {
        left.extend(std::mem::take(&mut loaded.links));
        if let Some((pid, n)) = nvprobe::uprobes::remove_in_background(left) {
            eprintln!(
                "nvprobe: {n} probe descriptors were not left to the kernel: a child (pid {pid}) closes them after nvprobe's exit, one grace period each for its perf events (up to a minute or more on a busy host)"
            );
        }
        loaded.detach_all();
    }
}

/// The checks before anything attaches, in the order whose failures say
/// most: root, the host's facts (doctor's, before a probe can trace their
/// reads), bpf(2), tracefs and the syscall tracepoints, the kernel's
/// offsets. The tracefs guard unmounts what nvprobe mounted when it goes,
/// after the probes.
fn preflight(
    a: &WatchArgs,
    extra: Vec<ExtraFile>,
) -> Result<(Host, attach::Tracefs, nvprobe_common::Config), Fail> {
    attach::check_root().map_err(start_fail)?;
    let h = Host::read(a, extra);
    attach::check_bpf().map_err(start_fail)?;
    // Declared before the probes: a tracefs nvprobe mounts is unmounted
    // after they are detached, on every way out.
    let tracefs = attach::ensure_tracefs().map_err(start_fail)?;
    attach::check_syscall_tracepoints(&tracefs).map_err(start_fail)?;
    if let Err(why) = &tracefs.own_namespace {
        eprintln!(
            "nvprobe: note: running in the mount namespace it was started in ({why}); what it mounts would be seen there"
        );
    }
    let cfg = attach::kernel_config().map_err(start_fail)?;
    Ok((h, tracefs, cfg))
}

/// The runtime the pipeline runs on, with the stop signals installed.
fn runtime() -> Result<(tokio::runtime::Runtime, StopSignals), Fail> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let stop = {
        let _in_rt = rt.enter();
        StopSignals::install()?
    };
    Ok((rt, stop))
}

/// Keep only the capabilities still used, before any thread is made (they
/// inherit the sets): CAP_SYS_ADMIN only while something needs it
/// (/proc/PID/stack in stall reports, or libcuda uprobes made as perf
/// events: uprobe_multi refused, or not known yet because no copy was
/// hooked at start). Those kept, for the start record.
fn keep_capabilities(
    a: &WatchArgs,
    start: &nvprobe::records::StartRecord,
    kmsg: &Result<nvprobe::pipeline::kmsg::Opened, String>,
) -> Option<Vec<String>> {
    // The kernel log through syslog(2) needs CAP_SYSLOG at every read.
    let syslog = kmsg.as_ref().is_ok_and(|k| k.needs_syslog_cap());
    let sys_admin =
        a.stall_after > 0.0 || (a.layer("cuda") && start.libcuda_attach != "uprobe_multi");
    match attach::caps::drop_unneeded(sys_admin, syslog) {
        Ok(k) => Some(k),
        Err(e) => {
            eprintln!(
                "nvprobe: warning: could not drop unneeded capabilities ({e}); going on with those it has"
            );
            None
        }
    }
}

/// The start record and the warnings, first in the output; the banner and
/// how the probes are held, on stderr.
fn announce(
    a: &WatchArgs,
    (h, loaded, mounted): (&Host, &Loaded, bool),
    start: &nvprobe::records::StartRecord,
    warnings: &[(&'static str, String)],
    out: &mut Output,
) -> Result<(), Fail> {
    let format = a.out.format();
    let now = Clock::mono_now();
    out.note(now, &Note::Start(start)).map_err(write_fail)?;
    for (id, msg) in warnings {
        eprintln!("nvprobe: warning: {msg}");
        if format.structured() || a.out.output.is_some() {
            out.note(now, &Note::Warning { id, message: msg })
                .map_err(write_fail)?;
        }
    }
    eprintln!("{}", banner(a, h, loaded, mounted));
    // Said once: how the libcuda hooks are attached, and who removes the
    // probes (both are in the start record too).
    if a.layer("cuda") && !start.libcuda_attach.is_empty() {
        eprintln!(
            "nvprobe: libcuda hooks: {} ({} copies)",
            start.libcuda_attach,
            start.libcuda.len()
        );
    }
    if !start.probe_removal.starts_with("kernel:") {
        eprintln!("nvprobe: probe removal: {}", start.probe_removal);
    }
    out.flush().map_err(write_fail)?;
    Ok(())
}

/// `top`'s view: an observer of the run, drawn on a thread of its own.
fn start_view(
    view: Option<nvprobe::top::draw::Opts>,
    a: &WatchArgs,
    probes: String,
    opts: &mut RunOpts,
) -> Result<Option<nvprobe::top::draw::Drawer>, Fail> {
    Ok(match view {
        Some(o) => {
            let v = nvprobe::top::View::new(probes, (a.stall_after * 1e9) as u64, true);
            opts.pipe.observers.push(Arc::new(v.clone()));
            opts.hangup_stops = true;
            Some(nvprobe::top::draw::Drawer::start(v, o).map_err(|e| Fail(1, e))?)
        }
        None => None,
    })
}

/// How the run ended: its summary said, the Perfetto file written
/// however it ended (not left empty); a closed pipe is a normal end.
fn ended(
    res: anyhow::Result<nvprobe::summary::Summary>,
    trace: Option<trace::TraceFile>,
    a: &WatchArgs,
) -> Result<(), Fail> {
    // The file opened at start gets the timeline of what was seen, however
    // the run ended (not left empty).
    let write_trace = || trace.map_or(Ok(()), trace::TraceFile::write);
    let summary = match res {
        Ok(s) => s,
        // The reader went away (`nvprobe watch | head`): a normal end.
        Err(e) if is_broken_pipe(&e) => return write_trace(),
        Err(e) => {
            if let Err(Fail(_, t)) = write_trace() {
                eprintln!("nvprobe: {t:#}");
            }
            return Err(Fail(1, e));
        }
    };
    report_end(a, a.out.format(), &summary);
    write_trace()
}

/// libcuda hooked, and every link pinned (so that the kernel removes the
/// probes after nvprobe has gone, however it ends: attach/keep.rs); a pin
/// refused is a refusal.
fn hook_and_hold(
    a: &WatchArgs,
    loaded: &mut Loaded,
) -> (
    Result<Arc<attach::keep::Keep>, String>,
    Libcuda,
    attach::keep::Held,
) {
    // Every link is pinned here, so that the kernel removes the probes
    // after nvprobe has gone, however it ends (see attach/keep.rs).
    let keep = attach::keep::Keep::new().map(Arc::new);
    let mut libcuda = libcuda_layer(a, loaded, keep.as_ref().ok().cloned());
    attach::patience("hooking libcuda", || hook_libcuda(a, loaded, &mut libcuda));
    let held = attach::keep::hold_all(keep.as_ref().map(|k| k.as_ref()), &loaded.links);
    loaded
        .refusals
        .extend(held.refused.iter().map(|reason| attach::Refusal {
            probe: "pin".into(),
            reason: reason.clone(),
        }));
    (keep, libcuda, held)
}

/// How the live pipeline runs.
/// Other processes' descriptor calls at the floor, once the processes
/// already holding an NVIDIA descriptor are known (a thread made after the
/// capabilities were dropped).
fn open_gate(loaded: &mut attach::Loaded) -> Option<attach::holders::Report> {
    loaded
        .gate
        .take()
        .map(|d| attach::holders::open_gate_after_scan(&loaded.ebpf, d))
}

fn run_opts(
    a: &WatchArgs,
    bpf_stats: bool,
    metrics: Option<Arc<nvprobe::metrics::Metrics>>,
) -> RunOpts {
    RunOpts {
        duration: a.duration.map(Duration::from_secs_f64),
        tick: Duration::from_millis(20),
        drain_budget: Duration::from_millis(10),
        lost_every: Duration::from_millis(200),
        pipe: PipeOpts {
            // The main thread drains the ring buffer; these decode and render.
            workers: std::thread::available_parallelism()
                .map_or(1, |n| n.get().saturating_sub(1))
                .clamp(1, 4),
            summary_only: a.summary_only,
            level: a.out.events,
            observers: metrics
                .into_iter()
                .map(|m| Arc::new(m) as Arc<dyn nvprobe::pipeline::Observer>)
                .collect(),
            host_facts: true,
            all_processes: a.out.all_processes,
        },
        hangup_stops: false,
        bpf_stats,
        stall_after: (a.stall_after > 0.0).then(|| Duration::from_secs_f64(a.stall_after)),
        cmdline: !a.no_cmdline,
        stall_every: Duration::from_millis(500),
        hang_after: (a.hang_after > 0.0).then(|| Duration::from_secs_f64(a.hang_after)),
        launches_hooked: a.libcuda_hooks == nvprobe::uprobes::Hooks::Launches
            || a.libcuda_hooks == nvprobe::uprobes::Hooks::All,
        own_programs: Vec::new(),
        kernel_log: None,
        gate: None,
    }
}

/// The --metrics and --health sockets, bound before anything is attached.
type Listeners = (Option<std::net::TcpListener>, Option<std::net::TcpListener>);

fn bind(a: &WatchArgs) -> Result<Listeners, Fail> {
    Ok((
        a.metrics.map(|m| listen(m, "--metrics")).transpose()?,
        a.health.map(|m| listen(m, "--health")).transpose()?,
    ))
}

/// The --metrics or --health socket, bound before anything is attached.
fn listen(addr: std::net::SocketAddr, flag: &str) -> Result<std::net::TcpListener, Fail> {
    let l = std::net::TcpListener::bind(addr).map_err(|e| {
        Fail(
            2,
            anyhow::anyhow!(
                "{flag}: cannot listen on {addr}: {e} (another program has the port? choose another, e.g. {flag} 127.0.0.1:{})",
                if flag == "--health" { 9479 } else { 9477 }
            ),
        )
    })?;
    l.set_nonblocking(true)
        .map_err(|e| Fail(1, anyhow::anyhow!("{flag}: {e}")))?;
    Ok(l)
}

/// A write error: the reader going away ends nvprobe quietly (exit 0, see
/// `main`), anything else is an error (exit 1).
fn write_fail(e: std::io::Error) -> Fail {
    // Said as the writer thread says it, whichever write met it first.
    let f = nvprobe::output::WriteFailure {
        kind: e.kind(),
        message: e.to_string(),
    };
    Fail(1, WriteFailed(f).into())
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<WriteFailed>()
            .is_some_and(WriteFailed::is_broken_pipe)
            || c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn enable_bpf_stats() -> Option<std::os::fd::OwnedFd> {
    match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
        Ok(fd) => Some(fd),
        Err(e) => {
            eprintln!(
                "nvprobe: warning: --bpf-stats: the kernel refused BPF_ENABLE_STATS ({e}); no BPF cost figures"
            );
            None
        }
    }
}

/// What the decoder needs to know about this host.
fn decode_context(a: &WatchArgs, h: &Host, s: &Settings<'_>) -> Context {
    let mut ctx = Context::new(h.vctx);
    ctx.keep_raw = a.raw;
    ctx.uvm_major = s.uvm_major;
    ctx.caps_major = s.caps_major;
    ctx.nodes = host::device_nodes(Path::new("/"))
        .into_iter()
        .map(|(k, v)| (k, v.into()))
        .collect();
    for (d, id) in &h.extra {
        ctx.extra.insert(*id, d.path.display().to_string().into());
    }
    ctx.host_gpus = nvprobe::identity::host_gpus(Path::new("/"));
    ctx.host_driver = h.driver.as_ref().map(|d| d.version.to_string());
    ctx
}

/// libcuda uprobes: the copies on this host and in running processes.
fn hook_libcuda(a: &WatchArgs, loaded: &mut Loaded, libcuda: &mut Libcuda) {
    if !a.layer("cuda") {
        return;
    }
    if a.libcuda_hooks == Hooks::All {
        // A descriptor per uprobe: ~700 functions x 2 probes per libcuda
        // copy need more than the usual soft limit of 1024.
        raise_nofile();
    }
    let mut candidates = nvprobe::uprobes::static_candidates();
    candidates.extend(nvprobe::uprobes::mapped_by_all());
    for path in candidates {
        if let Err(e) = libcuda.attach(&path) {
            loaded.refusals.push(attach::Refusal {
                probe: format!("uprobe {}", path.display()),
                reason: e,
            });
        }
    }
}

/// The soft limit on open files up to the hard one.
fn raise_nofile() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

fn report_end(a: &WatchArgs, format: Format, summary: &nvprobe::summary::Summary) {
    let total: u64 = summary.events.values().sum();
    if format.structured() || a.out.output.is_some() {
        eprintln!(
            "nvprobe: stopped after {:.1} s: {total} events, {} failed, {} lost, {} processes",
            summary.duration_s,
            summary.failed,
            summary.lost.total,
            summary.processes.len() as u64 + summary.processes_omitted
        );
    }
    let unread = summary
        .lost
        .per_kind
        .get(live::UNREAD_AT_STOP)
        .copied()
        .unwrap_or(0);
    let full = summary.lost.total.saturating_sub(unread);
    if full > 0 {
        eprintln!(
            "nvprobe: {full} events were lost because the ring buffer was full; raise --ringbuf-size or narrow with --pid"
        );
    }
    if unread > 0 {
        eprintln!(
            "nvprobe: {unread} events made before the stop were still in the ring buffer when it ended and were counted, not decoded (the stop decodes for {} ms at most)",
            live::LAST_DRAIN.as_millis()
        );
    }
}
