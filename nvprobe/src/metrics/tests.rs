//! The registry's text, and the real server on 127.0.0.1:0 against clients
//! that hold connections without sending anything.

use std::{
    io::{ErrorKind, Read as _, Write as _},
    net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream},
    thread::JoinHandle,
    time::Duration,
};

use super::{
    slots::{Pool, Slots},
    *,
};

#[test]
fn the_registry_encodes_what_was_counted() {
    let m = Metrics::new(vec![("version".into(), "0.1.0".into())], 1 << 24);
    m.lost("ioctl", 3);
    m.quieted_total(10);
    m.quieted_total(7);
    m.processes(4);
    m.ringbuf_high_water(1 << 22);
    let t = m.encode();
    for want in [
        "nvprobe_build_info{version=\"0.1.0\"} 1",
        "nvprobe_lost_events_total{kind=\"ioctl\"} 3",
        "nvprobe_quieted_calls_total 10",
        "nvprobe_processes_tracked 4",
        "nvprobe_ringbuf_fill_ratio 0.25",
        "nvprobe_ringbuf_size_bytes 16777216",
        "# EOF",
    ] {
        assert!(t.contains(want), "{want} missing from\n{t}");
    }
}

/// Every metric the Grafana dashboard's queries name (deploy/grafana) is
/// one nvprobe exports: each family filled once, its names read back.
#[test]
fn the_dashboard_names_only_metrics_nvprobe_exports() {
    let m = Metrics::new(vec![("version".into(), "0.1.0".into())], 1 << 24);
    m.lost("ioctl", 1);
    m.quieted_total(1);
    m.processes(1);
    m.ringbuf_high_water(1);
    m.verdicts.get_or_create(&VerdictLabels::default()).inc();
    m.diagnoses.get_or_create(&DiagnosisLabels::default()).inc();
    m.calls.get_or_create(&CallLabels::default()).inc();
    m.latency.get_or_create(&CallName::default()).observe(0.001);
    m.events.get_or_create(&EventLabels::default()).inc();
    m.signals.get_or_create(&SignalLabels::default()).inc();
    m.stalls.get_or_create(&CallName::default()).inc();
    m.hangs.get_or_create(&HangLabels::default()).inc();
    m.hangs_total.get_or_create(&HangLabels::default()).inc();
    m.nccl_seq.get_or_create(&NcclLabels::default()).set(1);
    m.xids.get_or_create(&XidLabels::default()).inc();
    m.faults.get_or_create(&FaultLabels::default()).inc();
    let text = m.encode();
    let families: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(families.len(), 18, "every family filled: {families:?}");
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/grafana/nvprobe-dashboard.json"
    );
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the dashboard")).expect("JSON");
    let mut named = std::collections::BTreeSet::new();
    for p in d["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            let expr = t["expr"].as_str().expect("expr");
            let mut rest = expr;
            while let Some(at) = rest.find("nvprobe_") {
                let name: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[at + name.len()..];
                let family = ["_total", "_bucket", "_count", "_sum", "_info"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .filter(|f| families.contains(f))
                    .unwrap_or(&name);
                assert!(families.contains(family), "{name} in {expr}");
                named.insert(family.to_owned());
            }
        }
    }
    for f in [
        "nvprobe_verdicts",
        "nvprobe_driver_call_duration_seconds",
        "nvprobe_xids",
        "nvprobe_hangs_open",
        "nvprobe_nccl_seq",
        "nvprobe_lost_events",
    ] {
        assert!(named.contains(f), "no panel shows {f}: {named:?}");
    }
}

/// The H200's fault recording, replayed: its Xids by number and GPU, its
/// fault verdicts by result and class.
#[test]
fn xids_and_faults_of_the_h200_recording_are_counted() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/h200-580.159.04-faults.ndjson"
    );
    let text = std::fs::read(path).expect("fixture");
    let m = Metrics::new(Vec::new(), 1 << 24);
    nvprobe_model::replay::replay(&text[..], None, |_, item| {
        if let nvprobe_model::replay::Item::Record(r) = item {
            m.record(r);
        }
    })
    .expect("replay");
    let t = m.encode();
    for want in [
        r#"nvprobe_xids_total{xid="31",gpu="0000:00:06",action="fix_program"} 2"#,
        r#"nvprobe_xids_total{xid="13",gpu="0000:00:06",action="fix_program"} 2"#,
        r#"nvprobe_xids_total{xid="43",gpu="0000:00:06",action="fix_program"} 3"#,
        r#"nvprobe_faults_total{result="CUDA_ERROR_ILLEGAL_ADDRESS",class="program",xid="31",drain="false"} 2"#,
        r#"nvprobe_faults_total{result="CUDA_ERROR_MISALIGNED_ADDRESS",class="program",xid="13",drain="false"} 1"#,
        r#"nvprobe_faults_total{result="none",class="unfinished",xid="none",drain="false"} 1"#,
    ] {
        assert!(t.contains(want), "{want} missing from\n{t}");
    }
}

/// An upper bound on any one read, so that a broken server fails the test
/// instead of hanging it; no assertion depends on how long anything took.
const READ_BOUND: Duration = Duration::from_secs(60);

/// The real server on 127.0.0.1:0, in a runtime on a thread of its own,
/// stopped when dropped.
struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// `limits`: None serves with [`serve`] as `--metrics` does.
    fn start(limits: Option<Limits>) -> Server {
        let m = Arc::new(Metrics::new(
            vec![("version".into(), "test".into())],
            1 << 20,
        ));
        Self::start_serving(m, limits)
    }

    /// [`Server::start`] of any exposition (`--health`'s).
    fn start_serving(m: Arc<impl Exposition>, limits: Option<Limits>) -> Server {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        l.set_nonblocking(true).expect("nonblocking listener");
        let addr = l.local_addr().expect("the listener's address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let l = tokio::net::TcpListener::from_std(l).expect("a tokio listener");
                let serving = async {
                    match limits {
                        Some(limits) => serve_with(l, m, limits).await,
                        None => serve(l, m).await,
                    }
                };
                tokio::select! {
                    () = serving => {}
                    _ = stopped => {}
                }
            });
        });
        Server {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A connection to `to` from the loopback address `from` (any of
/// 127.0.0.0/8 is the loopback device's), so that one test has several
/// peers.
fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("a runtime");
    let s = rt
        .block_on(async {
            let sock = tokio::net::TcpSocket::new_v4()?;
            sock.bind(SocketAddr::new(IpAddr::V4(from), 0))?;
            sock.connect(to).await?.into_std()
        })
        .unwrap_or_else(|e| panic!("connect from {from} to {to}: {e}"));
    s.set_nonblocking(false).expect("blocking client socket");
    s.set_read_timeout(Some(READ_BOUND)).expect("read bound");
    s
}

fn peer(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, n)
}

/// GET `path` from `from`: (status line, body).
fn get(from: Ipv4Addr, to: SocketAddr, path: &str) -> (String, String) {
    let mut s = connect_from(from, to);
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {to}\r\nConnection: close\r\n\r\n"
    )
    .expect("send the request");
    let mut all = String::new();
    s.read_to_string(&mut all)
        .unwrap_or_else(|e| panic!("GET {path} from {from}: {e}"));
    let (head, body) = all.split_once("\r\n\r\n").unwrap_or((&all, ""));
    let status = head.lines().next().unwrap_or_default();
    (status.to_owned(), body.to_owned())
}

/// Whether the server closed `s` (end of stream or reset) before
/// [`READ_BOUND`]; it sends nothing first.
fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 256];
    match s.read(&mut buf) {
        Ok(0) => true,
        Ok(n) => panic!(
            "the server answered a request it never got: {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => true,
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
        Err(e) => panic!("reading an idle connection: {e}"),
    }
}

#[test]
fn idle_connections_from_one_peer_do_not_shut_out_its_scrape() {
    let srv = Server::start(None);
    // More than every slot there is, from the scraper's own address (a
    // node-local Prometheus shares 127.0.0.1 with every local process).
    let idle: Vec<TcpStream> = (0..20).map(|_| connect_from(peer(1), srv.addr)).collect();
    let (status, body) = get(peer(1), srv.addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "body: {body}");
    assert!(
        body.contains("nvprobe_build_info{version=\"test\"} 1"),
        "{body}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    drop(idle);
}

#[test]
fn idle_connections_from_many_peers_do_not_shut_out_a_scrape() {
    let srv = Server::start(None);
    // Four peers at their bound fill every slot of the main pool.
    let idle: Vec<TcpStream> = (2..=5)
        .flat_map(|p| (0..Limits::DEFAULT.per_peer).map(move |_| p))
        .map(|p| connect_from(peer(p), srv.addr))
        .collect();
    assert_eq!(idle.len(), Limits::DEFAULT.total);
    let (status, body) = get(peer(1), srv.addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "body: {body}");
    assert!(body.ends_with("# EOF\n"), "{body}");
}

#[test]
fn a_connection_that_sends_no_request_is_closed_by_the_server() {
    let srv = Server::start(None);
    let mut silent = connect_from(peer(1), srv.addr);
    // Slowloris: a request line, and never the blank line that ends the head.
    let mut partial = connect_from(peer(1), srv.addr);
    partial
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .expect("send part of a head");
    assert!(
        closed_by_server(&mut silent),
        "a connection that sent nothing was still open after {READ_BOUND:?}"
    );
    assert!(
        closed_by_server(&mut partial),
        "a connection that never ended its head was still open after {READ_BOUND:?}"
    );
    // And the server still answers.
    let (status, _) = get(peer(1), srv.addr, "/healthz");
    assert_eq!(status, "HTTP/1.1 200 OK");
}

#[test]
fn healthz_answers_while_the_per_peer_and_total_slots_are_full() {
    let srv = Server::start(None);
    let per_peer = Limits::DEFAULT.per_peer;
    // The prober's own address at its bound, and three more peers filling
    // the rest of the main pool.
    let idle: Vec<TcpStream> = (1..=4)
        .flat_map(|p| (0..per_peer).map(move |_| p))
        .map(|p| connect_from(peer(p), srv.addr))
        .collect();
    assert_eq!(idle.len(), Limits::DEFAULT.total);
    let (status, body) = get(peer(1), srv.addr, "/healthz");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(body, "ok\n");
}

#[test]
fn the_health_address_answers_healthz_alone() {
    let srv = Server::start_serving(Arc::new(HealthOnly), None);
    let (status, body) = get(peer(1), srv.addr, "/healthz");
    assert_eq!(
        (status.as_str(), body.as_str()),
        ("HTTP/1.1 200 OK", "ok\n")
    );
    for path in ["/metrics", "/", "/anything"] {
        let (status, body) = get(peer(1), srv.addr, path);
        assert_eq!(
            (status.as_str(), body.as_str()),
            (
                "HTTP/1.1 404 Not Found",
                "not found: this address answers /healthz alone\n"
            ),
            "{path}"
        );
    }
}

#[test]
fn the_reserve_answers_healthz_and_refuses_the_rest() {
    // No main pool: every connection lands in the reserve.
    let srv = Server::start(Some(Limits {
        total: 0,
        per_peer: 4,
        reserve: 2,
    }));
    let (status, body) = get(peer(1), srv.addr, "/healthz");
    assert_eq!(
        (status.as_str(), body.as_str()),
        ("HTTP/1.1 200 OK", "ok\n")
    );
    let (status, body) = get(peer(1), srv.addr, "/metrics");
    assert_eq!(
        (status.as_str(), body.as_str()),
        ("HTTP/1.1 503 Service Unavailable", "busy\n")
    );
}

fn ip(n: u8) -> IpAddr {
    IpAddr::V4(peer(n))
}

fn admit(s: &mut Slots, n: u8) -> Option<(u64, Pool)> {
    s.admit(ip(n)).place
}

#[test]
fn a_peer_at_its_bound_gives_up_its_own_oldest_idle_connection() {
    let mut s = Slots::new(Limits {
        total: 4,
        per_peer: 2,
        reserve: 1,
    });
    let a0 = admit(&mut s, 1).expect("a place");
    let b0 = admit(&mut s, 2).expect("a place");
    let a1 = admit(&mut s, 1).expect("a place");
    let third = s.admit(ip(1));
    let evicted: Vec<u64> = third.evicted.iter().map(|(id, _)| *id).collect();
    assert_eq!(evicted, [a0.0], "peer 1's oldest, not peer 2's {b0:?}");
    assert_eq!(third.place.map(|p| p.1), Some(Pool::Main));
    // Once its requests have arrived, a peer at its bound is refused.
    s.head_read(a1.0);
    s.head_read(third.place.expect("a place").0);
    let refused = s.admit(ip(1));
    assert!(refused.place.is_none() && refused.evicted.is_empty());
    assert_eq!(s.held(), (3, 0));
}

#[test]
fn exchanges_under_way_keep_their_places_and_the_reserve_takes_probes() {
    let mut s = Slots::new(Limits {
        total: 2,
        per_peer: 4,
        reserve: 1,
    });
    let a = admit(&mut s, 1).expect("a place");
    let b = admit(&mut s, 2).expect("a place");
    s.head_read(a.0);
    s.head_read(b.0);
    // The main pool answers two requests: the next connection is the
    // reserve's, then, the reserve full of a reading one, it takes its place.
    let r = admit(&mut s, 3).expect("a reserve place");
    assert_eq!(r.1, Pool::Reserve);
    let r2 = s.admit(ip(3));
    assert_eq!(
        r2.evicted.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        [r.0]
    );
    let r2 = r2.place.expect("the reserve place");
    assert_eq!(r2.1, Pool::Reserve);
    s.head_read(r2.0);
    assert!(admit(&mut s, 4).is_none(), "every place answers a request");
    assert_eq!(s.held(), (2, 1));
    // Ends free the places; an end after an eviction frees nothing twice.
    s.release(a.0);
    s.release(r.0);
    assert_eq!(s.held(), (1, 1));
    assert_eq!(admit(&mut s, 4).map(|p| p.1), Some(Pool::Main));
}
