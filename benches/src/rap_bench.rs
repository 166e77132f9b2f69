//! `cargo xtask bench rap`: fanning a `/cancel_tool_call` out to 100 tool servers, 10 of which
//! accept the connection and never answer. cancelkit's [`Notifier`](cancelkit::rap::Notifier)
//! against a sequential notifier that awaits each server in turn (as the reference RAP runtime
//! does), same servers, same client settings, same run.
//!
//! Then the tool server under load with its default settings (the full-size runs of
//! `tests/tests/rap_load.rs`): connection churn from many loopback addresses, and token
//! guessing from one address while another client is served. Unix only, like `rap`.

#[cfg(unix)]
pub use unix::run;

#[cfg(unix)]
#[path = "rap_load.rs"]
mod load;

/// The RAP benchmark needs the `rap` module, which is Unix only.
#[cfg(not(unix))]
pub fn run() {
    eprintln!("the rap benchmark runs on Unix only, like cancelkit's rap module");
}

#[cfg(unix)]
mod unix {
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use axum::routing::post;
    use cancelkit::rap::{Notifier, ToolServerTarget};
    use serde_json::json;
    use tokio::net::TcpListener;

    use crate::report::{Row, print_table, save_json};

    use super::load;

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
        fan_out();
        tool_server_load();
    }

    /// The runtime both RAP benchmarks run on: two worker threads, one per core.
    fn two_workers() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime")
    }

    fn fan_out() {
        two_workers().block_on(async {
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

    /// Connections for the churn run (half of them send a refused request, each from its own
    /// address).
    const CHURN_CONNECTIONS: usize = 50_000;
    const CHURN_CONCURRENCY: usize = 64;
    const GUESS_WORKERS: usize = 8;
    const GUESS_FOR: Duration = Duration::from_secs(10);

    fn tool_server_load() {
        two_workers().block_on(async {
        let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);

        let (server, addr) = load::start_server().await;
        assert_eq!(load::healthy(addr).await, 200, "the server serves");
        let tasks_before = load::settle_tasks(0, Duration::from_millis(200)).await;
        let (rss_before, _) = load::rss_kib();
        let churn = load::churn(&server, addr, CHURN_CONNECTIONS, CHURN_CONCURRENCY).await;
        let (rss_after_churn, peak_after_churn) = load::rss_kib();
        let tasks_after = load::settle_tasks(tasks_before + 2, Duration::from_secs(10)).await;
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let served_after = load::healthy(addr).await;
        let swept_to = server.rate_limited_clients();
        println!(
            "\nRAP tool server under load (default settings, 2 worker threads, server and clients in one process)"
        );
        let rows = vec![
            Row {
                name: format!(
                    "{} connections opened and dropped, {CHURN_CONCURRENCY} at a time",
                    churn.connections
                ),
                cells: vec![ms(churn.elapsed), "-".into()],
            },
            Row {
                name: "wrong-token requests among them (one address each)".into(),
                cells: vec![
                    format!(
                        "{} ({} not 401)",
                        churn.full_requests,
                        churn.unexpected_statuses.len()
                    ),
                    "all 401".into(),
                ],
            },
            Row {
                name: "rate limiter: most clients remembered during the churn".into(),
                cells: vec![churn.peak_limiter_clients.to_string(), "<= 2048".into()],
            },
            Row {
                name: "rate limiter: clients remembered 1 s later, after one request".into(),
                cells: vec![swept_to.to_string(), "<= 2".into()],
            },
            Row {
                name: "tokio tasks alive before / after the churn".into(),
                cells: vec![format!("{tasks_before} / {tasks_after}"), "no growth".into()],
            },
            Row {
                name: "a request with the right token afterwards".into(),
                cells: vec![served_after.to_string(), "200".into()],
            },
            Row {
                name: "process RSS before / after the churn (peak)".into(),
                cells: vec![
                    format!(
                        "{} / {} ({})",
                        mib(rss_before),
                        mib(rss_after_churn),
                        mib(peak_after_churn)
                    ),
                    "-".into(),
                ],
            },
        ];
        print_table(
            "connection churn from many loopback addresses",
            &["measure", "value", "bound"],
            &rows,
        );

        let guess = load::guess(addr, GUESS_WORKERS, GUESS_FOR).await;
        let (_, peak) = load::rss_kib();
        let admitted_bound = 100.0 + 50.0 * guess.guessing_for.as_secs_f64();
        let rows = vec![
            Row {
                name: "first 429 at wrong-token attempt".into(),
                cells: vec![
                    guess
                        .first_429_attempt
                        .map_or("never".into(), |n| n.to_string()),
                    "<= 300".into(),
                ],
            },
            Row {
                name: "time to the first 429".into(),
                cells: vec![
                    guess.time_to_first_429.map_or("never".into(), ms),
                    "-".into(),
                ],
            },
            Row {
                name: format!(
                    "wrong tokens tried in {:.1} s / reaching the token check (401)",
                    guess.guessing_for.as_secs_f64()
                ),
                cells: vec![
                    format!("{} / {}", guess.attempts, guess.answered_401),
                    format!("401s <= ~{admitted_bound:.0}"),
                ],
            },
            Row {
                name: "right token from 127.0.0.2 meanwhile: answers 200 / tries".into(),
                cells: vec![
                    format!(
                        "{} / {}",
                        guess
                            .other_address_statuses
                            .iter()
                            .filter(|&&s| s == 200)
                            .count(),
                        guess.other_address_statuses.len()
                    ),
                    "all".into(),
                ],
            },
            Row {
                name: "process peak RSS after both runs".into(),
                cells: vec![mib(peak), "-".into()],
            },
        ];
        print_table(
            &format!(
                "token guessing from 127.0.0.1 at full speed ({GUESS_WORKERS} connections)"
            ),
            &["measure", "value", "bound"],
            &rows,
        );
        save_json(
            "rap_load",
            &json!({
                "churn": {
                    "connections": CHURN_CONNECTIONS,
                    "concurrency": CHURN_CONCURRENCY,
                    "wrong_token_requests": churn.full_requests,
                    "unexpected_statuses": churn.unexpected_statuses,
                    "elapsed_ms": churn.elapsed.as_secs_f64() * 1e3,
                    "peak_limiter_clients": churn.peak_limiter_clients,
                    "limiter_clients_after_sweep": swept_to,
                    "tasks_before": tasks_before,
                    "tasks_after": tasks_after,
                    "served_after": served_after,
                    "rss_kib_before": rss_before,
                    "rss_kib_after": rss_after_churn,
                    "peak_rss_kib_after_churn": peak_after_churn,
                },
                "guessing": {
                    "workers": GUESS_WORKERS,
                    "seconds": guess.guessing_for.as_secs_f64(),
                    "first_429_attempt": guess.first_429_attempt,
                    "time_to_first_429_ms": guess.time_to_first_429.map(|d| d.as_secs_f64() * 1e3),
                    "attempts": guess.attempts,
                    "answered_401": guess.answered_401,
                    "answered_429": guess.answered_429,
                    "other_address_statuses": guess.other_address_statuses,
                },
                "peak_rss_kib": peak,
            }),
        );
        let failed = [
            (!churn.unexpected_statuses.is_empty(), "a churn request was not answered 401"),
            (churn.peak_limiter_clients > 2048, "the rate limiter grew past its bound"),
            (swept_to > 2, "the rate limiter was not swept"),
            (tasks_after > tasks_before + 2, "connection tasks were left behind"),
            (served_after != 200, "the server stopped serving"),
            (
                guess.first_429_attempt.is_none_or(|n| n > 300),
                "token guessing was not throttled within 300 attempts",
            ),
            (
                guess.answered_401 as f64 > admitted_bound * 1.2 + 10.0,
                "too many guesses reached the token check",
            ),
            (
                guess.other_address_statuses.is_empty()
                    || guess.other_address_statuses.iter().any(|&s| s != 200),
                "the client on another address was not served",
            ),
        ];
        for (bad, what) in failed {
            if bad {
                eprintln!("RAP load: {what}");
                std::process::exit(1);
            }
        }
    });
    }
}
