//! The notifier's fan-out to many tool servers, and the runtime's call tracker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::routing::post;
use cancelkit::rap::{CallTracker, Notifier, ToolServerTarget};
use serde_json::json;
use tokio::net::TcpListener;

use crate::harness::{TOKEN, rig, serve};

/// A server that counts the cancellations it receives and answers each after `delay`.
async fn counting_server(delay: Duration) -> (String, Arc<AtomicUsize>, Arc<Mutex<Vec<Instant>>>) {
    let count = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(Mutex::new(Vec::new()));
    let (c, a) = (count.clone(), answered.clone());
    let router = axum::Router::new().route(
        "/cancel_tool_call",
        post(move || {
            let (c, a) = (c.clone(), a.clone());
            async move {
                c.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                a.lock().unwrap().push(Instant::now());
            }
        }),
    );
    (format!("http://{}", serve(router).await), count, answered)
}

/// Accepts connections and never answers; counts connections.
async fn silent_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = connections.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            held.push(socket);
        }
    });
    (format!("http://{addr}"), connections)
}

/// A loopback address where nothing listens.
async fn refusing_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_to_fifty_servers_is_concurrent_and_never_retried() {
    let mut targets = Vec::new();
    let mut live = Vec::new();
    for _ in 0..35 {
        let (url, count, answered) = counting_server(Duration::from_millis(300)).await;
        targets.push(ToolServerTarget::new(url));
        live.push((count, answered));
    }
    let mut silent = Vec::new();
    for _ in 0..10 {
        let (url, connections) = silent_server().await;
        targets.push(ToolServerTarget::new(url));
        silent.push(connections);
    }
    for _ in 0..5 {
        targets.push(ToolServerTarget::new(refusing_server().await));
    }
    let notifier = Notifier::new(targets, Duration::from_millis(800));

    let started = Instant::now();
    let handle = notifier.notify("thread_1", "call_1");
    let returned = Instant::now();
    assert!(
        returned - started < Duration::from_millis(50),
        "notify returns at once"
    );
    let outcomes = handle.outcomes().await;
    let earliest_answer = live
        .iter()
        .flat_map(|(_, a)| a.lock().unwrap().clone())
        .min()
        .unwrap();
    assert!(
        returned < earliest_answer,
        "notify returned before any server answered"
    );
    assert_eq!(outcomes.len(), 50);
    assert_eq!(outcomes.iter().filter(|d| d.outcome == Ok(200)).count(), 35);
    assert_eq!(outcomes.iter().filter(|d| d.outcome.is_err()).count(), 15);
    // All at once: the whole fan-out took about one timeout, not fifty.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // Wait past every timeout: each live server got exactly one notification, nobody retried.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    for (count, _) in &live {
        assert_eq!(count.load(Ordering::SeqCst), 1);
    }
    for connections in &silent {
        assert!(connections.load(Ordering::SeqCst) <= 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tracker_injects_interrupted_and_drops_late_results() {
    let r = rig(|b| b).await;
    let notifier = Notifier::new(
        [ToolServerTarget::new(r.base.clone()).with_bearer_token(TOKEN)],
        Duration::from_secs(2),
    );
    let tracker = CallTracker::new(Some(notifier));
    tracker.start("thread_1", "call_t").unwrap();
    assert_eq!(
        r.invoke("sleep", "call_t", json!({"ms": 60_000})).await,
        200
    );
    r.wait_running(1).await;
    let interrupted = tracker
        .cancel("thread_1", "call_t")
        .expect("a running call");
    assert_eq!(interrupted["text"], "interrupted");
    assert_eq!(interrupted["is_error"], true);
    r.wait_running(0).await; // the notification reached the server and stopped the call
    assert!(
        tracker.cancel("thread_1", "call_t").is_none(),
        "cancelling twice does nothing"
    );
    let late =
        json!({"type": "tool_result", "group_id": "thread_1", "id": "call_t", "text": "too late"});
    assert!(
        tracker.deliver(late).is_none(),
        "a result after the cancel is dropped"
    );

    tracker.start("thread_1", "call_ok").unwrap();
    let on_time =
        json!({"type": "tool_result", "group_id": "thread_1", "id": "call_ok", "text": "fine"});
    assert_eq!(tracker.deliver(on_time.clone()), Some(on_time.clone()));
    assert!(
        tracker.deliver(on_time).is_none(),
        "a second result is dropped"
    );
    assert!(
        tracker
            .deliver(json!({"group_id": "x", "id": "y"}))
            .is_none()
    );
    assert_eq!(tracker.len(), 1, "only the cancelled call is remembered");
}
