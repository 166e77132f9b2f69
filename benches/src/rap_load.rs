//! Load on a RAP tool server with its default settings, over loopback: connection churn from
//! many client addresses, and bearer-token guessing from one address while another client is
//! served. Used at full size by `cargo xtask bench rap` and, smaller, by
//! `tests/tests/rap_load.rs` (which includes this file).
//!
//! Client addresses come from 127.0.0.0/8: on Linux the whole block reaches the loopback
//! interface, so a client socket can be bound to any of them without configuration.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cancelkit::rap::{ToolCall, ToolOutput, ToolServer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};
use tokio::task::JoinSet;

/// The token the load server expects.
pub const TOKEN: &str = "load-test-token";

/// A tool server with the default settings (rate limit, body limit, client key), one `echo`
/// operation, serving on a loopback port with client addresses.
pub async fn start_server() -> (ToolServer, SocketAddr) {
    let server = ToolServer::builder("load")
        .bearer_token(TOKEN)
        .allow_callback_origin("http://127.0.0.1:9")
        .expect("a valid origin")
        .operation(
            "echo",
            "Returns its text",
            json!({"type": "object"}),
            |args: Value, _call: ToolCall| async move {
                Ok(ToolOutput::from(args["text"].as_str().unwrap_or_default()))
            },
        )
        .build();
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("a bound listener");
    let router = server.router();
    tokio::spawn(async move {
        let _ = axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await;
    });
    (server, addr)
}

/// The `n`-th client address: 127.1.0.1, 127.1.0.2, ... (all loopback, never 127.0.0.1).
pub fn client_address(n: usize) -> IpAddr {
    let base = u32::from(Ipv4Addr::new(127, 1, 0, 1));
    IpAddr::V4(Ipv4Addr::from(base + n as u32))
}

/// What [`churn`] saw.
#[derive(Debug, Clone)]
pub struct ChurnReport {
    /// Connections opened (and dropped).
    pub connections: usize,
    /// Of those, how many sent a whole request (with a wrong token) and read its answer.
    pub full_requests: usize,
    /// The answers' statuses that were not 401 (none are expected: every address is new).
    pub unexpected_statuses: Vec<u16>,
    /// How long the churn took.
    pub elapsed: Duration,
    /// The most clients the rate limiter remembered at any sample during the churn.
    pub peak_limiter_clients: usize,
}

/// Opens `connections` connections to `addr`, `concurrency` at a time, each from its own
/// loopback address, and drops each: a quarter right after connecting, a quarter half-way
/// through a request's headers, the rest after a whole `/cancel_tool_call` with a wrong token
/// and its answer. Samples `server`'s limiter size meanwhile.
pub async fn churn(
    server: &ToolServer,
    addr: SocketAddr,
    connections: usize,
    concurrency: usize,
) -> ChurnReport {
    let started = Instant::now();
    let peak = Arc::new(AtomicUsize::new(0));
    let sampler = tokio::spawn({
        let (server, peak) = (server.clone(), peak.clone());
        async move {
            loop {
                peak.fetch_max(server.rate_limited_clients(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    let mut tasks = JoinSet::new();
    let mut full_requests = 0;
    let mut unexpected_statuses = Vec::new();
    let mut collect = |outcome: Option<u16>| {
        if let Some(status) = outcome {
            full_requests += 1;
            if status != 401 {
                unexpected_statuses.push(status);
            }
        }
    };
    for n in 0..connections {
        if tasks.len() >= concurrency
            && let Some(done) = tasks.join_next().await
        {
            collect(done.expect("a churn task"));
        }
        tasks.spawn(one_connection(addr, client_address(n), n % 4));
    }
    while let Some(done) = tasks.join_next().await {
        collect(done.expect("a churn task"));
    }
    sampler.abort();
    peak.fetch_max(server.rate_limited_clients(), Ordering::Relaxed);
    ChurnReport {
        connections,
        full_requests,
        unexpected_statuses,
        elapsed: started.elapsed(),
        peak_limiter_clients: peak.load(Ordering::Relaxed),
    }
}

/// One churn connection from `from`; returns the status if a whole request was sent.
async fn one_connection(addr: SocketAddr, from: IpAddr, style: usize) -> Option<u16> {
    let socket = TcpSocket::new_v4().expect("a socket");
    socket
        .bind(SocketAddr::new(from, 0))
        .unwrap_or_else(|e| panic!("cannot bind a client socket to {from}: {e}"));
    let mut stream = socket
        .connect(addr)
        .await
        .unwrap_or_else(|e| panic!("cannot connect from {from}: {e}"));
    match style {
        0 => None,
        1 => {
            let _ = stream
                .write_all(b"POST /invoke HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Len")
                .await;
            None
        }
        _ => {
            let request = "POST /cancel_tool_call HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                 Authorization: Bearer not-the-token\r\nContent-Type: application/json\r\n\
                 Content-Length: 2\r\n\r\n{}";
            stream
                .write_all(request.as_bytes())
                .await
                .expect("a request sent");
            let mut head = [0u8; 12];
            stream.read_exact(&mut head).await.expect("a status line");
            let status = std::str::from_utf8(&head[9..12])
                .ok()
                .and_then(|s| s.parse().ok())
                .expect("an HTTP status");
            Some(status)
        }
    }
}

/// What [`guess`] saw.
#[derive(Debug, Clone)]
pub struct GuessReport {
    /// Which wrong-token attempt got the first 429 (1-based), if any did.
    pub first_429_attempt: Option<usize>,
    /// How long after the first attempt that was.
    pub time_to_first_429: Option<Duration>,
    /// All wrong-token attempts made.
    pub attempts: usize,
    /// How many of them were answered 401 (got through the limit to the token check).
    pub answered_401: usize,
    /// How many were answered 429.
    pub answered_429: usize,
    /// How long the guessing went on.
    pub guessing_for: Duration,
    /// What a correct token from another address got, each time it was tried while the
    /// guesser was being throttled.
    pub other_address_statuses: Vec<u16>,
}

/// Guesses the token as fast as `workers` connections from 127.0.0.1 allow, for `duration`,
/// while a client on 127.0.0.2 with the right token sends a request every 100 ms once the
/// guesser is throttled.
pub async fn guess(addr: SocketAddr, workers: usize, duration: Duration) -> GuessReport {
    let base = format!("http://{addr}");
    let guesser = reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)))
        .build()
        .expect("a client");
    let honest = reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))
        .build()
        .expect("a client");
    let body = json!({"thread_id": "t", "tool_call_id": "c"}).to_string();
    let attempts = Arc::new(AtomicUsize::new(0));
    let first_429 = Arc::new(std::sync::Mutex::new(None::<(usize, Instant)>));
    let (answered_401, answered_429) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for worker in 0..workers {
        let (guesser, base, body) = (guesser.clone(), base.clone(), body.clone());
        let (attempts, first_429) = (attempts.clone(), first_429.clone());
        let (answered_401, answered_429) = (answered_401.clone(), answered_429.clone());
        tasks.spawn(async move {
            loop {
                if started.elapsed() >= duration {
                    return;
                }
                let attempt = attempts.fetch_add(1, Ordering::Relaxed) + 1;
                let status =
                    cancel_status(&guesser, &base, &format!("guess-{worker}-{attempt}"), &body)
                        .await;
                match status {
                    401 => {
                        answered_401.fetch_add(1, Ordering::Relaxed);
                    }
                    429 => {
                        answered_429.fetch_add(1, Ordering::Relaxed);
                        first_429
                            .lock()
                            .unwrap()
                            .get_or_insert((attempt, Instant::now()));
                    }
                    other => panic!("a wrong token got {other}"),
                }
            }
        });
    }
    let mut other_address_statuses = Vec::new();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if tasks.is_empty() {
            break;
        }
        if first_429.lock().unwrap().is_some() && !tasks.is_empty() {
            let status = cancel_status(&honest, &base, TOKEN, &body).await;
            other_address_statuses.push(status);
        }
        while let Some(done) = tasks.try_join_next() {
            done.expect("a guessing task");
        }
    }
    let guessing_for = started.elapsed();
    let first = *first_429.lock().unwrap();
    GuessReport {
        first_429_attempt: first.map(|(attempt, _)| attempt),
        time_to_first_429: first.map(|(_, at)| at - started),
        attempts: attempts.load(Ordering::Relaxed),
        answered_401: answered_401.load(Ordering::Relaxed),
        answered_429: answered_429.load(Ordering::Relaxed),
        guessing_for,
        other_address_statuses,
    }
}

/// This process's resident set size now and at its peak, in KiB (Linux `/proc/self/status`).
pub fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Tasks alive on the current tokio runtime.
pub fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Waits (up to `patience`) until at most `bound` tasks are alive; returns how many are.
pub async fn settle_tasks(bound: usize, patience: Duration) -> usize {
    let deadline = Instant::now() + patience;
    loop {
        let alive = alive_tasks();
        if alive <= bound || Instant::now() >= deadline {
            return alive;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A request with the right token from 127.0.0.1: the server still serves.
pub async fn healthy(addr: SocketAddr) -> u16 {
    let body = json!({"thread_id": "t", "tool_call_id": "c"}).to_string();
    cancel_status(
        &reqwest::Client::new(),
        &format!("http://{addr}"),
        TOKEN,
        &body,
    )
    .await
}

/// The status of one `POST {base}/cancel_tool_call` with `token`.
async fn cancel_status(client: &reqwest::Client, base: &str, token: &str, body: &str) -> u16 {
    client
        .post(format!("{base}/cancel_tool_call"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .expect("an answer")
        .status()
        .as_u16()
}
