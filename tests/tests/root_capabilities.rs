//! Tier 2: the real BPF programs on this machine's kernel, as root.
//!
//! This file: the capability set the deployments give nvprobe
//! (deploy/CAPABILITIES.md; read here from the systemd unit's
//! CapabilityBoundingSet=, so that the unit and this test cannot drift
//! apart). nvprobe runs as uid 0 with its bounding set cut to that set
//! before exec, exactly as systemd does it (PR_CAPBSET_DROP; inheritable
//! and ambient sets emptied), so the exec'd nvprobe holds those
//! capabilities and no others. With the set it attaches every syscall and
//! process probe, hooks a libcuda held by another user's process, and
//! reads the identity of another user's process and of a root process that
//! holds every capability. Without CAP_BPF (and CAP_SYS_ADMIN, which covers
//! it) it exits 4 saying bpf() was refused; without CAP_PERFMON (and
//! CAP_SYS_ADMIN) it exits 3 naming the ioctl probe; without CAP_SYS_PTRACE
//! the identity of those processes is out of reach.
//!
//! Each nvprobe here runs in a mount namespace of the test's own, never
//! on the host's tracefs: with CAP_SYS_ADMIN it finds tracefs unmounted
//! and mounts its own (a fresh host, such as the GPU machine); without it,
//! where nvprobe cannot mount one, the test mounts one there first, as
//! systemd or the operator does on a real host.

use std::{
    fs,
    os::unix::{
        fs::PermissionsExt as _,
        process::{CommandExt as _, ExitStatusExt as _},
    },
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use nvprobe_tests::{
    harness::{
        Finished, Trace, bin, private_mount_namespace, private_mount_namespace_with_tracefs,
    },
    need_root,
    scenario::{check_schema, lock, stub_libcuda, tmpdir},
};
use serde_json::Value;

/// Capability numbers (linux/capability.h) of the names the deployments
/// use.
const CAP_NUMBERS: &[(&str, u32)] = &[
    ("CAP_DAC_READ_SEARCH", 2),
    ("CAP_SYS_PTRACE", 19),
    ("CAP_SYS_ADMIN", 21),
    ("CAP_SYSLOG", 34),
    ("CAP_PERFMON", 38),
    ("CAP_BPF", 39),
];

fn deploy_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(rel)
}

/// The documented set, when this machine can run these tests (else said,
/// as a skip).
fn documented_set_here() -> Option<Vec<String>> {
    let set = documented_set();
    if let Some(why) = unsupported(&set) {
        nvprobe_tests::harness::skip(format_args!("{why}"));
        return None;
    }
    Some(set)
}

/// The systemd unit's CapabilityBoundingSet=, as capability names.
fn documented_set() -> Vec<String> {
    let unit = fs::read_to_string(deploy_file("systemd/nvprobe.service")).expect("read the unit");
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("the unit sets CapabilityBoundingSet=");
    let set: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
    assert!(!set.is_empty(), "an empty CapabilityBoundingSet=");
    set
}

fn cap_number(name: &str) -> u32 {
    CAP_NUMBERS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("{name}: add its number to CAP_NUMBERS"))
}

/// The highest capability number this kernel knows.
fn cap_last_cap() -> u32 {
    fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .expect("read cap_last_cap")
        .trim()
        .parse()
        .expect("cap_last_cap is a number")
}

/// This process's effective capabilities (they bound what a child can keep).
fn own_effective() -> u64 {
    let status = fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .expect("CapEff line");
    u64::from_str_radix(hex.trim(), 16).expect("CapEff is hex")
}

/// Why this machine cannot run these tests, if it cannot.
fn unsupported(set: &[String]) -> Option<String> {
    let last = cap_last_cap();
    if last < 39 {
        return Some(format!(
            "this kernel knows capabilities up to {last}; CAP_BPF (39) and CAP_PERFMON (38) need Linux 5.8"
        ));
    }
    let own = own_effective();
    let missing: Vec<&String> = set
        .iter()
        .filter(|c| own & (1 << cap_number(c)) == 0)
        .collect();
    (!missing.is_empty()).then(|| format!("this test process lacks {missing:?} itself"))
}

/// Run the command with exactly `keep` (capability numbers): the bounding
/// set is cut to them and the inheritable and ambient sets emptied, so
/// that the exec'd program, as uid 0, gets `keep` and nothing else. It
/// runs in a mount namespace of its own: tracefs unmounted there when it
/// keeps CAP_SYS_ADMIN (it mounts its own), mounted by the test before the
/// capabilities go when it does not.
fn with_only(cmd: &mut Command, keep: Vec<u32>) {
    own_namespace(cmd, &keep);
    cut_to(cmd, keep);
}

/// The mount namespace of [`with_only`].
fn own_namespace(cmd: &mut Command, keep: &[u32]) {
    if keep.contains(&cap_number("CAP_SYS_ADMIN")) {
        private_mount_namespace(cmd, &["/sys/kernel/tracing"]);
    } else {
        private_mount_namespace_with_tracefs(cmd);
    }
}

/// [`with_only`], with `/dev/kmsg` unopenable in the command's mount
/// namespace, as in a container (whose device cgroup refuses it): a unix
/// socket is bound over it, and opening a socket fails (ENXIO).
fn with_only_and_no_kmsg(cmd: &mut Command, keep: Vec<u32>, socket: PathBuf) {
    own_namespace(cmd, &keep);
    // SAFETY: runs in the forked child before exec, after the unshare and
    // before the capabilities go: one mount system call.
    unsafe {
        cmd.pre_exec(move || {
            nix::mount::mount(
                Some(socket.as_path()),
                "/dev/kmsg",
                None::<&str>,
                nix::mount::MsFlags::MS_BIND,
                None::<&str>,
            )?;
            Ok(())
        });
    }
    cut_to(cmd, keep);
}

/// The capability cut of [`with_only`].
fn cut_to(cmd: &mut Command, keep: Vec<u32>) {
    let last = cap_last_cap();
    // SAFETY: runs in the forked child before exec: only system calls
    // (prctl, capget, capset) on memory owned by the closure, no
    // allocation, no locks.
    unsafe {
        cmd.pre_exec(move || {
            // struct __user_cap_header_struct { version, pid } and two
            // struct __user_cap_data_struct { effective, permitted,
            // inheritable } (linux/capability.h, version 3).
            let mut hdr: [u32; 2] = [0x2008_0522, 0];
            let mut data: [u32; 6] = [0; 6];
            if libc::syscall(libc::SYS_capget, hdr.as_mut_ptr(), data.as_mut_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            data[2] = 0;
            data[5] = 0;
            if libc::syscall(libc::SYS_capset, hdr.as_mut_ptr(), data.as_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            for cap in 0..=last {
                if !keep.contains(&cap)
                    && libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// The documented set less `drop`, as numbers.
fn set_without(set: &[String], drop: &[&str]) -> Vec<u32> {
    set.iter()
        .filter(|c| !drop.contains(&c.as_str()))
        .map(|c| cap_number(c))
        .collect()
}

/// A stand-in NVIDIA control node that any user can open: a 0666 regular
/// file in a 0755 folder, declared to nvprobe with --device.
fn fake_ctl(tmp: &Path) -> PathBuf {
    fs::set_permissions(tmp, fs::Permissions::from_mode(0o755)).expect("chmod tmp");
    let ctl = tmp.join("fakectl");
    fs::write(&ctl, b"").expect("create the stand-in node");
    fs::set_permissions(&ctl, fs::Permissions::from_mode(0o666)).expect("chmod node");
    ctl
}

/// A process that opens `ctl`, keeps it open for 2 s and exits; as
/// uid/gid 65534 when `nobody`, else as this (root) process with every
/// capability it has.
fn opener(ctl: &Path, nobody: bool, visible: &str) -> Child {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("exec 3<'{}'; sleep 2; :", ctl.display()))
        .env("CUDA_VISIBLE_DEVICES", visible)
        .stdin(Stdio::null());
    if nobody {
        // std drops the supplementary groups when root sets a uid.
        c.uid(65534).gid(65534);
    }
    c.spawn().expect("spawn the opener")
}

/// `nvprobe watch` with exactly `keep`; both openers run while it traces.
fn trace_openers(tmp: &Path, ctl: &Path, keep: Vec<u32>, extra: &[&str]) -> (Finished, u32, u32) {
    let device = format!("{}=ctl", ctl.display());
    let mut args = vec!["--driver-version", "580.159.04", "--device", &device];
    args.extend_from_slice(extra);
    let t = Trace::start_with(tmp, &args, |c| with_only(c, keep));
    let mut nobody = opener(ctl, true, "7");
    let mut rooted = opener(ctl, false, "5");
    let (np, rp) = (nobody.id(), rooted.id());
    assert!(nobody.wait().expect("wait").success());
    assert!(rooted.wait().expect("wait").success());
    std::thread::sleep(Duration::from_millis(300));
    let f = t.stop();
    check_schema(&f);
    (f, np, rp)
}

fn process_record(f: &Finished, pid: u32) -> &Value {
    f.of_type("process")
        .find(|r| r["pid"] == pid)
        .unwrap_or_else(|| panic!("no process record for {pid}: {:#?}", f.records))
}

/// With exactly the documented set: every syscall and process probe
/// attached, nothing refused, and the identity of another user's process
/// and of a full-capability root process read (CAP_SYS_PTRACE for exe,
/// CAP_DAC_READ_SEARCH for another user's environ).
#[test]
#[ignore = "needs root"]
fn the_documented_set_attaches_everything_and_reads_identities() {
    need_root!();
    let Some(set) = documented_set_here() else {
        return;
    };
    let _g = lock();
    let tmp = tmpdir("caps-full");
    let ctl = fake_ctl(&tmp);
    let (f, nobody, rooted) = trace_openers(&tmp, &ctl, set_without(&set, &[]), &[]);
    let start = f.of_type("start").next().expect("a start record");
    let probes = start["probes"].as_array().expect("probes");
    let layer = |l: &'static str| probes.iter().filter(move |p| p["layer"] == l);
    assert!(layer("syscall").count() > 0 && layer("process").count() > 0);
    for p in layer("syscall").chain(layer("process")) {
        assert_eq!(p["attached"], true, "{p}");
    }
    let refused: Vec<&Value> = f
        .of_type("warning")
        .filter(|w| w["id"] == "probe_refused")
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
    assert!(f.stderr.contains("probes attached"), "{}", f.stderr);
    for (pid, visible) in [(nobody, "7"), (rooted, "5")] {
        let p = process_record(&f, pid);
        assert!(p["exe"].as_str().is_some_and(|e| e.ends_with("sh")), "{p}");
        assert!(
            p["cmdline"].as_array().is_some_and(|c| !c.is_empty()),
            "{p}"
        );
        assert_eq!(p["env"]["CUDA_VISIBLE_DEVICES"], visible, "{p}");
        assert!(p["cgroup"].is_string(), "{p}");
        assert!(p.get("note").is_none_or(Value::is_null), "{p}");
    }
}

/// The libcuda uprobes need CAP_SYS_PTRACE (the copy is reached through the
/// holder's /proc/PID/root) and, on the perf-event path only, CAP_SYS_ADMIN
/// (the kernel asks for it to open a uprobe perf event; a uprobe_multi link
/// needs CAP_BPF and CAP_PERFMON alone): with the set, a libcuda mapped by
/// another user's process is hooked at start; without CAP_SYS_ADMIN it is
/// hooked through uprobe_multi where the kernel has it, and not at all
/// otherwise, and tracing goes on either way.
#[test]
#[ignore = "needs root"]
fn libcuda_uprobes_need_cap_sys_admin_only_through_perf_events() {
    need_root!();
    let Some(set) = documented_set_here() else {
        return;
    };
    let _g = lock();
    let tmp = tmpdir("caps-uprobe");
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755)).expect("chmod tmp");
    let lib = stub_libcuda(&tmp);
    fs::set_permissions(
        lib.parent().expect("dir"),
        fs::Permissions::from_mode(0o755),
    )
    .expect("chmod lib dir");
    // Another user's process with the stand-in libcuda mapped.
    let mut holder = Command::new("sleep")
        .arg("30")
        .env("LD_PRELOAD", &lib)
        .uid(65534)
        .gid(65534)
        .spawn()
        .expect("spawn the holder");
    let mapped = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        fs::read_to_string(format!("/proc/{}/maps", holder.id()))
            .is_ok_and(|m| m.contains("libcuda.so.1"))
    });
    assert!(mapped, "the holder never mapped {}", lib.display());
    let hooked = |keep: Vec<u32>| -> (Vec<Value>, String) {
        let t = Trace::start_with(&tmp, &["--driver-version", "580.159.04"], |c| {
            with_only(c, keep)
        });
        let f = t.stop();
        check_schema(&f);
        let start = f.of_type("start").next().expect("a start record");
        let libs = start["libcuda"].as_array().cloned().unwrap_or_default();
        let ours: Vec<Value> = libs
            .into_iter()
            .filter(|l| {
                l["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with(&*lib.to_string_lossy()))
            })
            .collect();
        (ours, f.stderr)
    };
    let (with_set, err) = hooked(set_without(&set, &[]));
    assert_eq!(with_set.len(), 1, "{with_set:?} {err}");
    let functions = with_set[0]["functions"].as_array().expect("functions");
    assert!(functions.iter().any(|f| f == "cuInit"), "{with_set:?}");
    assert!(!err.contains("libcuda.so.1 not attached"), "{err}");
    let (without, err) = hooked(set_without(&set, &["CAP_SYS_ADMIN"]));
    if with_set[0]["via"] == "uprobe_multi" {
        assert_eq!(without.len(), 1, "{without:?} {err}");
        assert_eq!(without[0]["via"], "uprobe_multi", "{without:?}");
        let functions = without[0]["functions"].as_array().expect("functions");
        assert!(functions.iter().any(|f| f == "cuInit"), "{without:?}");
    } else {
        assert!(
            without
                .iter()
                .all(|l| l["functions"].as_array().is_none_or(Vec::is_empty)),
            "hooked through perf events without CAP_SYS_ADMIN: {without:?}"
        );
        assert!(
            err.contains("libcuda.so.1 not attached") && err.contains("cuInit could not be hooked"),
            "{err}"
        );
    }
    let _ = holder.kill();
    let _ = holder.wait();
}

/// Without CAP_SYS_PTRACE the exe link of another user's process, and of a
/// root process holding capabilities nvprobe lacks, cannot be read, and
/// their identity is missing. Tracing itself goes on.
#[test]
#[ignore = "needs root"]
fn identities_need_cap_sys_ptrace() {
    need_root!();
    let Some(set) = documented_set_here() else {
        return;
    };
    let _g = lock();
    let tmp = tmpdir("caps-ptrace");
    let ctl = fake_ctl(&tmp);
    let (f, nobody, rooted) =
        trace_openers(&tmp, &ctl, set_without(&set, &["CAP_SYS_PTRACE"]), &[]);
    let start = f.of_type("start").next().expect("a start record");
    assert!(
        start["probes"]
            .as_array()
            .expect("probes")
            .iter()
            .filter(|p| p["layer"] == "syscall" || p["layer"] == "process")
            .all(|p| p["attached"] == true),
        "{start}"
    );
    for pid in [nobody, rooted] {
        let p = process_record(&f, pid);
        assert!(p.get("exe").is_none_or(Value::is_null), "{p}");
        assert!(p.get("env").is_none_or(Value::is_null), "{p}");
    }
}

/// Where /dev/kmsg cannot be opened (a container's device cgroup refuses
/// it whatever the capabilities), the kernel log is followed through
/// syslog(2): with the set (the DaemonSet's as the unit's), nvprobe says so
/// once, keeps CAP_SYSLOG (syslog(2) checks it at every read) and reads on
/// without a failure; without CAP_SYSLOG, where `kernel.dmesg_restrict` is
/// 1, it says once that the log cannot be followed, naming both refusals.
#[test]
#[ignore = "needs root"]
fn the_kernel_log_is_followed_through_syslog_where_kmsg_cannot_be_opened() {
    need_root!();
    let Some(set) = documented_set_here() else {
        return;
    };
    let _g = lock();
    let tmp = tmpdir("caps-syslog");
    let socket = tmp.join("kmsg.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind the socket");
    let traced = |keep: Vec<u32>| {
        let sock = socket.clone();
        let t = Trace::start_with(&tmp, &["--driver-version", "580.159.04"], move |c| {
            with_only_and_no_kmsg(c, keep, sock)
        });
        // Four of the follower's reads.
        std::thread::sleep(Duration::from_millis(1100));
        let f = t.stop();
        check_schema(&f);
        f
    };
    let warnings = |f: &Finished, id: &str| -> Vec<String> {
        f.of_type("warning")
            .filter(|w| w["id"] == id)
            .map(|w| w["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let f = traced(set_without(&set, &[]));
    let via = warnings(&f, "kernel_log_syslog");
    assert_eq!(via.len(), 1, "{:#?}", f.records);
    assert!(
        via[0].contains("/dev/kmsg: No such device or address"),
        "{}",
        via[0]
    );
    assert!(
        warnings(&f, "kernel_log_unavailable").is_empty(),
        "{:#?}",
        f.records
    );
    let start = f.of_type("start").next().expect("a start record");
    let kept = start["capabilities_kept"].as_array().expect("kept");
    // Kept where syslog(2) checks it (kernel.dmesg_restrict 1), else not.
    let restrict = fs::read_to_string("/proc/sys/kernel/dmesg_restrict").unwrap_or_default();
    assert_eq!(
        kept.iter().any(|c| c == "CAP_SYSLOG"),
        restrict.trim() != "0",
        "{start}"
    );

    let f = traced(set_without(&set, &["CAP_SYSLOG"]));
    let start = f.of_type("start").next().expect("a start record");
    let kept = start["capabilities_kept"].as_array().expect("kept");
    assert!(!kept.iter().any(|c| c == "CAP_SYSLOG"), "{start}");
    if restrict.trim() == "1" {
        let no = warnings(&f, "kernel_log_unavailable");
        assert_eq!(no.len(), 1, "{:#?}", f.records);
        assert!(
            no[0].contains("/dev/kmsg: No such device or address")
                && no[0].contains("syslog(2): Operation not permitted"),
            "{}",
            no[0]
        );
        assert!(warnings(&f, "kernel_log_syslog").is_empty());
    } else {
        // Anyone may read the log here: followed without the capability.
        assert_eq!(
            warnings(&f, "kernel_log_syslog").len(),
            1,
            "{:#?}",
            f.records
        );
    }
}

/// Run `nvprobe watch --duration 1` with exactly `keep`; its exit code and
/// stderr.
fn watch_with(keep: Vec<u32>) -> (Option<i32>, String) {
    let mut c = Command::new(bin("nvprobe"));
    c.args(["watch", "--duration", "1", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    with_only(&mut c, keep);
    let o = c.output().expect("run nvprobe");
    assert!(
        o.status.signal().is_none(),
        "nvprobe was killed: {}",
        o.status
    );
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A capability the tracer cannot do without: a clear error and the
/// documented exit code (4: not permitted; 3: the kernel refused what
/// nvprobe needs), never a half-attached trace.
#[test]
#[ignore = "needs root"]
fn a_missing_bpf_or_perfmon_capability_is_a_clear_error() {
    need_root!();
    let Some(set) = documented_set_here() else {
        return;
    };
    let _g = lock();
    // CAP_SYS_ADMIN grants what CAP_BPF and CAP_PERFMON do: drop it too.
    let (code, err) = watch_with(set_without(&set, &["CAP_BPF", "CAP_SYS_ADMIN"]));
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.contains("nvprobe: error: the kernel refused the bpf() system call"),
        "{err}"
    );
    let (code, err) = watch_with(set_without(&set, &["CAP_PERFMON", "CAP_SYS_ADMIN"]));
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("attaching the required ioctl probe failed")
            && err.contains("Operation not permitted"),
        "{err}"
    );
    // And the set itself starts and stops cleanly.
    let (code, err) = watch_with(set_without(&set, &[]));
    assert_eq!(code, Some(0), "{err}");
}

/// Once attached, nvprobe keeps only the capabilities it still uses (BPF,
/// PERFMON, SYS_ADMIN, SYS_PTRACE, DAC_READ_SEARCH) in every thread's
/// effective, permitted and bounding sets, drops the rest root holds, and
/// says which it kept in the start record.
#[test]
#[ignore = "needs root"]
fn after_attaching_only_the_capabilities_still_used_are_kept() {
    nvprobe_tests::need_root!();
    let _g = nvprobe_tests::scenario::lock();
    let tmp = nvprobe_tests::scenario::tmpdir("caps-dropped");
    let drv = nvprobe_tests::scenario::FakeDrv::start(&tmp);
    let t = nvprobe_tests::scenario::watch(&tmp, &drv, &[]);
    // linux/capability.h: DAC_READ_SEARCH 2, SYS_PTRACE 19, SYS_ADMIN 21,
    // PERFMON 38, BPF 39.
    let want: u64 = [2u32, 19, 21, 38, 39].iter().map(|b| 1u64 << b).sum();
    let threads = assert_thread_caps(t.pid(), want);
    assert!(
        threads >= 2,
        "the pipeline's threads inherit the reduced sets"
    );
    let start = t.wait_for("start", |r| r["type"] == "start");
    assert_eq!(
        start["capabilities_kept"],
        serde_json::json!([
            "CAP_BPF",
            "CAP_DAC_READ_SEARCH",
            "CAP_PERFMON",
            "CAP_SYS_ADMIN",
            "CAP_SYS_PTRACE"
        ])
    );
    // It still works with them: a scenario's calls are traced, and it
    // stops cleanly (detaching, unmounting what it mounted).
    let ran = nvprobe_tests::scenario::scenario(&drv, "basic", &[]);
    let f = t.stop();
    nvprobe_tests::scenario::check_schema(&f);
    assert!(
        f.records
            .iter()
            .any(|r| r["type"] == "ioctl" && r["pid"] == ran["pid"])
    );
}

/// Issue 23, item 6: CAP_SYS_ADMIN is kept only while the run still needs
/// it. Without stall reports (their kernel stacks) and without the cuda
/// layer (libcuda uprobes as perf events), nvprobe keeps BPF, PERFMON,
/// SYS_PTRACE and DAC_READ_SEARCH only, in every thread; and it runs in a
/// mount namespace of its own, which it cannot leave (no CAP_SYS_CHROOT
/// for setns): whatever it mounts stays out of the host's.
#[test]
#[ignore = "needs root"]
fn sys_admin_is_dropped_when_nothing_needs_it() {
    nvprobe_tests::need_root!();
    let _g = nvprobe_tests::scenario::lock();
    let tmp = nvprobe_tests::scenario::tmpdir("caps-no-admin");
    let drv = nvprobe_tests::scenario::FakeDrv::start(&tmp);
    let t = nvprobe_tests::scenario::watch(
        &tmp,
        &drv,
        &["--stall-after", "0", "--layers", "syscall,process"],
    );
    let want: u64 = [2u32, 19, 38, 39].iter().map(|b| 1u64 << b).sum();
    assert_thread_caps(t.pid(), want);
    let ns = |p: String| std::fs::read_link(p).expect("ns link");
    assert_ne!(
        ns(format!("/proc/{}/ns/mnt", t.pid())),
        ns("/proc/self/ns/mnt".into()),
        "nvprobe runs in a mount namespace of its own"
    );
    let start = t.wait_for("start", |r| r["type"] == "start");
    assert_eq!(
        start["capabilities_kept"],
        serde_json::json!([
            "CAP_BPF",
            "CAP_DAC_READ_SEARCH",
            "CAP_PERFMON",
            "CAP_SYS_PTRACE"
        ])
    );
    let ran = nvprobe_tests::scenario::scenario(&drv, "basic", &[]);
    let f = t.stop();
    assert!(
        f.records
            .iter()
            .any(|r| r["type"] == "ioctl" && r["pid"] == ran["pid"])
    );
}

/// Every thread of `pid` has exactly `want` (a capability bit mask) as its
/// effective, permitted and bounding sets; returns how many threads.
fn assert_thread_caps(pid: u32, want: u64) -> usize {
    let mut threads = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks") {
        // A thread that ended since the listing (the start's scan of
        // /proc runs on one of its own) holds nothing any more.
        let Ok(status) = std::fs::read_to_string(task.expect("task").path().join("status")) else {
            continue;
        };
        for key in ["CapEff:", "CapPrm:", "CapBnd:"] {
            let hex = status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .expect("cap line")
                .trim();
            let v = u64::from_str_radix(hex, 16).expect("hex");
            assert_eq!(v, want, "{key} {hex} in\n{status}");
        }
        threads += 1;
    }
    threads
}
