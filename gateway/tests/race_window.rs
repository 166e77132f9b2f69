//! The race window: an operator's cancel that races its call's registration — sent through
//! another worker just before the call arrives, or at the same moment — stops the call, and
//! the time such a race spans is measured (printed; the guide quotes it). Two worker
//! processes on one real `redis-server`; seed 004's body (`requestId`, `reason`) plus the
//! `user` the operator's cancel is for.

mod support;

use std::time::{Duration, Instant};

use cancelkit_tests::redis::RedisServer;
use serde_json::{Value, json};
use support::workers::{redis_worker as worker, wait_redis};
use support::{Gateway, client, token, tools_call};

/// Rounds of each race.
const ROUNDS: usize = 20;

/// A slow call as alice on `gateway`: its JSON-RPC answer.
async fn call(gateway: &Gateway, id: &str) -> Value {
    client()
        .post(gateway.url("/rpc"))
        .bearer_auth(token("alice"))
        .json(&tools_call(json!(id), "demo-sleep", json!({"seconds": 60})))
        .send()
        .await
        .expect("the call is answered")
        .json()
        .await
        .expect("a JSON answer")
}

/// The operator's cancel of alice's call `id` through `gateway`: the answer's `status`.
async fn cancel(gateway: &Gateway, id: &str) -> String {
    let body: Value = client()
        .post(gateway.url("/cancellation/cancel"))
        .bearer_auth(token("admin"))
        .json(&json!({"requestId": id, "reason": "race", "user": "alice"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["status"].as_str().unwrap_or_default().to_owned()
}

async fn status(gateway: &Gateway, id: &str) -> Value {
    client()
        .get(gateway.url(&format!("/cancellation/status/{id}")))
        .bearer_auth(token("admin"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn summary(mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    format!(
        "median {:.1} ms, max {:.1} ms ({} rounds)",
        ms[ms.len() / 2],
        ms[ms.len() - 1],
        ms.len()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn a_cancel_racing_its_calls_registration_through_another_worker_stops_it() {
    let redis = RedisServer::start();
    let a = worker("a", &redis);
    let b = worker("b", &redis);
    wait_redis(&a, "connected").await;
    wait_redis(&b, "connected").await;

    // 1. The cancel goes first, through B; the call comes right after, to A.
    let mut gaps = Vec::new();
    let mut stopped = Vec::new();
    for round in 0..ROUNDS {
        let id = format!("early-{round}");
        assert_eq!(cancel(&b, &id).await, "queued");
        let started = Instant::now();
        let answer = tokio::time::timeout(Duration::from_secs(10), call(&a, &id))
            .await
            .expect("the call was stopped, not left to run 60 s");
        stopped.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(answer["error"]["code"], -32800, "{id}: {answer}");
        let s = status(&a, &id).await;
        let queued_at = s["cancel_queued_at"].as_f64().expect("cancel_queued_at");
        let registered_at = s["registered_at"].as_f64().unwrap();
        gaps.push((registered_at - queued_at) * 1000.0);
    }
    println!(
        "cancel first through B, call to A: registration {} after the cancel; the call \
         answered -32800 {} after it was sent",
        summary(gaps),
        summary(stopped)
    );

    // 2. The call to A and the cancel through B at the same moment.
    let mut outcomes = (0, 0);
    let mut stopped = Vec::new();
    for round in 0..ROUNDS {
        let id = format!("same-{round}");
        let started = Instant::now();
        let (answer, said) = tokio::join!(
            tokio::time::timeout(Duration::from_secs(10), call(&a, &id)),
            cancel(&b, &id)
        );
        let answer = answer.expect("the call was stopped, not left to run 60 s");
        stopped.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(answer["error"]["code"], -32800, "{id} ({said}): {answer}");
        match said.as_str() {
            "cancelled" => outcomes.0 += 1,
            "queued" => outcomes.1 += 1,
            other => panic!("{id}: {other}"),
        }
    }
    println!(
        "call and cancel at once: {} found the run (cancelled), {} waited for it (queued); \
         every call answered -32800, {} after it was sent",
        outcomes.0,
        outcomes.1,
        summary(stopped)
    );
}
