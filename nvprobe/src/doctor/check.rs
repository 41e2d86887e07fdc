//! The types every area shares: a check's verdict, the check itself, and
//! the options of a run.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// A check's verdict (the worst of them is the document's `result`).
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    Warn,
    Fail,
}

/// One check: what it looked at, what it found, what to do.
#[derive(Clone, Debug, Serialize, PartialEq, schemars::JsonSchema)]
pub struct Check {
    /// The area: `tracing`, `driver`, `gpus`, `nodes`, `libraries`,
    /// `container`, `kernel_log`, ….
    pub area: &'static str,
    /// The check's id, stable across versions (docs/FAILURE-CATALOGUE.md).
    pub id: &'static str,
    pub verdict: Verdict,
    /// What was seen (paths, numbers, the lines read).
    pub evidence: String,
    /// What to do, for a WARN or a FAIL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// `nvprobe doctor --json`: one document (`nvprobe schema --doctor`).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Report<'a> {
    /// The schema version (the NDJSON output's).
    pub v: u32,
    /// Always `doctor`.
    #[serde(rename = "type")]
    #[schemars(extend("const" = "doctor"))]
    pub kind: &'static str,
    /// The host tree checked (`/` for this host).
    pub root: String,
    /// What the checks could do there: this host as root (probes loaded,
    /// opens tried), not as root, or a tree's files only.
    pub scope: String,
    /// The worst verdict.
    pub result: Verdict,
    pub checks: &'a [Check],
}

/// The JSON Schema of [`Report`].
pub fn report_schema() -> serde_json::Value {
    let mut v = schemars::schema_for!(Report<'static>).to_value();
    close(&mut v);
    v
}

/// Every object schema with properties closed (no field the types lack).
fn close(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            if m.contains_key("properties") && !m.contains_key("additionalProperties") {
                m.insert(
                    "additionalProperties".into(),
                    serde_json::Value::Bool(false),
                );
            }
            m.values_mut().for_each(close);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(close),
        _ => {}
    }
}

/// Whether `doc` is a doctor document by [`report_schema`] (an independent
/// validator, the `jsonschema` crate), and if not, why.
pub fn validate_report(doc: &serde_json::Value) -> Result<(), String> {
    let v = jsonschema::validator_for(&report_schema()).map_err(|e| e.to_string())?;
    let why: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    if why.is_empty() {
        Ok(())
    } else {
        Err(why.join("; "))
    }
}

pub(super) fn check(
    area: &'static str,
    id: &'static str,
    verdict: Verdict,
    evidence: impl Into<String>,
    hint: Option<&str>,
) -> Check {
    Check {
        area,
        id,
        verdict,
        evidence: evidence.into(),
        hint: hint.map(str::to_owned),
    }
}

/// What to check and for whom.
#[derive(Clone, Debug)]
pub struct Options {
    pub root: PathBuf,
    /// The host itself (root is `/`): the kernel is asked, opens are tried.
    pub live: bool,
    pub user: Option<String>,
    /// watch's start-up: no kernel tracing checks (watch attaches its own
    /// probes and reports their refusals), no user checks, no opens.
    pub watch_startup: bool,
}

impl Options {
    pub fn tree(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            live: false,
            user: None,
            watch_startup: false,
        }
    }
}
