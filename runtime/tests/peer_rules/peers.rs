//! ACP capabilities and `session/cancel`, two cancelkit peers, notifications and handler
//! errors.

use std::time::Duration;

use cancelkit::JsonRpcError;
use cancelkit::peer::{Context, Peer, Protocol, RequestError, Router};
use serde_json::{Value, json};

use crate::common::{Event, next_event, serve};
use crate::{MCP, common};

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
