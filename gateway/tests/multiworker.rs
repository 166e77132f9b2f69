//! Three worker processes on one real `redis-server`: a cancel sent to one worker stops a run on
//! another, status and authorization are the same on every worker, Redis dying never blocks
//! local cancellation or produces a 5xx, and after it comes back (empty) cross-worker cancels
//! work again and nothing recorded before is lost. Plus the ContextForge defect: a worker that
//! was cut off when a cancel went out still applies it; a killed worker's runs read `lost`;
//! and a cancel beyond its share of the queue waiting for Redis is refused, never `queued`.

mod support;

use std::time::{Duration, Instant};

use cancelkit_tests::redis::RedisServer;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::workers::{redis_worker as worker, wait_redis};
use support::{Gateway, Options, client, config, token, tools_call};

/// Starts a slow call on `gateway` as `user`; returns the task awaiting its answer.
fn slow_call(
    gateway: &Gateway,
    user: &str,
    id: Value,
) -> tokio::task::JoinHandle<(Option<String>, Value)> {
    let request = client()
        .post(gateway.url("/rpc"))
        .bearer_auth(token(user))
        .json(&tools_call(id, "demo-sleep", json!({"seconds": 60})));
    tokio::spawn(async move {
        let response = request.send().await.expect("the call is answered");
        let run_id = response
            .headers()
            .get("cancelkit-run-id")
            .map(|v| v.to_str().unwrap().to_owned());
        (run_id, response.json().await.expect("a JSON answer"))
    })
}

async fn cancel(gateway: &Gateway, user: &str, request_id: &str) -> (StatusCode, Value) {
    let response = client()
        .post(gateway.url("/cancellation/cancel"))
        .bearer_auth(token(user))
        .json(&json!({"requestId": request_id, "reason": format!("by {user}")}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// An admin's cancel that names whose run it is (`user`).
async fn cancel_for(
    gateway: &Gateway,
    admin: &str,
    request_id: &str,
    user: &str,
) -> (StatusCode, Value) {
    let response = client()
        .post(gateway.url("/cancellation/cancel"))
        .bearer_auth(token(admin))
        .json(&json!({"requestId": request_id, "reason": format!("by {admin}"), "user": user}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn status(gateway: &Gateway, user: &str, request_id: &str) -> (StatusCode, Value) {
    let response = client()
        .get(gateway.url(&format!("/cancellation/status/{request_id}")))
        .bearer_auth(token(user))
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The number of demo stop lines on a worker.
fn stops(gateway: &Gateway) -> usize {
    gateway.count_stderr("demo-upstream: cancelled tools/call sleep")
}

async fn wait_stops(gateway: &Gateway, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while stops(gateway) < n {
        assert!(
            Instant::now() < deadline,
            "the upstream did not stop ({} of {n}):\n{}",
            stops(gateway),
            gateway.stderr()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn wait_running(gateway: &Gateway, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while gateway.count_stderr("demo-upstream: started tools/call sleep") < n {
        assert!(
            Instant::now() < deadline,
            "the call did not start:\n{}",
            gateway.stderr()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn three_workers_share_cancels_status_and_authorization_and_survive_redis_restarting() {
    let mut redis = RedisServer::start();
    let a = worker("a", &redis);
    let b = worker("b", &redis);
    let c = worker("c", &redis);
    for w in [&a, &b, &c] {
        wait_redis(w, "connected").await;
    }

    // A run on A, cancelled through B; its status read through C.
    let call = slow_call(&a, "alice", json!(7));
    wait_running(&a, 1).await;
    let (code, body) = status(&c, "admin", "7").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["state"], "running");
    assert_eq!(body["cancelled"], false);
    let run_id = body["run_id"].as_str().unwrap().to_owned();
    // Authorization comes from the shared record: bob may not, on any worker (his cancels
    // wait for runs of his own, his status reads find nothing); alice may.
    for selector in ["7", run_id.as_str()] {
        let (code, body) = cancel(&b, "bob", selector).await;
        assert_eq!(
            (code.as_u16(), body["status"].as_str()),
            (200, Some("queued")),
            "{body}"
        );
    }
    assert_eq!(status(&c, "bob", &run_id).await.0, 404);
    assert_eq!(stops(&a), 0, "bob's cancels stopped nothing");
    let (code, body) = cancel(&b, "alice", &run_id).await;
    assert_eq!(
        (code.as_u16(), body["status"].as_str()),
        (200, Some("cancelled")),
        "{body}"
    );
    wait_stops(&a, 1).await;
    let (header_run, answer) = call.await.unwrap();
    assert_eq!(answer["error"]["code"], -32800, "{answer}");
    assert_eq!(answer["error"]["data"]["runId"], run_id.as_str());
    assert_eq!(header_run.as_deref(), Some(run_id.as_str()));
    let (_, body) = status(&c, "alice", &run_id).await;
    assert_eq!(body["state"], "cancelled", "{body}");
    assert_eq!(body["cancel_reason"], "by alice");
    assert!(
        body.as_object().unwrap().values().all(|v| v != "alice"),
        "no owner in the status: {body}"
    );

    // Redis dies: local cancels still work, cross-worker ones are queued, nothing is a 5xx.
    let before = slow_call(&a, "alice", json!(8));
    wait_running(&a, 2).await;
    redis.kill();
    for w in [&a, &b, &c] {
        wait_redis(w, "disconnected").await;
    }
    let echo: Value = client()
        .post(b.url("/rpc"))
        .bearer_auth(token("alice"))
        .json(&tools_call(
            json!(1),
            "demo-echo",
            json!({"text": "still here"}),
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(echo["result"]["content"][0]["text"], "still here", "{echo}");
    let local = slow_call(&a, "alice", json!(9));
    wait_running(&a, 3).await;
    let started = Instant::now();
    let (code, body) = cancel(&a, "admin", "9").await;
    assert_eq!(
        (code.as_u16(), body["status"].as_str()),
        (200, Some("cancelled")),
        "{body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a local cancel waited on Redis: {:?}",
        started.elapsed()
    );
    wait_stops(&a, 2).await;
    assert_eq!(local.await.unwrap().1["error"]["code"], -32800);
    // A bare id that names no run B can see now: the admin says whose run it waits for.
    let (code, body) = cancel_for(&b, "admin", "8", "alice").await;
    assert_eq!(
        (code.as_u16(), body["status"].as_str()),
        (200, Some("queued")),
        "{body}"
    );
    let (code, _) = status(&c, "admin", "8").await;
    assert!(code.as_u16() < 500, "status while Redis is away: {code}");
    let metrics = support::metrics(&b).await;
    assert!(
        metrics.contains("cancelkit_gateway_redis_connected 0"),
        "{metrics}"
    );

    // Redis comes back empty: the queued cancel is delivered, records are written again.
    redis.restart();
    for w in [&a, &b, &c] {
        wait_redis(w, "connected").await;
    }
    wait_stops(&a, 3).await;
    let (_, answer) = before.await.unwrap();
    assert_eq!(
        answer["error"]["code"], -32800,
        "the cancel queued during the outage: {answer}"
    );
    let (code, body) = status(&c, "admin", &run_id).await;
    assert_eq!(
        code, 200,
        "the run recorded before the outage is still known: {body}"
    );
    assert_eq!(body["state"], "cancelled");

    // And cross-worker cancels work again.
    let again = slow_call(&a, "alice", json!(10));
    wait_running(&a, 4).await;
    let (code, body) = cancel(&c, "alice", "10").await;
    assert_eq!(
        (code.as_u16(), body["status"].as_str()),
        (200, Some("cancelled")),
        "{body}"
    );
    wait_stops(&a, 4).await;
    assert_eq!(again.await.unwrap().1["error"]["code"], -32800);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn a_worker_cut_off_when_the_cancel_went_out_applies_it_after_reconnecting() {
    let redis = RedisServer::start();
    let a = worker("a", &redis);
    let b = worker("b", &redis);
    wait_redis(&a, "connected").await;
    wait_redis(&b, "connected").await;
    let call = slow_call(&a, "alice", json!("job-1"));
    wait_running(&a, 1).await;

    // Freeze A, cut its subscription, publish the cancel through B, then let A go on: the
    // message went out while A had no subscription, so only the stored marker can tell it.
    let freeze = |signal: &str| {
        std::process::Command::new("kill")
            .args([signal, &a.pid().to_string()])
            .status()
            .unwrap()
    };
    freeze("-STOP");
    let raw = redis::Client::open(redis.url()).unwrap();
    let mut conn = raw.get_multiplexed_async_connection().await.unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(killed >= 1, "A's subscription was cut");
    // B's subscription was cut too: let it come back, so B publishes (rather than defers)
    // while A, frozen, has none.
    wait_redis(&b, "connected").await;
    let subscribers: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("cancellation:cancel")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        subscribers.get(1),
        Some(&redis::Value::Int(1)),
        "only B listens when the cancel goes out"
    );
    let (code, body) = cancel(&b, "admin", "job-1").await;
    freeze("-CONT");
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body["status"], "queued",
        "A could not ack while frozen: {body}"
    );
    wait_stops(&a, 1).await;
    let (_, answer) = call.await.unwrap();
    assert_eq!(answer["error"]["code"], -32800, "{answer}");
    assert_eq!(answer["error"]["data"]["requestId"], "job-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn a_killed_workers_runs_read_lost_and_their_cancels_are_not_answered_cancelled() {
    let redis = RedisServer::start();
    let mut a = worker("a", &redis);
    let b = worker("b", &redis);
    wait_redis(&a, "connected").await;
    wait_redis(&b, "connected").await;
    // Its answer never comes: the connection dies with the worker (while the call runs, the
    // client stays, so the run is not cancelled by a disconnect first).
    let request = client()
        .post(a.url("/rpc"))
        .bearer_auth(token("alice"))
        .json(&tools_call(
            json!("doomed"),
            "demo-sleep",
            json!({"seconds": 60}),
        ));
    tokio::spawn(async move { request.send().await.is_err() });
    wait_running(&a, 1).await;
    let (code, body) = status(&b, "alice", "doomed").await;
    assert_eq!(
        (code.as_u16(), body["state"].as_str()),
        (200, Some("running"))
    );
    let run_id = body["run_id"].as_str().unwrap().to_owned();
    // No tool timeout: the running record lives a lease (heartbeat ttl + retention), not a day.
    let raw = redis::Client::open(redis.url()).unwrap();
    let mut conn = raw.get_multiplexed_async_connection().await.unwrap();
    let ttl: i64 = redis::cmd("PTTL")
        .arg(format!("cancelkit:run:{run_id}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        ttl > 0 && ttl <= (15 + 300) * 1000,
        "the running record's ttl: {ttl} ms"
    );

    a.kill();
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let (code, body) = status(&b, "alice", "doomed").await;
        assert_eq!(code, 200, "{body}");
        if body["state"] == "lost" {
            break body;
        }
        assert_eq!(body["state"], "running", "{body}");
        assert!(Instant::now() < deadline, "never lost: {body}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(body["cancelled"], false, "{body}");
    let reason = body["state_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("worker a stopped answering"), "{body}");
    let started = Instant::now();
    let (code, body) = cancel(&b, "admin", &run_id).await;
    assert_eq!(
        (code.as_u16(), body["status"].as_str()),
        (200, Some("queued")),
        "a lost run is not reported cancelled: {body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "no ack is awaited from a worker that is gone: {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: redis-server (`cargo xtask setup` installs it)"]
async fn a_cancel_beyond_its_share_of_the_redis_queue_is_refused_not_queued() {
    let mut redis = RedisServer::start();
    // A queue of 8 writes (max_runs + max_retained): a user's share is one cancel.
    let b = Gateway::with(Options {
        config: config("[limits]\nmax_runs = 2\nmax_retained = 6\n"),
        env: vec![("REDIS_URL", redis.url())],
        worker: Some("b"),
        ..Options::default()
    });
    wait_redis(&b, "connected").await;
    redis.kill();
    wait_redis(&b, "disconnected").await;

    let (code, body) = cancel(&b, "alice", "elsewhere-1").await;
    assert_eq!(
        (code.as_u16(), body["status"].as_str()),
        (200, Some("queued")),
        "{body}"
    );
    let (code, body) = cancel(&b, "alice", "elsewhere-2").await;
    assert_eq!(code, 429, "alice's share is full: {body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("redis queue"), "{body}");
    // Others still get in.
    let (code, body) = cancel(&b, "bob", "elsewhere-3").await;
    assert_eq!(
        (code.as_u16(), body["status"].as_str()),
        (200, Some("queued"))
    );
    let metrics = support::metrics(&b).await;
    assert!(
        metrics.contains("cancelkit_gateway_redis_refused_total{kind=\"tombstone\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("cancelkit_gateway_redis_pending_cancels 2"),
        "{metrics}"
    );

    // What was queued is delivered once Redis is back.
    redis.restart();
    wait_redis(&b, "connected").await;
    let raw = redis::Client::open(redis.url()).unwrap();
    let mut conn = raw.get_multiplexed_async_connection().await.unwrap();
    let stored: Vec<String> = redis::cmd("ZRANGE")
        .arg("cancelkit:tombstones")
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        stored.len(),
        2,
        "both queued cancels reached redis: {stored:?}"
    );
}
