//! Cancel by request id with the ids real MCP clients use: the SDKs number each session's
//! requests from 0 (`initialize` 0, `tools/list` 1, the first `tools/call` 2), so a user's
//! id 2 names a call in every session. A finished run never makes such an id ambiguous, and
//! the run id of a `/mcp` call is known when the call starts (the `Cancelkit-Run-Id` header
//! of its response, and `_meta` of its progress events), not only from its answer.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::events::read_messages;
use support::http::{
    cancel, cancel_with, mcp_post, mcp_session, routing_headers, sleep_call, stamped, status,
    until_stderr_count,
};
use support::{Gateway, client, token, tools_call};

const STARTED: &str = "demo-upstream: started tools/call sleep";
const RUN_ID_META: &str = "io.cancelkit/runId";

/// POSTs `message` to `/mcp` as `user` (in `session`) and returns the response as soon as its
/// head has arrived.
async fn start(
    gateway: &Gateway,
    user: &str,
    session: Option<&str>,
    message: &Value,
) -> reqwest::Response {
    let mut request = client()
        .post(gateway.url("/mcp"))
        .bearer_auth(token(user))
        .header("accept", "application/json, text/event-stream")
        .json(message);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    for (name, value) in routing_headers(message) {
        request = request.header(name, value);
    }
    let response = request.send().await.expect("POST /mcp");
    assert_eq!(response.status(), 200);
    response
}

fn run_id_header(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("cancelkit-run-id")
        .and_then(|v| v.to_str().ok())
        .expect("Cancelkit-Run-Id in the head of a tools/call's response")
        .to_owned()
}

/// A session as an SDK client opens it: `initialize` 0, then `tools/list` 1.
async fn sdk_session(gateway: &Gateway, user: &str) -> String {
    let session = mcp_session(gateway, user).await;
    let listed = mcp_post(
        gateway,
        user,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    assert!(
        listed.response()["result"]["tools"].is_array(),
        "{}",
        listed.text
    );
    session
}

fn with_progress(mut call: Value) -> Value {
    call["params"]["_meta"] = json!({"progressToken": "p"});
    call
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_id_is_known_when_the_call_starts() {
    let gateway = Gateway::start();
    // 2025-11-25, in a session.
    let session = sdk_session(&gateway, "alice").await;
    let response = start(
        &gateway,
        "alice",
        Some(&session),
        &with_progress(sleep_call(json!(2), 30.0)),
    )
    .await;
    let run_id = run_id_header(&response);
    until_stderr_count(&gateway, STARTED, 1).await;
    let live = status(&gateway, "alice", &run_id).await;
    assert_eq!(live.body["state"], "running", "{}", live.text);
    let (first, _) = read_messages(response, 1, Duration::from_secs(10)).await;
    assert_eq!(first[0]["method"], "notifications/progress", "{first:?}");
    assert_eq!(
        first[0]["params"]["_meta"][RUN_ID_META],
        run_id.as_str(),
        "{first:?}"
    );
    assert_eq!(first[0]["params"]["progressToken"], "p", "{first:?}");
    let reply = cancel(&gateway, "admin", &run_id, Some("by run id")).await;
    assert_eq!(reply.body["status"], "cancelled", "{}", reply.text);

    // 2026-07-28: no session; the head names the run too, and the answer carries it.
    let response = start(
        &gateway,
        "alice",
        None,
        &stamped(
            tools_call(json!(2), "demo-echo", json!({"text": "hi"})),
            "2026-07-28",
        ),
    )
    .await;
    let run_id = run_id_header(&response);
    let (messages, _) = read_messages(response, 1, Duration::from_secs(10)).await;
    assert_eq!(
        messages[0]["result"]["_meta"][RUN_ID_META],
        run_id.as_str(),
        "{messages:?}"
    );
    // A request that is not a tools/call names no run.
    let listed = start(
        &gateway,
        "alice",
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    )
    .await;
    assert!(listed.headers().get("cancelkit-run-id").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_call_with_the_same_id_never_makes_a_cancel_by_id_ambiguous() {
    let gateway = Gateway::start();
    // Alice's first session: its call 2 finished (within status_retention).
    let first = sdk_session(&gateway, "alice").await;
    let done = mcp_post(
        &gateway,
        "alice",
        Some(&first),
        &tools_call(json!(2), "demo-echo", json!({"text": "done"})),
    )
    .await;
    let finished = done.run_id.clone().expect("Cancelkit-Run-Id");
    assert_eq!(done.response()["result"]["content"][0]["text"], "done");

    // Her second session's call 2 is live.
    let second = sdk_session(&gateway, "alice").await;
    let response = start(
        &gateway,
        "alice",
        Some(&second),
        &sleep_call(json!(2), 30.0),
    )
    .await;
    let live = run_id_header(&response);
    until_stderr_count(&gateway, STARTED, 1).await;
    // The status by bare id reports the live run and names the finished one.
    let s = status(&gateway, "alice", "2").await;
    assert_eq!(s.status, 200, "{}", s.text);
    assert_eq!(s.body["run_id"], live.as_str(), "{}", s.text);
    assert_eq!(s.body["state"], "running");
    assert_eq!(s.body["other_run_ids"], json!([finished]), "{}", s.text);
    // The operator's cancel by the id the client used, for that user: the live call.
    let reply = cancel_with(
        &gateway,
        "admin",
        json!({"requestId": "2", "reason": "operator", "user": "alice"}),
    )
    .await;
    assert_eq!(
        reply.body,
        json!({"status": "cancelled", "requestId": "2", "reason": "operator"}),
        "{}",
        reply.text
    );
    let (messages, _) = read_messages(response, usize::MAX, Duration::from_secs(10)).await;
    let answer = messages.last().expect("an answer");
    assert_eq!(answer["id"], 2);
    assert_eq!(answer["error"]["code"], -32800, "{messages:?}");
    assert_eq!(answer["error"]["data"]["runId"], live.as_str());

    // A third session's call 2: alice cancels it herself, by its id, past two finished ones.
    let third = sdk_session(&gateway, "alice").await;
    let response = start(&gateway, "alice", Some(&third), &sleep_call(json!(2), 30.0)).await;
    let again = run_id_header(&response);
    until_stderr_count(&gateway, STARTED, 2).await;
    let own = cancel(&gateway, "alice", "2", None).await;
    assert_eq!(own.body["status"], "cancelled", "{}", own.text);
    let (messages, _) = read_messages(response, usize::MAX, Duration::from_secs(10)).await;
    assert_eq!(
        messages.last().unwrap()["error"]["data"]["runId"],
        again.as_str()
    );
    let s = status(&gateway, "admin", "2").await;
    assert_eq!(s.body["run_id"], again.as_str(), "the newest: {}", s.text);
    assert_eq!(s.body["other_run_ids"].as_array().map(Vec::len), Some(2));
}
