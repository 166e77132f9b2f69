//! Against the fake server: a 2026-07-28 cancel closes the request's stream; HTTP failures, an
//! unreachable server and an expired session fail the call with a clear error.

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::http::Method;
use cancelkit::http::client::{HttpClient, TransportFailure};
use cancelkit::peer::{DEFAULT_DISCOVER_TIMEOUT, McpRevision, RequestError};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::fake;
use crate::harness::{
    WAIT, call, client_info, connect, eventually, header_of, negotiate, rpc_error, text,
};

#[tokio::test]
async fn v2026_cancel_closes_the_requests_stream_and_sends_no_notification() {
    let server = fake::Fake::start(false).await;
    let client = connect(HttpClient::new(&server.url).unwrap());
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2026_07_28);
    // The listing teaches the client which argument travels in a header.
    let _: Value = handle.request("tools/list", json!({})).await.unwrap();

    let pending = handle.request::<_, Value>(
        "tools/call",
        json!({"name": "hang", "arguments": {"region": "eu-west"}}),
    );
    let (headers, body) = eventually("the call was POSTed", || {
        server.record.posts("tools/call").into_iter().next()
    })
    .await;
    assert_eq!(
        header_of(&headers, "mcp-protocol-version"),
        Some("2026-07-28")
    );
    assert_eq!(header_of(&headers, "mcp-method"), Some("tools/call"));
    assert_eq!(header_of(&headers, "mcp-name"), Some("hang"));
    assert_eq!(header_of(&headers, "mcp-param-region"), Some("eu-west"));
    assert_eq!(header_of(&headers, "mcp-session-id"), None);
    // Give the stream a moment to be open for real.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        server.record.closed.lock().unwrap().is_empty(),
        "still open"
    );

    drop(pending);
    let closed = eventually("the server saw the stream closed", || {
        server.record.closed.lock().unwrap().first().cloned()
    })
    .await;
    assert_eq!(closed, body["id"]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        server.record.posts("notifications/cancelled").is_empty(),
        "the closed stream is the cancel; no notification"
    );
    // The connection goes on.
    let echoed = call(&handle, "echo", json!({"text": "after"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "after");
    client.close().await;
}

#[tokio::test]
async fn http_failures_fail_the_call_with_a_clear_error_and_the_connection_goes_on() {
    let server = fake::Fake::start(false).await;
    let client = HttpClient::new(&server.url)
        .unwrap()
        .max_event_bytes(16 << 10);
    let client = connect(client);
    let handle = client.handle();
    negotiate(&handle).await;

    let error = rpc_error(call(&handle, "http500", json!({})).await);
    assert_eq!(error.code.code(), -32603);
    assert!(error.message.contains("HTTP 500"), "{}", error.message);
    assert!(
        error.message.contains("the database is on fire"),
        "{}",
        error.message
    );
    assert_eq!(TransportFailure::of(&error), Some(TransportFailure::Status));
    assert_eq!(error.data.as_ref().unwrap()["status"], 500);

    let error = rpc_error(call(&handle, "rpc400", json!({})).await);
    assert_eq!(
        error.code.code(),
        -32602,
        "the server's own error is passed on"
    );
    assert_eq!(error.message, "Unknown tool arguments");

    let error = rpc_error(call(&handle, "bad_json", json!({})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::BadAnswer),
        "{error:?}"
    );
    assert!(
        error.message.contains("this is not json"),
        "{}",
        error.message
    );

    let error = rpc_error(call(&handle, "huge", json!({})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::TooLarge),
        "{error:?}"
    );
    assert!(error.message.contains("16384"), "{}", error.message);

    let error = rpc_error(call(&handle, "cut", json!({})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::Lost),
        "{error:?}"
    );
    assert!(
        error.message.contains("ended before the response"),
        "{}",
        error.message
    );
    assert!(error.message.contains("no event id"), "{}", error.message);

    let error = rpc_error(call(&handle, "huge_json", json!({})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::TooLarge),
        "{error:?}"
    );

    // 2026-07-28: ids were given, so resuming is tried — and refused, as such servers do.
    let error = rpc_error(call(&handle, "cut_with_id", json!({})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::Lost),
        "{error:?}"
    );
    assert!(
        error.message.contains("refused to resume"),
        "{}",
        error.message
    );
    let gets = server.record.of(Method::GET);
    assert_eq!(gets.len(), 1, "one attempt: a refusal is final");
    assert_eq!(header_of(&gets[0], "last-event-id"), Some("x1"));
    assert_eq!(
        header_of(&gets[0], "mcp-protocol-version"),
        Some("2026-07-28")
    );
    assert_eq!(header_of(&gets[0], "mcp-session-id"), None);

    let echoed = call(&handle, "echo", json!({"text": "still here"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "still here");
    client.close().await;
}

#[tokio::test]
async fn an_unreachable_server_fails_with_the_cause() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let client = connect(HttpClient::new(&url).unwrap());
    let outcome = tokio::time::timeout(
        WAIT,
        client
            .handle()
            .discover_or_initialize(client_info(), DEFAULT_DISCOVER_TIMEOUT),
    )
    .await
    .expect("an answer within 10 s");
    let Err(RequestError::Rpc(error)) = outcome else {
        panic!("expected an error response, got {outcome:?}");
    };
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::Unreachable)
    );
    assert!(
        error.message.contains(&format!("cannot reach {url}")),
        "{}",
        error.message
    );
    assert!(
        error.message.to_lowercase().contains("refused"),
        "the cause: {}",
        error.message
    );
    client.close().await;
}

#[tokio::test]
async fn an_expired_session_fails_the_call_and_closes_the_connection() {
    let server = fake::Fake::start(true).await;
    let client = connect(HttpClient::new(&server.url).unwrap().listen(false));
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2025_11_25);
    let echoed = call(&handle, "echo", json!({"text": "before"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "before");

    server.record.session_gone.store(true, Ordering::SeqCst);
    let error = rpc_error(call(&handle, "echo", json!({"text": "after"})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::SessionExpired),
        "{error:?}"
    );
    assert!(
        error.message.contains("ended the session"),
        "{}",
        error.message
    );
    eventually("the connection closed", || handle.is_closed().then_some(())).await;
    let later = call(&handle, "echo", json!({"text": "later"})).await;
    assert!(matches!(later, Err(RequestError::Closed)), "{later:?}");
    tokio::time::timeout(WAIT, client.bridge.stopped())
        .await
        .expect("the bridge stopped");
}
