//! `/mcp` at 2025-11-25: a closed response stream is not a cancel (the run goes on, and the
//! client resumes the stream with `Last-Event-ID` to get its answer — never on the session's
//! GET stream, which MCP keeps for messages of no request), and `DELETE` ends the session and
//! cancels its runs.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::events::read_messages;
use support::http::{mcp_session, sleep_call, status, until_stderr};
use support::{Gateway, client, token};

fn post(gateway: &Gateway, session: &str, message: &Value) -> reqwest::RequestBuilder {
    client()
        .post(gateway.url("/mcp"))
        .bearer_auth(token("alice"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .json(message)
}

fn get(gateway: &Gateway, user: &str, session: &str) -> reqwest::RequestBuilder {
    client()
        .get(gateway.url("/mcp"))
        .bearer_auth(token(user))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stream_is_not_a_cancel_and_its_answer_is_resumed() {
    let gateway = Gateway::start();
    let session = mcp_session(&gateway, "alice").await;
    let stream = get(&gateway, "alice", &session).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    let mut call = sleep_call(json!(3), 0.6);
    call["params"]["_meta"] = json!({"progressToken": "p"});
    let response = post(&gateway, &session, &call).send().await.unwrap();
    assert_eq!(response.status(), 200);
    // One progress notification, then the client goes away from this stream.
    let (first, last_id) = read_messages(response, 1, Duration::from_secs(10)).await;
    assert_eq!(first[0]["method"], "notifications/progress", "{first:?}");
    let last_id = last_id.expect("the events of a session's stream have ids");
    // Bob cannot resume alice's stream: to him the session does not exist.
    let bob = get(&gateway, "bob", &session)
        .header("last-event-id", &last_id)
        .send()
        .await
        .unwrap();
    assert_eq!(bob.status(), 404);
    let resumed = get(&gateway, "alice", &session)
        .header("last-event-id", &last_id)
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    // The rest of the stream: progress the client missed, then the answer, then the end.
    let (rest, _) = read_messages(resumed, usize::MAX, Duration::from_secs(10)).await;
    let answer = rest.last().expect("the resumed stream carries the answer");
    assert_eq!(answer["id"], 3, "the answer, resumed: {rest:?}");
    assert_eq!(answer["result"]["content"][0]["text"], "slept 600ms");
    assert!(
        answer["result"].get("resultType").is_none(),
        "no 2026 field for a 2025-11-25 session: {answer:?}"
    );
    assert!(
        rest[..rest.len() - 1]
            .iter()
            .all(|m| m["method"] == "notifications/progress"),
        "{rest:?}"
    );
    // The GET stream carried no response.
    let (on_get, _) = read_messages(stream, 1, Duration::from_millis(300)).await;
    assert!(on_get.is_empty(), "nothing on the GET stream: {on_get:?}");
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
    assert!(deleted.status().is_success(), "{}", deleted.status());
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
