//! Our outgoing requests: dropped, timed out or cancelled explicitly they send the protocol's
//! cancel; answers and errors reach the caller; a cancel names requests of its own direction.

use std::time::Duration;

use cancelkit::peer::{Peer, Protocol, RequestError};
use serde_json::{Value, json};

use crate::common::{Event, next_event, serve};
use crate::{MCP, SHORT, common};

/// Our outgoing requests: dropping one unanswered sends the protocol's cancel.
#[tokio::test]
async fn dropping_an_outgoing_request_sends_the_cancel() {
    for (protocol, expected) in [
        (
            Protocol::Acp,
            json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}}),
        ),
        (
            MCP,
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "the caller dropped the request"}}),
        ),
        (
            Protocol::Lsp,
            json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}}),
        ),
    ] {
        let mut s = serve(protocol, |b| b);
        let request = s.peer.request::<_, Value>("client/slow", json!({}));
        let sent = s.wire.recv().await;
        assert_eq!(
            (sent["id"].clone(), sent["method"].clone()),
            (json!(1), json!("client/slow"))
        );
        drop(request);
        assert_eq!(s.wire.recv().await, expected, "{protocol:?}");
        // A response that arrives afterwards is dropped quietly.
        s.wire
            .send(json!({"jsonrpc": "2.0", "id": 1, "result": {}}))
            .await;
        s.wire.assert_alive().await;
        assert_eq!(s.peer.pending_requests(), 0);
    }
}

#[tokio::test]
async fn initialize_and_detached_requests_are_never_cancelled() {
    let mut s = serve(Protocol::Acp, |b| b);
    drop(
        s.peer
            .request::<_, Value>("initialize", json!({"protocolVersion": 1})),
    );
    let sent = s.wire.recv().await;
    assert_eq!(sent["method"], "initialize");
    drop(
        s.peer
            .request::<_, Value>("client/slow", json!({}))
            .detach(),
    );
    assert_eq!(s.wire.recv().await["method"], "client/slow");
    s.wire.assert_silent(SHORT).await;
    assert_eq!(s.peer.pending_requests(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_sends_the_cancel_and_fails_the_request() {
    let mut s = serve(MCP, |b| b);
    let request = s
        .peer
        .request::<_, Value>("client/slow", json!({}))
        .timeout(Duration::from_secs(30));
    let error = request.await.unwrap_err();
    assert!(matches!(error, RequestError::Timeout(d) if d == Duration::from_secs(30)));
    assert_eq!(s.wire.recv().await["method"], "client/slow");
    let cancel = s.wire.recv().await;
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["reason"], "timed out after 30s");
}

#[tokio::test]
async fn the_peers_answers_and_errors_reach_the_caller() {
    let mut s = serve(Protocol::Acp, |b| b);
    let request = tokio::spawn({
        let peer = s.peer.clone();
        async move { peer.request::<_, String>("client/ok", json!({})).await }
    });
    let sent = s.wire.recv().await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": sent["id"], "result": "fine"}))
        .await;
    assert_eq!(request.await.unwrap().unwrap(), "fine");

    let request = tokio::spawn({
        let peer = s.peer.clone();
        async move { peer.request::<_, String>("client/fail", json!({})).await }
    });
    let sent = s.wire.recv().await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": sent["id"], "error": {"code": -32602, "message": "bad"}}))
        .await;
    match request.await.unwrap() {
        Err(RequestError::Rpc(error)) => assert_eq!(error.code.code(), -32602),
        other => panic!("{other:?}"),
    }
}

/// A request the server sends from inside a handler is cancelled when the handler is: one
/// cancel cascades across both hops.
#[tokio::test]
async fn cancelling_a_handler_cancels_the_requests_it_made() {
    let mut s = serve(Protocol::Acp, |b| b);
    s.wire
        .send(
            json!({"jsonrpc": "2.0", "id": 10, "method": "ask", "params": {"label": "q", "ms": 0}}),
        )
        .await;
    let nested = s.wire.recv().await;
    assert_eq!(nested["method"], "client/confirm");
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 10}}))
        .await;
    let mut messages = [s.wire.recv().await, s.wire.recv().await];
    messages.sort_by_key(|m| m.get("method").is_none());
    assert_eq!(messages[0]["method"], "$/cancel_request");
    assert_eq!(messages[0]["params"]["requestId"], nested["id"]);
    assert_eq!(messages[1]["id"], 10);
    assert_eq!(messages[1]["error"]["code"], -32800);
}

/// Inbound and outbound ids are unrelated: a cancel for id 1 names our inbound request 1, never
/// our outbound request 1.
#[tokio::test]
async fn a_cancel_only_names_requests_of_its_own_direction() {
    let mut s = serve(Protocol::Acp, |b| b);
    let outgoing = tokio::spawn({
        let peer = s.peer.clone();
        async move { peer.request::<_, String>("client/ok", json!({})).await }
    });
    let sent = s.wire.recv().await;
    assert_eq!(sent["id"], 1);
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}}))
        .await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": 1, "result": "still wanted"}))
        .await;
    assert_eq!(outgoing.await.unwrap().unwrap(), "still wanted");
}

/// `cancel()` tells the peer at once and keeps waiting: an ACP peer answers -32800.
#[tokio::test]
async fn an_explicit_cancel_waits_for_the_peers_answer() {
    let (events, mut rx) = common::events_channel();
    let (_server, client) = common::pair(
        Peer::builder(Protocol::Acp).router(common::router(events)),
        Peer::builder(Protocol::Acp),
    );
    let mut request = client
        .handle()
        .request::<_, String>("sleep", json!({"label": "asked", "ms": 60_000}));
    assert_eq!(next_event(&mut rx).await, Event::Started("asked".into()));
    request.cancel();
    request.cancel(); // a second call sends nothing more
    match request.await {
        Err(RequestError::Rpc(error)) => {
            assert_eq!(error.code.code(), -32800);
            assert_eq!(error.data.unwrap()["reason"], "cancelled by the peer");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(next_event(&mut rx).await, Event::Dropped("asked".into()));
    assert_eq!(client.handle().pending_requests(), 0);
}
