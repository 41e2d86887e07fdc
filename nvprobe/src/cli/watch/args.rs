//! `watch`'s flags, and what it learns of the host before attaching.

use std::path::Path;

use clap::Args;
use nvprobe::{
    decode::version::{DriverInfo, VersionCtx},
    host::{self, ExtraDevice},
    uprobes::Hooks,
};

use super::super::common::{
    Fail, OutputArgs, check_pids, parse_comm, parse_device, parse_pid, parse_ringbuf, parse_secs,
    version_ctx,
};

#[derive(Args)]
pub struct WatchArgs {
    /// The layers to use, comma-separated: syscall (ioctls and opens at the
    /// system calls), process (signals, exits, forks), cuda (libcuda
    /// uprobes), driver (kprobes inside nvidia/nvidia_uvm, where the kernel
    /// has kprobes). Default: every layer this kernel allows.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = ["syscall", "process", "cuda", "driver"])]
    pub layers: Vec<String>,
    /// Which libcuda functions the cuda layer hooks: startup (cuInit, version
    /// and device queries, contexts, first allocations and module loads: 58
    /// functions, none on a launch or copy path), faults (the default: the
    /// start-up set, and the synchronisations, copies, memsets and frees
    /// where a fault at run time surfaces, whose failures alone are sent),
    /// launches (that, and the kernel launches, failures only: a launch the
    /// driver refuses at once is named; each launch pays a uprobe round
    /// trip) or all (every CUDA driver API function the libcuda exports, 682 in
    /// libcuda 580.159.04:
    /// launches and copies too, each CUDA call then costs a uprobe round
    /// trip; see docs/BENCHMARKS.md; best with --pid or --events failures).
    #[arg(long, value_name = "SET", value_enum, default_value_t = Hooks::Faults)]
    pub libcuda_hooks: Hooks,
    /// Only this process (thread-group id, as the host's /proc shows it);
    /// repeatable. Filtered in the kernel. The process must be running when
    /// nvprobe starts (a free pid goes to whichever process comes next):
    /// to see a program from its very start, use --comm.
    #[arg(long, value_name = "PID", value_parser = parse_pid)]
    pub pid: Vec<u32>,
    /// Only processes with this name (comm); repeatable. The kernel keeps
    /// the first 15 bytes of a name, and so does the match:
    /// nvidia-persistenced matches the kernel's nvidia-persiste.
    #[arg(long, value_name = "COMM", value_parser = parse_comm)]
    pub comm: Vec<String>,
    /// Treat PATH as an NVIDIA device file of KIND (ctl, gpu or uvm), for odd
    /// setups and tests; repeatable. PATH must exist when nvprobe starts;
    /// KIND may be left out for the names nvidiactl, nvidiaN and nvidia-uvm.
    #[arg(long, value_name = "PATH[=KIND]", value_parser = parse_device)]
    pub device: Vec<ExtraDevice>,
    /// Keep each kernel record (hex) in the JSON, so `nvprobe decode` can
    /// decode the recording again later.
    #[arg(long)]
    pub raw: bool,
    /// Leave command lines out of `process` records and verdicts (they can
    /// hold secrets passed as arguments).
    #[arg(long)]
    pub no_cmdline: bool,
    /// Ring buffer size in bytes (a power of two, at least one page).
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024 * 1024, value_parser = parse_ringbuf)]
    pub ringbuf_size: u32,
    /// Print only each process's start-up verdict (its cuInit, and a first context that came after it) and the summary.
    #[arg(long)]
    pub summary_only: bool,
    /// Report an NVIDIA ioctl or a cuInit still running after this many
    /// seconds (then again at 2x, 4x, …), with what the thread is doing. 0
    /// turns stall reports off.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_secs)]
    pub stall_after: f64,
    /// Report a call of a process past its start-up (a libcuda
    /// synchronisation, copy, memset or free; an NVIDIA ioctl) still in
    /// flight after this many seconds, as a `hang` record: what the thread
    /// is doing, its last launch and completed wait, errors and Xids
    /// meanwhile, and the NCCL communicator's other ranks on this node;
    /// `hang_end` when it returns. 0 turns hang records off.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = parse_secs)]
    pub hang_after: f64,
    /// Measure each BPF program's run count and time (BPF_ENABLE_STATS) and
    /// report them in the summary: what nvprobe costs the traced host.
    #[arg(long)]
    pub bpf_stats: bool,
    /// Serve Prometheus metrics (OpenMetrics) at http://ADDR/metrics, e.g.
    /// 127.0.0.1:9477 or [::]:9477: verdicts, driver calls and their
    /// latency, stalls, signals, lost events, the ring buffer's fill; a
    /// health check at /healthz. No authentication: bind it to loopback or
    /// put an authenticating proxy or a network policy in front of it.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Answer a health check at http://ADDR/healthz alone (nothing else is
    /// served there), e.g. 0.0.0.0:9479: for a liveness probe that reaches
    /// nvprobe directly where --metrics sits behind a proxy on loopback.
    #[arg(long, value_name = "ADDR")]
    pub health: Option<std::net::SocketAddr>,
    /// The host's name in the start record and OTLP's `host.name` (default:
    /// the kernel's host name; in a Kubernetes pod that is the pod's, so
    /// the DaemonSet passes the node's name from the downward API).
    #[arg(long, value_name = "NAME", value_parser = parse_host_name)]
    pub host_name: Option<String>,
    /// Also write a Perfetto trace of the run to FILE (every event,
    /// whatever --events writes; at most 2,000,000 slices and instants).
    /// Created like -o once start-up has succeeded (0600, never through a
    /// link, an existing file only with --force); the trace is written
    /// into it when the run stops.
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<std::path::PathBuf>,
    /// Stop after this many seconds (default: run until Ctrl-C / SIGTERM).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub duration: Option<f64>,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// What `watch` learned about the host before attaching.
pub(super) struct Host {
    pub(super) driver: Option<DriverInfo>,
    pub(super) vctx: VersionCtx,
    pub(super) majors: host::Majors,
    pub(super) extra: Vec<(ExtraDevice, (u32, u64))>,
    /// The host checks of `nvprobe doctor` (files only: the probes answer
    /// for the kernel), run before any probe is attached so that their
    /// reads (a forked child of nvprobe) are not traced.
    pub(super) checks: Vec<nvprobe::doctor::Check>,
}

impl WatchArgs {
    pub(super) fn layer(&self, l: &str) -> bool {
        self.layers.is_empty() || self.layers.iter().any(|x| x == l)
    }

    /// Flags that parse but make no sense together or in range.
    pub(super) fn validate(&self) -> Result<(), Fail> {
        if !(self.stall_after.is_finite() && self.stall_after >= 0.0) {
            return Err(Fail(
                2,
                anyhow::anyhow!(
                    "--stall-after must be a number of seconds (0 turns stall reports off)"
                ),
            ));
        }
        if !(self.hang_after.is_finite() && self.hang_after >= 0.0) {
            return Err(Fail(
                2,
                anyhow::anyhow!(
                    "--hang-after must be a number of seconds (0 turns hang records off)"
                ),
            ));
        }
        if let Some(d) = self.duration
            && !(d.is_finite() && d > 0.0)
        {
            return Err(Fail(
                2,
                anyhow::anyhow!("--duration must be a positive number of seconds"),
            ));
        }
        if let (Some(h), Some(m)) = (self.health, self.metrics)
            && h.port() == m.port()
            && (h.ip() == m.ip() || h.ip().is_unspecified() || m.ip().is_unspecified())
        {
            return Err(Fail(
                2,
                anyhow::anyhow!(
                    "--health and --metrics name the same address: give --health one of its own (--metrics serves /healthz too)"
                ),
            ));
        }
        check_pids(&self.pid, Path::new("/proc"))
    }
}

impl Host {
    /// What the host says before anything is attached, with the host checks
    /// of `nvprobe doctor` (their reads are not traced as a process).
    pub(super) fn read(a: &WatchArgs, extra: Vec<(ExtraDevice, (u32, u64))>) -> Host {
        let root = Path::new("/");
        let driver = host::driver_info(root);
        Host {
            vctx: version_ctx(a.out.driver_version, driver.as_ref()),
            driver,
            majors: host::majors(root),
            extra,
            checks: nvprobe::doctor::run_with(&nvprobe::doctor::Options {
                watch_startup: true,
                live: true,
                ..nvprobe::doctor::Options::tree(root)
            })
            .unwrap_or_default(),
        }
    }
}

/// `--host-name`: a DNS name (what a node name is), at most 253 bytes.
fn parse_host_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if ok {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{s:?} is not a host name (letters, digits, '-', '_', dot-separated labels)"
        ))
    }
}
