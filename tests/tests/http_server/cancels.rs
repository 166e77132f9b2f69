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

/// A session's request and its cancel travel on two HTTP requests, and meet in the one peer
/// behind them: the cancel must reach the peer after its request however the two race (a
/// cancel that got there first would be ignored, and the request would run). Each of many
/// calls is sent with its cancel at the same moment — some cancels overtake their requests,
/// some arrive while they are written — and every one stops. (The narrowest interleaving,
/// a cancel between a request's admission and its writing, is pinned by the unit test in
/// runtime/src/http/server/conn/tests.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_racing_its_request_always_stops_it() {
    const CALLS: usize = 150;
    let server = Arc::new(start(|s| s).await);
    let session = session(&server).await;
    let mut calls = Vec::new();
    for id in 0..CALLS {
        let call = post(
            &server.url,
            Some(&session),
            &tool(json!(id), "sleep", json!({"seconds": 30})),
        );
        let cancel = post(
            &server.url,
            Some(&session),
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": id, "reason": "raced"}}),
        );
        calls.push(tokio::spawn(async move {
            let (response, accepted) = tokio::join!(call.send(), cancel.send());
            assert_eq!(accepted.unwrap().status(), 202);
            // The stream ends without a response.
            messages(&events(response.unwrap(), |_| false).await)
        }));
    }
    for call in calls {
        let got = call.await.unwrap();
        assert!(
            got.is_empty(),
            "no response for a cancelled request: {got:?}"
        );
    }
    for n in 0..CALLS {
        let stopped = tokio::time::timeout(Duration::from_secs(5), server.next_stop())
            .await
            .unwrap_or_else(|_| panic!("only {n} of {CALLS} sleeps stopped"));
        assert_eq!(stopped.seconds, 30.0);
    }
}
