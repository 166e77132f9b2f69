//! The server's and the session's lifecycle: a server down or gone after the handshake, an
//! expired session renewed, one handshake for concurrent first calls, the session deleted at
//! shutdown.

use std::time::{Duration, Instant};

use cancelkit_gateway::upstream::CallError;
use cancelkit_gateway::upstream::http::HttpUpstream;
use serde_json::json;

use crate::support::rmcp_server::{Era, Server};
use crate::{call, text};

#[tokio::test]
async fn a_server_that_is_down_is_unavailable_at_once() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let upstream = HttpUpstream::new("down", &url);
    let started = Instant::now();
    let error = upstream
        .call(call("echo", json!({"text": "x"})))
        .await
        .unwrap_err();
    assert!(matches!(error, CallError::Unavailable(_)), "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let error = upstream.list_tools().await.unwrap_err();
    assert!(matches!(error, CallError::Unavailable(_)), "{error:?}");
}

/// The server answered once, then went away: the next call is `Unavailable` at once (not a
/// lost call: the request never reached anyone).
async fn goes_down_after_the_handshake(era: Era) {
    let server = Server::start(era).await;
    let upstream = HttpUpstream::new("up", &server.url);
    upstream
        .call(call("echo", json!({"text": "up"})))
        .await
        .unwrap();
    server.stop();
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(5);
    while tokio::net::TcpStream::connect(&addr).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "the server still accepts connections"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    let error = upstream
        .call(call("echo", json!({"text": "down"})))
        .await
        .unwrap_err();
    assert!(matches!(error, CallError::Unavailable(_)), "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn v2026_a_server_gone_after_the_handshake_is_unavailable() {
    goes_down_after_the_handshake(Era::Both).await;
}

#[tokio::test]
async fn v2025_a_server_gone_after_the_handshake_is_unavailable() {
    goes_down_after_the_handshake(Era::Legacy).await;
}

#[tokio::test]
async fn v2025_an_expired_session_is_renewed() {
    let server = Server::start(Era::Legacy).await;
    let upstream = HttpUpstream::new("up", &server.url);
    upstream
        .call(call("echo", json!({"text": "one"})))
        .await
        .unwrap();
    let first = server.log.find(|e| e["event"] == "echo").unwrap()["session"].clone();
    server.expire_sessions().await;
    let result = upstream
        .call(call("echo", json!({"text": "two"})))
        .await
        .expect("the call succeeds on a new session");
    assert_eq!(text(&result), "two");
    assert_eq!(server.tap.count("initialize"), 2, "initialized again");
    let second = server
        .log
        .find(|e| e["event"] == "echo" && e["text"] == "two")
        .unwrap()["session"]
        .clone();
    assert_ne!(first, second);
    server.stop();
}

async fn one_handshake_for_concurrent_first_calls(era: Era) {
    let server = Server::start(era).await;
    let upstream = HttpUpstream::new("up", &server.url);
    let calls = (0..5).map(|n| upstream.call(call("echo", json!({"text": n.to_string()}))));
    for result in futures_util::future::join_all(calls).await {
        result.expect("echo");
    }
    assert_eq!(server.tap.count("server/discover"), 1);
    let initializes = server.tap.count("initialize");
    assert_eq!(initializes, usize::from(era == Era::Legacy));
    server.stop();
}

#[tokio::test]
async fn v2026_concurrent_first_calls_share_one_handshake() {
    one_handshake_for_concurrent_first_calls(Era::Both).await;
}

#[tokio::test]
async fn v2025_concurrent_first_calls_share_one_handshake() {
    one_handshake_for_concurrent_first_calls(Era::Legacy).await;
}

#[tokio::test]
async fn v2025_shutdown_deletes_the_session() {
    let server = Server::start(Era::Legacy).await;
    let upstream = HttpUpstream::new("up", &server.url);
    upstream
        .call(call("echo", json!({"text": "x"})))
        .await
        .unwrap();
    let session = server.log.find(|e| e["event"] == "echo").unwrap()["session"].clone();
    upstream.shutdown().await;
    let deletes = server.tap.deletes();
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].as_deref(), session.as_str());
    server.stop();
}
