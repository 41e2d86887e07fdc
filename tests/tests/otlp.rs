//! `--format otlp-json` against the official OTLP protobuf definitions:
//! recordings from the H200 decoded to OTLP/JSON, every line parsed as a
//! `LogsData` by opentelemetry-proto (Python, protobuf's JSON mapping,
//! unknown fields refused), and compared with the NDJSON of the same
//! recording: the same records, in OpenTelemetry's names.

use std::{collections::BTreeMap, path::Path, process::Command};

use nvprobe_tests::{
    harness::{bin, fixture},
    pyenv::python_with,
    scenario::tmpdir,
};
use serde_json::Value;

fn decode(rec: &Path, out: &Path, args: &[&str]) {
    let o = Command::new(bin("nvprobe"))
        .arg("decode")
        .arg(rec)
        .args(args)
        .arg("-o")
        .arg(out)
        .output()
        .expect("run nvprobe decode");
    assert!(
        o.status.success(),
        "nvprobe decode {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn validate(python: &Path, file: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/otlp-validate.py");
    let o = Command::new(python)
        .arg(script)
        .arg(file)
        .output()
        .expect("run the validator");
    assert!(
        o.status.success(),
        "{} is not OTLP/JSON: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("validator output")
}

/// What protobuf's JSON parser forgives but the OTLP/JSON mapping
/// requires: camelCase names, 64-bit integers as decimal strings, the
/// severity as an enum number.
fn check_otlp_json_shapes(file: &Path) {
    fn walk(v: &Value, at: &str) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    assert!(!k.contains('_'), "snake_case field {k} at {at}");
                    match k.as_str() {
                        "intValue" | "timeUnixNano" | "observedTimeUnixNano" => {
                            assert!(
                                x.as_str().is_some_and(|s| s.parse::<i128>().is_ok()),
                                "{k} must be a decimal string at {at}: {x}"
                            );
                        }
                        "severityNumber" => assert!(x.is_u64(), "{k} at {at}: {x}"),
                        // Attribute keys are data, not field names.
                        "key" => assert!(x.is_string(), "key at {at}"),
                        _ => walk(x, &format!("{at}.{k}")),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, at)),
            _ => {}
        }
    }
    for (n, l) in std::fs::read_to_string(file)
        .expect("read")
        .lines()
        .enumerate()
    {
        let v: Value = serde_json::from_str(l).expect("json");
        assert!(v["resourceLogs"].is_array(), "line {}", n + 1);
        walk(&v, "");
    }
}

fn json_types(file: &Path) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in std::fs::read_to_string(file).expect("read").lines() {
        let v: Value = serde_json::from_str(l).expect("ndjson");
        let t = format!("nvprobe.{}", v["type"].as_str().expect("type"));
        *m.entry(t).or_default() += 1;
    }
    m
}

#[test]
fn otlp_json_is_logs_data_with_semantic_convention_names() {
    let python = match python_with("otlp", &["opentelemetry-proto==1.*", "protobuf"]) {
        Ok(Some(p)) => p,
        Ok(None) => return,
        Err(e) => panic!("{e}"),
    };
    let tmp = tmpdir("otlp");
    let rec = fixture("h200-580.159.04-catalogue.ndjson");
    let (otlp, ndjson) = (tmp.join("c.otlp.json"), tmp.join("c.ndjson"));
    decode(&rec, &otlp, &["--format", "otlp-json"]);
    decode(&rec, &ndjson, &["--json"]);
    let r = validate(&python, &otlp);
    check_otlp_json_shapes(&otlp);
    let lines = std::fs::read_to_string(&otlp)
        .expect("read")
        .lines()
        .count();
    assert_eq!(r["lines"], lines as u64);
    // The same records as the NDJSON, type for type.
    let want = json_types(&ndjson);
    let got: BTreeMap<String, u64> = serde_json::from_value(r["types"].clone()).expect("types");
    assert_eq!(got, want);
    for t in [
        "nvprobe.cuinit",
        "nvprobe.ioctl",
        "nvprobe.process",
        "nvprobe.summary",
    ] {
        assert!(got.contains_key(t), "{t} in {got:?}");
    }
    for (sev, _) in r["severities"].as_object().expect("severities") {
        assert!(
            ["debug/5", "info/9", "warn/13", "error/17"].contains(&sev.as_str()),
            "{sev}"
        );
    }
    let keys: Vec<&str> = r["resource_keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for k in [
        "service.name",
        "service.version",
        "process.pid",
        "process.executable.name",
        "process.executable.path",
        "process.command_line",
        "process.command_args",
        "process.linux.cgroup",
        "container.id",
        "container.runtime.name",
    ] {
        assert!(keys.contains(&k), "{k} in {keys:?}");
    }
    // A verdict: its process is its resource; its fields are nvprobe.*.
    let v = &r["first"]["nvprobe.cuinit"];
    assert_eq!(v["resource"]["service.name"], "nvprobe");
    assert_eq!(v["resource"]["process.pid"], v["attributes"]["nvprobe.pid"]);
    assert!(
        v["attributes"]["nvprobe.result"].is_string()
            && v["body"].as_str().is_some_and(|b| b.starts_with("== ")),
        "{v}"
    );
    // The failed start-up in the docker container the catalogue recorded.
    let ioctl = &r["first"]["nvprobe.ioctl"];
    assert!(
        ioctl["attributes"]["nvprobe.duration_ns"].is_i64(),
        "{ioctl}"
    );
    assert!(ioctl["time_unix_nano"].as_u64().expect("time") > 1_700_000_000_000_000_000);

    // --events verdicts: only what that level ships.
    let quiet = tmp.join("v.otlp.json");
    decode(
        &rec,
        &quiet,
        &["--format", "otlp-json", "--events", "verdicts"],
    );
    let r = validate(&python, &quiet);
    let got: BTreeMap<String, u64> = serde_json::from_value(r["types"].clone()).expect("types");
    assert_eq!(got.get("nvprobe.cuinit"), want.get("nvprobe.cuinit"));
    for t in got.keys() {
        assert!(
            [
                "nvprobe.start",
                "nvprobe.warning",
                "nvprobe.lost",
                "nvprobe.stall",
                "nvprobe.summary",
                "nvprobe.cuinit",
                "nvprobe.signal",
                "nvprobe.ioctl",
                "nvprobe.open",
                "nvprobe.mknod",
                "nvprobe.cuda",
                "nvprobe.mmap",
                "nvprobe.close",
                "nvprobe.dup",
                "nvprobe.driver"
            ]
            .contains(&t.as_str()),
            "{t} at --events verdicts"
        );
    }
    assert!(got["nvprobe.ioctl"] < want["nvprobe.ioctl"]);
}

/// The OTLP/JSON nvprobe wrote on the H200 (tests/fixtures/README.md:
/// record-fleet.sh): every line is a LogsData; the failed start-up in a
/// Kubernetes-named cgroup carries its container, pod and executable.
#[test]
fn the_real_drivers_otlp_json_validates_and_names_the_container() {
    let python = match python_with("otlp", &["opentelemetry-proto==1.*", "protobuf"]) {
        Ok(Some(p)) => p,
        Ok(None) => return,
        Err(e) => panic!("{e}"),
    };
    let f = fixture("h200-580.159.04-fleet-verdicts.otlp.json");
    let r = validate(&python, &f);
    check_otlp_json_shapes(&f);
    assert_eq!(r["lines"], 59);
    let text = std::fs::read_to_string(&f).expect("fixture");
    let line = text
        .lines()
        .find(|l| l.contains("k8s_missing_uvm_user") && l.contains("\"nvprobe.cuinit\""))
        .expect("the Kubernetes case's verdict");
    let v: Value = serde_json::from_str(line).expect("json");
    let rl = &v["resourceLogs"][0];
    let res: BTreeMap<String, Value> = rl["resource"]["attributes"]
        .as_array()
        .expect("attributes")
        .iter()
        .map(|a| {
            (
                a["key"].as_str().expect("key").to_owned(),
                a["value"].clone(),
            )
        })
        .collect();
    assert_eq!(res["container.runtime.name"]["stringValue"], "containerd");
    assert_eq!(
        res["container.id"]["stringValue"],
        "beef000000000000000000000000000000000000000000000000000000000042"
    );
    assert_eq!(
        res["k8s.pod.uid"]["stringValue"],
        "0f1e2d3c-4b5a-4697-8877-665544332211"
    );
    assert_eq!(
        res["process.executable.path"]["stringValue"],
        "/usr/bin/python3.12"
    );
    assert!(
        res["process.linux.cgroup"]["stringValue"]
            .as_str()
            .is_some_and(|c| c.starts_with("/kubepods.slice/kubepods-burstable.slice/")),
        "{res:?}"
    );
    let lr = &rl["scopeLogs"][0]["logRecords"][0];
    assert_eq!(
        (lr["severityText"].as_str(), lr["severityNumber"].as_u64()),
        (Some("error"), Some(17))
    );
    assert!(
        lr["body"]["stringValue"]
            .as_str()
            .is_some_and(|b| b.contains("cuInit failed") && b.contains("/dev/nvidia-uvm: ENOENT")),
        "{lr}"
    );
}

/// Issue 38: no OTLP line a container runtime would split (containerd and
/// Docker cut at 16 KiB). The longest recording of the H200 (36 processes
/// in its summary) made a 19,871-byte line: its summary now keeps half its
/// process table, says so in `nvprobe.truncated`, and still validates;
/// NDJSON keeps the whole table.
#[test]
fn no_otlp_line_is_one_a_container_runtime_splits() {
    let python = match python_with("otlp", &["opentelemetry-proto==1.*", "protobuf"]) {
        Ok(Some(p)) => p,
        Ok(None) => return,
        Err(e) => panic!("{e}"),
    };
    let tmp = tmpdir("otlp-lines");
    let rec = fixture("h200-580.159.04-who-refused.ndjson");
    let (otlp, ndjson) = (tmp.join("w.otlp.json"), tmp.join("w.ndjson"));
    decode(
        &rec,
        &otlp,
        &["--format", "otlp-json", "--events", "verdicts"],
    );
    decode(&rec, &ndjson, &["--json", "--events", "verdicts"]);
    validate(&python, &otlp);
    let text = std::fs::read_to_string(&otlp).expect("read");
    let longest = text.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 16 * 1024, "a line of {longest} bytes");
    let summary = text
        .lines()
        .find(|l| l.contains("\"nvprobe.summary\""))
        .expect("the summary");
    assert!(
        summary.contains(r#"{"key":"nvprobe.truncated","value":{"arrayValue":{"values":[{"stringValue":"processes: 18 of 36 kept"}]}}}"#),
        "{summary}"
    );
    let whole = std::fs::read_to_string(&ndjson).expect("read");
    let s: Value = whole
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .expect("the NDJSON summary");
    assert_eq!(s["processes"].as_array().map(Vec::len), Some(36));
    assert!(s.get("truncated").is_none());
}
