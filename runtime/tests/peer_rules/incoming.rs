//! Cancels of the requests we serve: each protocol's cancel forms, what is never cancelled,
//! unknown and duplicate ids, the queue, partial results, a closed connection.

use std::time::Duration;

use cancelkit::peer::Protocol;
use serde_json::json;

use crate::common::{Event, next_event, serve};
use crate::{MCP, SHORT, sleep_request};

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
    ids.sort_by_key(std::string::ToString::to_string);
    assert_eq!(ids, [json!(1), json!(2)]);
    tokio::time::timeout(Duration::from_secs(5), s.server.closed())
        .await
        .unwrap();
    assert_eq!(s.peer.in_flight(), 0);
}
