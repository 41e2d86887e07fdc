//! Tier 1, through the binary (issue 27, item 5): `nvprobe hooks` on a
//! host without the driver printed 17 rows of `not in BTF` and nothing
//! saying why. Each module now gets a line before the table (loaded or
//! not, and on what evidence; its BTF or why there is none), and a row
//! whose module has no BTF says `no module BTF`, keeping `not in BTF` for
//! a function the BTF read does not have. No root needed.
//!
//! The BTF folders are the test's own; what the host has (its
//! /sys/module) is read by the test too, so each assertion holds on a host
//! with the driver and on one without.

use std::{path::Path, process::Command};

use nvprobe_tests::harness::{TestDir, bin};
use serde_json::Value;

/// BTF that parses: a header and an empty string section.
fn empty_btf() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0xEB9F_u16.to_le_bytes());
    b.extend_from_slice(&[1, 0]);
    for v in [24_u32, 0, 0, 0, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.push(0);
    b
}

fn btf_dir(tag: &str, modules: &[&str]) -> TestDir {
    let d = TestDir::new(&format!("hooks-{tag}"));
    for m in ["vmlinux"].iter().chain(modules) {
        std::fs::write(d.join(m), empty_btf()).expect("btf");
    }
    d
}

fn hooks(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(bin("nvprobe"))
        .arg("hooks")
        .args(args)
        .output()
        .expect("run nvprobe hooks");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn loaded_here(m: &str) -> bool {
    Path::new("/sys/module").join(m).is_dir()
        || std::fs::read_to_string("/proc/modules")
            .is_ok_and(|t| t.lines().any(|l| l.split_whitespace().next() == Some(m)))
}

/// The table's rows of one module, as "name kallsyms:… btf:…" columns.
fn rows<'a>(out: &'a str, module: &str) -> Vec<&'a str> {
    out.lines()
        .filter(|l| l.split_whitespace().nth(1) == Some(module))
        .collect()
}

#[test]
fn a_btf_folder_without_the_modules_says_so_per_module() {
    let d = btf_dir("none", &[]);
    let ds = d.to_str().expect("utf8");
    let (code, out, err) = hooks(&["--btf-dir", ds]);
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    for (i, (m, n)) in [("nvidia", 6), ("nvidia_uvm", 7)].into_iter().enumerate() {
        // Before the table, in the modules' order.
        let want = format!(
            "module {m}: no BTF in {ds} (no {ds}/{m}): the prototypes of its {n} hooks cannot be checked; copy /sys/kernel/btf/{m} there from a host where the module is loaded"
        );
        assert!(
            lines[i].starts_with(&want),
            "{want:?} is not line {i} of\n{out}"
        );
        assert_eq!(
            lines[i].contains("; not loaded on this host"),
            !loaded_here(m),
            "{}",
            lines[i]
        );
        let r = rows(&out, m);
        assert_eq!(r.len(), n, "{out}");
        assert!(r.iter().all(|l| l.ends_with("btf:no module BTF")), "{out}");
    }
    // vmlinux's BTF was read: its functions are simply not in it.
    assert!(
        rows(&out, "vmlinux")
            .iter()
            .all(|l| l.ends_with("btf:not in BTF")),
        "{out}"
    );
    // The same in JSON.
    let (code, out, _) = hooks(&["--btf-dir", ds, "--json"]);
    assert_eq!(code, Some(0));
    let v: Value = serde_json::from_str(&out).expect("JSON");
    let modules = v["modules"].as_array().expect("modules");
    assert_eq!(modules.len(), 2);
    assert_eq!(modules[0]["name"], "nvidia");
    assert_eq!(modules[0]["btf"], false);
    assert_eq!(modules[0]["hooks"], 6);
    assert_eq!(modules[0]["loaded"], loaded_here("nvidia"));
    let checks: Vec<&Value> = v["hooks"]
        .as_array()
        .expect("hooks")
        .iter()
        .filter(|h| h["module"] == "nvidia_uvm")
        .map(|h| &h["prototype_check"])
        .collect();
    assert!(checks.iter().all(|c| *c == "no module BTF"), "{checks:?}");
}

/// A module's BTF that has none of its functions: `not in BTF`, as before.
#[test]
fn a_modules_btf_without_the_function_is_not_in_btf() {
    let d = btf_dir("nvidia", &["nvidia"]);
    let ds = d.to_str().expect("utf8");
    let (code, out, err) = hooks(&["--btf-dir", ds]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.lines()
            .next()
            .is_some_and(|l| l.starts_with(&format!("module nvidia: BTF {ds}/nvidia"))),
        "{out}"
    );
    assert!(
        rows(&out, "nvidia")
            .iter()
            .all(|l| l.ends_with("btf:not in BTF")),
        "{out}"
    );
    assert!(
        rows(&out, "nvidia_uvm")
            .iter()
            .all(|l| l.ends_with("btf:no module BTF")),
        "{out}"
    );
}

/// This host's own BTF folder: a module that is not loaded is said so,
/// with the evidence and what to do (this build machine has no nvidia
/// module; the GPU machine has both, and says they are loaded).
#[test]
fn this_hosts_modules_are_said_loaded_or_not() {
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        nvprobe_tests::harness::skip("this kernel has no /sys/kernel/btf/vmlinux");
        return;
    }
    let (code, out, err) = hooks(&[]);
    assert_eq!(code, Some(0), "{err}");
    for (i, (m, n)) in [("nvidia", 6), ("nvidia_uvm", 7)].into_iter().enumerate() {
        let line = out.lines().nth(i).expect("a module line");
        if loaded_here(m) {
            assert!(line.starts_with(&format!("module {m}: loaded")), "{line}");
        } else {
            assert!(
                line.starts_with(&format!(
                    "module {m}: not loaded on this host (no /sys/module/{m}"
                )),
                "{line}"
            );
            // What to do follows from whether this kernel loads modules.
            let todo = if Path::new("/proc/modules").exists() {
                format!("Load the driver (modprobe {m})")
            } else {
                "No modprobe can load it here: use a kernel that loads modules (or has the driver built in)".to_owned()
            };
            assert!(
                line.contains(&format!(
                    "its {n} hooks below have no symbol in kallsyms and no BTF to check. {todo}, or check another host's BTF with --btf-dir DIR"
                )),
                "{line}"
            );
            let r = rows(&out, m);
            assert_eq!(r.len(), n);
            assert!(
                r.iter()
                    .all(|l| l.contains("kallsyms:no") && l.ends_with("btf:no module BTF")),
                "{out}"
            );
        }
    }
}
