//! The `--metrics` HTTP server: one HTTP/1.1 exchange per connection, GET
//! and HEAD of /metrics, /healthz and /.
//!
//! The accept loop never waits on a client: it takes a place for the
//! connection (`slots.rs`: per address, in all, and a reserve for /healthz),
//! spawns its exchange and goes back to accepting. A connection that has not
//! sent its request head within [`HEAD_TIMEOUT`] is closed, and one still
//! sending it gives its place up to a newer connection, so idle connections
//! can neither hold the slots nor get a liveness probe failed.

use std::{
    net::IpAddr,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
    time::Instant,
};

use super::slots::{Limits, Pool, Slots};

/// What the server exposes: the registry's text exposition, made anew for
/// each scrape.
pub trait Exposition: Send + Sync + 'static {
    /// The text exposition.
    fn encode(&self) -> String;
    /// Whether this server answers /healthz alone.
    fn health_only(&self) -> bool {
        false
    }
}

/// A server of /healthz alone (`watch --health`): a liveness probe that
/// reaches nvprobe without the proxy in front of its metrics.
pub struct HealthOnly;

impl Exposition for HealthOnly {
    fn encode(&self) -> String {
        String::new()
    }
    fn health_only(&self) -> bool {
        true
    }
}

/// How long a connection has to send its whole request head (a scraper
/// sends it at once, in one segment); then it is closed. Well below any
/// scrape interval, and below the kubelet's default probe timeout.
const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// The whole exchange, from accept: the request, then the answer.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request head read.
const MAX_REQUEST: usize = 8 << 10;

/// Serve /metrics and /healthz until the runtime stops, with the
/// [`Limits::DEFAULT`] bounds.
pub async fn serve<M: Exposition>(listener: TcpListener, m: Arc<M>) {
    serve_with(listener, m, Limits::DEFAULT).await;
}

/// [`serve`] with other bounds.
pub async fn serve_with<M: Exposition>(listener: TcpListener, m: Arc<M>, limits: Limits) {
    let slots = Arc::new(Mutex::new(Slots::new(limits)));
    loop {
        let (sock, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(_) => {
                // Out of fds, or the like: do not spin.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let admission = lock(&slots).admit(peer_key(peer.ip()));
        for (_, abort) in admission.evicted {
            if let Some(a) = abort {
                a.abort();
            }
        }
        let Some((id, pool)) = admission.place else {
            refuse(&sock);
            continue;
        };
        let task = tokio::spawn(exchange(sock, m.clone(), slots.clone(), id, pool));
        lock(&slots).set_abort(id, task.abort_handle());
    }
}

/// The address a connection counts against: an IPv4 peer of a dual-stack
/// socket (`::ffff:a.b.c.d`) is that IPv4 address.
fn peer_key(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

fn lock(slots: &Mutex<Slots>) -> MutexGuard<'_, Slots> {
    slots.lock().unwrap_or_else(PoisonError::into_inner)
}

/// No place: say so without waiting (the answer fits in an empty send
/// buffer, and a client that does not read it loses nothing), then close.
fn refuse(sock: &TcpStream) {
    let _ = sock.try_write(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nbusy\n",
    );
}

/// Gives the connection's place back when its task ends, however it ends.
struct Held {
    slots: Arc<Mutex<Slots>>,
    id: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        lock(&self.slots).release(self.id);
    }
}

async fn exchange(
    mut sock: TcpStream,
    m: Arc<impl Exposition>,
    slots: Arc<Mutex<Slots>>,
    id: u64,
    pool: Pool,
) {
    let _held = Held {
        slots: slots.clone(),
        id,
    };
    let start = Instant::now();
    // Idle, too slow, or gone: close without an answer.
    let Ok(Ok(head)) = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut sock)).await else {
        return;
    };
    lock(&slots).head_read(id);
    let _ = tokio::time::timeout_at(
        start + EXCHANGE_TIMEOUT,
        answer(&mut sock, head.as_deref(), &*m, pool),
    )
    .await;
}

/// The request head, up to its blank line or the peer's end of sending;
/// None when it is longer than [`MAX_REQUEST`].
async fn read_head(sock: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = sock.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST {
            return Ok(None);
        }
    }
    Ok(Some(head))
}

/// Answer one request. A connection of the reserve answers /healthz only.
async fn answer(
    sock: &mut TcpStream,
    head: Option<&[u8]>,
    m: &impl Exposition,
    pool: Pool,
) -> std::io::Result<()> {
    let Some(head) = head else {
        return respond(
            sock,
            "431 Request Header Fields Too Large",
            "text/plain",
            "request too large\n",
            false,
        )
        .await;
    };
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let head_only = method == "HEAD";
    match (method, path) {
        ("GET" | "HEAD", "/healthz") => {
            respond(
                sock,
                "200 OK",
                "text/plain; charset=utf-8",
                "ok\n",
                head_only,
            )
            .await
        }
        ("GET" | "HEAD", _) if pool == Pool::Reserve => {
            respond(
                sock,
                "503 Service Unavailable",
                "text/plain",
                "busy\n",
                head_only,
            )
            .await
        }
        ("GET" | "HEAD", _) if m.health_only() => {
            respond(
                sock,
                "404 Not Found",
                "text/plain",
                "not found: this address answers /healthz alone\n",
                head_only,
            )
            .await
        }
        ("GET" | "HEAD", "/metrics") => {
            let body = m.encode();
            respond(
                sock,
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                &body,
                head_only,
            )
            .await
        }
        ("GET" | "HEAD", "/") => {
            respond(
                sock,
                "200 OK",
                "text/plain; charset=utf-8",
                "nvprobe: metrics at /metrics, health at /healthz\n",
                head_only,
            )
            .await
        }
        ("GET" | "HEAD", _) => {
            respond(
                sock,
                "404 Not Found",
                "text/plain",
                "not found: try /metrics\n",
                head_only,
            )
            .await
        }
        _ => {
            respond(
                sock,
                "405 Method Not Allowed",
                "text/plain",
                "only GET and HEAD\n",
                false,
            )
            .await
        }
    }
}

async fn respond(
    sock: &mut TcpStream,
    status: &str,
    ctype: &str,
    body: &str,
    head_only: bool,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await?;
    if !head_only {
        sock.write_all(body.as_bytes()).await?;
    }
    sock.shutdown().await
}
