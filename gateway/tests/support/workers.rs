//! Worker processes sharing one real `redis-server`.

use std::time::{Duration, Instant};

use cancelkit_tests::redis::RedisServer;
use serde_json::Value;

use super::{Gateway, Options, client, config};

/// A gateway worker named `name`, with the default test config, on `redis`.
pub fn redis_worker(name: &'static str, redis: &RedisServer) -> Gateway {
    Gateway::with(Options {
        config: config(""),
        env: vec![("REDIS_URL", redis.url())],
        worker: Some(name),
        ..Options::default()
    })
}

/// `GET /health`; `Null` when the worker does not answer (it may be stopped or restarting).
pub async fn health(gateway: &Gateway) -> Value {
    match client().get(gateway.url("/health")).send().await {
        Ok(response) => response.json().await.unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

/// Waits until the worker's link to Redis is `state` (`connected`, `disconnected`); panics
/// after 30 s.
pub async fn wait_redis(gateway: &Gateway, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let h = health(gateway).await;
        if h["redis"] == state {
            return;
        }
        assert!(Instant::now() < deadline, "redis never {state}: {h}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
