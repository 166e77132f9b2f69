//! Cancels: a closed 2026-07-28 stream, a session's `notifications/cancelled` (also one that
//! overtakes its request), and a session `DELETE`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cancelkit::wire::headers;
use serde_json::{Value, json};

use crate::harness::{client, events, messages, post, session, stamped, start, tool};

#[tokio::test]
async fn closing_a_2026_stream_cancels_its_request() {
    let server = start(|s| s).await;
    let call = stamped(tool(json!("c"), "sleep", json!({"seconds": 30})));
    let response = post(&server.url, None, &call).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let started = Instant::now();
    drop(response);
    let stopped = server.next_stop().await;
    assert_eq!(stopped.seconds, 30.0);
    assert!(
        stopped.reason.contains("closed the response stream"),
        "{stopped:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_session_cancel_stops_the_tool_and_ends_its_stream_without_a_response() {
    let server = Arc::new(start(|s| s).await);
    let session = session(&server).await;
    let call = tool(json!(9), "sleep", json!({"seconds": 30}));
    let response = post(&server.url, Some(&session), &call)
        .send()
        .await
        .unwrap();
    let reading = tokio::spawn(events(response, |_| false));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 9, "reason": "user"}});
    let accepted = post(&server.url, Some(&session), &cancel)
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status(), 202);
    let stopped = server.next_stop().await;
    assert!(stopped.reason.contains("user"), "{stopped:?}");
    let got = messages(&reading.await.unwrap());
    assert!(
        got.is_empty(),
        "no response for a cancelled request: {got:?}"
    );
    // The session goes on.
    let echo = post(
        &server.url,
        Some(&session),
        &tool(json!(10), "echo", json!({"text": "on"})),
    )
    .send()
    .await
    .unwrap();
    let got = messages(&events(echo, |_| false).await);
    assert_eq!(got[0]["result"]["content"][0]["text"], "on");
}

#[tokio::test]
async fn a_session_cancel_that_overtakes_its_request_cancels_it_when_it_comes() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 77, "reason": "overtaken"}});
    let accepted = post(&server.url, Some(&session), &cancel)
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status(), 202);
    let call = tool(json!(77), "sleep", json!({"seconds": 30}));
    let response = post(&server.url, Some(&session), &call)
        .send()
        .await
        .unwrap();
    let stopped = server.next_stop().await;
    assert!(stopped.reason.contains("overtaken"), "{stopped:?}");
    let got = messages(&events(response, |_| false).await);
    assert!(
        got.is_empty(),
        "no response for a cancelled request: {got:?}"
    );
}

#[tokio::test]
async fn deleting_a_session_cancels_what_it_runs_and_forgets_it() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let call = tool(json!(1), "sleep", json!({"seconds": 30}));
    let response = post(&server.url, Some(&session), &call)
        .send()
        .await
        .unwrap();
    let reading = tokio::spawn(events(response, |_| false));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let deleted = client()
        .delete(&server.url)
        .header(headers::SESSION_ID, &session)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    server.next_stop().await;
    let _ = reading.await.unwrap();
    let after = post(
        &server.url,
        Some(&session),
        &tool(json!(2), "echo", json!({"text": "x"})),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(after.status(), 404);
    let error: Value = after.json().await.unwrap();
    assert_eq!(error["error"]["code"], -32001);
}
