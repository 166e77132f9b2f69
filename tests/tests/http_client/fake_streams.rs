//! Against the fake server: the session's `GET` stream, the server's requests, the `POST` bound,
//! the message limit, and a legacy cancel sent again.

use std::time::Duration;

use axum::http::Method;
use cancelkit::http::client::{HttpClient, TransportFailure};
use cancelkit::peer::McpRevision;
use serde_json::{Value, json};

use crate::fake;
use crate::harness::{WAIT, call, connect, eventually, header_of, negotiate, rpc_error, text};

#[tokio::test]
async fn the_sessions_get_stream_is_delivered_and_reopened_with_last_event_id() {
    let server = fake::Fake::start(true).await;
    let client = HttpClient::new(&server.url)
        .unwrap()
        .retry_delay(Duration::from_millis(20));
    let mut client = connect(client);
    let handle = client.handle();
    negotiate(&handle).await;
    for expected in ["first", "second"] {
        let message = tokio::time::timeout(WAIT, client.messages.recv())
            .await
            .expect("a message from the GET stream")
            .unwrap();
        assert_eq!(message["data"], expected);
    }
    let gets = server.record.of(Method::GET);
    assert_eq!(gets.len(), 2, "opened, then reopened once");
    assert_eq!(header_of(&gets[0], "last-event-id"), None);
    assert_eq!(header_of(&gets[1], "last-event-id"), Some("g1"));
    for get in &gets {
        assert_eq!(header_of(get, "mcp-session-id"), Some("session-1"));
        assert_eq!(header_of(get, "mcp-protocol-version"), Some("2025-11-25"));
    }
    client.close().await;
    let deletes = server.record.of(Method::DELETE);
    assert_eq!(deletes.len(), 1);
    assert_eq!(header_of(&deletes[0], "mcp-session-id"), Some("session-1"));
}

#[tokio::test]
async fn a_servers_request_on_a_calls_stream_is_answered_by_the_peer() {
    let server = fake::Fake::start(true).await;
    let client = connect(HttpClient::new(&server.url).unwrap().listen(false));
    let handle = client.handle();
    negotiate(&handle).await;
    let answered = call(&handle, "ask", json!({})).await.unwrap();
    assert_eq!(text(&answered), "answered");
    let (headers, answer) = server
        .record
        .seen
        .lock()
        .unwrap()
        .iter()
        .find(|(m, _, body)| *m == Method::POST && body["id"] == "srv-1")
        .map(|(_, headers, body)| (headers.clone(), body.clone()))
        .expect("the answer was POSTed");
    assert_eq!(answer["result"], json!({}), "{answer}");
    assert_eq!(header_of(&headers, "mcp-session-id"), Some("session-1"));
    client.close().await;
}

#[tokio::test]
async fn at_the_post_bound_requests_wait_in_order_and_cancels_still_go_through() {
    let server = fake::Fake::start(false).await;
    let client = connect(
        HttpClient::new(&server.url)
            .unwrap()
            .max_concurrent_posts(1),
    );
    let handle = client.handle();
    negotiate(&handle).await;
    let hang = |region: &str| {
        handle.request::<_, Value>(
            "tools/call",
            json!({"name": "hang", "arguments": {"region": region}}),
        )
    };
    let first = hang("first");
    let (_, posted) = eventually("the first call was POSTed", || {
        server.record.posts("tools/call").into_iter().next()
    })
    .await;
    let second = hang("second");
    let third = handle.request::<_, Value>(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "third"}}),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        server.record.posts("tools/call").len(),
        1,
        "the others wait for the slot"
    );

    drop(second); // cancelled while waiting: never sent
    drop(first); // its stream closes, which frees the slot
    let echoed = tokio::time::timeout(WAIT, third)
        .await
        .expect("the third call got the slot")
        .unwrap();
    assert_eq!(text(&echoed), "third");
    let calls: Vec<Value> = server
        .record
        .posts("tools/call")
        .into_iter()
        .map(|(_, body)| body["params"]["arguments"].clone())
        .collect();
    assert_eq!(
        calls,
        [json!({"region": "first"}), json!({"text": "third"})]
    );
    let closed = eventually("the first call's stream closed", || {
        server.record.closed.lock().unwrap().first().cloned()
    })
    .await;
    assert_eq!(closed, posted["id"]);
    client.close().await;
}

#[tokio::test]
async fn a_request_beyond_the_message_limit_fails_without_being_sent() {
    let server = fake::Fake::start(false).await;
    let client = connect(
        HttpClient::new(&server.url)
            .unwrap()
            .max_message_bytes(2048),
    );
    let handle = client.handle();
    negotiate(&handle).await;
    let error = rpc_error(call(&handle, "echo", json!({"text": "x".repeat(4096)})).await);
    assert_eq!(
        TransportFailure::of(&error),
        Some(TransportFailure::NotSent),
        "{error:?}"
    );
    assert!(error.message.contains("2048"), "{}", error.message);
    assert!(server.record.posts("tools/call").is_empty());
    let echoed = call(&handle, "echo", json!({"text": "small"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "small");
    client.close().await;
}

#[tokio::test]
async fn a_legacy_cancel_that_may_overtake_its_request_is_sent_again_once_the_post_is_answered() {
    let server = fake::Fake::start(true).await;
    let client = connect(HttpClient::new(&server.url).unwrap().listen(false));
    let handle = client.handle();
    assert_eq!(negotiate(&handle).await, McpRevision::V2025_11_25);
    let pending =
        handle.request::<_, Value>("tools/call", json!({"name": "late", "arguments": {}}));
    let (_, posted) = eventually("the call was POSTed", || {
        server.record.posts("tools/call").into_iter().next()
    })
    .await;
    drop(pending); // before the server answered the POST (it takes 300 ms)
    let cancels = eventually("notifications/cancelled was sent twice", || {
        Some(server.record.posts("notifications/cancelled")).filter(|c| c.len() == 2)
    })
    .await;
    for (headers, cancel) in &cancels {
        assert_eq!(cancel["params"]["requestId"], posted["id"]);
        assert_eq!(header_of(headers, "mcp-session-id"), Some("session-1"));
    }
    // Then the request's stream is dropped.
    eventually("the call's stream closed", || {
        server.record.closed.lock().unwrap().first().cloned()
    })
    .await;
    client.close().await;
}
