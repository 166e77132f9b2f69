//! Fanning one `/cancel_tool_call` out to 100 tool servers, 10 of which accept the connection
//! and never answer: cancelkit's [`Notifier`] against the sequential notifier of the reference
//! runtime and a concurrent `join_all` notifier, interleaved round by round.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::routing::post;
use cancelkit::rap::{Notifier, ToolServerTarget};
use futures_util::future::join_all;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::report::{Cdf, Report, Spread, Table, number};

const SERVERS: usize = 100;
const SILENT: usize = 10;
const LIVE: usize = SERVERS - SILENT;
const TIMEOUT: Duration = Duration::from_millis(500);
/// A multiple of the three notifiers, so each runs first, second and third equally often.
const ROUNDS: usize = 6;
const THREAD: &str = "thread_1";

/// The notifiers compared, in the order of the tables.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ours,
    Sequential,
    JoinAll,
}

const KINDS: [Kind; 3] = [Kind::Ours, Kind::Sequential, Kind::JoinAll];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Ours => "cancelkit Notifier",
            Kind::Sequential => "sequential (one .await per server)",
            Kind::JoinAll => "concurrent join_all",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Kind::Ours => "cancelkit",
            Kind::Sequential => "sequential",
            Kind::JoinAll => "join_all",
        }
    }
}

/// When the live servers received each notification, by its `tool_call_id`.
#[derive(Clone, Default)]
struct Arrivals(Arc<Mutex<HashMap<String, Vec<Instant>>>>);

impl Arrivals {
    fn record(&self, body: &[u8]) {
        let at = Instant::now();
        let call = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v["tool_call_id"].as_str().map(str::to_owned))
            .unwrap_or_default();
        self.0.lock().unwrap().entry(call).or_default().push(at);
    }

    /// The arrivals of `call` at all [`LIVE`] servers (waiting a little for stragglers).
    async fn take(&self, call: &str) -> Vec<Instant> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let count = self.0.lock().unwrap().get(call).map_or(0, Vec::len);
            if count >= LIVE {
                return self.0.lock().unwrap().remove(call).unwrap_or_default();
            }
            assert!(
                Instant::now() < deadline,
                "only {count} of {LIVE} live servers received {call}"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

async fn live_server(arrivals: Arrivals) -> String {
    let router = axum::Router::new().route(
        "/cancel_tool_call",
        post(move |body: Bytes| {
            arrivals.record(&body);
            async {}
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

/// A client for a baseline, with the timeouts the [`Notifier`] gives its own.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(TIMEOUT)
        .connect_timeout(TIMEOUT)
        .build()
        .expect("a client")
}

fn cancellation(call: &str) -> Value {
    json!({"thread_id": THREAD, "tool_call_id": call})
}

fn answered(result: &reqwest::Result<reqwest::Response>) -> bool {
    result.as_ref().is_ok_and(|r| r.status().is_success())
}

/// The reference runtime's loop: one `.await` per server, in order. Returns how many answered.
async fn notify_sequentially(
    http: &reqwest::Client,
    servers: &[ToolServerTarget],
    call: &str,
) -> usize {
    let body = cancellation(call);
    let mut count = 0;
    for server in servers {
        let url = format!("{}/cancel_tool_call", server.base_url);
        count += usize::from(answered(&http.post(url).json(&body).send().await));
    }
    count
}

/// What a careful user writes: every request at once, awaited together. Returns how many
/// answered.
async fn notify_concurrently(
    http: &reqwest::Client,
    servers: &[ToolServerTarget],
    call: &str,
) -> usize {
    let body = cancellation(call);
    let requests = servers.iter().map(|server| {
        let url = format!("{}/cancel_tool_call", server.base_url);
        http.post(url).json(&body).send()
    });
    join_all(requests)
        .await
        .iter()
        .filter(|r| answered(r))
        .count()
}

/// The three notifiers and what they notify.
struct Stacks {
    servers: Vec<ToolServerTarget>,
    arrivals: Arrivals,
    ours: Notifier,
    sequential: reqwest::Client,
    join_all: reqwest::Client,
}

/// One notifier's round.
struct Sample {
    /// From calling the notifier to getting control back.
    returned: Duration,
    /// From calling the notifier to the last live server's arrival.
    all_live: Duration,
    /// From calling the notifier to every request finished (answered or timed out).
    finished: Duration,
    /// Servers that answered 2xx.
    answered: usize,
    /// Each live server's arrival after the call, in milliseconds.
    arrivals_ms: Vec<f64>,
}

/// Notifies every server of `call` with `kind`; returns once all its requests are finished.
async fn one_round(stacks: &Stacks, kind: Kind, call: &str) -> Sample {
    let start = Instant::now();
    let (returned, answered) = match kind {
        Kind::Ours => {
            let handle = stacks.ours.notify(THREAD, call);
            let returned = start.elapsed();
            let outcomes = handle.outcomes().await;
            let answered = outcomes
                .iter()
                .filter(|d| d.outcome.as_ref().is_ok_and(|s| (200..300).contains(s)))
                .count();
            (returned, answered)
        }
        Kind::Sequential => {
            let answered = notify_sequentially(&stacks.sequential, &stacks.servers, call).await;
            (start.elapsed(), answered)
        }
        Kind::JoinAll => {
            let answered = notify_concurrently(&stacks.join_all, &stacks.servers, call).await;
            (start.elapsed(), answered)
        }
    };
    let finished = start.elapsed();
    let arrivals = stacks.arrivals.take(call).await;
    let all_live = arrivals
        .iter()
        .max()
        .expect("live servers")
        .duration_since(start);
    Sample {
        returned,
        all_live,
        finished,
        answered,
        arrivals_ms: arrivals
            .iter()
            .map(|at| at.duration_since(start).as_secs_f64() * 1e3)
            .collect(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `baseline / cancelkit`, without decimals once it is large.
fn times(ratio: f64) -> String {
    if ratio >= 100.0 {
        format!("{}×", number(ratio, 0))
    } else {
        format!("{ratio:.2}×")
    }
}

/// Runs the fan-out comparison and writes `target/bench/rap.json` (and its plot).
pub async fn run() {
    let connections = Arc::new(AtomicUsize::new(0));
    let arrivals = Arrivals::default();
    let mut servers = Vec::new();
    for i in 0..SERVERS {
        // The silent servers are spread out, as they would be in a real configuration.
        if i % (SERVERS / SILENT) == SERVERS / SILENT / 2 {
            servers.push(ToolServerTarget::new(
                silent_server(connections.clone()).await,
            ));
        } else {
            servers.push(ToolServerTarget::new(live_server(arrivals.clone()).await));
        }
    }
    let stacks = Stacks {
        ours: Notifier::new(servers.clone(), TIMEOUT),
        servers,
        arrivals,
        sequential: client(),
        join_all: client(),
    };
    println!(
        "RAP fan-out: {SERVERS} tool servers, {SILENT} silent; 1 warm-up round and {ROUNDS} rounds per notifier, interleaved"
    );
    for kind in KINDS {
        one_round(&stacks, kind, &format!("warmup-{}", kind.key())).await;
    }
    let mut samples: [Vec<Sample>; 3] = Default::default();
    for round in 0..ROUNDS {
        for k in 0..KINDS.len() {
            let i = (round + k) % KINDS.len();
            let kind = KINDS[i];
            let call = format!("{}-{round}", kind.key());
            samples[i].push(one_round(&stacks, kind, &call).await);
        }
    }
    report(&samples, connections.load(Ordering::Relaxed)).finish();
}

fn report(samples: &[Vec<Sample>; 3], silent_connections: usize) -> Report {
    let mut report = Report::new(
        "rap",
        format!(
            "Fanning one RAP `/cancel_tool_call` out to {SERVERS} tool servers on loopback (axum, \
             HTTP/1.1), {SILENT} of which accept the connection and never answer; every request \
             has a {} ms timeout and a {} ms connect timeout. cancelkit's `Notifier` against two \
             baselines: the sequential notifier of the reference runtime (one `.await` per \
             server, in order) and the concurrent notifier a careful user would write (`join_all` \
             over every request, on one shared reqwest client with the same timeouts). Each \
             notifier has its own HTTP client and one un-measured warm-up round, so all have warm \
             connection pools; then {ROUNDS} rounds, each running the three in turn (the order \
             rotated every round), each waiting until all of its requests finished (answered or \
             timed out) before the next starts. One tokio multi-thread runtime with 2 worker \
             threads runs the servers and the notifiers. Figures are the median (min–max) of the \
             {ROUNDS} rounds; ratios are taken on the medians.",
            TIMEOUT.as_millis(),
            TIMEOUT.as_millis()
        ),
    );
    let spread = |i: usize, f: &dyn Fn(&Sample) -> f64| {
        Spread::of(&samples[i].iter().map(f).collect::<Vec<_>>())
    };
    let returned: Vec<Spread> = (0..3).map(|i| spread(i, &|s| ms(s.returned))).collect();
    let all_live: Vec<Spread> = (0..3).map(|i| spread(i, &|s| ms(s.all_live))).collect();
    let finished: Vec<Spread> = (0..3).map(|i| spread(i, &|s| ms(s.finished))).collect();

    let mut table = Table::new(
        format!("RAP fan-out to {SERVERS} servers ({SILENT} silent), ms, {ROUNDS} rounds"),
        &[
            "notifier",
            "notify returns",
            &format!("all {LIVE} live servers notified"),
            "every request finished",
        ],
    );
    for (i, kind) in KINDS.iter().enumerate() {
        table.row(vec![
            kind.name().to_owned(),
            returned[i].show(3),
            all_live[i].show(2),
            finished[i].show(1),
        ]);
    }
    table.note(
        "cancelkit's notify() returns at once: it spawns one task per server and hands back a \
         handle, so the fan-out goes on in the background. The baselines return when their last \
         request finished. For cancelkit, \"every request finished\" is when the handle's \
         outcomes() resolved.",
    );
    table.note(format!(
        "The silent servers hold every connection they accept ({silent_connections} over the run); \
         each notifier waits out the {} ms timeout on them in every round.",
        TIMEOUT.as_millis()
    ));
    report.tables.push(table);

    let mut ratios = Table::new(
        "baseline / cancelkit, on the medians",
        &[
            "baseline",
            "notify returns",
            &format!("all {LIVE} live servers notified"),
            "every request finished",
        ],
    );
    for i in 1..3 {
        ratios.row(vec![
            KINDS[i].name().to_owned(),
            times(returned[i].median / returned[0].median),
            times(all_live[i].median / all_live[0].median),
            times(finished[i].median / finished[0].median),
        ]);
    }
    ratios.note(
        "Above 1× cancelkit is faster. The first column compares returning at once with waiting \
         for the requests; the second is the one that says how soon the servers hear of the \
         cancellation.",
    );
    for i in 1..3 {
        if all_live[i].median < all_live[0].median {
            ratios.note(format!(
                "The {} notifier reached all {LIVE} live servers sooner than cancelkit's: {} ms \
                 against {} ms (medians). It sends every request from one task; the Notifier \
                 spawns one task per server.",
                KINDS[i].key(),
                number(all_live[i].median, 2),
                number(all_live[0].median, 2)
            ));
        }
    }
    report.tables.push(ratios);

    report.cdfs.push(Cdf {
        slug: "arrivals".into(),
        title: format!(
            "RAP fan-out: when each of the {LIVE} live servers received the cancellation"
        ),
        x_label: "notify called → server received it (ms)".into(),
        series: KINDS
            .iter()
            .enumerate()
            .map(|(i, kind)| {
                let all = samples[i]
                    .iter()
                    .flat_map(|s| s.arrivals_ms.iter().copied())
                    .collect();
                (kind.name().to_owned(), all)
            })
            .collect(),
    });

    let mut data = serde_json::Map::new();
    for (i, kind) in KINDS.iter().enumerate() {
        let rounds: Vec<Value> = samples[i]
            .iter()
            .map(|s| {
                json!({
                    "returned_ms": ms(s.returned),
                    "all_live_notified_ms": ms(s.all_live),
                    "finished_ms": ms(s.finished),
                    "answered": s.answered,
                    "arrivals_ms": s.arrivals_ms,
                })
            })
            .collect();
        data.insert(kind.key().to_owned(), Value::Array(rounds));
    }
    report.data = json!({
        "servers": SERVERS,
        "silent": SILENT,
        "timeout_ms": TIMEOUT.as_millis() as u64,
        "rounds": ROUNDS,
        "warm_up_rounds": 1,
        "silent_connections_accepted": silent_connections,
        "notifiers": Value::Object(data),
    });
    report
}
