//! `cargo xtask bench gateway`: the cancellation gateway (release build) in real processes on
//! loopback, with its bundled demo upstream (a stdio child) and a real `redis-server`.
//!
//! 1. API cancel → upstream tool stopped, same worker: from the moment the bench sends
//!    `POST /cancellation/cancel` to the moment the demo upstream's `sleep` is dropped (its
//!    stderr line carries the wall-clock time; same machine, same clock), p50 / p99;
//! 2. the same across workers: the run on worker A, the cancel sent to worker B, which finds
//!    the run in Redis and publishes the cancel; next to it a raw Redis `PUBLISH` → subscriber
//!    round trip (the floor any cross-worker cancel pays). The three are interleaved sample by
//!    sample and split into rounds. Goal: cross-worker ≤ 2 × that round trip + the same-worker
//!    figure;
//! 3. `tools/call` (echo) throughput through the gateway's `/rpc` (a worker with Redis, and
//!    one alone) against calling the same upstream directly over stdio with the cancelkit
//!    `Peer`, 32 calls in flight for all, rounds interleaved (the overhead ratio: HTTP, auth,
//!    the run registry and its Redis records, the extra hop);
//! 4. memory, measured once: the gateway's resident set with 2,000 idle keep-alive connections
//!    open against before (per connection), then with a slow call in flight on each of them
//!    (per run, on top of its connection); the upstream's own memory is not counted;
//! 5. lookups against retained runs (`lookups`): on a fresh worker alone, then on one with a
//!    `redis-server` of its own, the round trips of `GET /cancellation/status/{bare id}` of a
//!    live slow run, `GET /cancellation/status/{run id}` of a retained run and
//!    `POST /cancellation/cancel` of a live slow run by its run id, interleaved sample by
//!    sample, with (almost) no finished run retained and again once echo calls of 10 users
//!    have filled it to 100,000; the resident set before and after that fill (bytes per
//!    retained run; with Redis, also `redis-server`'s `used_memory`);
//! 6. idle connections at the cap (`capped`): a worker with `max_connections = 2000`, 2,000
//!    idle keep-alive connections (bytes per connection), 100 more at once (what became of
//!    each), `/health` on a fresh connection at the cap.
//!
//! Prints the tables and saves `target/bench/gateway.json` and the cancel-latency plot.

mod capped;
mod lookups;
mod measure;
mod summary;
#[cfg(test)]
mod tests;
mod worker;

pub use measure::unix_us;
pub use summary::{per_round, quantile};
pub use worker::{StopLog, Worker, gateway_binary};

use std::time::Duration;

use cancelkit_gateway::auth::Verifier;
use cancelkit_tests::redis::RedisServer;
use serde_json::json;

use measure::{Direct, RawPubSub, call, memory_per_run, one_cancel, through_gateway};

pub const SECRET: &str = "cancelkit-gateway-bench-secret-0123456789";
/// Rounds of cancels; each round has this many samples of each kind, interleaved.
const CANCEL_ROUNDS: usize = 5;
const CANCELS_PER_ROUND: usize = 400;
const THROUGHPUT_ROUNDS: usize = 5;
const THROUGHPUT_CALLS: usize = 10_000;
/// Calls in flight in the throughput rounds.
const WINDOW: usize = 32;
const IN_FLIGHT_RUNS: usize = 2_000;
/// Un-measured echo calls that warm each worker and the direct upstream.
const WARM_UP_CALLS: usize = 20;

/// Every sample of the cancel rounds, in µs, one vector per round.
struct Cancels {
    same: Vec<Vec<f64>>,
    cross: Vec<Vec<f64>>,
    raw: Vec<Vec<f64>>,
}

/// Calls per second of each throughput round.
struct Throughput {
    redis: Vec<f64>,
    alone: Vec<f64>,
    direct: Vec<f64>,
}

async fn warm(http: &reqwest::Client, token: &str, worker: &Worker) {
    for i in 0..WARM_UP_CALLS {
        let _ = http
            .post(worker.url("/rpc"))
            .bearer_auth(token)
            .json(&call(i as u64, "demo-echo", json!({"text": "warm"})))
            .send()
            .await;
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
        let token =
            Verifier::new(SECRET, Default::default()).mint("admin", Duration::from_secs(3600));
        let http = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(4096)
            .build()
            .expect("client");
        warm(&http, &token, &a).await;
        warm(&http, &token, &b).await;
        let mut raw = RawPubSub::connect(&redis.url()).await;

        println!(
            "gateway bench: {CANCEL_ROUNDS} rounds of {CANCELS_PER_ROUND} same-worker cancels, cross-worker cancels and raw PUBLISH round trips, interleaved"
        );
        let mut cancels = Cancels {
            same: Vec::new(),
            cross: Vec::new(),
            raw: Vec::new(),
        };
        let mut id = 10_000u64;
        for _ in 0..CANCEL_ROUNDS {
            let (mut same, mut cross, mut publish) = (Vec::new(), Vec::new(), Vec::new());
            for sample in 0..CANCELS_PER_ROUND {
                for k in 0..3 {
                    id += 1;
                    match (sample + k) % 3 {
                        0 => same.push(one_cancel(&http, &token, id, &a, &a).await),
                        1 => cross.push(one_cancel(&http, &token, id, &a, &b).await),
                        _ => publish.push(raw.round_trip().await),
                    }
                }
            }
            cancels.same.push(same);
            cancels.cross.push(cross);
            cancels.raw.push(publish);
        }

        println!(
            "throughput: {THROUGHPUT_ROUNDS} rounds of {THROUGHPUT_CALLS} echo calls each way, interleaved"
        );
        let solo = Worker::start("solo", None);
        warm(&http, &token, &solo).await;
        let direct = Direct::start(WARM_UP_CALLS).await;
        let mut throughput = Throughput {
            redis: Vec::new(),
            alone: Vec::new(),
            direct: Vec::new(),
        };
        for round in 0..THROUGHPUT_ROUNDS {
            for k in 0..3 {
                match (round + k) % 3 {
                    0 => throughput
                        .redis
                        .push(through_gateway(&http, &token, &a, THROUGHPUT_CALLS).await),
                    1 => throughput
                        .alone
                        .push(through_gateway(&http, &token, &solo, THROUGHPUT_CALLS).await),
                    _ => throughput.direct.push(direct.round(THROUGHPUT_CALLS).await),
                }
            }
        }
        drop((solo, direct));

        println!("memory: {IN_FLIGHT_RUNS} slow calls in flight on a fresh worker");
        let memory = memory_per_run(&token).await;

        let mut scale = Vec::new();
        for with_redis in [false, true] {
            println!(
                "lookups: {} rounds of {} samples at ~0 and at {} retained runs, {}",
                lookups::LOOKUP_ROUNDS,
                lookups::LOOKUPS_PER_ROUND,
                lookups::RETAINED,
                if with_redis {
                    "a worker with Redis"
                } else {
                    "one worker alone"
                }
            );
            scale.push(lookups::lookups(&token, with_redis).await);
        }
        println!(
            "connections: {} idle at the cap, {} more beyond it",
            capped::CAP,
            capped::BEYOND
        );
        let at_cap = capped::idle_at_cap(&token).await;
        summary::build(&cancels, &throughput, &memory, &scale, &at_cap).finish();
        drop((a, b));
    });
}
