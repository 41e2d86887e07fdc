//! Tier 2: `--metrics` scraped by a real Prometheus server (Debian's
//! `prometheus` package), as root.
//!
//! Two start-ups through the stand-in libcuda (one succeeds, one fails at
//! GPU_ATTACH_IDS with NV_ERR_INVALID_DEVICE) are traced with
//! `--metrics`; Prometheus scrapes nvprobe every second with the alert
//! rules of deploy/prometheus/nvprobe-alerts.yml loaded, and the test reads
//! the values back through Prometheus's own query API, and the alert that
//! fires.

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use nvprobe_tests::{
    need_root,
    scenario::{FakeDrv, check_schema, lock, spawn_cuinit, stub_libcuda, tmpdir, watch},
};
use serde_json::Value;

fn rules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/prometheus/nvprobe-alerts.yml")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// GET `path` from 127.0.0.1:`port`: (status line, headers, body).
fn get(port: u16, path: &str) -> std::io::Result<(String, String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    let mut all = String::new();
    s.read_to_string(&mut all)?;
    let (head, body) = all.split_once("\r\n\r\n").unwrap_or((&all, ""));
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    Ok((status.to_owned(), headers.to_owned(), body.to_owned()))
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

struct Prometheus {
    child: Child,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(tmp: &Path, target: u16) -> Prometheus {
        let port = free_port();
        let cfg = tmp.join("prometheus.yml");
        std::fs::write(
            &cfg,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - {}\n\
                 scrape_configs:\n  - job_name: nvprobe\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n",
                rules().display()
            ),
        )
        .expect("config");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                tmp.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(tmp.join("prometheus.log")).expect("log"))
            .spawn()
            .expect("start prometheus");
        Prometheus { child, port }
    }

    fn api(&self, path: &str) -> Option<Value> {
        let (status, _, body) = get(self.port, path).ok()?;
        if !status.contains(" 200 ") {
            return None;
        }
        let v: Value = serde_json::from_str(&body).ok()?;
        (v["status"] == "success").then(|| v["data"].clone())
    }

    /// An instant query: (labels, value) of each series.
    fn query(&self, q: &str) -> Vec<(Value, f64)> {
        self.api(&format!("/api/v1/query?query={}", encode(q)))
            .and_then(|d| d["result"].as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .map(|r| {
                let v = r["value"][1]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(f64::NAN);
                (r["metric"].clone(), v)
            })
            .collect()
    }

    /// Wait until `q` has a series whose value is `want` (Prometheus
    /// scrapes each second; the patience only ends a broken run).
    fn wait_value(&self, q: &str, want: f64) -> Vec<(Value, f64)> {
        let t0 = Instant::now();
        loop {
            let r = self.query(q);
            if r.iter().any(|(_, v)| *v == want) {
                return r;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "Prometheus never had {q} = {want}: last {r:?}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// Every query of deploy/grafana/nvprobe-dashboard.json, with Grafana's
/// variables as a dashboard over the last hour sets them, runs on the real
/// Prometheus (a query it cannot parse is an error there); the panels of
/// what the scenario made (start-ups, driver calls, latency, up) have
/// series.
fn dashboard_queries_run(prom: &Prometheus) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana/nvprobe-dashboard.json");
    let d: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the dashboard")).expect("JSON");
    for p in d["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            let q = t["expr"]
                .as_str()
                .expect("expr")
                .replace("$__rate_interval", "1m")
                .replace("$__range", "1h")
                .replace("$instance", ".*");
            let must = [1, 3, 4, 10].contains(&p["id"].as_u64().unwrap_or(0));
            // A rate needs two samples of a series: poll, with patience
            // that only ends a broken run.
            let t0 = Instant::now();
            loop {
                let r = prom
                    .api(&format!("/api/v1/query?query={}", encode(&q)))
                    .unwrap_or_else(|| {
                        panic!("Prometheus refused the query of {}: {q}", p["title"])
                    });
                assert_eq!(r["resultType"], "vector", "{q}: {r}");
                if !must || r["result"].as_array().is_some_and(|a| !a.is_empty()) {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(60),
                    "no series for {}: {q}",
                    p["title"]
                );
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    }
}

#[test]
#[ignore = "needs root"]
fn prometheus_scrapes_verdicts_calls_and_latency_and_the_alert_fires() {
    need_root!();
    let have = Command::new("prometheus").arg("--version").output();
    assert!(
        have.is_ok_and(|o| o.status.success()),
        "the Prometheus server is missing: install Debian's prometheus package (cargo xtask test installs it)"
    );
    let _g = lock();
    let tmp = tmpdir("metrics");
    let lib = stub_libcuda(&tmp);
    let drv = FakeDrv::start(&tmp);
    let (mut good, mut good_out) = spawn_cuinit(&drv, &lib, "ok");
    let (mut bad, mut bad_out) = spawn_cuinit(&drv, &lib, "fail");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let health_port = free_port();
    let health = format!("127.0.0.1:{health_port}");
    let t = watch(
        &tmp,
        &drv,
        &[
            "--metrics",
            &addr,
            "--health",
            &health,
            "--events",
            "verdicts",
            "--pid",
            &good.id().to_string(),
            "--pid",
            &bad.id().to_string(),
        ],
    );
    // The endpoint itself: OpenMetrics text, ending in # EOF.
    let (status, headers, body) = get(port, "/metrics").expect("GET /metrics");
    assert!(status.contains(" 200 "), "{status}");
    assert!(
        headers
            .to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "{headers}"
    );
    assert!(
        body.ends_with("# EOF\n") && body.contains("nvprobe_build_info{"),
        "{body}"
    );
    let (status, _, _) = get(port, "/nope").expect("GET /nope");
    assert!(status.contains(" 404 "), "{status}");
    // --health: /healthz, and nothing of the metrics.
    let (status, _, body) = get(health_port, "/healthz").expect("GET --health's /healthz");
    assert!(
        status.contains(" 200 ") && body == "ok\n",
        "{status} {body}"
    );
    let (status, _, body) = get(health_port, "/metrics").expect("GET --health's /metrics");
    assert!(
        status.contains(" 404 ") && !body.contains("nvprobe_"),
        "{status} {body}"
    );

    let prom = Prometheus::start(&tmp, port);
    prom.wait_value("up{job=\"nvprobe\"}", 1.0);
    for (c, out) in [(&mut good, &mut good_out), (&mut bad, &mut bad_out)] {
        c.stdin
            .take()
            .expect("stdin")
            .write_all(b"go\n")
            .expect("go");
        let mut line = String::new();
        std::io::BufRead::read_line(out, &mut line).expect("result");
        assert!(c.wait().expect("wait").success());
    }
    // Verdicts by result and class, and the diagnosis of the failure.
    let ok = prom.wait_value("nvprobe_verdicts_total{result=\"ok\",class=\"cuda\"}", 1.0);
    assert_eq!(ok[0].0["diagnosis"], "none", "{ok:?}");
    let failed = prom.wait_value(
        "nvprobe_verdicts_total{result=\"failed\",class=\"cuda\"}",
        1.0,
    );
    let failed_call = failed[0].0["failed_call"]
        .as_str()
        .expect("failed_call")
        .to_owned();
    assert_eq!(
        failed_call, "NV_ESC_RM_CONTROL NV0000_CTRL_CMD_GPU_ATTACH_IDS",
        "{failed:?}"
    );
    assert_eq!(ok[0].0["failed_call"], "none", "{ok:?}");
    // Driver calls by name and status; latency histograms per call.
    prom.wait_value(
        "nvprobe_driver_calls_total{call=\"NV_ESC_RM_CONTROL\",status=\"NV_ERR_INVALID_DEVICE\"}",
        1.0,
    );
    prom.wait_value(
        "nvprobe_driver_calls_total{call=\"NV_ESC_RM_ALLOC\",status=\"NV_OK\"}",
        2.0,
    );
    prom.wait_value(
        "nvprobe_driver_call_duration_seconds_count{call=\"NV_ESC_RM_ALLOC\"}",
        2.0,
    );
    let le = prom
        .query("nvprobe_driver_call_duration_seconds_bucket{call=\"NV_ESC_RM_ALLOC\",le=\"+Inf\"}");
    assert_eq!(le.first().map(|x| x.1), Some(2.0), "{le:?}");
    // No label carries a pid.
    for (labels, _) in prom.query("{__name__=~\"nvprobe_.*\"}") {
        for (k, _) in labels.as_object().expect("labels") {
            assert!(!k.contains("pid"), "{labels}");
        }
    }
    prom.wait_value(
        "nvprobe_events_total{event=\"cuda\",result=\"failed\"}",
        1.0,
    );
    // The gauges read from the kernel side: the ring buffer's size and
    // fill, the processes followed (both exited: 0), no loss.
    prom.wait_value("nvprobe_ringbuf_size_bytes", 16_777_216.0);
    prom.wait_value("nvprobe_processes_tracked", 0.0);
    let fill = prom.query("nvprobe_ringbuf_fill_ratio");
    assert!(
        fill.len() == 1 && (0.0..=1.0).contains(&fill[0].1),
        "{fill:?}"
    );
    assert!(prom.query("nvprobe_lost_events_total").is_empty());
    // The alert rule: the failed start-up fires CudaStartupFailures.
    let t0 = Instant::now();
    let alert = loop {
        let firing = prom
            .api("/api/v1/alerts")
            .and_then(|d| d["alerts"].as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .find(|a| a["labels"]["alertname"] == "CudaStartupFailures" && a["state"] == "firing");
        if let Some(a) = firing {
            break a;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "CudaStartupFailures never fired"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(alert["labels"]["result"], "failed", "{alert}");
    assert_eq!(
        alert["labels"]["failed_call"],
        failed_call.as_str(),
        "{alert}"
    );
    dashboard_queries_run(&prom);
    drop(prom);
    let f = t.stop();
    check_schema(&f);

    let o = Command::new("promtool")
        .args(["check", "rules"])
        .arg(rules())
        .output()
        .expect("promtool");
    assert!(
        o.status.success(),
        "promtool: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    // The Xid and fault alerts, on series of the shape --metrics serves
    // (the Xid and fault families are checked against a real run in
    // nvprobe's metrics tests and the H200's scrape, tests/fixtures).
    let o = Command::new("promtool")
        .args(["test", "rules", "nvprobe-alerts.test.yml"])
        .current_dir(rules().parent().expect("folder"))
        .output()
        .expect("promtool");
    assert!(
        o.status.success(),
        "promtool test rules: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
