//! A dropped call: its stream or connection closed at 2026-07-28; at 2025-11-25
//! `notifications/cancelled` with the upstream id and the scope's cause, sent again when it
//! overtook its call.

use std::time::{Duration, Instant};

use cancelkit::{CancelReason, Scope};
use cancelkit_gateway::upstream::ToolCall;
use cancelkit_gateway::upstream::http::HttpUpstream;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::rmcp_server::{Era, Server, wait_for};
use crate::{call, text};

/// Two sleeps in flight at once; the one labelled `dropped` is dropped once both run, the
/// other completes. Returns the upstream ids of both.
async fn drop_one_of_two(server: &Server, upstream: &HttpUpstream) -> (Value, Value) {
    let is_started =
        |label: &'static str| move |e: &Value| e["event"] == "started" && e["label"] == label;
    let mut dropped =
        Box::pin(upstream.call(call("sleep", json!({"seconds": 30, "label": "dropped"}))));
    tokio::select! {
        biased;
        _ = wait_for(&server.log, is_started("dropped")) => {}
        _ = &mut dropped => panic!("dropped finished"),
    }
    let mut kept = Box::pin(upstream.call(call("sleep", json!({"seconds": 0.6, "label": "kept"}))));
    tokio::select! {
        biased;
        _ = wait_for(&server.log, is_started("kept")) => {}
        _ = &mut kept => panic!("kept finished before it was seen running"),
        _ = &mut dropped => panic!("dropped finished"),
    }
    let dropped_id = server.log.started("dropped")["id"].clone();
    let kept_id = server.log.started("kept")["id"].clone();
    drop(dropped);
    let result = kept.await.expect("the other call completes");
    assert_eq!(text(&result), "slept");
    (dropped_id, kept_id)
}

/// Waits (at most 5 s) until the server has closed more than `before` connections.
async fn wait_closed(server: &Server, before: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.tap.closed_connections() <= before {
        assert!(
            Instant::now() < deadline,
            "the server never saw the connection close"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn drop_closes_the_stream_and_stops_the_tool(era: Era) {
    let server = Server::start(era).await;
    let upstream = HttpUpstream::new("up", &server.url);
    let (dropped, kept) = drop_one_of_two(&server, &upstream).await;
    let cancelled = wait_for(&server.log, |e| e["event"] == "cancelled").await;
    assert_eq!(cancelled["id"], dropped, "the dropped call's tool stopped");
    wait_closed(&server, 0).await;
    assert!(
        server
            .log
            .find(|e| e["event"] == "finished" && e["id"] == kept)
            .is_some()
    );
    assert!(
        server
            .log
            .find(|e| e["event"] == "cancelled" && e["id"] == kept)
            .is_none(),
        "no cancel reached the call that was not dropped"
    );
    assert_eq!(
        server.tap.count("notifications/cancelled"),
        0,
        "at 2026-07-28 the closed stream is the cancel"
    );
    server.stop();
}

#[tokio::test]
async fn v2026_dropping_a_call_closes_its_stream_and_stops_the_tool() {
    drop_closes_the_stream_and_stops_the_tool(Era::Both).await;
}

#[tokio::test]
async fn v2026_json_dropping_a_call_closes_its_connection_and_stops_the_tool() {
    drop_closes_the_stream_and_stops_the_tool(Era::Json).await;
}

#[tokio::test]
async fn v2026_the_connection_of_a_dropped_call_is_closed_not_pooled() {
    let server = Server::start(Era::Both).await;
    let upstream = HttpUpstream::new("up", &server.url);
    upstream
        .call(call("echo", json!({"text": "warm"})))
        .await
        .unwrap();
    let before = server.tap.closed_connections();
    // A call that sends progress: its response stream is open (headers sent) when dropped.
    let (sink, mut progress) = mpsc::channel(64);
    let sleep = upstream.call(ToolCall {
        tool: "sleep".into(),
        arguments: Some(super::raw(&json!({"seconds": 30, "label": "streaming"}))),
        progress: Some(sink),
    });
    tokio::select! {
        _ = progress.recv() => {}
        _ = sleep => panic!("the sleep finished"),
    }
    let id = server.log.started("streaming")["id"].clone();
    let cancelled = wait_for(&server.log, |e| e["event"] == "cancelled").await;
    assert_eq!(cancelled["id"], id);
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.tap.closed_connections() == before {
        assert!(
            Instant::now() < deadline,
            "the server never saw the connection close"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.stop();
}

#[tokio::test]
async fn v2025_dropping_a_call_sends_notifications_cancelled_with_the_upstream_id() {
    let server = Server::start(Era::Legacy).await;
    let upstream = HttpUpstream::new("up", &server.url);
    let (dropped, kept) = drop_one_of_two(&server, &upstream).await;
    let notice = wait_for(&server.log, |e| e["event"] == "notifications/cancelled").await;
    assert_eq!(
        notice["requestId"], dropped,
        "the upstream's own id: {notice}"
    );
    // The runtime's summary of a dropped request (the same on a stdio upstream).
    assert_eq!(notice["reason"], "the caller dropped the request");
    let cancelled = wait_for(&server.log, |e| e["event"] == "cancelled").await;
    assert_eq!(cancelled["id"], dropped, "the dropped call's tool stopped");
    assert!(
        server
            .log
            .find(|e| e["event"] == "finished" && e["id"] == kept)
            .is_some()
    );
    assert!(
        server
            .log
            .find(|e| e["event"] == "cancelled" && e["id"] == kept)
            .is_none()
    );
    let cancels: Vec<_> = server
        .tap
        .posts()
        .into_iter()
        .filter(|p| p.body["method"] == "notifications/cancelled")
        .collect();
    assert_eq!(cancels.len(), 1, "{cancels:?}");
    assert_ne!(
        cancels[0].session, None,
        "the cancel travels on the session"
    );
    server.stop();
}

#[tokio::test]
async fn v2025_the_reason_is_the_cancelled_scope_s_cause() {
    let server = Server::start(Era::Legacy).await;
    let upstream = std::sync::Arc::new(HttpUpstream::new("up", &server.url));
    let (scope, canceller) = Scope::root();
    let task = tokio::spawn({
        let upstream = upstream.clone();
        scope.run(async move {
            tokio::select! {
                result = upstream.call(call("sleep", json!({"seconds": 30, "label": "scoped"}))) => Some(result),
                () = cancelkit::cancelled() => None,
            }
        })
    });
    wait_for(&server.log, |e| e["event"] == "started").await;
    canceller.cancel(CancelReason::Timeout(Duration::from_secs(7)));
    // The upstream request is a child of the scope: the call ends with it, unanswered.
    let ended = task.await.unwrap();
    assert!(!matches!(ended, Some(Ok(_))), "{ended:?}");
    let notice = wait_for(&server.log, |e| e["event"] == "notifications/cancelled").await;
    assert_eq!(notice["reason"], "timed out after 7s");
    assert_eq!(notice["requestId"], server.log.started("scoped")["id"]);
    server.stop();
}

/// A call dropped after its POST reached the server but before the server took it in: the
/// first `notifications/cancelled` overtakes the call (rmcp ignores a cancel for a request it
/// does not know, then runs the call), so the connector sends it again once the server answers
/// the POST, and the tool stops.
#[tokio::test]
async fn v2025_a_cancel_that_overtook_its_call_is_sent_again() {
    let server = Server::start(Era::Legacy).await;
    let upstream = HttpUpstream::new("up", &server.url);
    upstream.list_tools().await.expect("tools/list");
    server.hold_calls(Duration::from_millis(400));
    let sleep = upstream.call(call("sleep", json!({"seconds": 30, "label": "held"})));
    let dropped = tokio::time::timeout(Duration::from_millis(150), sleep).await;
    assert!(dropped.is_err(), "the call finished: {dropped:?}");
    assert_eq!(
        server.tap.count("tools/call"),
        1,
        "the POST reached the server"
    );
    let started = wait_for(&server.log, |e| e["event"] == "started").await;
    let cancelled = wait_for(&server.log, |e| e["event"] == "cancelled").await;
    assert_eq!(cancelled["id"], started["id"], "{cancelled}");
    assert_eq!(cancelled["how"], "token", "{cancelled}");
    let notices: Vec<_> = server
        .tap
        .posts()
        .into_iter()
        .filter(|p| p.body["method"] == "notifications/cancelled")
        .map(|p| p.body["params"]["requestId"].clone())
        .collect();
    assert_eq!(notices, [started["id"].clone(), started["id"].clone()]);
    server.stop();
}
