//! Idle connections at the cap: a fresh worker whose `max_connections` is [`CAP`], [`CAP`]
//! idle keep-alive connections from 127.0.0.1 (one `/health` each), the resident memory each
//! costs, then [`BEYOND`] more connections at once (what became of each), `/health` on a fresh
//! connection at the cap, and whether the served connections still answer afterwards.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::WARM_UP_CALLS;
use super::measure::{call, metric_sum};
use super::worker::{Worker, demo_config};

/// The worker's `max_connections` (and `max_connections_per_ip`): the idle connections opened.
pub const CAP: usize = 2_000;
/// Connections opened beyond the cap, all at once.
pub const BEYOND: usize = 100;
/// How long one exchange on a raw connection may take.
const EXCHANGE_WITHIN: Duration = Duration::from_secs(5);
/// The error of an exchange that got no answer within [`EXCHANGE_WITHIN`].
const SILENT: &str = "silent";
/// The largest response a raw connection reads.
const MAX_RESPONSE: usize = 1 << 20;

/// What the step saw.
#[derive(Debug)]
pub struct AtCap {
    /// The gateway's resident set before the connections and with [`CAP`] of them open.
    pub rss: [u64; 2],
    /// Connections the gateway counted as served with the cap reached (its gauge).
    pub served: u64,
    /// Of the [`BEYOND`] connections: answered 503 (the cap named), answered otherwise (status
    /// codes), closed without an answer, and silent for [`EXCHANGE_WITHIN`].
    pub refused_503: usize,
    /// See `refused_503`.
    pub answered_otherwise: Vec<u16>,
    /// See `refused_503`.
    pub closed: usize,
    /// See `refused_503`.
    pub silent: usize,
    /// `GET /health` on a fresh connection at the cap: its status, body `status` and whether
    /// the gateway closed the connection after it (the answer beyond the cap does).
    pub health: (u16, String, bool),
    /// Of the [`CAP`] connections, how many answered `/health` again at the end.
    pub still_served: usize,
}

impl AtCap {
    /// Resident bytes per idle connection at the cap.
    pub fn per_connection(&self) -> f64 {
        self.rss[1].saturating_sub(self.rss[0]) as f64 / CAP as f64
    }
}

/// The config of the worker: the cap at [`CAP`] for all and for one address, and a head
/// timeout (also the idle limit of a kept-alive connection) long enough that no connection
/// is closed for idling before the step ends.
pub fn config() -> String {
    let cap = format!("max_connections = {CAP}");
    let per_ip = format!("max_connections_per_ip = {CAP}");
    demo_config(&[
        ("connections", cap.as_str()),
        ("connections", per_ip.as_str()),
        ("connections", "header_timeout = \"60s\""),
    ])
}

/// A response read off a raw connection.
struct Answer {
    status: u16,
    /// Whether the response said `Connection: close`.
    closes: bool,
    body: String,
}

/// Sends `request` on `stream` and reads one response (its body by `Content-Length`); an
/// error says how the connection failed (closed, reset, silent).
async fn exchange(stream: &mut TcpStream, request: &str) -> Result<Answer, String> {
    match tokio::time::timeout(EXCHANGE_WITHIN, exchange_now(stream, request)).await {
        Ok(answer) => answer,
        Err(_) => Err(SILENT.into()),
    }
}

async fn exchange_now(stream: &mut TcpStream, request: &str) -> Result<Answer, String> {
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if seen.len() > MAX_RESPONSE {
            return Err("a response head over 1 MiB".into());
        }
        let n = stream
            .read(&mut buffer)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("closed".into());
        }
        seen.extend_from_slice(&buffer[..n]);
    };
    let head = String::from_utf8_lossy(&seen[..head_end]).to_ascii_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("no status line in {head:?}"))?;
    let header = |name: &str| {
        head.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim() == name)
            .map(|(_, v)| v.trim().to_owned())
    };
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no content-length in {head:?}"))?;
    if length > MAX_RESPONSE {
        return Err(format!("a {length}-byte body"));
    }
    while seen.len() < head_end + length {
        let n = stream
            .read(&mut buffer)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("closed in the body".into());
        }
        seen.extend_from_slice(&buffer[..n]);
    }
    Ok(Answer {
        status,
        closes: header("connection").is_some_and(|v| v == "close"),
        body: String::from_utf8_lossy(&seen[head_end..head_end + length]).into_owned(),
    })
}

/// A `GET path` request on `address`, keep-alive unless `close`.
fn get(address: &str, path: &str, close: bool) -> String {
    let connection = if close { "connection: close\r\n" } else { "" };
    format!("GET {path} HTTP/1.1\r\nhost: {address}\r\n{connection}\r\n")
}

/// The gateway's `cancelkit_gateway_connections` gauge, read on a fresh connection.
async fn connections_now(address: &str) -> u64 {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    let answer = exchange(&mut stream, &get(address, "/metrics", true))
        .await
        .expect("metrics");
    metric_sum(&answer.body, "cancelkit_gateway_connections") as u64
}

/// Runs the step; `token` is the admin's (for the warm-up calls).
pub async fn idle_at_cap(token: &str) -> AtCap {
    let worker = Worker::start_with("capped", &config(), None);
    let address = worker.base.trim_start_matches("http://").to_owned();
    // Warm up on connections that close, then wait until the gateway serves none but the one
    // asking, so that the cap is reached by the step's own connections.
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    for i in 0..WARM_UP_CALLS as u64 {
        let _ = http
            .post(worker.url("/rpc"))
            .bearer_auth(token)
            .json(&call(i, "demo-echo", json!({"text": "warm"})))
            .send()
            .await;
    }
    drop(http);
    let deadline = Instant::now() + Duration::from_secs(10);
    while connections_now(&address).await > 1 {
        assert!(
            Instant::now() < deadline,
            "the warm-up connections did not close"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = worker.rss_bytes();

    let mut streams = Vec::with_capacity(CAP);
    for n in 0..CAP {
        let mut stream = TcpStream::connect(&address).await.expect("connect");
        let answer = exchange(&mut stream, &get(&address, "/health", false))
            .await
            .unwrap_or_else(|e| panic!("connection {n} of {CAP}: {e}"));
        assert!(
            answer.status == 200 && !answer.closes,
            "connection {n} of {CAP} was not served in full: {} {}",
            answer.status,
            answer.body
        );
        streams.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let at_cap = worker.rss_bytes();
    let metrics = exchange(&mut streams[0], &get(&address, "/metrics", false))
        .await
        .expect("metrics on a served connection");
    let served = metric_sum(&metrics.body, "cancelkit_gateway_connections") as u64;

    // Beyond the cap: every connection made first, then a request on each.
    let mut beyond = Vec::with_capacity(BEYOND);
    for _ in 0..BEYOND {
        beyond.push(TcpStream::connect(&address).await.expect("connect"));
    }
    let (mut refused_503, mut answered_otherwise, mut closed, mut silent) = (0, Vec::new(), 0, 0);
    for stream in &mut beyond {
        match exchange(stream, &get(&address, "/cancellation/status/bench", false)).await {
            Ok(answer) if answer.status == 503 => refused_503 += 1,
            Ok(answer) => answered_otherwise.push(answer.status),
            Err(e) if e == SILENT => silent += 1,
            Err(_) => closed += 1,
        }
    }
    drop(beyond);
    tokio::time::sleep(Duration::from_millis(100)).await;

    let mut fresh = TcpStream::connect(&address).await.expect("connect");
    let health = match exchange(&mut fresh, &get(&address, "/health", false)).await {
        Ok(answer) => {
            let body: Value = serde_json::from_str(&answer.body).unwrap_or(Value::Null);
            let status = body["status"].as_str().unwrap_or("").to_owned();
            (answer.status, status, answer.closes)
        }
        Err(e) => (0, e, true),
    };
    drop(fresh);

    let mut still_served = 0;
    for stream in &mut streams {
        if let Ok(answer) = exchange(stream, &get(&address, "/health", false)).await
            && answer.status == 200
        {
            still_served += 1;
        }
    }
    drop(streams);
    drop(worker);
    AtCap {
        rss: [before, at_cap],
        served,
        refused_503,
        answered_otherwise,
        closed,
        silent,
        health,
        still_served,
    }
}
