//! The gateway benchmark's measurements: one cancel, one raw Redis round trip, a throughput
//! round, and the memory of in-flight runs.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cancelkit::peer::{DEFAULT_DISCOVER_TIMEOUT, McpRevision, Peer, PeerHandle, Protocol};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::worker::{Worker, gateway_binary};
use super::{IN_FLIGHT_RUNS, WINDOW};

/// The wall-clock time, µs since the epoch.
pub fn unix_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0)
}

/// A JSON-RPC `tools/call` of `tool` with `arguments`.
pub fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
}

/// The sum of every series of the Prometheus metric `name` in `text` (0 when it has none).
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            if !rest.starts_with(['{', ' ']) {
                return None;
            }
            line.rsplit(' ').next()?.parse::<f64>().ok()
        })
        .sum()
}

/// One cancel: a slow call on `runs_on`, the API cancel sent to `cancel_via`; returns the
/// microseconds from sending the cancel to the upstream's stop.
pub async fn one_cancel(
    http: &reqwest::Client,
    token: &str,
    id: u64,
    runs_on: &Worker,
    cancel_via: &Worker,
) -> f64 {
    let started = runs_on.started();
    let stopped = runs_on.stopped();
    let pending = tokio::spawn({
        let request = http
            .post(runs_on.url("/rpc"))
            .bearer_auth(token)
            .json(&call(id, "demo-sleep", json!({"seconds": 60})));
        async move {
            request
                .send()
                .await
                .map(|r| r.headers().get("cancelkit-run-id").cloned())
        }
    });
    runs_on.wait_started(started + 1).await;
    let sent = unix_us();
    let response: Value = http
        .post(cancel_via.url("/cancellation/cancel"))
        .bearer_auth(token)
        .json(&json!({"requestId": id.to_string(), "reason": "bench"}))
        .send()
        .await
        .expect("cancel")
        .json()
        .await
        .expect("cancel body");
    assert_eq!(response["status"], "cancelled", "{response}");
    let stop = runs_on.stop_time(stopped + 1).await;
    let _ = pending.await;
    (stop.saturating_sub(sent)) as f64
}

/// A Redis publisher and a subscriber on one channel, both connected once and kept.
pub struct RawPubSub {
    publisher: redis::aio::MultiplexedConnection,
    messages: redis::aio::PubSubStream,
    sent: u64,
}

impl RawPubSub {
    /// Connects both to Redis at `url` and sends a few messages through, to warm them.
    pub async fn connect(url: &str) -> RawPubSub {
        let client = redis::Client::open(url).expect("redis url");
        let publisher = client
            .get_multiplexed_async_connection()
            .await
            .expect("publisher");
        let mut subscriber = client.get_async_pubsub().await.expect("subscriber");
        subscriber.subscribe("bench:raw").await.expect("subscribe");
        let mut raw = RawPubSub {
            publisher,
            messages: subscriber.into_on_message(),
            sent: 0,
        };
        for _ in 0..20 {
            raw.round_trip().await;
        }
        raw
    }

    /// One `PUBLISH` until the subscriber has the message, in microseconds.
    pub async fn round_trip(&mut self) -> f64 {
        self.sent += 1;
        let sent = Instant::now();
        let _: i64 = redis::cmd("PUBLISH")
            .arg("bench:raw")
            .arg(self.sent)
            .query_async(&mut self.publisher)
            .await
            .expect("publish");
        let _ = tokio::time::timeout(Duration::from_secs(5), self.messages.next())
            .await
            .expect("the message arrives");
        sent.elapsed().as_secs_f64() * 1e6
    }
}

/// `calls` echo calls through the gateway's `/rpc`, `WINDOW` at a time; calls per second.
pub async fn through_gateway(
    http: &reqwest::Client,
    token: &str,
    worker: &Worker,
    calls: usize,
) -> f64 {
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..WINDOW {
        let (http, token, url, next) = (
            http.clone(),
            token.to_owned(),
            worker.url("/rpc"),
            Arc::clone(&next),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= calls {
                    break;
                }
                let body: Value = http
                    .post(&url)
                    .bearer_auth(&token)
                    .json(&call(i as u64, "demo-echo", json!({"text": "x"})))
                    .send()
                    .await
                    .expect("call")
                    .json()
                    .await
                    .expect("body");
                assert_eq!(body["result"]["content"][0]["text"], "x", "{body}");
            }
        }));
    }
    for task in tasks {
        task.await.expect("caller");
    }
    calls as f64 / started.elapsed().as_secs_f64()
}

/// A demo upstream child spoken to straight over stdio with the cancelkit `Peer`: the baseline
/// of the throughput rounds. Started once and warmed like the gateway workers.
pub struct Direct {
    handle: PeerHandle,
    _peer: Peer,
    _child: tokio::process::Child,
}

impl Direct {
    /// Starts the upstream, negotiates, and makes `warm_up` calls.
    pub async fn start(warm_up: usize) -> Direct {
        let mut child = tokio::process::Command::new(gateway_binary())
            .arg("demo-upstream")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the demo upstream");
        let peer = Peer::builder(Protocol::Mcp(McpRevision::Negotiated))
            .client_capabilities(json!({}))
            .connect(child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let handle = peer.handle();
        handle
            .discover_or_initialize(
                json!({"name": "bench", "version": "1"}),
                DEFAULT_DISCOVER_TIMEOUT,
            )
            .await
            .expect("negotiate");
        let direct = Direct {
            handle,
            _peer: peer,
            _child: child,
        };
        for _ in 0..warm_up {
            direct_echo(&direct.handle).await;
        }
        direct
    }

    /// `calls` echo calls, `WINDOW` at a time; calls per second.
    pub async fn round(&self, calls: usize) -> f64 {
        let started = Instant::now();
        let next = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..WINDOW {
            let (handle, next) = (self.handle.clone(), Arc::clone(&next));
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= calls {
                        break;
                    }
                    direct_echo(&handle).await;
                }
            }));
        }
        for task in tasks {
            task.await.expect("caller");
        }
        calls as f64 / started.elapsed().as_secs_f64()
    }
}

/// One echo `tools/call` straight to the upstream.
async fn direct_echo(handle: &PeerHandle) {
    let result: Value = handle
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}}),
        )
        .await
        .expect("direct call");
    assert_eq!(result["content"][0]["text"], "x");
}

impl Drop for Direct {
    fn drop(&mut self) {
        self.handle.close();
    }
}

/// What the gateway's resident set says about one in-flight run.
pub struct Memory {
    /// Bytes per open, idle HTTP/1.1 connection (before any run).
    pub per_connection: f64,
    /// Bytes per in-flight run on a connection that was already open.
    pub per_run: f64,
    /// Resident set: at start, with the connections open, with the runs in flight.
    pub rss: [u64; 3],
}

/// Opens `IN_FLIGHT_RUNS` keep-alive connections (one `/health` each), then starts one slow
/// `tools/call` on each: the resident set after each step, against a fresh worker.
pub async fn memory_per_run(token: &str) -> Memory {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let worker = Worker::start("mem", None);
    let address = worker.base.trim_start_matches("http://").to_owned();
    let request = |method: &str, path: &str, body: &str| {
        format!(
            "{method} {path} HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    async fn read_head(stream: &mut tokio::net::TcpStream) {
        let mut seen = Vec::new();
        let mut byte = [0u8; 1024];
        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut byte).await.expect("read");
            assert!(n > 0, "the gateway closed the connection");
            seen.extend_from_slice(&byte[..n]);
        }
    }
    // Warm up, so lazily built state is there before the baseline.
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    for i in 0..50 {
        let _ = http
            .post(worker.url("/rpc"))
            .bearer_auth(token)
            .json(&call(i, "demo-echo", json!({"text": "warm"})))
            .send()
            .await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = worker.rss_bytes();
    let mut streams = Vec::with_capacity(IN_FLIGHT_RUNS);
    for _ in 0..IN_FLIGHT_RUNS {
        let mut stream = tokio::net::TcpStream::connect(&address)
            .await
            .expect("connect");
        stream
            .write_all(request("GET", "/health", "").as_bytes())
            .await
            .expect("write");
        read_head(&mut stream).await;
        streams.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let connected = worker.rss_bytes();
    for (i, stream) in streams.iter_mut().enumerate() {
        let body = call(1_000_000 + i as u64, "demo-sleep", json!({"seconds": 120})).to_string();
        stream
            .write_all(request("POST", "/rpc", &body).as_bytes())
            .await
            .expect("write");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let health: Value = http
            .get(worker.url("/health"))
            .send()
            .await
            .expect("health")
            .json()
            .await
            .expect("health body");
        if health["runs_in_flight"].as_u64() == Some(IN_FLIGHT_RUNS as u64) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "runs did not all start: {health}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let running = worker.rss_bytes();
    drop(streams);
    drop(worker);
    Memory {
        per_connection: connected.saturating_sub(start) as f64 / IN_FLIGHT_RUNS as f64,
        per_run: running.saturating_sub(connected) as f64 / IN_FLIGHT_RUNS as f64,
        rss: [start, connected, running],
    }
}
