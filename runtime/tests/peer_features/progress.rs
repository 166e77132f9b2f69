//! Timeouts that restart on progress: the idle timeout, the maximum, the bound on watched
//! progress tokens.

use std::time::{Duration, Instant};

use cancelkit::JsonRpcError;
use cancelkit::peer::{Context, Peer, RequestError, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::{MCP, common};

#[derive(Deserialize)]
struct Work {
    /// Progress every this many ms (0: none).
    every_ms: u64,
    /// Finish after this many ms (0: never).
    total_ms: u64,
    #[serde(rename = "_meta")]
    meta: Option<Value>,
}

/// Reports `"dropped"` when a `work` handler stops unfinished.
struct Unfinished(Option<mpsc::UnboundedSender<&'static str>>);

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send("dropped");
        }
    }
}

/// A server with `work`: sends `notifications/progress` for its `_meta.progressToken` every
/// `every_ms`, finishes after `total_ms`.
fn progress_pair() -> (Peer, Peer, mpsc::UnboundedReceiver<&'static str>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let router = Router::new().request("work", move |p: Work, cx: Context| {
        let tx = tx.clone();
        async move {
            let mut guard = Unfinished(Some(tx));
            let token = p.meta.and_then(|m| m.get("progressToken").cloned());
            let start = Instant::now();
            let mut n = 0;
            while p.total_ms == 0 || start.elapsed() < Duration::from_millis(p.total_ms) {
                let step = if p.every_ms == 0 {
                    p.total_ms
                } else {
                    p.every_ms
                };
                tokio::time::sleep(Duration::from_millis(step)).await;
                n += 1;
                if let Some(token) = token.as_ref().filter(|_| p.every_ms > 0) {
                    let progress = json!({"progressToken": token, "progress": n});
                    let _ = cx.peer().notify("notifications/progress", progress).await;
                }
            }
            guard.0 = None;
            Ok::<_, JsonRpcError>(json!("done"))
        }
    });
    let (server, client) = common::pair(Peer::builder(MCP).router(router), Peer::builder(MCP));
    (server, client, rx)
}

const IDLE: Duration = Duration::from_millis(150);

#[tokio::test]
async fn progress_keeps_a_request_alive_past_its_idle_timeout() {
    let (_server, client, _dropped) = progress_pair();
    let started = Instant::now();
    let done: Value = client
        .handle()
        .request_with_progress(
            "work",
            json!({"every_ms": 50, "total_ms": 400}),
            IDLE,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(done, "done");
    assert!(started.elapsed() >= Duration::from_millis(400));
    // The caller's own token works the same, and a second `progress_timeout` replaces the
    // first.
    let done: Value = client
        .handle()
        .request(
            "work",
            json!({"every_ms": 50, "total_ms": 400, "_meta": {"progressToken": "mine"}}),
        )
        .progress_timeout(Duration::from_millis(10), Duration::from_millis(20))
        .progress_timeout(IDLE, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(done, "done");
}

#[tokio::test]
async fn a_silent_request_times_out_at_idle() {
    let (_server, client, mut dropped) = progress_pair();
    let started = Instant::now();
    let error = client
        .handle()
        .request_with_progress::<_, Value>(
            "work",
            json!({"every_ms": 0, "total_ms": 10_000}),
            IDLE,
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
    let after = started.elapsed();
    assert!(
        matches!(error, RequestError::Timeout(d) if d == IDLE),
        "{error:?}"
    );
    assert!(after >= IDLE && after < Duration::from_secs(3), "{after:?}");
    // The server was told (notifications/cancelled) and dropped its handler.
    let seen = tokio::time::timeout(Duration::from_secs(5), dropped.recv()).await;
    assert_eq!(seen.unwrap(), Some("dropped"));
}

/// At most `MAX_PROGRESS_TOKENS` requests are watched for progress; beyond, the request gets
/// a plain timeout of its maximum (not its idle time).
#[tokio::test]
async fn watched_progress_tokens_are_bounded() {
    let s = common::serve(MCP, |b| b);
    let long = Duration::from_secs(60);
    let held: Vec<_> = (0..cancelkit::peer::MAX_PROGRESS_TOKENS)
        .map(|_| {
            s.peer
                .request_with_progress::<_, Value>("client/slow", json!({}), long, long)
        })
        .collect();
    let max = Duration::from_millis(400);
    let error = s
        .peer
        .request_with_progress::<_, Value>("client/slow", json!({}), Duration::from_millis(20), max)
        .await
        .unwrap_err();
    assert!(
        matches!(error, RequestError::Timeout(d) if d == max),
        "{error:?}"
    );
    drop(held);
}

#[tokio::test]
async fn progress_forever_is_cancelled_at_the_maximum() {
    let (_server, client, mut dropped) = progress_pair();
    let max = Duration::from_millis(700);
    let started = Instant::now();
    let error = client
        .handle()
        .request_with_progress::<_, Value>(
            "work",
            json!({"every_ms": 50, "total_ms": 0}),
            IDLE,
            max,
        )
        .await
        .unwrap_err();
    let after = started.elapsed();
    assert!(
        matches!(error, RequestError::Timeout(d) if d == max),
        "{error:?}"
    );
    assert!(after >= max && after < Duration::from_secs(4), "{after:?}");
    let seen = tokio::time::timeout(Duration::from_secs(5), dropped.recv()).await;
    assert_eq!(seen.unwrap(), Some("dropped"));
    assert_eq!(client.handle().pending_requests(), 0);
}
