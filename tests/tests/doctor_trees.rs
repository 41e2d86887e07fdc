//! Tier 1, through the binary: real recordings and host trees from the GPU
//! machine (NVIDIA H200, open kernel module 580.159.04) given to the
//! nvprobe binary, as a user would. No root needed. The replays that need
//! only the model are in nvprobe/model/tests/.
//!
//! This file: `nvprobe doctor --root` on host trees and on the H200's own
//! snapshot (file evidence only).

use std::path::PathBuf;

use nvprobe_tests::harness::{bin, fixture};
use serde_json::Value;

/// `nvprobe doctor` on the host trees: verdicts, JSON, exit codes.
#[test]
fn doctor_on_host_trees() {
    let run = |tree: &str, json: bool| {
        let mut c = std::process::Command::new(bin("nvprobe"));
        c.arg("doctor")
            .arg("--root")
            .arg(fixture("hosts").join(tree));
        if json {
            c.arg("--json");
        }
        c.output().expect("run nvprobe doctor")
    };
    let ok = run("healthy", false);
    assert_eq!(ok.status.code(), Some(0));
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(
        text.contains("ok   driver  driver_loaded  open kernel module 580.159.04"),
        "{text}"
    );
    let warn = run("proxmox-hmm", true);
    assert_eq!(warn.status.code(), Some(0), "a warning is not a failure");
    let doc: Value = serde_json::from_slice(&warn.stdout).expect("one JSON document");
    assert_eq!(doc["result"], "warn");
    let hmm = doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == "uvm_hmm")
        .expect("uvm_hmm check");
    assert_eq!(hmm["verdict"], "warn");
    let bad = run("no-uvm", false);
    assert_eq!(bad.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("a check failed"));
    let missing = std::process::Command::new(bin("nvprobe"))
        .args(["doctor", "--root", "/nonexistent-nvprobe-root"])
        .output()
        .expect("run");
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&missing.stderr)
            .contains("--root /nonexistent-nvprobe-root: no such folder or snapshot archive"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
    let nouser = std::process::Command::new(bin("nvprobe"))
        .args(["doctor", "--user", "zed", "--root"])
        .arg(fixture("hosts/wrong-perms"))
        .output()
        .expect("run");
    assert_eq!(nouser.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&nouser.stderr).contains("--user zed: no such user in "));
    let t = nvprobe_tests::harness::TestDir::new("junk");
    let junk = t.join("junk.tar");
    std::fs::write(&junk, b"not a tar file at all").expect("write");
    let bad_tar = std::process::Command::new(bin("nvprobe"))
        .args(["doctor", "--root"])
        .arg(&junk)
        .output()
        .expect("run");
    assert_eq!(bad_tar.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad_tar.stderr).contains("not a readable snapshot archive"),
        "{}",
        String::from_utf8_lossy(&bad_tar.stderr)
    );
    // Every tree's JSON is one document with the verdicts the unit tests
    // pin down; the exit code follows the worst verdict.
    for (tree, code, result) in [
        ("healthy", 0, "warn"),
        ("proxmox-hmm", 0, "warn"),
        ("no-uvm", 5, "fail"),
        ("version-mismatch", 5, "fail"),
        ("lxc-no-uvm", 5, "fail"),
        ("wrong-perms", 0, "warn"),
        ("no-btf-kprobes", 5, "fail"),
    ] {
        let o = run(tree, true);
        assert_eq!(o.status.code(), Some(code), "{tree}");
        let doc: Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
        // The document is what `nvprobe schema --doctor` says it is.
        nvprobe::doctor::validate_report(&doc).unwrap_or_else(|e| panic!("{tree}: {e}"));
        assert_eq!(doc["result"], result, "{tree}");
        assert_eq!(doc["type"], "doctor");
        assert!(
            doc["scope"].as_str().is_some_and(
                |s| s.ends_with("file evidence only (no probes loaded, no opens tried)")
            ),
            "{tree}: {}",
            doc["scope"]
        );
        for c in doc["checks"].as_array().expect("checks") {
            assert!(["ok", "warn", "fail"].contains(&c["verdict"].as_str().expect("verdict")));
            assert!(c["evidence"].as_str().is_some_and(|e| !e.is_empty()), "{c}");
            if c["verdict"] != "ok" {
                assert!(
                    c.get("hint").is_some() || c["id"] == "fentry",
                    "{tree}: {c}"
                );
            }
        }
    }
}

/// The library version comes from the file's contents: a stand-in libcuda
/// built here with "575.57.08" in its .rodata, named like any libcuda,
/// ahead of the matching one in the search path, is caught as a mismatch
/// with the 580.159.04 module.
#[test]
fn doctor_reads_library_versions_from_the_elf() {
    let t = nvprobe_tests::harness::TestDir::new("libs");
    let dir = t.join("tree");
    let copy = std::process::Command::new("cp")
        .arg("-r")
        .arg(fixture("hosts/healthy"))
        .arg(&dir)
        .status()
        .expect("cp");
    assert!(copy.success());
    std::fs::remove_file(dir.join("libs.manifest")).expect("the tree lists libraries");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("cuda-stub/libcuda.c");
    let build = |version: &str, to: &str| {
        let out = dir.join(to);
        std::fs::create_dir_all(out.parent().expect("dir")).expect("mkdir");
        std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&out)
            .arg(format!("-DSTUB_VERSION=\"{version}\""))
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success())
    };
    // cargo xtask setup installs cc: a build that fails is a failure.
    assert!(
        build("575.57.08", "etc/libold/libcuda.so.1")
            && build(
                "580.159.04",
                "usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04",
            ),
        "cc could not build the stand-in libcuda"
    );
    std::fs::write(
        dir.join("etc/ld.so.conf"),
        "include /etc/ld.so.conf.d/*.conf\n",
    )
    .expect("write");
    std::fs::create_dir_all(dir.join("etc/ld.so.conf.d")).expect("mkdir");
    std::fs::write(dir.join("etc/ld.so.conf.d/old.conf"), "/etc/libold\n").expect("write");
    let o = std::process::Command::new(bin("nvprobe"))
        .args(["doctor", "--json", "--root"])
        .arg(&dir)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(5));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let cuda: Vec<&Value> = doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"] == "libcuda")
        .collect();
    assert_eq!(cuda.len(), 2, "{cuda:?}");
    assert_eq!(cuda[0]["verdict"], "fail");
    let e0 = cuda[0]["evidence"].as_str().expect("evidence");
    assert!(
        e0.starts_with("/etc/libold/libcuda.so.1 (version 575.57.08, ")
            && e0.ends_with(" bytes), loaded first, but the kernel module is 580.159.04"),
        "{e0}"
    );
    assert_eq!(cuda[1]["verdict"], "ok");
    assert!(
        cuda[1]["evidence"].as_str().is_some_and(|e| e
            .starts_with("/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04 (version 580.159.04, ")),
        "{}",
        cuda[1]
    );
}

/// The H200's own snapshot (`nvprobe doctor --snapshot` on the GPU
/// machine, tests/fixtures/hosts/h200-snapshot) read back with `--root`
/// gives the file-level verdicts and evidence that doctor gave live there
/// (tests/fixtures/gpu-host/h200-580.159.04-doctor.json).
#[test]
fn the_h200_snapshot_reads_back_like_the_live_host() {
    let live: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("gpu-host/h200-580.159.04-doctor.json")).expect("fixture"),
    )
    .expect("json");
    assert_eq!(
        live["result"], "warn",
        "the live H200: warnings (no kprobes), no failure"
    );
    let o = std::process::Command::new(bin("nvprobe"))
        .args(["doctor", "--json", "--root"])
        .arg(fixture("hosts/h200-snapshot"))
        .output()
        .expect("run");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let snap: Value = serde_json::from_slice(&o.stdout).expect("json");
    let pick = |d: &Value, id: &str| -> Vec<(String, String)> {
        d["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .filter(|c| c["id"] == id)
            .map(|c| {
                (
                    c["verdict"].as_str().unwrap_or("").to_owned(),
                    c["evidence"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    };
    for id in [
        "driver_loaded",
        "uvm_loaded",
        "uvm_hmm",
        "params",
        "gpu",
        "pci_gpu",
        "persistence",
        "node",
        "caps",
        "libcuda",
        "libnvidia-ml",
        "runtime",
        "device_cgroup",
        "btf_nvidia",
        "btf_nvidia_uvm",
    ] {
        let l = pick(&live, id);
        assert!(!l.is_empty(), "{id} live");
        assert_eq!(pick(&snap, id), l, "{id}");
    }
    // The hook survey reads the snapshot's kallsyms: same symbols, and the
    // refusal comes from its event-source listing.
    let h = pick(&snap, "driver_hooks");
    // The live doctor ran a build whose text went on about the library
    // nvprobe uses; what the host said is the same up to there.
    let upto = |v: &[(String, String)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, t)| {
                let cut = t.find("CONFIG_KPROBES is off)").map_or(t.len(), |i| i + 22);
                (a.clone(), t[..cut].to_owned())
            })
            .collect()
    };
    assert_eq!(upto(&h), upto(&pick(&live, "driver_hooks")));
    assert!(
        h[0].1.ends_with("a kernel built with CONFIG_KPROBES=y (every major distribution's) gives the driver layer"),
        "{h:?}"
    );
    assert!(
        h[0].1
            .starts_with("driver 580.159.04: 14/16 driver-hook symbols"),
        "{h:?}"
    );
    // The kernel checks are file evidence there, and agree on kprobes.
    assert_eq!(pick(&snap, "kprobe")[0].0, "warn");
    assert!(pick(&snap, "kprobe")[0].1.ends_with("(file evidence)"));
}

/// `nvprobe schema --doctor` prints the schema the documents are checked
/// against, and it refuses what a doctor document is not.
#[test]
fn the_doctor_schema_is_printed_and_closed() {
    let o = std::process::Command::new(bin("nvprobe"))
        .args(["schema", "--doctor"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0));
    let printed: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(printed, nvprobe::doctor::report_schema());
    assert_eq!(printed["properties"]["type"]["const"], "doctor");
    let real: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("gpu-host/h200-580.159.04-doctor.json")).expect("read"),
    )
    .expect("JSON");
    nvprobe::doctor::validate_report(&real).expect("the H200's own doctor --json");
    let mut extra = real.clone();
    extra["checks"][0]["surprise"] = Value::Bool(true);
    assert!(nvprobe::doctor::validate_report(&extra).is_err());
    let mut bad = real;
    bad["result"] = Value::from("maybe");
    assert!(nvprobe::doctor::validate_report(&bad).is_err());
}
