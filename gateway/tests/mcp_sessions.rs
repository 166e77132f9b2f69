//! `/mcp` at 2025-11-25: a closed response stream is not a cancel (the run goes on and its
//! response arrives on the session's GET stream), and `DELETE` ends the session and cancels its
//! runs.

mod support;

use std::time::Duration;

use cancelkit::wire::sse;
use futures_util::StreamExt;
use serde_json::{Value, json};
use support::http::{mcp_session, sleep_call, status, until_stderr};
use support::{Gateway, client, token};

/// Reads SSE messages from a response until `count` have arrived (or 10 s pass).
async fn read_messages(response: reqwest::Response, count: usize) -> Vec<Value> {
    let mut body = response.bytes_stream();
    let mut parser = sse::Parser::new(sse::Limits::default());
    let mut events = Vec::new();
    let mut messages = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while messages.len() < count {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .expect("SSE messages within 10 s")
            .expect("the stream stays open")
            .expect("a chunk");
        parser
            .feed(&chunk, &mut events)
            .expect("events within the limits");
        for event in events.drain(..) {
            messages.push(serde_json::from_str(&event.data).expect("JSON in data"));
        }
    }
    messages
}

fn post(gateway: &Gateway, session: &str, message: &Value) -> reqwest::RequestBuilder {
    client()
        .post(gateway.url("/mcp"))
        .bearer_auth(token("alice"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .json(message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stream_is_not_a_cancel_and_the_answer_comes_on_the_get_stream() {
    let gateway = Gateway::start();
    let session = mcp_session(&gateway, "alice").await;
    let stream = client()
        .get(gateway.url("/mcp"))
        .bearer_auth(token("alice"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut call = sleep_call(json!(3), 0.6);
    call["params"]["_meta"] = json!({"progressToken": "p"});
    let response = post(&gateway, &session, &call).send().await.unwrap();
    assert_eq!(response.status(), 200);
    // One progress notification, then the client goes away from this stream.
    let first = read_messages(response, 1).await;
    assert_eq!(first[0]["method"], "notifications/progress", "{first:?}");
    let answers = read_messages(stream, 1).await;
    assert_eq!(
        answers[0]["id"], 3,
        "the answer on the GET stream: {answers:?}"
    );
    assert_eq!(answers[0]["result"]["content"][0]["text"], "slept 600ms");
    assert!(
        answers[0]["result"].get("resultType").is_none(),
        "no 2026 field for a 2025-11-25 session: {answers:?}"
    );
    assert!(
        !gateway.stderr().contains("demo-upstream: cancelled"),
        "the upstream was not cancelled:\n{}",
        gateway.stderr()
    );
    let reply = status(&gateway, "alice", "3").await;
    assert_eq!(reply.body["state"], "completed", "{}", reply.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_session_cancels_its_runs() {
    let gateway = Gateway::start();
    let session = mcp_session(&gateway, "alice").await;
    let pending = tokio::spawn(post(&gateway, &session, &sleep_call(json!(4), 30.0)).send());
    until_stderr(&gateway, "for 30s").await;
    let deleted = client()
        .delete(gateway.url("/mcp"))
        .bearer_auth(token("alice"))
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    until_stderr(&gateway, "demo-upstream: cancelled tools/call sleep").await;
    let reply = status(&gateway, "alice", "4").await;
    assert_eq!(reply.body["state"], "cancelled", "{}", reply.text);
    assert_eq!(reply.body["cancel_source"], "disconnect", "{}", reply.text);
    // The session is gone: bob could never use it, and now neither can alice.
    let after = post(
        &gateway,
        &session,
        &json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(after.status(), 404);
    drop(pending);
}
