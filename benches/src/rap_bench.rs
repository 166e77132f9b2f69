//! `cargo xtask bench rap`: fanning a `/cancel_tool_call` out to 100 tool servers, 10 of which
//! accept the connection and never answer. cancelkit's [`Notifier`] against a sequential
//! notifier that awaits each server in turn (as the reference RAP runtime does), same servers,
//! same client settings, same run.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::routing::post;
use cancelkit::rap::{Notifier, ToolServerTarget};
use serde_json::json;
use tokio::net::TcpListener;

use crate::report::{Row, print_table, save_json};

const SERVERS: usize = 100;
const SILENT: usize = 10;
const TIMEOUT: Duration = Duration::from_millis(500);
const OUR_ROUNDS: usize = 5;

/// One live server's record of the notifications it received.
#[derive(Clone, Default)]
struct Arrivals(Arc<Mutex<Vec<Instant>>>);

async fn live_server(arrivals: Arrivals) -> String {
    let router = axum::Router::new().route(
        "/cancel_tool_call",
        post(move || {
            let arrivals = arrivals.clone();
            async move {
                arrivals.0.lock().unwrap().push(Instant::now());
            }
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await;
    });
    format!("http://{addr}")
}

async fn silent_server(connections: Arc<AtomicUsize>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            connections.fetch_add(1, Ordering::Relaxed);
            held.push(socket); // accepted, never read, never answered
        }
    });
    format!("http://{addr}")
}

/// The reference runtime's loop: one `.await` per server, in order.
async fn notify_sequentially(
    http: &reqwest::Client,
    servers: &[ToolServerTarget],
    thread: &str,
    call: &str,
) {
    let body = json!({"thread_id": thread, "tool_call_id": call});
    for server in servers {
        let url = format!("{}/cancel_tool_call", server.base_url);
        let _ = http.post(url).json(&body).send().await;
    }
}

/// Waits until every live server has `n` arrivals; returns when the last of the n-th arrived.
async fn all_notified(live: &[Arrivals], n: usize) -> Instant {
    loop {
        let lasts: Option<Vec<Instant>> = live
            .iter()
            .map(|a| a.0.lock().unwrap().get(n - 1).copied())
            .collect();
        if let Some(lasts) = lasts {
            return lasts.into_iter().max().expect("live servers");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

pub fn run() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let connections = Arc::new(AtomicUsize::new(0));
        let mut live = Vec::new();
        let mut servers = Vec::new();
        for i in 0..SERVERS {
            // The silent servers are spread out, as they would be in a real configuration.
            if i % (SERVERS / SILENT) == SERVERS / SILENT / 2 {
                servers.push(ToolServerTarget::new(silent_server(connections.clone()).await));
            } else {
                let arrivals = Arrivals::default();
                servers.push(ToolServerTarget::new(live_server(arrivals.clone()).await));
                live.push(arrivals);
            }
        }
        println!(
            "RAP fan-out: {SERVERS} tool servers on loopback, {SILENT} of them never answer; per-request timeout {TIMEOUT:?}"
        );

        let notifier = Notifier::new(servers.clone(), TIMEOUT);
        let (mut returns, mut everyone) = (Vec::new(), Vec::new());
        for round in 1..=OUR_ROUNDS {
            let start = Instant::now();
            let handle = notifier.notify("thread_1", &format!("call_{round}"));
            returns.push(start.elapsed());
            everyone.push(all_notified(&live, round).await - start);
            let _ = handle.outcomes().await;
        }
        returns.sort();
        everyone.sort();
        let ours = (returns[OUR_ROUNDS / 2], everyone[OUR_ROUNDS / 2]);

        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(TIMEOUT)
            .build()
            .expect("a client");
        let start = Instant::now();
        notify_sequentially(&http, &servers, "thread_1", "call_sequential").await;
        let sequential_returns = start.elapsed();
        let sequential_everyone = all_notified(&live, OUR_ROUNDS + 1).await - start;

        let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
        let rows = vec![
            Row {
                name: "cancelkit Notifier (concurrent, never waits)".into(),
                cells: vec![ms(ours.0), ms(ours.1)],
            },
            Row {
                name: "sequential notifier (one .await per server)".into(),
                cells: vec![ms(sequential_returns), ms(sequential_everyone)],
            },
            Row {
                name: "sequential / cancelkit".into(),
                cells: vec![
                    format!("{:.0}x", sequential_returns.as_secs_f64() / ours.0.as_secs_f64()),
                    format!("{:.1}x", sequential_everyone.as_secs_f64() / ours.1.as_secs_f64()),
                ],
            },
        ];
        print_table(
            &format!("median of {OUR_ROUNDS} rounds for cancelkit, one round for the sequential notifier"),
            &["notifier", "notify() returns after", "all 90 live servers notified after"],
            &rows,
        );
        save_json(
            "rap",
            &json!({
                "servers": SERVERS, "silent": SILENT, "timeout_ms": TIMEOUT.as_millis() as u64,
                "cancelkit": {"returns_us": ours.0.as_secs_f64() * 1e6, "all_live_notified_ms": ours.1.as_secs_f64() * 1e3},
                "sequential": {"returns_ms": sequential_returns.as_secs_f64() * 1e3, "all_live_notified_ms": sequential_everyone.as_secs_f64() * 1e3},
            }),
        );
    });
}
