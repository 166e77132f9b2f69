//! What a handler reads of its HTTP request at both eras, sessions found only by their owner,
//! and the stop token ending `GET` streams.

use std::time::{Duration, Instant};

use cancelkit::wire::{headers, sse};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::harness::{
    as_user, authenticate, client, events, messages, post, session, session_of, stamped, start,
    start_wrapped, tool,
};

/// The result of a `whoami` call answered on `response` (JSON or an event stream).
async fn whoami_result(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), 200);
    let streamed = response.headers().get("content-type").is_some_and(|v| {
        v.to_str()
            .unwrap_or_default()
            .starts_with(sse::CONTENT_TYPE)
    });
    let answer = if streamed {
        messages(&events(response, |_| false).await)
            .pop()
            .expect("an answer")
    } else {
        response.json().await.unwrap()
    };
    answer["result"].clone()
}

#[tokio::test]
async fn a_handler_reads_its_http_request_at_both_eras() {
    let server = start_wrapped(
        |s| s,
        |app| app.layer(axum::middleware::from_fn(authenticate)),
    )
    .await;
    // In a session: the session, the id as sent, what the layer put in the extensions.
    let session = session_of(&server, Some("alice")).await;
    let response = post(
        &server.url,
        Some(&session),
        &tool(json!(7), "whoami", json!({})),
    )
    .header("x-user", "alice")
    .send()
    .await
    .unwrap();
    let seen = whoami_result(response).await;
    assert_eq!(
        seen,
        json!({"user": "alice", "session": session, "clientId": 7, "method": "POST",
               "path": "/mcp", "header": "alice"})
    );
    // At 2026-07-28: no session, and the client's own id although the handler runs under one
    // of the server's (two clients sending "abc" at once share the peer).
    let response = post(
        &server.url,
        None,
        &stamped(tool(json!("abc"), "whoami", json!({}))),
    )
    .header("x-user", "bob")
    .send()
    .await
    .unwrap();
    let seen = whoami_result(response).await;
    assert_eq!(
        seen,
        json!({"user": "bob", "session": null, "clientId": "abc", "method": "POST",
               "path": "/mcp", "header": "bob", "resultType": "complete"})
    );
}

#[tokio::test]
async fn with_an_owner_a_session_is_found_only_by_its_owner() {
    let server = start(|s| {
        s.session_owner(|parts| {
            parts
                .headers
                .get("x-user")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        })
    })
    .await;
    let session = session_of(&server, Some("alice")).await;
    let echo = tool(json!(1), "echo", json!({"text": "x"}));
    // Bob, and a request naming no user, are told the session does not exist.
    for user in [Some("bob"), None] {
        let label = format!("{user:?}");
        let posted = as_user(post(&server.url, Some(&session), &echo), user)
            .send()
            .await
            .unwrap();
        assert_eq!(posted.status(), 404, "POST as {label}");
        let error: Value = posted.json().await.unwrap();
        assert_eq!(error["error"]["code"], -32001, "POST as {label}");
        let get = |resume: bool| {
            let mut request = as_user(client().get(&server.url), user)
                .header("accept", sse::CONTENT_TYPE)
                .header(headers::SESSION_ID, &session);
            if resume {
                request = request.header(headers::LAST_EVENT_ID, "0");
            }
            request.send()
        };
        assert_eq!(get(false).await.unwrap().status(), 404, "GET as {label}");
        assert_eq!(get(true).await.unwrap().status(), 404, "resume as {label}");
        let deleted = as_user(client().delete(&server.url), user)
            .header(headers::SESSION_ID, &session)
            .send()
            .await
            .unwrap();
        assert_eq!(deleted.status(), 404, "DELETE as {label}");
    }
    // The session is untouched: alice calls, then ends it.
    let posted = post(&server.url, Some(&session), &echo)
        .header("x-user", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 200);
    let deleted = client()
        .delete(&server.url)
        .header("x-user", "alice")
        .header(headers::SESSION_ID, &session)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
}

#[tokio::test]
async fn the_stop_token_ends_get_streams_and_calls_run_on_to_their_answers() {
    let stop = CancellationToken::new();
    let server = start({
        let stop = stop.clone();
        |s| s.stop_streams_on(stop)
    })
    .await;
    let session = session(&server).await;
    let stream = client()
        .get(&server.url)
        .header("accept", sse::CONTENT_TYPE)
        .header(headers::SESSION_ID, &session)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let call = post(
        &server.url,
        Some(&session),
        &tool(json!(1), "sleep", json!({"seconds": 0.5})),
    )
    .send()
    .await
    .unwrap();
    let answer = tokio::spawn(events(call, |_| false));
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.cancel();
    // The GET stream ends (`events` panics if it is still open after its wait)...
    let started = Instant::now();
    let on_stream = events(stream, |_| false).await;
    assert!(started.elapsed() < Duration::from_secs(2), "{on_stream:?}");
    assert!(messages(&on_stream).is_empty(), "{on_stream:?}");
    // ...and the call is answered.
    let got = messages(&answer.await.unwrap());
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["result"]["content"][0]["text"], "slept 0.5");
    // A GET opened after the stop ends at once.
    let late = client()
        .get(&server.url)
        .header("accept", sse::CONTENT_TYPE)
        .header(headers::SESSION_ID, &session)
        .send()
        .await
        .unwrap();
    if late.status() == 200 {
        let started = Instant::now();
        events(late, |_| false).await;
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
