//! Each cancellation rule of PROTOCOLS.md §0–2, over an in-memory duplex.

mod common;

use std::time::Duration;

use cancelkit::JsonRpcError;
use cancelkit::peer::{Context, McpRevision, Peer, Protocol, RequestError, Router};
use common::{Event, next_event, serve};
use serde_json::{Value, json};

const MCP: Protocol = Protocol::Mcp(McpRevision::V2025_11_25);
const SHORT: Duration = Duration::from_millis(150);

fn sleep_request(id: Value, label: &str, ms: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "sleep", "params": {"label": label, "ms": ms}})
}

#[tokio::test]
async fn acp_cancel_request_stops_the_handler_and_answers_32800() {
    let mut s = serve(Protocol::Acp, |b| b);
    s.wire.send(sleep_request(json!(7), "seven", 60_000)).await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("seven".into())
    );
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 7}}))
        .await;
    let answer = s.wire.recv().await;
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["error"]["code"], -32800);
    assert_eq!(answer["error"]["message"], "Request cancelled");
    assert_eq!(answer["error"]["data"]["reason"], "cancelled by the peer");
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("seven".into())
    );
    assert_eq!(s.peer.in_flight(), 0);
    s.wire.assert_alive().await;
}

#[tokio::test]
async fn acp_accepts_the_draft_cancel_request_form() {
    let mut s = serve(Protocol::Acp, |b| b);
    s.wire.send(sleep_request(json!("a"), "a", 60_000)).await;
    next_event(&mut s.events).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "a"}}))
        .await;
    let answer = s.wire.recv().await;
    assert_eq!(
        (answer["id"].clone(), answer["error"]["code"].clone()),
        (json!("a"), json!(-32800))
    );
}

#[tokio::test]
async fn mcp_sends_no_response_for_a_cancelled_request_and_logs_the_reason() {
    let mut s = serve(MCP, |b| b);
    s.wire.send(sleep_request(json!(1), "one", 60_000)).await;
    next_event(&mut s.events).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user pressed stop"}}))
        .await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("one".into())
    );
    s.wire.assert_silent(SHORT).await;
    assert_eq!(s.peer.in_flight(), 0);
    s.wire.assert_alive().await;
}

#[tokio::test]
async fn mcp_gateway_mode_answers_cancelled_requests_with_32800() {
    let mut s = serve(MCP, |b| b.answer_cancelled(true));
    s.wire.send(sleep_request(json!(1), "one", 60_000)).await;
    next_event(&mut s.events).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "operator"}}))
        .await;
    let answer = s.wire.recv().await;
    assert_eq!(answer["error"]["code"], -32800);
    assert_eq!(
        answer["error"]["data"]["reason"],
        "cancelled by the peer: operator"
    );
}

#[tokio::test]
async fn mcp_ignores_the_acp_and_lsp_forms() {
    let mut s = serve(MCP, |b| b);
    s.wire.send(sleep_request(json!(1), "one", 300)).await;
    next_event(&mut s.events).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}}))
        .await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}}))
        .await;
    assert_eq!(s.wire.recv().await["result"], "one");
}

#[tokio::test]
async fn lsp_uses_content_length_framing_and_answers_cancelled_requests() {
    let mut s = serve(Protocol::Lsp, |b| b);
    s.wire.send(sleep_request(json!(3), "three", 60_000)).await;
    next_event(&mut s.events).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 3}}))
        .await;
    let answer = s.wire.recv().await;
    assert_eq!(
        (answer["id"].clone(), answer["error"]["code"].clone()),
        (json!(3), json!(-32800))
    );
    s.wire.assert_alive().await;
}

#[tokio::test]
async fn initialize_is_never_cancelled() {
    for protocol in [Protocol::Acp, MCP, Protocol::Lsp] {
        let mut s = serve(protocol, |b| b);
        s.wire
            .send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"label": "init", "ms": 100}}))
            .await;
        next_event(&mut s.events).await;
        for cancel in [
            json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 0}}),
            json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 0}}),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}),
        ] {
            s.wire.send(cancel).await;
        }
        let answer = s.wire.recv().await;
        assert_eq!(answer["id"], 0, "{protocol:?}");
        assert!(answer.get("result").is_some(), "{protocol:?}: {answer}");
    }
}

#[tokio::test]
async fn cancels_for_unknown_finished_and_malformed_ids_are_ignored_silently() {
    let mut s = serve(Protocol::Acp, |b| b);
    assert_eq!(
        s.wire.call(json!(1), "echo", json!({"text": "done"})).await["result"],
        "done"
    );
    for cancel in [
        json!({"requestId": 1}),        // finished
        json!({"requestId": 404}),      // unknown
        json!({"requestId": "1"}),      // a string is another id than the number 1
        json!({"requestId": null}),     // names no request
        json!({"requestId": {"x": 1}}), // malformed
        json!("garbage"),               // malformed
    ] {
        s.wire
            .send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": cancel}))
            .await;
    }
    s.wire.assert_silent(SHORT).await;
    s.wire.assert_alive().await;
}

#[tokio::test]
async fn a_duplicate_in_flight_id_gets_32600_and_leaves_the_original_alone() {
    let mut s = serve(Protocol::Acp, |b| b);
    s.wire.send(sleep_request(json!(5), "original", 200)).await;
    next_event(&mut s.events).await;
    s.wire.send(sleep_request(json!(5), "impostor", 10)).await;
    let rejection = s.wire.recv().await;
    assert_eq!(
        (rejection["id"].clone(), rejection["error"]["code"].clone()),
        (json!(5), json!(-32600))
    );
    let original = s.wire.recv().await;
    assert_eq!(original["result"], "original");
    // Once answered, the id may be used again.
    assert_eq!(
        s.wire
            .call(json!(5), "echo", json!({"text": "reused"}))
            .await["result"],
        "reused"
    );
}

#[tokio::test]
async fn queued_requests_stay_cancellable_and_cancels_skip_the_queue() {
    let mut s = serve(Protocol::Acp, |b| b.max_concurrency(1));
    s.wire
        .send(sleep_request(json!(1), "running", 60_000))
        .await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("running".into())
    );
    s.wire.send(sleep_request(json!(2), "queued", 10)).await;
    // The queued request never started, and its cancel is handled at once.
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 2}}))
        .await;
    let answer = s.wire.recv().await;
    assert_eq!(
        (answer["id"].clone(), answer["error"]["code"].clone()),
        (json!(2), json!(-32800))
    );
    // The running one is still running; cancel it too.
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}}))
        .await;
    assert_eq!(s.wire.recv().await["id"], 1);
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("running".into())
    );
    assert_eq!(s.peer.in_flight(), 0);
}

#[tokio::test]
async fn cooperative_handlers_answer_with_partial_results() {
    let mut s = serve(Protocol::Acp, |b| b);
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": 9, "method": "coop", "params": {"label": "c", "ms": 60_000}}))
        .await;
    next_event(&mut s.events).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 9}}))
        .await;
    let answer = s.wire.recv().await;
    assert_eq!(answer["result"]["partial"], true, "{answer}");
}

#[tokio::test]
async fn closing_the_connection_cancels_everything_in_flight() {
    let mut s = serve(Protocol::Acp, |b| b);
    s.wire.send(sleep_request(json!(1), "a", 60_000)).await;
    s.wire.send(sleep_request(json!(2), "b", 60_000)).await;
    next_event(&mut s.events).await;
    next_event(&mut s.events).await;
    s.wire.hang_up().await;
    let mut dropped = vec![
        next_event(&mut s.events).await,
        next_event(&mut s.events).await,
    ];
    dropped.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        dropped,
        [Event::Dropped("a".into()), Event::Dropped("b".into())]
    );
    // ACP still owes both answers, and gets them out before the connection ends.
    let mut ids = vec![
        s.wire.recv().await["id"].clone(),
        s.wire.recv().await["id"].clone(),
    ];
    ids.sort_by_key(|id| id.to_string());
    assert_eq!(ids, [json!(1), json!(2)]);
    tokio::time::timeout(Duration::from_secs(5), s.server.closed())
        .await
        .unwrap();
    assert_eq!(s.peer.in_flight(), 0);
}

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

/// ACP capabilities: we declare the draft `cancellation` capability both ways, record the
/// peer's, and only send the draft `$/cancelRequest` to a peer that declared it.
#[tokio::test]
async fn acp_capabilities_gate_the_draft_cancel_form() {
    // Our agent answers initialize with the capability added.
    let mut s = serve(Protocol::Acp, |b| b);
    let answer = s
        .wire
        .call(json!(0), "initialize", json!({"label": "i", "ms": 0, "clientCapabilities": {"cancellation": {"request": true}}}))
        .await;
    assert_eq!(
        answer["result"]["agentCapabilities"]["cancellation"]["request"],
        true
    );
    assert_eq!(answer["result"]["agentCapabilities"]["loadSession"], true);
    assert!(s.peer.peer_accepts_draft_cancel());

    // A client configured for the draft form uses it only after the agent declared it.
    for (declared, expected) in [(false, "$/cancel_request"), (true, "$/cancelRequest")] {
        let mut s = serve(Protocol::Acp, |b| b.emit_draft_cancel(true));
        let init = tokio::spawn({
            let peer = s.peer.clone();
            async move {
                peer.request::<_, Value>("initialize", json!({"protocolVersion": 1}))
                    .await
            }
        });
        let sent = s.wire.recv().await;
        assert_eq!(
            sent["params"]["clientCapabilities"]["cancellation"]["request"],
            true
        );
        let capabilities = if declared {
            json!({"cancellation": {"request": true}})
        } else {
            json!({})
        };
        s.wire
            .send(json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"protocolVersion": 1, "agentCapabilities": capabilities}}))
            .await;
        init.await.unwrap().unwrap();
        assert_eq!(s.peer.peer_accepts_draft_cancel(), declared);
        drop(s.peer.request::<_, Value>("session/new", json!({})));
        s.wire.recv().await;
        assert_eq!(s.wire.recv().await["method"], expected);
    }
}

/// The spec's cascading example: `session/cancel` ends the turn, the agent cancels its own
/// outstanding request to the client, and `session/prompt` is answered with a result whose
/// `stopReason` is `cancelled`.
#[tokio::test]
async fn session_cancel_ends_the_turn_with_stop_reason_cancelled() {
    let mut s = serve(Protocol::Acp, |b| b);
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "sess-1", "prompt": []}}))
        .await;
    let permission = s.wire.recv().await;
    assert_eq!(permission["method"], "session/request_permission");
    s.wire.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "sess-1"}})).await;
    let mut messages = [s.wire.recv().await, s.wire.recv().await];
    messages.sort_by_key(|m| m.get("method").is_none());
    assert_eq!(messages[0]["method"], "$/cancel_request");
    assert_eq!(messages[0]["params"]["requestId"], permission["id"]);
    assert_eq!(
        messages[1],
        json!({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "cancelled"}})
    );
    // The client answers the cancelled permission request with -32800; that answer is dropped.
    s.wire
        .send(json!({"jsonrpc": "2.0", "id": permission["id"], "error": {"code": -32800, "message": "Request cancelled"}}))
        .await;
    s.wire.assert_alive().await;
}

/// Two cancelkit peers: a client drops its request and the server's handler stops.
#[tokio::test]
async fn between_two_cancelkit_peers_a_dropped_request_stops_the_remote_handler() {
    let (events, mut rx) = common::events_channel();
    let (server, client) = common::pair(
        Peer::builder(Protocol::Acp).router(common::router(events)),
        Peer::builder(Protocol::Acp),
    );
    let request = client
        .handle()
        .request::<_, String>("sleep", json!({"label": "remote", "ms": 60_000}));
    assert_eq!(next_event(&mut rx).await, Event::Started("remote".into()));
    drop(request);
    assert_eq!(next_event(&mut rx).await, Event::Dropped("remote".into()));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(server.handle().in_flight(), 0);
    assert_eq!(client.handle().pending_requests(), 0);
}

#[tokio::test]
async fn notifications_reach_their_handlers() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let router = Router::new().notification("log", move |text: String, _cx: Context| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(text);
        }
    });
    let (_server, client) = common::pair(Peer::builder(MCP).router(router), Peer::builder(MCP));
    client.handle().notify("log", "hello").await.unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap(),
        "hello"
    );
}

#[tokio::test]
async fn handler_errors_pass_through() {
    let router = Router::new().request("fail", |_: Value, _cx: Context| async {
        Err::<(), _>(JsonRpcError::invalid_params("missing `name`"))
    });
    let (_server, client) = common::pair(
        Peer::builder(Protocol::Acp).router(router),
        Peer::builder(Protocol::Acp),
    );
    match client.handle().request::<_, Value>("fail", json!({})).await {
        Err(RequestError::Rpc(error)) => {
            assert_eq!(error.code.code(), -32602);
            assert_eq!(error.message, "missing `name`");
        }
        other => panic!("{other:?}"),
    }
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

/// A writer that always fails, as stdout does once the other side has gone.
struct BrokenPipe;

impl tokio::io::AsyncWrite for BrokenPipe {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        _buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// When answers can no longer be written, the connection closes and cancels what is in flight.
#[tokio::test]
async fn a_failed_write_closes_the_connection() {
    use tokio::io::AsyncWriteExt;
    let (events, mut rx) = common::events_channel();
    let (mut client, server_io) = tokio::io::duplex(1 << 16);
    let server = Peer::builder(Protocol::Acp)
        .router(common::router(events))
        .connect(server_io, BrokenPipe);
    let line = |value: Value| format!("{value}\n");
    client
        .write_all(line(sleep_request(json!(1), "waiting", 60_000)).as_bytes())
        .await
        .unwrap();
    assert_eq!(next_event(&mut rx).await, Event::Started("waiting".into()));
    client
        .write_all(
            line(json!({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"text": "x"}}))
                .as_bytes(),
        )
        .await
        .unwrap();
    assert_eq!(next_event(&mut rx).await, Event::Dropped("waiting".into()));
    tokio::time::timeout(Duration::from_secs(5), server.closed())
        .await
        .expect("the connection closes");
}

/// MCP owes no response after a cancel, so a client may reuse the id at once: the new request
/// is served, not rejected as a duplicate, and the old handler's late end sends nothing.
#[tokio::test]
async fn mcp_ids_are_free_again_right_after_a_cancel() {
    let mut s = serve(MCP, |b| b);
    s.wire.send(sleep_request(json!(5), "old", 60_000)).await;
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Started("old".into())
    );
    s.wire
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}))
        .await;
    let answer = s.wire.call(json!(5), "echo", json!({"text": "new"})).await;
    assert_eq!(answer["result"], "new", "{answer}");
    assert_eq!(
        next_event(&mut s.events).await,
        Event::Dropped("old".into())
    );
    s.wire.assert_silent(SHORT).await;
    assert_eq!(s.peer.in_flight(), 0);
}

/// Notifications are handled in the order they arrived, even when handlers take time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_are_handled_in_arrival_order() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let router = Router::new().notification("session/update", move |n: u64, _cx: Context| {
        let tx = tx.clone();
        async move {
            // Uneven work: later updates would overtake earlier ones if run concurrently.
            for _ in 0..(n % 7) {
                tokio::task::yield_now().await;
            }
            let _ = tx.send(n);
        }
    });
    let (_server, client) = common::pair(
        Peer::builder(Protocol::Acp).router(router),
        Peer::builder(Protocol::Acp),
    );
    for n in 0..1_000u64 {
        client.handle().notify("session/update", n).await.unwrap();
    }
    for expected in 0..1_000u64 {
        let got = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, expected);
    }
}

/// A handler that panics still answers (-32603), leaves nothing in flight, and the connection
/// goes on; so does a notification handler that panics.
#[tokio::test]
async fn a_panicking_handler_is_answered_and_the_connection_goes_on() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
    let router = Router::new()
        .request("boom", |_: Value, _cx: Context| async {
            if true {
                panic!("handler bug");
            }
            Ok::<Value, JsonRpcError>(Value::Null)
        })
        .request("echo", |text: String, _cx: Context| async move {
            Ok::<_, JsonRpcError>(text)
        })
        .notification("tick", move |n: u32, _cx: Context| {
            let tx = tx.clone();
            async move {
                assert!(n != 1, "notification handler bug");
                let _ = tx.send(n);
            }
        });
    let (server, client) = common::pair(
        Peer::builder(Protocol::Acp).router(router),
        Peer::builder(Protocol::Acp),
    );
    match client.handle().request::<_, Value>("boom", json!({})).await {
        Err(RequestError::Rpc(error)) => assert_eq!(error.code.code(), -32603),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.handle().in_flight(), 0);
    client.handle().notify("tick", 1).await.unwrap();
    client.handle().notify("tick", 2).await.unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap(),
        Some(2)
    );
    let echo: String = client.handle().request("echo", "alive").await.unwrap();
    assert_eq!(echo, "alive");
}

/// A request waiting for an answer fails with `Closed` when the connection ends.
#[tokio::test]
async fn pending_requests_fail_when_the_connection_closes() {
    let mut s = serve(Protocol::Acp, |b| b);
    let request = tokio::spawn({
        let peer = s.peer.clone();
        async move { peer.request::<_, Value>("client/never", json!({})).await }
    });
    assert_eq!(s.wire.recv().await["method"], "client/never");
    s.wire.hang_up().await;
    let outcome = tokio::time::timeout(Duration::from_secs(5), request)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(outcome, Err(RequestError::Closed)), "{outcome:?}");
    assert!(matches!(
        s.peer.request::<_, Value>("client/late", json!({})).await,
        Err(RequestError::Closed)
    ));
    assert!(s.peer.is_closed());
}
