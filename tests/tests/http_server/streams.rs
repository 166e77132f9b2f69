//! Resumption with `Last-Event-ID` (refused without a replay buffer), and keep-alive comments
//! behind a proxy that cuts idle connections.

use std::time::Duration;

use cancelkit::wire::{headers, sse};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::harness::{Server, WAIT, client, events, messages, post, session, stamped, start, tool};

#[tokio::test]
async fn a_cut_session_stream_is_resumed_with_last_event_id() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    let call = tool(json!(5), "sleep", json!({"seconds": 0.4}));
    let response = post(&server.url, Some(&session), &call)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // The priming event gives the id to resume from before any message; then the client cuts.
    let primed = events(response, |_| true).await;
    let last_id = primed[0].id.clone().expect("a priming event with an id");
    assert!(primed[0].data.is_empty(), "{primed:?}");
    let resumed = client()
        .get(&server.url)
        .header("accept", sse::CONTENT_TYPE)
        .header(headers::SESSION_ID, &session)
        .header(headers::LAST_EVENT_ID, &last_id)
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let got = messages(&events(resumed, |_| false).await);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["id"], 5);
    assert_eq!(got[0]["result"]["content"][0]["text"], "slept 0.4");
}

#[tokio::test]
async fn without_a_replay_buffer_a_cut_stream_cannot_be_resumed() {
    let server = start(|s| s.replay_events(0)).await;
    let session = session(&server).await;
    let call = tool(json!(5), "echo", json!({"text": "x"}));
    let response = post(&server.url, Some(&session), &call)
        .send()
        .await
        .unwrap();
    let got = events(response, |_| false).await;
    assert!(got.iter().all(|e| e.id.is_none()), "no ids: {got:?}");
    let resumed = client()
        .get(&server.url)
        .header("accept", sse::CONTENT_TYPE)
        .header(headers::SESSION_ID, &session)
        .header(headers::LAST_EVENT_ID, "2/0")
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 400);
}

/// A stamped 1 s sleep through a proxy that cuts connections idle for 300 ms: the messages and
/// keep-alive comments the stream carried.
async fn sleep_behind_idle_cutting_proxy(server: &Server) -> (Vec<Value>, u64) {
    let proxy =
        cancelkit_tests::proxy::idle_cutting(server.address.clone(), Duration::from_millis(300))
            .await;
    let call = stamped(tool(json!(1), "sleep", json!({"seconds": 1.0})));
    let response = post(&format!("{proxy}/mcp"), None, &call)
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let mut parser = sse::Parser::new(sse::Limits::default());
    let mut events = Vec::new();
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout(WAIT, body.next()).await {
        parser.feed(&chunk, &mut events).unwrap();
    }
    (messages(&events), parser.comments())
}

#[tokio::test]
async fn keep_alive_comments_keep_a_long_call_alive_behind_an_idle_timeout() {
    let server = start(|s| s.keep_alive(Some(Duration::from_millis(100)))).await;
    let (got, comments) = sleep_behind_idle_cutting_proxy(&server).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["result"]["content"][0]["text"], "slept 1");
    assert!(comments >= 5, "{comments} keep-alive comments");
    assert!(!server.stops_within(Duration::from_millis(300)).await);
}

#[tokio::test]
async fn without_keep_alive_the_idle_timeout_cancels_the_call() {
    let server = start(|s| s.keep_alive(None)).await;
    let (got, comments) = sleep_behind_idle_cutting_proxy(&server).await;
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(comments, 0);
    let stopped = server.next_stop().await;
    assert!(
        stopped.reason.contains("closed the response stream"),
        "{stopped:?}"
    );
}

/// `GET` with `Last-Event-ID` in `session`.
async fn resume(server: &Server, session: &str, last_id: &str) -> reqwest::Response {
    client()
        .get(&server.url)
        .header("accept", sse::CONTENT_TYPE)
        .header(headers::SESSION_ID, session)
        .header(headers::LAST_EVENT_ID, last_id)
        .send()
        .await
        .unwrap()
}

/// Both official clients resume a stream that ended without a result — a cancelled call's,
/// or one answered with an error. Such a stream owes nothing: the resume gets 405 (which the
/// spec allows a GET, and both clients take quietly), also once the stream itself is no
/// longer kept; a stream the server never had, or whose events it dropped, still gets 400.
#[tokio::test]
async fn a_stream_that_owes_nothing_more_answers_its_resume_with_405() {
    let server = start(|s| s).await;
    let session = session(&server).await;
    // A cancelled call: its stream ends without a response.
    let call = tool(json!(9), "sleep", json!({"seconds": 30}));
    let response = post(&server.url, Some(&session), &call)
        .send()
        .await
        .unwrap();
    let reading = tokio::spawn(events(response, |_| false));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 9}});
    post(&server.url, Some(&session), &cancel)
        .send()
        .await
        .unwrap();
    let seen = reading.await.unwrap();
    let cancelled_id = seen[0].id.clone().expect("the priming event's id");
    let ended = resume(&server, &session, &cancelled_id).await;
    assert_eq!(ended.status(), 405);
    assert_eq!(ended.headers()["allow"], "POST, DELETE");
    let body: Value = ended.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600, "{body}");
    // An error answer: resumed at (or past) it, nothing is owed; before it, it is replayed.
    let failing = tool(json!(10), "no-such-tool", json!({}));
    let response = post(&server.url, Some(&session), &failing)
        .send()
        .await
        .unwrap();
    let seen = events(response, |_| false).await;
    let answer = seen.last().unwrap();
    assert!(messages(&seen)[0]["error"].is_object(), "{seen:?}");
    let answered_id = answer.id.clone().expect("the answer's id");
    assert_eq!(resume(&server, &session, &answered_id).await.status(), 405);
    let primed = seen[0].id.clone().unwrap();
    let replay = resume(&server, &session, &primed).await;
    assert_eq!(replay.status(), 200);
    assert!(messages(&events(replay, |_| false).await)[0]["error"].is_object());
    // 64 more calls: the cancelled stream is no longer kept, its end still is.
    for id in 100..165 {
        let echo = tool(json!(id), "echo", json!({"text": "x"}));
        let response = post(&server.url, Some(&session), &echo)
            .send()
            .await
            .unwrap();
        events(response, |_| false).await;
    }
    assert_eq!(resume(&server, &session, &cancelled_id).await.status(), 405);
    // Never a stream of this session: 400.
    assert_eq!(resume(&server, &session, "999/1").await.status(), 400);
}
