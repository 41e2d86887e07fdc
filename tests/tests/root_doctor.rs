//! Tier 2: the real BPF programs on this machine's kernel, as root.
//!
//! A FUSE stand-in serves the NVIDIA device files (tests/src/fakedrv.rs)
//! and `nvfixture` makes driver-style calls on it; `nvprobe watch --json`
//! runs as a separate process, exactly as a user runs it. Without root the
//! tests say `skipping` and pass, since loading BPF needs root. What the
//! root tests share is in tests/src/scenario.rs.
//!
//! This file: `nvprobe doctor` on this host: the live kernel checks against the
//! kernel's own config, snapshots, tracefs left alone, a stuck driver file.

use std::{path::Path, process::Command};

use nvprobe_tests::{
    harness::{bin, private_mount_namespace},
    need_root,
    scenario::{FakeDrv, lock, tmpdir},
};

/// `zcat /proc/config.gz`: the kernel's own account of what it was built
/// with, independent of doctor's probes.
fn kernel_config() -> Option<String> {
    let o = Command::new("zcat").arg("/proc/config.gz").output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

fn doctor_json(args: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let o = Command::new(bin("nvprobe"))
        .arg("doctor")
        .arg("--json")
        .args(args)
        .output()
        .expect("run nvprobe doctor");
    let doc = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    (
        o.status.code(),
        doc,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn check_of<'a>(doc: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no {id} check: {doc}"))
}

/// The live kernel checks load real probes. What they find must agree with
/// /proc/config.gz and with the facts of this machine kind (docs/KERNELS.md:
/// a 6.18 Firecracker guest whose security policy refuses TRACING programs
/// with EPERM, and which has no kprobes).
#[test]
fn doctor_asks_the_kernel_and_agrees_with_its_config() {
    need_root!();
    let _g = lock();
    let Some(cfg) = kernel_config() else {
        eprintln!("skipping: no /proc/config.gz to compare with");
        return;
    };
    let set = |k: &str| cfg.lines().any(|l| l == format!("{k}=y"));
    let (_, doc, _) = doctor_json(&[]);
    assert!(
        doc["scope"]
            .as_str()
            .is_some_and(|s| s.starts_with("this host: the kernel was asked")),
        "{doc}"
    );
    assert_eq!(
        check_of(&doc, "bpf")["verdict"],
        if set("CONFIG_BPF_SYSCALL") {
            "ok"
        } else {
            "fail"
        }
    );
    assert_eq!(
        check_of(&doc, "btf")["verdict"],
        if set("CONFIG_DEBUG_INFO_BTF") {
            "ok"
        } else {
            "fail"
        }
    );
    let tp = check_of(&doc, "tracepoint");
    assert_eq!(
        tp["verdict"],
        if set("CONFIG_FTRACE_SYSCALLS") {
            "ok"
        } else {
            "fail"
        },
        "{tp}"
    );
    if set("CONFIG_FTRACE_SYSCALLS") {
        let e = tp["evidence"].as_str().expect("evidence");
        assert!(
            e.starts_with("tracepoint syscalls/sys_enter_getppid: attached and fired ("),
            "{e}"
        );
    }
    let up = check_of(&doc, "uprobe");
    assert_eq!(
        up["verdict"],
        if set("CONFIG_UPROBE_EVENTS") {
            "ok"
        } else {
            "warn"
        },
        "{up}"
    );
    let kp = check_of(&doc, "kprobe");
    if set("CONFIG_KPROBES") {
        assert_eq!(kp["verdict"], "ok", "{kp}");
    } else {
        assert_eq!(kp["verdict"], "warn", "{kp}");
        assert!(
            kp["evidence"]
                .as_str()
                .is_some_and(|e| e
                    .starts_with("no kprobe PMU (/sys/bus/event_source/devices/kprobe is missing")),
            "{kp}"
        );
    }
    let layers = check_of(&doc, "layers")["evidence"]
        .as_str()
        .expect("layers")
        .to_owned();
    assert!(
        layers.ends_with(if set("CONFIG_KPROBES") {
            "driver layer (kprobes inside nvidia/nvidia_uvm): yes"
        } else {
            "driver layer (kprobes inside nvidia/nvidia_uvm): no"
        }),
        "{layers}"
    );
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    if release.contains("-fc-") {
        // This machine kind: fentry is refused by policy, with EPERM.
        let fe = check_of(&doc, "fentry");
        assert_eq!(fe["verdict"], "warn", "{fe}");
        assert!(
            fe["evidence"]
                .as_str()
                .is_some_and(|e| e.starts_with("the kernel refused it with EPERM")),
            "{fe}"
        );
        assert!(!set("CONFIG_KPROBES"), "this machine kind has no kprobes");
        assert!(layers.starts_with("syscall layer (ioctls, opens on /dev/nvidia*): yes; process layer (signals, exits, forks): yes; libcuda uprobes (cuInit's own result): yes;"), "{layers}");
    }
    // No probe is left behind.
    let left = Command::new("sh")
        .args(["-c", "cat /sys/kernel/tracing/uprobe_events 2>/dev/null"])
        .output()
        .expect("sh");
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains("getppid"),
        "the uprobe was detached"
    );
}

/// `--snapshot` captures what doctor reads; `--root` on the archive (and on
/// a folder) gives the same file-level verdicts elsewhere.
#[test]
fn doctor_snapshot_round_trip() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("snapshot");
    let tar = tmp.join("host.tar.gz");
    let o = Command::new(bin("nvprobe"))
        .args(["doctor", "--snapshot"])
        .arg(&tar)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("wrote a snapshot of this host to"), "{err}");
    let list = Command::new("tar")
        .arg("tzf")
        .arg(&tar)
        .output()
        .expect("tar");
    let names = String::from_utf8_lossy(&list.stdout);
    for f in [
        "dev.manifest",
        "libs.manifest",
        "kmsg.txt",
        "snapshot.json",
        "proc/devices",
        "sys/kernel/btf.list",
        "sys/bus/event_source/devices.list",
    ] {
        assert!(
            names.lines().any(|l| l.trim_start_matches("./") == f),
            "{f} missing from {names}"
        );
    }
    assert!(
        !names.contains("environ") || {
            // pid 1's environment is cut down to container= / KUBERNETES.
            let env = Command::new("tar")
                .arg("xzOf")
                .arg(&tar)
                .arg("proc/1/environ")
                .output()
                .expect("tar");
            env.stdout.split(|&b| b == 0).all(|e| {
                e.is_empty()
                    || e.starts_with(b"container=")
                    || e.starts_with(b"KUBERNETES_SERVICE_HOST=")
            })
        }
    );
    let (_, live, _) = doctor_json(&[]);
    let (code, snap, _) = doctor_json(&["--root", tar.to_str().expect("utf8")]);
    assert!(code.is_some_and(|c| c <= 1));
    assert!(
        snap["scope"]
            .as_str()
            .is_some_and(|s| s.ends_with("file evidence only (no probes loaded, no opens tried)"))
    );
    for id in ["driver_loaded", "uvm_loaded", "runtime", "btf"] {
        assert_eq!(
            check_of(&live, id)["verdict"],
            check_of(&snap, id)["verdict"],
            "{id}"
        );
    }
    assert_eq!(
        check_of(&live, "runtime")["evidence"],
        check_of(&snap, "runtime")["evidence"]
    );
    let kp_live = check_of(&live, "kprobe")["verdict"].clone();
    assert_eq!(
        check_of(&snap, "kprobe")["verdict"],
        kp_live,
        "the event-source listing says the same"
    );
    // A folder works too, and an existing non-empty one is refused.
    let dir = tmp.join("folder");
    let o = Command::new(bin("nvprobe"))
        .args(["doctor", "--snapshot"])
        .arg(&dir)
        .output()
        .expect("run");
    assert!(o.status.code().is_some_and(|c| c <= 1));
    assert!(dir.join("snapshot.json").is_file());
    let again = Command::new(bin("nvprobe"))
        .args(["doctor", "--snapshot"])
        .arg(&dir)
        .output()
        .expect("run");
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("the folder exists and is not empty"));
    let both = Command::new(bin("nvprobe"))
        .args(["doctor", "--snapshot", "/tmp/x.tar", "--root"])
        .arg(&dir)
        .output()
        .expect("run");
    assert_eq!(both.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&tmp);
}

/// With tracefs unmounted, doctor tests tracepoints in a private mount
/// namespace: the namespace it was started in is left as it was. Doctor
/// runs here in a mount namespace of the test's own, with tracefs detached
/// there (the host's tracefs, which another tracer may be using, is not
/// touched), and that namespace is looked at after doctor exits.
#[test]
fn doctor_tests_tracepoints_without_mounting_tracefs_on_the_host() {
    need_root!();
    let _g = lock();
    if Path::new("/sys/kernel/debug/tracing/events").exists() {
        eprintln!("skipping: debugfs offers tracefs here");
        return;
    }
    // sh, in the new namespace: doctor, then whether tracefs is mounted
    // there now.
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(concat!(
            r#"[ -d /sys/kernel/tracing/events ] && { echo "tracefs: mounted before" >&2; exit 99; }; "#,
            r#""$0" doctor --json; rc=$?; "#,
            r#"if [ -d /sys/kernel/tracing/events ]; then echo "tracefs: mounted" >&2; "#,
            r#"else echo "tracefs: unmounted" >&2; fi; exit $rc"#
        ))
        .arg(bin("nvprobe"));
    private_mount_namespace(&mut c, &["/sys/kernel/tracing"]);
    let o = c.output().expect("run nvprobe doctor");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(99), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    let still_unmounted = err.lines().any(|l| l == "tracefs: unmounted");
    assert!(
        still_unmounted,
        "doctor must not mount tracefs on the host: {err}"
    );
    let t = check_of(&doc, "tracefs");
    assert_eq!(t["verdict"], "ok");
    assert!(
        t["evidence"]
            .as_str()
            .is_some_and(|e| e.contains("tested in a private mount namespace")),
        "{t}"
    );
    let tp = check_of(&doc, "tracepoint");
    assert!(
        tp["evidence"]
            .as_str()
            .is_some_and(|e| e.contains("attached and fired")),
        "{tp}"
    );
}

/// A read of /proc/driver/nvidia that never comes back (a stuck driver):
/// doctor reads it in a child, gives up after its timeout, says which file
/// and why, and finishes the other checks. Here a FUSE file whose read
/// hangs stands in for the driver's procfs file.
#[test]
fn doctor_does_not_hang_on_a_stuck_driver_file() {
    need_root!();
    let _g = lock();
    let tmp = tmpdir("stuck");
    let tree = tmp.join("tree");
    let _ = std::fs::remove_dir_all(&tree);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hosts/healthy");
    assert!(
        Command::new("cp")
            .arg("-r")
            .arg(&src)
            .arg(&tree)
            .status()
            .expect("cp")
            .success()
    );
    let gpu = tree.join("proc/driver/nvidia/gpus/0000:00:06.0");
    std::fs::remove_file(gpu.join("information")).expect("the tree has it");
    let drv = FakeDrv::start_at(&gpu);
    let (code, doc, _) = doctor_json(&["--root", tree.to_str().expect("utf8")]);
    drop(drv);
    assert_eq!(code, Some(1), "{doc}");
    let p = check_of(&doc, "proc_driver");
    assert_eq!(p["verdict"], "fail");
    assert_eq!(
        p["evidence"],
        "reading /proc/driver/nvidia/gpus/0000:00:06.0/information did not finish within 2 s: the driver is stuck in the kernel"
    );
    assert!(
        p["hint"]
            .as_str()
            .is_some_and(|h| h.contains("fuser -v /dev/nvidia*"))
    );
    // The rest ran: the driver version came from its own (readable) file,
    // and the GPU is reported as not answering, not as absent.
    assert_eq!(check_of(&doc, "driver_loaded")["verdict"], "ok");
    let g = check_of(&doc, "gpu");
    assert_eq!(g["verdict"], "fail");
    assert_eq!(
        g["evidence"],
        "0000:00:06.0: the driver did not answer for this GPU (its information file blocked)"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
