//! The fleet's deployment pieces (deploy/kubernetes's kustomize base, the
//! PodMonitor, the metrics-auth component, deploy/grafana's dashboard,
//! the alerts' job), checked against one another and, where kubectl is at
//! hand, rendered and checked against the Kubernetes schema, without
//! root. tests/tests/deploy.rs checks each file alone.

use std::{collections::BTreeSet, fs, path::Path, process::Command};

use nvprobe_tests::deployfiles::{
    KUBERNETES_VERSIONS, deploy_file, of_kind, on_path, python_tools, read, selects, yaml_documents,
};
use serde_json::{Value, json};

/// The fleet's pieces agree: the kustomize base holds the manifests that
/// exist and every manifest a cluster without the Prometheus Operator can
/// apply; the DaemonSet's priority class is in its file (a missing class
/// rejects every pod) and preempts nothing; a rollout takes a share of
/// the nodes, not one at a time; the PodMonitor scrapes the DaemonSet's
/// pods on its metrics port with the job NvprobeDown's expression names.
#[test]
fn the_fleet_base_podmonitor_and_alerts_agree() {
    let Some(tools) = python_tools() else { return };
    let k = yaml_documents(&tools, "kubernetes/kustomization.yaml");
    let resources: Vec<&str> = k[0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        resources,
        ["nvprobe-daemonset.yaml", "nvprobe-networkpolicy.yaml"]
    );
    for r in &resources {
        assert!(deploy_file(&format!("kubernetes/{r}")).is_file(), "{r}");
    }
    let ds_docs = yaml_documents(&tools, "kubernetes/nvprobe-daemonset.yaml");
    let ds = of_kind(&ds_docs, "DaemonSet");
    let pc = of_kind(&ds_docs, "PriorityClass");
    let pod = &ds["spec"]["template"];
    assert_eq!(pod["spec"]["priorityClassName"], pc["metadata"]["name"]);
    assert_eq!(pc["preemptionPolicy"], "Never", "{pc}");
    assert_eq!(pc["globalDefault"], false, "{pc}");
    let pace = ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"]
        .as_str()
        .expect("maxUnavailable as a percentage");
    assert!(pace.ends_with('%') && pace != "0%", "{pace}");

    let pm_docs = yaml_documents(&tools, "kubernetes/nvprobe-podmonitor.yaml");
    let pm = of_kind(&pm_docs, "PodMonitor");
    assert_eq!(pm["metadata"]["namespace"], ds["metadata"]["namespace"]);
    let labels = &pod["metadata"]["labels"];
    assert!(
        selects(&pm["spec"]["selector"]["matchLabels"], labels),
        "{pm}"
    );
    let port = &pm["spec"]["podMetricsEndpoints"][0]["port"];
    assert!(
        pod["spec"]["containers"][0]["ports"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["name"] == *port)),
        "the PodMonitor's port {port} is the container's"
    );
    let job_label = pm["spec"]["jobLabel"].as_str().expect("jobLabel");
    let job = labels[job_label].as_str().expect("the job label's value");
    let alerts = read("prometheus/nvprobe-alerts.yml");
    assert!(
        alerts.contains(&format!("expr: up{{job=\"{job}\"}} == 0")),
        "NvprobeDown keys on job {job}"
    );
    assert!(
        read("README.md").contains(&format!("- job_name: {job}")),
        "the static scrape config's job is {job} too"
    );
    // Where kubectl is at hand (its kustomize is the one users run), the
    // base renders to those kinds.
    if on_path("kubectl") {
        let o = Command::new("kubectl")
            .args(["kustomize"])
            .arg(deploy_file("kubernetes"))
            .output()
            .expect("kubectl kustomize");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        for kind in [
            "Namespace",
            "ServiceAccount",
            "PriorityClass",
            "DaemonSet",
            "NetworkPolicy",
        ] {
            assert!(text.contains(&format!("kind: {kind}\n")), "{kind}: {text}");
        }
    }
}

/// The metrics-auth component (kube-rbac-proxy in front of the metrics
/// port): nvprobe keeps every argument but `--metrics`, which moves to
/// 127.0.0.1:9478 (no other pod can reach it, whatever the network
/// plugin), and `--health` answers its probes on a port of its own, so
/// that a proxy that stops answering does not get nvprobe restarted; the
/// proxy takes the `metrics` port the NetworkPolicy admits, forwards to
/// nvprobe's and is probed on its own endpoints' port (no path of 9477
/// passes unchecked); the proxy alone mounts a token;
/// the binding gives the pod's account the reviews the proxy makes. Where
/// kubectl is at hand, an overlay of base and component renders, and the
/// result passes the strict schema check of the base.
#[test]
fn the_metrics_auth_component_fronts_the_metrics_port() {
    let Some(tools) = python_tools() else { return };
    let base = yaml_documents(&tools, "kubernetes/nvprobe-daemonset.yaml");
    let base_c = &of_kind(&base, "DaemonSet")["spec"]["template"]["spec"]["containers"][0];
    let patch = yaml_documents(&tools, "kubernetes/metrics-auth/daemonset-patch.yaml");
    let pod = &patch[0]["spec"]["template"]["spec"];
    let containers = pod["containers"].as_array().expect("containers");
    let nv = containers
        .iter()
        .find(|c| c["name"] == base_c["name"])
        .expect("nvprobe's container");
    let args = |c: &Value| -> Vec<String> {
        c["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect()
    };
    let (mut want, got) = (args(base_c), args(nv));
    let at = want
        .iter()
        .position(|a| a == "--metrics")
        .expect("--metrics");
    want[at + 1] = "127.0.0.1:9478".into();
    want.extend(["--health".into(), "0.0.0.0:9479".into()]);
    assert_eq!(got, want, "only --metrics moves, and --health comes");
    assert!(
        nv["ports"]
            .as_array()
            .expect("ports")
            .contains(&json!({"name": "health", "containerPort": 9479, "protocol": "TCP"})),
        "{nv}"
    );
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
        assert_eq!(
            nv[probe]["httpGet"],
            json!({"path": "/healthz", "port": "health"}),
            "{probe}"
        );
    }
    assert!(nv.get("volumeMounts").is_none(), "nvprobe mounts no token");
    assert!(pod.get("automountServiceAccountToken").is_none(), "{pod}");
    let proxy = containers
        .iter()
        .find(|c| c["name"] == "kube-rbac-proxy")
        .expect("the proxy");
    assert_eq!(proxy["ports"][0]["name"], "metrics");
    assert_eq!(proxy["ports"][0]["containerPort"], 9477);
    assert_eq!(
        proxy["ports"][1],
        json!({"name": "proxy-health", "containerPort": 9476, "protocol": "TCP"})
    );
    let pargs = args(proxy);
    for a in [
        "--secure-listen-address=0.0.0.0:9477",
        "--upstream=http://127.0.0.1:9478/",
        "--proxy-endpoints-port=9476",
    ] {
        assert!(pargs.contains(&a.to_owned()), "{a} in {pargs:?}");
    }
    assert!(
        !pargs.iter().any(|a| a.starts_with("--ignore-paths")),
        "{pargs:?}"
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(
            proxy[probe]["httpGet"],
            json!({"path": "/healthz", "port": "proxy-health", "scheme": "HTTPS"}),
            "{probe}"
        );
    }
    assert_eq!(
        proxy["volumeMounts"][0]["mountPath"],
        "/var/run/secrets/kubernetes.io/serviceaccount"
    );
    assert_eq!(proxy["securityContext"]["runAsNonRoot"], true);
    let rbac = yaml_documents(&tools, "kubernetes/metrics-auth/rbac.yaml");
    let binding = of_kind(&rbac, "ClusterRoleBinding");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "nvprobe", "namespace": "nvprobe"}])
    );
    if !on_path("kubectl") {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target")
        .join(format!("deploy-overlay-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(
        dir.join("kustomization.yaml"),
        "resources:\n  - ../../deploy/kubernetes\ncomponents:\n  - ../../deploy/kubernetes/metrics-auth\n",
    )
    .expect("the overlay");
    let o = Command::new("kubectl")
        .arg("kustomize")
        .arg(&dir)
        .output()
        .expect("kubectl kustomize");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rendered = dir.join("rendered.yaml");
    fs::write(&rendered, &o.stdout).expect("write");
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.matches("containerPort: 9477").count(), 1, "{text}");
    // nvprobe's three probes on its own port, the proxy's two on its.
    assert_eq!(text.matches("port: health\n").count(), 3, "{text}");
    assert_eq!(text.matches("port: proxy-health\n").count(), 2, "{text}");
    for v in KUBERNETES_VERSIONS {
        let o = Command::new(tools.join("kubernetes-validate"))
            .args(["--strict", "-k", v])
            .arg(&rendered)
            .output()
            .expect("run kubernetes-validate");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && !out.contains("ERROR"),
            "the overlay against {v}: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

/// The Grafana dashboard: JSON Grafana imports (an id and a place for
/// each panel, the data source a variable, a query in every target).
/// nvprobe/src/metrics/tests.rs checks the metrics its queries name, and
/// tests/tests/root_metrics.rs runs each query on a real Prometheus.
#[test]
fn the_dashboard_is_one_grafana_imports() {
    let d: Value = serde_json::from_str(&read("grafana/nvprobe-dashboard.json")).expect("JSON");
    assert_eq!(d["uid"], "nvprobe");
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 36), "{d}");
    let vars: Vec<&str> = d["templating"]["list"]
        .as_array()
        .expect("variables")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(vars, ["datasource", "instance"]);
    let panels = d["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    for p in panels {
        assert!(ids.insert(p["id"].as_u64().expect("id")), "{p}");
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{p}");
        for k in ["x", "y", "w", "h"] {
            assert!(p["gridPos"][k].is_u64(), "{p}");
        }
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{p}");
        for t in targets {
            assert!(
                t["expr"]
                    .as_str()
                    .is_some_and(|e| e.contains("nvprobe_") || e.contains("up{")),
                "{t}"
            );
        }
    }
}
