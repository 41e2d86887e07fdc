//! What `watch` says at start: the start record, the warnings, the banner
//! and `top`'s probes line.

use std::path::Path;

use nvprobe::{
    attach::Loaded,
    decode::{self, Context, version::version_warning},
    pipeline::Filters,
    records::{ExtraDevice as ExtraDeviceRec, StartFilters, StartRecord},
    uprobes::Libcuda,
};

use crate::cli::common::Fail;

use super::args::{Host, WatchArgs};

pub(super) fn start_record(
    a: &WatchArgs,
    h: &Host,
    ctx: &Context,
    loaded: &Loaded,
    libcuda: &Libcuda,
    (tracefs, mounted): (&Path, bool),
) -> StartRecord {
    let attached_hooks: Vec<&str> = loaded
        .probes
        .iter()
        .filter(|p| p.layer == "driver" && p.attached)
        .map(|p| p.name.as_str())
        .collect();
    StartRecord {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        capabilities_kept: None,
        host: a.host_name.clone().or_else(|| {
            nix::unistd::gethostname()
                .ok()
                .map(|h| h.to_string_lossy().into_owned())
        }),
        kernel: nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default(),
        driver: h.driver.clone(),
        decode_version: h.vctx.version.to_string(),
        layouts: if h.vctx.known { "known" } else { "assumed" }.to_owned(),
        nvidia_major: h.majors.nvidia,
        uvm_major: h.majors.uvm,
        caps_major: h.majors.caps,
        nodes: ctx
            .nodes
            .iter()
            .map(|(k, v)| {
                (
                    format!(
                        "{}:{}",
                        nvprobe_common::kdev_major(*k),
                        nvprobe_common::kdev_minor(*k)
                    ),
                    v.to_string(),
                )
            })
            .collect(),
        extra_devices: h
            .extra
            .iter()
            .map(|(d, (sdev, ino))| ExtraDeviceRec {
                path: d.path.display().to_string(),
                kind: decode::dev_kind_name(d.kind).to_owned(),
                sdev: *sdev,
                ino: *ino,
            })
            .collect(),
        probes: loaded.probes.clone(),
        ringbuf_bytes: a.ringbuf_size,
        filters: StartFilters {
            pid: a.pid.clone(),
            comm: a.comm.clone(),
        },
        tracefs: tracefs.display().to_string(),
        tracefs_mounted_by_nvprobe: mounted,
        libcuda: libcuda.attached(),
        libcuda_hooks: if a.layer("cuda") {
            libcuda.hooks().name().to_owned()
        } else {
            String::new()
        },
        libcuda_attach: libcuda.via(),
        probe_removal: String::new(),
        events: a.out.events.as_str().to_owned(),
        ioctls_in_driver: loaded.ioctls_in_driver,
        gpus: ctx.host_gpus.clone(),
        driver_layer: Some(nvprobe::hooks::start_state(
            Path::new("/"),
            h.driver.as_ref().map(|d| &d.version),
            &attached_hooks,
            a.layer("driver"),
        )),
    }
}

/// The driver layer, said once: attached (with the hooks this driver
/// lacks) or why not; tracing goes on at the syscalls.
fn driver_layer_warning(a: &WatchArgs, h: &Host, loaded: &Loaded) -> Option<String> {
    let v = h.driver.as_ref().map(|d| &d.version);
    let attached = loaded
        .probes
        .iter()
        .filter(|p| p.layer == "driver" && p.attached)
        .count();
    if attached > 0 {
        let s = nvprobe::hooks::survey(Path::new("/"), v)?;
        return s.iter().any(|(_, p)| !*p).then(|| {
            format!(
                "driver layer attached ({attached} hooks); {}",
                nvprobe::hooks::describe(&s)
            )
        });
    }
    if !a.layer("driver") {
        return None;
    }
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
    Some(format!(
        "driver layer not attached: {reason}; {hooks}; the syscall layer traces every call"
    ))
}

/// Everything worth saying once before the trace starts.
pub(super) fn warnings(
    a: &WatchArgs,
    h: &Host,
    loaded: &Loaded,
) -> Result<Vec<(&'static str, String)>, Fail> {
    let mut warnings: Vec<(&str, String)> = Vec::new();
    match a.out.driver_version {
        // An explicit version the tables do not cover still warns.
        Some(v) if !h.vctx.known => warnings.push((
            "driver_version",
            format!("--driver-version {v} is outside the versions nvprobe's tables cover: statuses are decoded with the newest layouts and marked \"assumed\""),
        )),
        Some(_) => {}
        None => {
            if let Some(w) = version_warning(h.driver.as_ref()) {
                warnings.push(("driver_version", w));
            }
        }
    }
    if let Some(w) = driver_layer_warning(a, h, loaded) {
        warnings.push(("driver_layer", w));
    }
    if nvprobe::host::procfs_is_hosts(Path::new("/proc")) == Some(false) {
        warnings.push((
            "pid_namespace",
            "nvprobe runs in a pid namespace other than the host's (a container without --pid=host or hostPID: true, or unshare --pid): the kernel names traced processes by the host's ids, which this /proc does not show, so their command lines, containers and libcuda copies are not read; run nvprobe in the host's pid namespace".to_owned(),
        ));
    }
    if let Err(v) = nvprobe::attach::exit_forced() {
        warnings.push((
            "environment",
            format!(
                "{}={v:?} in nvprobe's environment is neither `counting` nor `simple`: ignored, the kernel's release picks the ioctl exit (docs/TRACING.md)",
                nvprobe::attach::EXIT_ENV
            ),
        ));
    }
    if !a.layer("syscall") && !loaded.ioctls_in_driver {
        return Err(Fail(
            3,
            anyhow::anyhow!(
                "--layers without syscall needs the driver layer's ioctl hooks (nvidia_unlocked_ioctl and uvm_unlocked_ioctl_entry), and they are not attached here: add syscall to --layers"
            ),
        ));
    }
    for c in h
        .checks
        .iter()
        .filter(|c| c.verdict != nvprobe::doctor::Verdict::Ok)
    {
        let level = if c.verdict == nvprobe::doctor::Verdict::Fail {
            "FAIL"
        } else {
            "WARN"
        };
        let hint = c
            .hint
            .as_ref()
            .map_or_else(String::new, |h| format!(" (hint: {h})"));
        warnings.push((
            "host_check",
            format!(
                "host check {level} {}/{}: {}{hint}",
                c.area, c.id, c.evidence
            ),
        ));
    }
    for r in &loaded.refusals {
        let id = if r.probe.starts_with("uprobe ") {
            "libcuda_refused"
        } else {
            "probe_refused"
        };
        warnings.push((id, format!("probe {} not attached: {}", r.probe, r.reason)));
    }
    Ok(warnings)
}

pub(super) fn banner(a: &WatchArgs, h: &Host, loaded: &Loaded, mounted: bool) -> String {
    let attached = loaded.probes.iter().filter(|p| p.attached).count();
    format!(
        "nvprobe {}: tracing NVIDIA driver calls ({}; decoding as {}{}); {attached}/{} probes attached{}{}{}. Ctrl-C to stop.",
        env!("CARGO_PKG_VERSION"),
        h.driver.as_ref().map_or_else(
            || "no NVIDIA driver loaded".to_owned(),
            |d| format!("driver {} {}", d.version, d.flavor)
        ),
        h.vctx.version,
        if h.vctx.known { "" } else { ", assumed" },
        loaded.probes.len(),
        if loaded.ioctls_in_driver {
            "; NVIDIA ioctls traced inside the driver (kprobes), no ioctl syscall tracepoint"
        } else {
            ""
        },
        if mounted {
            "; mounted tracefs (in its own mount namespace)"
        } else {
            ""
        },
        comm_match(&a.comm),
    )
}

/// The probes in use, per layer, for `top`'s footer.
pub(super) fn probes_line(loaded: &Loaded, libcuda: &Libcuda) -> String {
    let mut layers: Vec<(&str, usize, usize)> = Vec::new();
    for p in &loaded.probes {
        match layers.iter_mut().find(|l| l.0 == p.layer) {
            Some(l) => {
                l.1 += usize::from(p.attached);
                l.2 += 1;
            }
            None => layers.push((&p.layer, usize::from(p.attached), 1)),
        }
    }
    let mut parts: Vec<String> = layers
        .iter()
        .map(|(l, on, all)| format!("{l} {on}/{all}"))
        .collect();
    parts.push(format!("libcuda {}", libcuda.attached().len()));
    parts.join(", ")
}

/// How `--comm` matches, said at start-up: the kernel's name of a process
/// is its first 15 bytes.
fn comm_match(names: &[String]) -> String {
    if names.is_empty() {
        return String::new();
    }
    let each: Vec<String> = names
        .iter()
        .map(|n| {
            let k = Filters::kernel_comm(n);
            if k == *n {
                k
            } else {
                format!("{k} (from {n})")
            }
        })
        .collect();
    format!(
        "; --comm matches the kernel's process name (comm, its first {} bytes): {}",
        nvprobe::pipeline::COMM_BYTES,
        each.join(", ")
    )
}
