//! `--format otlp-json`: each record as one line holding an OTLP/JSON
//! `LogsData` (opentelemetry-proto, `logs/v1/logs.proto`), the shape the
//! OpenTelemetry collector's `otlpjsonfile` receiver reads, one resource
//! per process.
//!
//! - Resource attributes use OpenTelemetry's semantic-convention names:
//!   `service.name`, `service.version`, `host.name`, `process.pid`,
//!   `process.parent_pid`, `process.executable.name`,
//!   `process.executable.path`, `process.command_line`,
//!   `process.command_args`, `process.linux.cgroup`, `container.id`,
//!   `container.runtime.name`, `k8s.pod.uid`; what has no convention is
//!   `nvprobe.*` (`nvprobe.k8s.qos_class`).
//! - Each log record has the record's time, its severity (text and
//!   number), the line nvprobe would print as its body, `event.name`
//!   (`nvprobe.<type>`), and every field of the NDJSON record under
//!   `nvprobe.<field>` (objects as kvlists, arrays as arrays), so nothing
//!   of schema v1 is lost.
//!
//! 64-bit integers are decimal strings, as the OTLP/JSON mapping requires.
//! docs/LOG-PIPELINES.md maps the fields for Vector, Fluent Bit and the
//! collector.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, RwLock},
};

use serde_json::{Map, Value, json};

use super::level::Severity;
use crate::attribution::ProcessInfo;

/// Processes whose identity is kept for their resource at most (the
/// oldest go first); a process's identity is also forgotten at its exit.
const KEEP_PROCESSES: usize = 4096;

/// Longest `process.command_line` written (the whole line is in
/// `process.command_args`).
const COMMAND_LINE_MAX: usize = 4096;

/// What the resources of the records are made of, shared by every
/// renderer of one output.
#[derive(Debug, Default)]
pub struct Resources {
    host: RwLock<Option<String>>,
    procs: RwLock<Procs>,
}

#[derive(Debug, Default)]
struct Procs {
    /// pid -> (when it was learnt, its attributes).
    by_pid: HashMap<u32, (u64, Arc<Vec<Value>>)>,
    order: VecDeque<u32>,
}

impl Resources {
    /// The host every record comes from (the start record's).
    pub fn set_host(&self, name: &str) {
        if let Ok(mut h) = self.host.write() {
            *h = Some(name.to_owned());
        }
    }

    /// A process's identity, learnt at `at_ns`: the resource of its later
    /// records.
    pub fn learn(&self, info: &ProcessInfo, at_ns: u64) {
        let attrs = Arc::new(process_attrs(info));
        let Ok(mut p) = self.procs.write() else {
            return;
        };
        if p.by_pid.insert(info.pid, (at_ns, attrs)).is_none() {
            p.order.push_back(info.pid);
        }
        while p.order.len() > KEEP_PROCESSES {
            if let Some(old) = p.order.pop_front() {
                p.by_pid.remove(&old);
            }
        }
    }

    /// `pid` exited at `exit_ns`: forget what was learnt of it before then
    /// (not a later process that reuses the pid).
    pub fn forget(&self, pid: u32, exit_ns: u64) {
        let Ok(mut p) = self.procs.write() else {
            return;
        };
        if p.by_pid.get(&pid).is_some_and(|(at, _)| *at <= exit_ns) {
            p.by_pid.remove(&pid);
            p.order.retain(|x| *x != pid);
        }
    }

    /// Identities held now.
    pub fn len(&self) -> usize {
        self.procs.read().map_or(0, |p| p.by_pid.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The resource attributes of a record about `pid` (the identity the
    /// record carries wins over the one learnt).
    fn attrs(&self, pid: Option<u32>, comm: Option<&str>, own: Option<&ProcessInfo>) -> Vec<Value> {
        let mut a = vec![
            kv("service.name", str_value("nvprobe")),
            kv("service.version", str_value(env!("CARGO_PKG_VERSION"))),
        ];
        if let Some(h) = self.host.read().ok().and_then(|h| h.clone()) {
            a.push(kv("host.name", str_value(&h)));
        }
        let known = match own {
            Some(i) => Some(Arc::new(process_attrs(i))),
            None => pid.and_then(|p| self.procs.read().ok()?.by_pid.get(&p).map(|x| x.1.clone())),
        };
        let named = match known {
            Some(k) => {
                a.extend(k.iter().cloned());
                k.iter().any(|x| x["key"] == "process.executable.name")
            }
            None => {
                if let Some(p) = pid {
                    a.push(kv("process.pid", int_value(u64::from(p))));
                }
                false
            }
        };
        // The record's task name when the identity has none.
        if let (false, Some(c)) = (named, comm) {
            a.push(kv("process.executable.name", str_value(c)));
        }
        a
    }
}

fn process_attrs(i: &ProcessInfo) -> Vec<Value> {
    let mut a = vec![kv("process.pid", int_value(u64::from(i.pid)))];
    if let Some(p) = i.ppid {
        a.push(kv("process.parent_pid", int_value(u64::from(p))));
    }
    // The convention's name is the executable's base name; the task name
    // (15 bytes, settable by the process) only when the path is unknown.
    let name = i
        .exe
        .as_deref()
        .and_then(|e| e.rsplit('/').next())
        .filter(|n| !n.is_empty())
        .or(i.comm.as_deref());
    if let Some(n) = name {
        a.push(kv("process.executable.name", str_value(n)));
    }
    if let Some(e) = &i.exe {
        a.push(kv("process.executable.path", str_value(e)));
    }
    if let Some(args) = &i.cmdline {
        if let Some(line) = i.cmdline_text(COMMAND_LINE_MAX) {
            a.push(kv("process.command_line", str_value(&line)));
        }
        let list: Vec<Value> = args.iter().map(|s| str_value(s)).collect();
        a.push(kv(
            "process.command_args",
            json!({ "arrayValue": { "values": list } }),
        ));
    }
    if let Some(c) = &i.cgroup {
        a.push(kv("process.linux.cgroup", str_value(c)));
    }
    if let Some(c) = &i.container {
        a.push(kv("container.runtime.name", str_value(&c.runtime)));
        if let Some(id) = &c.id {
            a.push(kv("container.id", str_value(id)));
        }
        if let Some(u) = &c.pod_uid {
            a.push(kv("k8s.pod.uid", str_value(u)));
        }
        if let Some(q) = &c.qos {
            a.push(kv("nvprobe.k8s.qos_class", str_value(q)));
        }
        if let Some(n) = &c.pod_name {
            a.push(kv("k8s.pod.name", str_value(n)));
        }
        if let Some(n) = &c.pod_namespace {
            a.push(kv("k8s.namespace.name", str_value(n)));
        }
        if let Some(n) = &c.container_name {
            a.push(kv("k8s.container.name", str_value(n)));
        }
    }
    a
}

fn kv(key: &str, value: Value) -> Value {
    json!({ "key": key, "value": value })
}

fn str_value(s: &str) -> Value {
    json!({ "stringValue": s })
}

fn int_value(n: u64) -> Value {
    json!({ "intValue": n.to_string() })
}

/// A JSON value as an OTLP AnyValue (None for null: an attribute without
/// a value is left out).
fn any_value(v: &Value) -> Option<Value> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => json!({ "boolValue": b }),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => json!({ "intValue": i.to_string() }),
            // Beyond int64: kept exact, as text.
            (None, Some(u)) => str_value(&u.to_string()),
            _ => json!({ "doubleValue": n.as_f64().unwrap_or(0.0) }),
        },
        Value::String(s) => str_value(s),
        Value::Array(a) => {
            let values: Vec<Value> = a.iter().filter_map(any_value).collect();
            json!({ "arrayValue": { "values": values } })
        }
        Value::Object(m) => {
            let values: Vec<Value> = m
                .iter()
                .filter_map(|(k, v)| Some(kv(k, any_value(v)?)))
                .collect();
            json!({ "kvlistValue": { "values": values } })
        }
    })
}

/// What one log line is made of.
pub struct LogRecord<'a> {
    /// Unix time, ns.
    pub time_unix_ns: u128,
    pub mono_ns: u64,
    pub severity: Severity,
    /// The text nvprobe would print (empty: the record's type is used).
    pub body: String,
    /// The NDJSON record (an object with its `type`).
    pub record: Value,
    pub pid: Option<u32>,
    pub comm: Option<&'a str>,
    /// The identity the record carries (a verdict's).
    pub process: Option<&'a ProcessInfo>,
}

/// One `LogsData` object, without a newline.
pub fn logs_data(res: &Resources, r: LogRecord<'_>) -> Value {
    let Value::Object(fields) = r.record else {
        return Value::Null;
    };
    let ty = fields
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("record")
        .to_owned();
    let mut attrs = vec![
        kv("event.name", str_value(&format!("nvprobe.{ty}"))),
        kv(
            "nvprobe.schema_version",
            int_value(u64::from(super::note::SCHEMA_VERSION)),
        ),
        kv("nvprobe.mono_ns", int_value(r.mono_ns)),
    ];
    attrs.extend(
        fields
            .iter()
            .filter_map(|(k, v)| Some(kv(&format!("nvprobe.{k}"), any_value(v)?))),
    );
    let time = r.time_unix_ns.to_string();
    let body = if r.body.trim().is_empty() {
        ty
    } else {
        r.body.trim_end().to_owned()
    };
    let record = json!({
        "timeUnixNano": time,
        "observedTimeUnixNano": time,
        "severityNumber": r.severity.number(),
        "severityText": r.severity.text(),
        "body": str_value(&body),
        "attributes": attrs,
    });
    let mut scope = Map::new();
    scope.insert("name".into(), Value::from("nvprobe"));
    scope.insert("version".into(), Value::from(env!("CARGO_PKG_VERSION")));
    json!({
        "resourceLogs": [{
            "resource": { "attributes": res.attrs(r.pid, r.comm, r.process) },
            "scopeLogs": [{
                "scope": scope,
                "logRecords": [record],
            }],
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr<'a>(attrs: &'a Value, key: &str) -> Option<&'a Value> {
        attrs
            .as_array()?
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| &a["value"])
    }

    #[test]
    fn values_map_to_any_value() {
        assert_eq!(any_value(&json!(null)), None);
        assert_eq!(any_value(&json!(-3)), Some(json!({"intValue": "-3"})));
        assert_eq!(
            any_value(&json!(u64::MAX)),
            Some(json!({"stringValue": u64::MAX.to_string()}))
        );
        assert_eq!(any_value(&json!(1.5)), Some(json!({"doubleValue": 1.5})));
        assert_eq!(
            any_value(&json!({"a": [true, null, "x"]})),
            Some(json!({"kvlistValue": {"values": [
                {"key": "a", "value": {"arrayValue": {"values": [{"boolValue": true}, {"stringValue": "x"}]}}}
            ]}}))
        );
    }

    #[test]
    fn a_process_is_its_records_resource() {
        let res = Resources::default();
        res.set_host("gpu-node-7");
        let info = ProcessInfo {
            pid: 4711,
            comm: Some("python3".into()),
            exe: Some("/usr/bin/python3.12".into()),
            cmdline: Some(vec![
                "python3".into(),
                "train.py".into(),
                "--lr=1e-3".into(),
            ]),
            cgroup: Some("/kubepods.slice/x.scope".into()),
            container: Some(crate::attribution::Container {
                runtime: "containerd".into(),
                id: Some("ab".repeat(32)),
                pod_uid: Some("0f1e2d3c-0000-4000-8000-000000000001".into()),
                qos: Some("burstable".into()),
                pod_name: Some("trainer-0".into()),
                pod_namespace: Some("ml".into()),
                container_name: Some("pytorch".into()),
            }),
            ..Default::default()
        };
        res.learn(&info, 1);
        let line = logs_data(
            &res,
            LogRecord {
                time_unix_ns: 1_764_000_000_123_456_789,
                mono_ns: 42,
                severity: Severity::Warn,
                body: "python3[4711] ioctl(…) = 0 NV_ERR_GENERIC\n".into(),
                record: json!({"type": "ioctl", "ok": false, "proc": {"pid": 4711}}),
                pid: Some(4711),
                comm: Some("python3"),
                process: None,
            },
        );
        let rl = &line["resourceLogs"][0];
        let ra = &rl["resource"]["attributes"];
        assert_eq!(
            attr(ra, "host.name"),
            Some(&json!({"stringValue": "gpu-node-7"}))
        );
        assert_eq!(attr(ra, "process.pid"), Some(&json!({"intValue": "4711"})));
        assert_eq!(
            attr(ra, "process.command_line"),
            Some(&json!({"stringValue": "python3 train.py --lr=1e-3"}))
        );
        assert_eq!(
            attr(ra, "container.id"),
            Some(&json!({"stringValue": "ab".repeat(32)}))
        );
        assert_eq!(
            attr(ra, "k8s.pod.uid"),
            Some(&json!({"stringValue": "0f1e2d3c-0000-4000-8000-000000000001"}))
        );
        assert_eq!(
            attr(ra, "k8s.pod.name"),
            Some(&json!({"stringValue": "trainer-0"}))
        );
        assert_eq!(
            attr(ra, "k8s.namespace.name"),
            Some(&json!({"stringValue": "ml"}))
        );
        assert_eq!(
            attr(ra, "k8s.container.name"),
            Some(&json!({"stringValue": "pytorch"}))
        );
        let lr = &rl["scopeLogs"][0]["logRecords"][0];
        assert_eq!(lr["timeUnixNano"], "1764000000123456789");
        assert_eq!(
            (lr["severityNumber"].clone(), lr["severityText"].clone()),
            (json!(13), json!("warn"))
        );
        assert_eq!(
            lr["body"]["stringValue"],
            "python3[4711] ioctl(…) = 0 NV_ERR_GENERIC"
        );
        let la = &lr["attributes"];
        assert_eq!(
            attr(la, "event.name"),
            Some(&json!({"stringValue": "nvprobe.ioctl"}))
        );
        assert_eq!(attr(la, "nvprobe.ok"), Some(&json!({"boolValue": false})));
        // Another pid without an identity: what the record says.
        let other = logs_data(
            &res,
            LogRecord {
                time_unix_ns: 1,
                mono_ns: 1,
                severity: Severity::Debug,
                body: String::new(),
                record: json!({"type": "open"}),
                pid: Some(9),
                comm: Some("ls"),
                process: None,
            },
        );
        let ra = &other["resourceLogs"][0]["resource"]["attributes"];
        assert_eq!(
            attr(ra, "process.executable.name"),
            Some(&json!({"stringValue": "ls"}))
        );
        assert_eq!(attr(ra, "container.id"), None);
        assert_eq!(
            other["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["body"]["stringValue"],
            "open"
        );
    }

    #[test]
    fn the_table_of_identities_is_bounded() {
        let res = Resources::default();
        for pid in 0..(KEEP_PROCESSES as u32 + 100) {
            res.learn(
                &ProcessInfo {
                    pid,
                    ..Default::default()
                },
                u64::from(pid),
            );
        }
        // An exit forgets the identity learnt before it, not a newer one.
        let last = KEEP_PROCESSES as u32 + 99;
        res.forget(last, u64::from(last) - 1);
        assert_eq!(res.len(), KEEP_PROCESSES);
        res.forget(last, u64::from(last));
        assert_eq!(res.len(), KEEP_PROCESSES - 1);
        let p = res.procs.read().expect("lock");
        assert_eq!(p.order.len(), KEEP_PROCESSES - 1);
        assert!(!p.by_pid.contains_key(&0) && p.by_pid.contains_key(&(KEEP_PROCESSES as u32 + 98)));
    }
}
