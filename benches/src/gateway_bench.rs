//! `cargo xtask bench gateway`: the cancellation gateway (release build) in real processes on
//! loopback, with its bundled demo upstream (a stdio child) and a real `redis-server`.
//!
//! 1. API cancel → upstream tool stopped, same worker: from the moment the bench sends
//!    `POST /cancellation/cancel` to the moment the demo upstream's `sleep` is dropped (its
//!    stderr line carries the wall-clock time; same machine, same clock), p50 / p99;
//! 2. the same across workers: the run on worker A, the cancel sent to worker B, which finds
//!    the run in Redis and publishes the cancel; next to it, in the same run and interleaved
//!    round by round, a raw Redis `PUBLISH` → subscriber round trip (the floor any cross-worker
//!    cancel pays). Goal: cross-worker ≤ 2 × that round trip + the same-worker figure;
//! 3. `tools/call` (echo) throughput through the gateway's `/rpc` (a worker with Redis, and
//!    one alone) against calling the same upstream directly over stdio with the cancelkit
//!    `Peer`, 32 calls in flight for all, rounds interleaved (the overhead ratio: HTTP, auth,
//!    the run registry and its Redis records, the extra hop);
//! 4. memory: the gateway's resident set with 2,000 idle keep-alive connections open against
//!    before (per connection), then with a slow call in flight on each of them (per run, on
//!    top of its connection); the upstream's own memory is not counted.
//!
//! Prints a table and saves `target/bench/gateway.json`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cancelkit::peer::{DEFAULT_DISCOVER_TIMEOUT, McpRevision, Peer, Protocol};
use cancelkit_gateway::auth::Verifier;
use cancelkit_tests::redis::RedisServer;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::report::{Row, print_table, save_json};

const SECRET: &str = "cancelkit-gateway-bench-secret-0123456789";
const CANCEL_ROUNDS: usize = 200;
const RAW_ROUNDS: usize = 200;
const THROUGHPUT_CALLS: usize = 10_000;
const THROUGHPUT_ROUNDS: usize = 3;
const WINDOW: usize = 32;
const IN_FLIGHT_RUNS: usize = 2_000;

fn gateway_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the bench binary's path");
    let path = exe.with_file_name("cancelkit-gateway");
    assert!(
        path.exists(),
        "{} is missing: `cargo xtask bench gateway` builds it first",
        path.display()
    );
    path
}

fn unix_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0)
}

/// A gateway process whose stderr is collected.
struct Worker {
    child: Child,
    base: String,
    stderr: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Worker {
    fn start(name: &str, redis: Option<&str>) -> Worker {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("gateway.toml");
        std::fs::write(
            &config,
            "listen = \"127.0.0.1:0\"\n[limits]\nmax_runs = 20000\n[[upstream]]\nname = \"demo\"\ncommand = \"@self\"\nargs = [\"demo-upstream\"]\n",
        )
        .expect("write the config");
        let mut command = Command::new(gateway_binary());
        command
            .arg("--config")
            .arg(&config)
            .args(["--worker-id", name])
            .env("JWT_SECRET_KEY", SECRET)
            .env("RUST_LOG", "warn")
            .env_remove("MCPGATEWAY_TOOL_CANCELLATION_ENABLED")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match redis {
            Some(url) => command.env("REDIS_URL", url),
            None => command.env_remove("REDIS_URL"),
        };
        let mut child = command.spawn().expect("start the gateway");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let lines = Arc::clone(&stderr);
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let mut base = None;
        for line in stdout.lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("listening on ") {
                base = rest.split_whitespace().next().map(str::to_owned);
                break;
            }
        }
        Worker {
            child,
            base: base.expect("the gateway printed its address"),
            stderr,
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn cancelled_lines(&self) -> usize {
        self.stderr
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("demo-upstream: cancelled"))
            .count()
    }

    fn started_lines(&self) -> usize {
        self.stderr
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("demo-upstream: started"))
            .count()
    }

    /// Waits for the `n`th stop line and returns its wall-clock time.
    async fn stop_time(&self, n: usize) -> u128 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let found = {
                let lines = self.stderr.lock().unwrap();
                lines
                    .iter()
                    .filter(|l| l.contains("demo-upstream: cancelled"))
                    .nth(n - 1)
                    .and_then(|l| {
                        l.split("[unix_us=")
                            .nth(1)?
                            .trim_end_matches(']')
                            .parse()
                            .ok()
                    })
            };
            if let Some(t) = found {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "the upstream did not stop within 10 s"
            );
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }

    async fn wait_started(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.started_lines() < n {
            assert!(
                Instant::now() < deadline,
                "the upstream did not start the call"
            );
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }

    fn rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .unwrap_or(0)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percentiles(mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
}

/// One cancel: a slow call on `runs_on`, the API cancel sent to `cancel_via`; returns the
/// microseconds from sending the cancel to the upstream's stop.
async fn one_cancel(
    http: &reqwest::Client,
    token: &str,
    id: u64,
    runs_on: &Worker,
    cancel_via: &Worker,
) -> f64 {
    let started = runs_on.started_lines();
    let stopped = runs_on.cancelled_lines();
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

async fn raw_publish_round_trip(url: &str, rounds: usize) -> Vec<f64> {
    let client = redis::Client::open(url).expect("redis url");
    let mut publisher = client
        .get_multiplexed_async_connection()
        .await
        .expect("publisher");
    let mut subscriber = client.get_async_pubsub().await.expect("subscriber");
    subscriber.subscribe("bench:raw").await.expect("subscribe");
    let mut messages = subscriber.on_message();
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let sent = Instant::now();
        let _: i64 = redis::cmd("PUBLISH")
            .arg("bench:raw")
            .arg(i)
            .query_async(&mut publisher)
            .await
            .expect("publish");
        let _ = tokio::time::timeout(Duration::from_secs(5), messages.next())
            .await
            .expect("the message arrives");
        samples.push(sent.elapsed().as_secs_f64() * 1e6);
    }
    samples
}

/// `calls` echo calls through the gateway's `/rpc`, `WINDOW` at a time; calls per second.
async fn through_gateway(
    http: &reqwest::Client,
    token: &str,
    worker: &Worker,
    calls: usize,
) -> f64 {
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
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
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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

/// The same calls straight to a demo upstream child over stdio, with the cancelkit `Peer`.
async fn direct(calls: usize) -> f64 {
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
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..WINDOW {
        let (handle, next) = (handle.clone(), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= calls {
                    break;
                }
                let result: Value = handle
                    .request(
                        "tools/call",
                        json!({"name": "echo", "arguments": {"text": "x"}}),
                    )
                    .await
                    .expect("direct call");
                assert_eq!(result["content"][0]["text"], "x");
            }
        }));
    }
    for task in tasks {
        task.await.expect("caller");
    }
    let rate = calls as f64 / started.elapsed().as_secs_f64();
    handle.close();
    rate
}

/// What the gateway's resident set says about one in-flight run.
struct Memory {
    /// Bytes per open, idle HTTP/1.1 connection (before any run).
    per_connection: f64,
    /// Bytes per in-flight run on a connection that was already open.
    per_run: f64,
    /// Resident set: at start, with the connections open, with the runs in flight.
    rss: [u64; 3],
}

/// Opens `IN_FLIGHT_RUNS` keep-alive connections (one `/health` each), then starts one slow
/// `tools/call` on each: the resident set after each step, against a fresh worker.
async fn memory_per_run(token: &str) -> Memory {
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

/// Runs the benchmark.
pub fn run() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let redis = RedisServer::start();
        let a = Worker::start("a", Some(&redis.url()));
        let b = Worker::start("b", Some(&redis.url()));
        let token = Verifier::new(SECRET, Default::default()).mint("admin", Duration::from_secs(3600));
        let http = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(4096)
            .build()
            .expect("client");
        // Warm both workers and their upstreams.
        for worker in [&a, &b] {
            for i in 0..20 {
                let _ = http
                    .post(worker.url("/rpc"))
                    .bearer_auth(&token)
                    .json(&call(i, "demo-echo", json!({"text": "warm"})))
                    .send()
                    .await;
            }
        }

        println!("gateway bench: {CANCEL_ROUNDS} same-worker cancels, {CANCEL_ROUNDS} cross-worker cancels and {RAW_ROUNDS} raw PUBLISH round trips, interleaved");
        let (mut same, mut cross, mut raw) = (Vec::new(), Vec::new(), Vec::new());
        let mut id = 10_000u64;
        for round in 0..CANCEL_ROUNDS {
            id += 1;
            same.push(one_cancel(&http, &token, id, &a, &a).await);
            id += 1;
            cross.push(one_cancel(&http, &token, id, &a, &b).await);
            if round < RAW_ROUNDS {
                raw.extend(raw_publish_round_trip(&redis.url(), 1).await);
            }
        }
        let (same_p50, same_p99) = percentiles(same);
        let (cross_p50, cross_p99) = percentiles(cross);
        let (raw_p50, raw_p99) = percentiles(raw);
        let goal_p50 = 2.0 * raw_p50 + same_p50;
        let goal_p99 = 2.0 * raw_p99 + same_p99;

        println!("throughput: {THROUGHPUT_ROUNDS} rounds of {THROUGHPUT_CALLS} echo calls each way, interleaved");
        let solo = Worker::start("solo", None);
        for i in 0..20 {
            let _ = http
                .post(solo.url("/rpc"))
                .bearer_auth(&token)
                .json(&call(i, "demo-echo", json!({"text": "warm"})))
                .send()
                .await;
        }
        let (mut via, mut via_solo, mut straight) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..THROUGHPUT_ROUNDS {
            via.push(through_gateway(&http, &token, &a, THROUGHPUT_CALLS).await);
            via_solo.push(through_gateway(&http, &token, &solo, THROUGHPUT_CALLS).await);
            straight.push(direct(THROUGHPUT_CALLS).await);
        }
        drop(solo);
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (via, via_solo, straight) = (median(via), median(via_solo), median(straight));

        println!("memory: {IN_FLIGHT_RUNS} slow calls in flight on a fresh worker");
        let memory = memory_per_run(&token).await;
        let mib = |b: u64| b as f64 / 1048576.0;

        let rows = vec![
            Row {
                name: "API cancel → upstream stopped, same worker, p50 / p99 µs".into(),
                cells: vec![format!("{same_p50:.0} / {same_p99:.0}"), String::new()],
            },
            Row {
                name: "API cancel → upstream stopped, across workers (Redis), p50 / p99 µs".into(),
                cells: vec![
                    format!("{cross_p50:.0} / {cross_p99:.0}"),
                    format!(
                        "goal ≤ {goal_p50:.0} / {goal_p99:.0}: {}",
                        if cross_p50 <= goal_p50 && cross_p99 <= goal_p99 { "met" } else { "MISSED" }
                    ),
                ],
            },
            Row {
                name: "raw Redis PUBLISH → subscriber, p50 / p99 µs".into(),
                cells: vec![format!("{raw_p50:.0} / {raw_p99:.0}"), String::new()],
            },
            Row {
                name: "tools/call (echo) through the gateway /rpc, with Redis, calls/s".into(),
                cells: vec![format!("{via:.0}"), format!("{:.2}× of direct", via / straight)],
            },
            Row {
                name: "tools/call (echo) through the gateway /rpc, one worker alone, calls/s".into(),
                cells: vec![format!("{via_solo:.0}"), format!("{:.2}× of direct", via_solo / straight)],
            },
            Row {
                name: "tools/call (echo) straight to the upstream over stdio, calls/s".into(),
                cells: vec![format!("{straight:.0}"), String::new()],
            },
            Row {
                name: "gateway resident memory per open idle HTTP/1.1 connection, bytes".into(),
                cells: vec![
                    format!("{:.0}", memory.per_connection),
                    format!("{:.1} → {:.1} MiB for {IN_FLIGHT_RUNS}", mib(memory.rss[0]), mib(memory.rss[1])),
                ],
            },
            Row {
                name: "gateway resident memory per in-flight run (on an open connection), bytes".into(),
                cells: vec![
                    format!("{:.0}", memory.per_run),
                    format!("{:.1} → {:.1} MiB for {IN_FLIGHT_RUNS}", mib(memory.rss[1]), mib(memory.rss[2])),
                ],
            },
        ];
        print_table("cancelkit-gateway (release, loopback, demo upstream on stdio)", &["measure", "value", "note"], &rows);
        save_json(
            "gateway",
            &json!({
                "same_worker_cancel_us": {"p50": same_p50, "p99": same_p99},
                "cross_worker_cancel_us": {"p50": cross_p50, "p99": cross_p99},
                "raw_publish_round_trip_us": {"p50": raw_p50, "p99": raw_p99},
                "cross_worker_goal_us": {"p50": goal_p50, "p99": goal_p99},
                "throughput_calls_per_s": {"gateway_rpc_redis": via, "gateway_rpc_alone": via_solo, "direct_stdio": straight, "ratio_redis": via / straight, "ratio_alone": via_solo / straight},
                "memory_per_idle_connection_bytes": memory.per_connection,
                "memory_per_in_flight_run_bytes": memory.per_run,
                "rss_bytes": {"start": memory.rss[0], "connections_open": memory.rss[1], "runs_in_flight": memory.rss[2], "count": IN_FLIGHT_RUNS},
            }),
        );
        drop((a, b));
    });
}
