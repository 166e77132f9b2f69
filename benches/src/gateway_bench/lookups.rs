//! Lookups against retained runs: what `GET /cancellation/status/{id}` and
//! `POST /cancellation/cancel` cost on a fresh worker with (almost) no finished run retained,
//! and again once [`RETAINED`] finished runs are kept; and the resident memory one retained
//! run costs (with Redis, also what its record costs `redis-server`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cancelkit_gateway::auth::Verifier;
use cancelkit_tests::redis::RedisServer;
use serde_json::{Value, json};

use super::measure::{call, metric_sum};
use super::worker::{Worker, demo_config};
use super::{SECRET, WARM_UP_CALLS, WINDOW};

/// Rounds at each level; each round has this many samples of every lookup, interleaved.
pub const LOOKUP_ROUNDS: usize = 5;
/// Samples per round (each one slow call, cancelled by its run id).
pub const LOOKUPS_PER_ROUND: usize = 200;
/// Finished runs retained at the end of the rounds after the fill (the fill stops short by
/// the samples' own runs).
pub const RETAINED: usize = 100_000;
/// Subjects the fill's calls are spread over, each granted `tools.execute` only.
pub const FILL_USERS: usize = 10;
/// One fill call in this many keeps its run id, as a retained run to read back.
pub const KEEP_EVERY: usize = 50;
/// The first JSON-RPC id of the samples' slow calls (the fill's ids stay far below).
const SAMPLE_IDS: u64 = 1_000_000_000;
/// The JSON-RPC ids of the admin's warm-up calls.
const WARM_UP_IDS: u64 = 500_000_000;

/// The three lookups at one level of retained runs, µs, one vector per round.
#[derive(Debug, Default)]
pub struct Level {
    /// Finished runs retained when the level's rounds began and when they ended (from
    /// `/metrics`: runs finished less statuses forgotten early).
    pub retained: [u64; 2],
    /// `GET /cancellation/status/{bare id}` of a live slow run.
    pub live_bare: Vec<Vec<f64>>,
    /// `GET /cancellation/status/{run id}` of a retained run.
    pub retained_run: Vec<Vec<f64>>,
    /// `POST /cancellation/cancel` of a live slow run by its run id.
    pub cancel_run: Vec<Vec<f64>>,
}

/// The lookups on one worker, before and after the fill, and what the fill cost in memory.
#[derive(Debug)]
pub struct Lookups {
    /// Which worker: alone, or with Redis.
    pub worker: &'static str,
    /// Before the fill.
    pub empty: Level,
    /// After the fill.
    pub full: Level,
    /// Echo calls the fill made.
    pub filled: usize,
    /// How long the fill took, seconds.
    pub fill_secs: f64,
    /// The gateway's resident set before and after the fill.
    pub rss: [u64; 2],
    /// `redis-server`'s `used_memory` before and after the fill (with Redis).
    pub redis_memory: Option<[u64; 2]>,
}

impl Lookups {
    /// Finished runs the fill added to the retained ones.
    pub fn added(&self) -> u64 {
        self.full.retained[0].saturating_sub(self.empty.retained[1])
    }

    /// Resident bytes per retained run the fill added.
    pub fn bytes_per_retained(&self) -> f64 {
        self.rss[1].saturating_sub(self.rss[0]) as f64 / self.added().max(1) as f64
    }

    /// `redis-server` bytes per retained run the fill added, with Redis.
    pub fn redis_bytes_per_retained(&self) -> Option<f64> {
        self.redis_memory
            .map(|[before, after]| after.saturating_sub(before) as f64 / self.added().max(1) as f64)
    }
}

/// The config of the lookups worker: statuses kept an hour, up to [`RETAINED`] of them (all of
/// one user if need be), and [`FILL_USERS`] subjects that may call tools.
pub fn config() -> String {
    let users: Vec<String> = (0..FILL_USERS)
        .map(|u| format!("\"{}\" = [\"tools.execute\"]", fill_user(u)))
        .collect();
    let retained = format!("max_retained = {RETAINED}");
    let per_user = format!("max_retained_per_user = {RETAINED}");
    let mut extra = vec![
        ("cancellation", "status_retention = \"1h\""),
        ("limits", retained.as_str()),
        ("limits", per_user.as_str()),
    ];
    extra.extend(users.iter().map(|u| ("auth.permissions", u.as_str())));
    demo_config(&extra)
}

/// The subject of fill user `u`.
fn fill_user(u: usize) -> String {
    format!("bench-user-{u}")
}

/// Runs the step on a fresh worker, alone or (with `redis`) on a fresh `redis-server` of its
/// own; `token` is the admin's.
pub async fn lookups(token: &str, redis: bool) -> Lookups {
    let server = redis.then(RedisServer::start);
    let url = server.as_ref().map(RedisServer::url);
    let worker = Worker::start_with("lookups", &config(), url.as_deref());
    let verifier = Verifier::new(SECRET, Default::default());
    let tokens: Vec<String> = (0..FILL_USERS)
        .map(|u| verifier.mint(&fill_user(u), Duration::from_secs(7200)))
        .collect();
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");

    // The warm-up calls are the retained runs read back before the fill.
    let mut warm = Vec::with_capacity(WARM_UP_CALLS);
    for i in 0..WARM_UP_CALLS as u64 {
        warm.push(echo(&http, token, &worker, WARM_UP_IDS + i).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut next_id = SAMPLE_IDS;
    let empty = level(&http, token, &worker, &mut next_id, &warm).await;

    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_before = worker.rss_bytes();
    let redis_before = server.as_ref().map(used_memory);
    // The samples after the fill add their own cancelled runs: it leaves room for them, so
    // that the level ends at RETAINED and no status is forgotten (the oldest filled ones, read
    // back, would be the first to go).
    let samples = LOOKUP_ROUNDS * LOOKUPS_PER_ROUND;
    let to_fill = RETAINED.saturating_sub(empty.retained[1] as usize + samples);
    let started = Instant::now();
    let kept = fill(&worker, &tokens, to_fill).await;
    let fill_secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_after = worker.rss_bytes();
    let redis_after = match &server {
        Some(server) => Some(settled_memory(server).await),
        None => None,
    };
    let full = level(&http, token, &worker, &mut next_id, &kept).await;

    drop(worker);
    Lookups {
        worker: if redis {
            "worker with Redis"
        } else {
            "one worker alone"
        },
        empty,
        full,
        filled: to_fill,
        fill_secs,
        rss: [rss_before, rss_after],
        redis_memory: redis_before.zip(redis_after).map(|(b, a)| [b, a]),
    }
}

/// One echo call as `token` with JSON-RPC id `id`: its run id (the `Cancelkit-Run-Id` header).
async fn echo(http: &reqwest::Client, token: &str, worker: &Worker, id: u64) -> String {
    let response = http
        .post(worker.url("/rpc"))
        .bearer_auth(token)
        .json(&call(id, "demo-echo", json!({"text": "x"})))
        .send()
        .await
        .expect("echo call");
    let run_id = response
        .headers()
        .get("cancelkit-run-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .expect("a tools/call answer names its run id");
    let body: Value = response.json().await.expect("echo body");
    assert_eq!(body["result"]["content"][0]["text"], "x", "{body}");
    run_id
}

/// `calls` echo calls through `/rpc`, [`WINDOW`] in flight on a pool of their own (closed at
/// the end), call `i` by fill user `i % FILL_USERS` with JSON-RPC id `i / FILL_USERS`; the run
/// ids of every [`KEEP_EVERY`]th call.
async fn fill(worker: &Worker, tokens: &[String], calls: usize) -> Vec<String> {
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let tokens: Arc<[String]> = tokens.into();
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(WINDOW);
    for _ in 0..WINDOW {
        let (http, tokens, next) = (http.clone(), Arc::clone(&tokens), Arc::clone(&next));
        let url = worker.url("/rpc");
        tasks.push(tokio::spawn(async move {
            let mut kept = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= calls {
                    break;
                }
                let id = (i / tokens.len()) as u64;
                let response = http
                    .post(&url)
                    .bearer_auth(&tokens[i % tokens.len()])
                    .json(&call(id, "demo-echo", json!({"text": "x"})))
                    .send()
                    .await
                    .expect("fill call");
                let run_id = response
                    .headers()
                    .get("cancelkit-run-id")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let body: Value = response.json().await.expect("fill body");
                assert_eq!(body["result"]["content"][0]["text"], "x", "{body}");
                if i % KEEP_EVERY == 0 {
                    kept.push(run_id.expect("a tools/call answer names its run id"));
                }
            }
            kept
        }));
    }
    let mut kept = Vec::with_capacity(calls / KEEP_EVERY + WINDOW);
    for task in tasks {
        kept.extend(task.await.expect("filler"));
    }
    kept
}

/// Finished runs the worker retains now: runs finished less statuses forgotten early (none
/// expire within the hour of the step).
async fn retained(http: &reqwest::Client, worker: &Worker) -> u64 {
    let text = http
        .get(worker.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics body");
    let finished = metric_sum(&text, "cancelkit_gateway_runs_finished_total");
    let forgotten = metric_sum(&text, "cancelkit_gateway_statuses_forgotten_total");
    (finished - forgotten).max(0.0) as u64
}

/// [`LOOKUP_ROUNDS`] rounds of [`LOOKUPS_PER_ROUND`] samples, reading back the retained runs
/// `reads` in turn.
async fn level(
    http: &reqwest::Client,
    token: &str,
    worker: &Worker,
    next_id: &mut u64,
    reads: &[String],
) -> Level {
    assert!(!reads.is_empty(), "no retained run to read back");
    let mut level = Level {
        retained: [retained(http, worker).await, 0],
        ..Level::default()
    };
    for round in 0..LOOKUP_ROUNDS {
        let mut samples = Samples::default();
        for sample in 0..LOOKUPS_PER_ROUND {
            *next_id += 1;
            let read = &reads[(round * LOOKUPS_PER_ROUND + sample) % reads.len()];
            let retained_first = (round + sample) % 2 == 1;
            one_sample(
                http,
                token,
                worker,
                *next_id,
                (read, retained_first),
                &mut samples,
            )
            .await;
        }
        level.live_bare.push(samples.live_bare);
        level.retained_run.push(samples.retained_run);
        level.cancel_run.push(samples.cancel_run);
    }
    level.retained[1] = retained(http, worker).await;
    level
}

/// One round's samples, µs.
#[derive(Default)]
struct Samples {
    live_bare: Vec<f64>,
    retained_run: Vec<f64>,
    cancel_run: Vec<f64>,
}

/// `request`'s round trip until its whole body is read, µs, with the body; panics unless 200,
/// naming the request as `what`.
async fn timed(what: &str, request: reqwest::RequestBuilder) -> (f64, Value) {
    let sent = Instant::now();
    let response = request.send().await.expect("API request");
    let status = response.status();
    let bytes = response.bytes().await.expect("API body");
    let took = sent.elapsed().as_secs_f64() * 1e6;
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    assert_eq!(
        status,
        reqwest::StatusCode::OK,
        "{what}: {}",
        String::from_utf8_lossy(&bytes)
    );
    (took, body)
}

/// One sample: a slow call with id `id`; once the upstream runs it, its status by bare id and
/// the retained run `read`'s status by run id (in either order), then the cancel of the slow
/// call by the run id its status gave. Waits for the upstream's stop and the call's answer.
async fn one_sample(
    http: &reqwest::Client,
    token: &str,
    worker: &Worker,
    id: u64,
    (read, retained_first): (&str, bool),
    samples: &mut Samples,
) {
    let started = worker.started();
    let stopped = worker.stopped();
    let pending = tokio::spawn(
        http.post(worker.url("/rpc"))
            .bearer_auth(token)
            .json(&call(id, "demo-sleep", json!({"seconds": 60})))
            .send(),
    );
    worker.wait_started(started + 1).await;
    let mut run_id = None;
    for step in 0..2 {
        if (step == 0) == retained_first {
            let path = format!("/cancellation/status/{read}");
            let (took, body) = timed(&path, http.get(worker.url(&path)).bearer_auth(token)).await;
            assert_eq!(body["state"], "completed", "{path}: {body}");
            samples.retained_run.push(took);
        } else {
            let path = format!("/cancellation/status/{id}");
            let (took, body) = timed(&path, http.get(worker.url(&path)).bearer_auth(token)).await;
            assert_eq!(body["state"], "running", "{path}: {body}");
            run_id = body["run_id"].as_str().map(str::to_owned);
            samples.live_bare.push(took);
        }
    }
    let run_id = run_id.expect("a run's status names its run id");
    let cancel = http
        .post(worker.url("/cancellation/cancel"))
        .bearer_auth(token)
        .json(&json!({"requestId": run_id, "reason": "bench"}));
    let (took, body) = timed(&format!("cancel {run_id}"), cancel).await;
    assert_eq!(body["status"], "cancelled", "cancel {run_id}: {body}");
    samples.cancel_run.push(took);
    worker.stop_time(stopped + 1).await;
    let _ = pending.await;
}

/// `redis-server`'s `used_memory` once its key count has stopped growing (the worker writes
/// its records in the background; 20 s at most).
async fn settled_memory(server: &RedisServer) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut keys = server.command(&["DBSIZE"]);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = server.command(&["DBSIZE"]);
        if now == keys || Instant::now() >= deadline {
            return used_memory(server);
        }
        keys = now;
    }
}

/// `redis-server`'s `used_memory`, bytes.
fn used_memory(server: &RedisServer) -> u64 {
    let info = server.command(&["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO memory gives used_memory")
}
