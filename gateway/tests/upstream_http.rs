//! The Streamable HTTP upstream connector against a real third-party MCP server: rmcp 3.9's
//! `StreamableHttpService`, in-process on 127.0.0.1, behind a tap that records every HTTP
//! request it receives and counts the TCP connections it closes.
//!
//! rmcp serves both eras on one endpoint: a request stamped with 2026-07-28 `_meta` (or
//! `server/discover`) is served statelessly, `initialize` opens a 2025-11-25 session. The
//! legacy tests pin the server to versions up to 2025-11-25 (as a server that does not speak
//! 2026-07-28), so the connector falls back to `initialize`.

mod support;

use std::time::{Duration, Instant};

use cancelkit::{CancelReason, Scope};
use cancelkit_gateway::upstream::http::HttpUpstream;
use cancelkit_gateway::upstream::{CallError, ToolCall};
use serde_json::{Value, json};
use support::rmcp_server::{Era, Server, wait_for};
use tokio::sync::mpsc;

fn call(tool: &str, arguments: Value) -> ToolCall {
    ToolCall {
        tool: tool.into(),
        arguments: Some(arguments),
        progress: None,
    }
}

/// The text of a `CallToolResult`'s first content block.
fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

async fn lists_tools_and_echoes(era: Era) {
    let server = Server::start(era).await;
    let upstream = HttpUpstream::new("up", &server.url);
    let tools = upstream.list_tools().await.expect("tools/list");
    let mut names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["big", "echo", "fail", "routed", "sleep"]);

    let result = upstream
        .call(call("echo", json!({"text": "hello"})))
        .await
        .expect("echo");
    assert_eq!(text(&result), "hello");

    let echoed = server.log.find(|e| e["event"] == "echo").expect("echo ran");
    let answered_as = server.tap.answered_as("tools/call");
    let expected = if era == Era::Json {
        "application/json"
    } else {
        "text/event-stream"
    };
    assert!(
        !answered_as.is_empty() && answered_as.iter().all(|t| t.starts_with(expected)),
        "{answered_as:?}"
    );
    match era {
        Era::Both | Era::Json => {
            assert_eq!(echoed["version"], "2026-07-28", "{echoed}");
            assert_eq!(echoed["session"], Value::Null, "no session at 2026-07-28");
            assert_eq!(server.tap.count("initialize"), 0);
            assert_eq!(server.tap.count("server/discover"), 1);
            for post in server.tap.posts() {
                assert_eq!(
                    post.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
                    "2026-07-28",
                    "every request is stamped: {post:?}"
                );
            }
        }
        Era::Legacy => {
            assert_ne!(
                echoed["session"],
                Value::Null,
                "the call carries the session"
            );
            assert_eq!(server.tap.count("server/discover"), 1, "probed first");
            assert_eq!(server.tap.count("initialize"), 1);
            assert_eq!(server.tap.count("notifications/initialized"), 1);
        }
    }
    upstream.shutdown().await;
    server.stop();
}

#[tokio::test]
async fn v2026_lists_tools_and_calls_echo() {
    lists_tools_and_echoes(Era::Both).await;
}

#[tokio::test]
async fn v2025_lists_tools_and_calls_echo() {
    lists_tools_and_echoes(Era::Legacy).await;
}

async fn forwards_progress(era: Era) {
    let server = Server::start(era).await;
    let upstream = HttpUpstream::new("up", &server.url);
    let (sink, mut progress) = mpsc::channel(64);
    let result = upstream
        .call(ToolCall {
            tool: "sleep".into(),
            arguments: Some(json!({"seconds": 0.45, "label": "p"})),
            progress: Some(sink),
        })
        .await
        .expect("sleep with progress");
    assert_eq!(text(&result), "slept");
    let mut seen = Vec::new();
    while let Ok(params) = progress.try_recv() {
        seen.push(params);
    }
    assert!(seen.len() >= 2, "progress forwarded: {seen:?}");
    for (n, params) in seen.iter().enumerate() {
        assert_eq!(params.get("progressToken"), None, "token removed: {params}");
        assert_eq!(params["progress"], json!((n + 1) as f64), "{params}");
    }
    server.stop();
}

#[tokio::test]
async fn v2026_progress_is_forwarded() {
    forwards_progress(Era::Both).await;
}

#[tokio::test]
async fn v2025_progress_is_forwarded() {
    forwards_progress(Era::Legacy).await;
}

/// Two sleeps in flight at once; the one labelled `dropped` is dropped once both run, the
/// other completes. Returns the upstream ids of both.
async fn drop_one_of_two(server: &Server, upstream: &HttpUpstream) -> (Value, Value) {
    let is_started =
        |label: &'static str| move |e: &Value| e["event"] == "started" && e["label"] == label;
    let mut dropped =
        Box::pin(upstream.call(call("sleep", json!({"seconds": 30, "label": "dropped"}))));
    tokio::select! {
        biased;
        _ = wait_for(&server.log, is_started("dropped")) => {}
        _ = &mut dropped => panic!("dropped finished"),
    }
    let mut kept = Box::pin(upstream.call(call("sleep", json!({"seconds": 0.6, "label": "kept"}))));
    tokio::select! {
        biased;
        _ = wait_for(&server.log, is_started("kept")) => {}
        _ = &mut kept => panic!("kept finished before it was seen running"),
        _ = &mut dropped => panic!("dropped finished"),
    }
    let dropped_id = server.log.started("dropped")["id"].clone();
    let kept_id = server.log.started("kept")["id"].clone();
    drop(dropped);
    let result = kept.await.expect("the other call completes");
    assert_eq!(text(&result), "slept");
    (dropped_id, kept_id)
}

/// Waits (at most 5 s) until the server has closed more than `before` connections.
async fn wait_closed(server: &Server, before: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.tap.closed_connections() <= before {
        assert!(
            Instant::now() < deadline,
            "the server never saw the connection close"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn drop_closes_the_stream_and_stops_the_tool(era: Era) {
    let server = Server::start(era).await;
    let upstream = HttpUpstream::new("up", &server.url);
    let (dropped, kept) = drop_one_of_two(&server, &upstream).await;
    let cancelled = wait_for(&server.log, |e| e["event"] == "cancelled").await;
    assert_eq!(cancelled["id"], dropped, "the dropped call's tool stopped");
    wait_closed(&server, 0).await;
    assert!(
        server
            .log
            .find(|e| e["event"] == "finished" && e["id"] == kept)
            .is_some()
    );
    assert!(
        server
            .log
            .find(|e| e["event"] == "cancelled" && e["id"] == kept)
            .is_none(),
        "no cancel reached the call that was not dropped"
    );
    assert_eq!(
        server.tap.count("notifications/cancelled"),
        0,
        "at 2026-07-28 the closed stream is the cancel"
    );
    server.stop();
}

#[tokio::test]
async fn v2026_dropping_a_call_closes_its_stream_and_stops_the_tool() {
    drop_closes_the_stream_and_stops_the_tool(Era::Both).await;
}

#[tokio::test]
async fn v2026_json_dropping_a_call_closes_its_connection_and_stops_the_tool() {
    drop_closes_the_stream_and_stops_the_tool(Era::Json).await;
}

#[tokio::test]
async fn v2026_the_connection_of_a_dropped_call_is_closed_not_pooled() {
    let server = Server::start(Era::Both).await;
    let upstream = HttpUpstream::new("up", &server.url);
    upstream
        .call(call("echo", json!({"text": "warm"})))
        .await
        .unwrap();
    let before = server.tap.closed_connections();
    // A call that sends progress: its response stream is open (headers sent) when dropped.
    let (sink, mut progress) = mpsc::channel(64);
    let sleep = upstream.call(ToolCall {
        tool: "sleep".into(),
        arguments: Some(json!({"seconds": 30, "label": "streaming"})),
        progress: Some(sink),
    });
    tokio::select! {
        _ = progress.recv() => {}
        _ = sleep => panic!("the sleep finished"),
    }
    let id = server.log.started("streaming")["id"].clone();
    let cancelled = wait_for(&server.log, |e| e["event"] == "cancelled").await;
    assert_eq!(cancelled["id"], id);
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.tap.closed_connections() == before {
        assert!(
            Instant::now() < deadline,
            "the server never saw the connection close"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.stop();
}

#[tokio::test]
async fn v2025_dropping_a_call_sends_notifications_cancelled_with_the_upstream_id() {
    let server = Server::start(Era::Legacy).await;
    let upstream = HttpUpstream::new("up", &server.url);
    let (dropped, kept) = drop_one_of_two(&server, &upstream).await;
    let notice = wait_for(&server.log, |e| e["event"] == "notifications/cancelled").await;
    assert_eq!(
        notice["requestId"], dropped,
        "the upstream's own id: {notice}"
    );
    // The runtime's summary of a dropped request (the same on a stdio upstream).
    assert_eq!(notice["reason"], "the caller dropped the request");
    let cancelled = wait_for(&server.log, |e| e["event"] == "cancelled").await;
    assert_eq!(cancelled["id"], dropped, "the dropped call's tool stopped");
    assert!(
        server
            .log
            .find(|e| e["event"] == "finished" && e["id"] == kept)
            .is_some()
    );
    assert!(
        server
            .log
            .find(|e| e["event"] == "cancelled" && e["id"] == kept)
            .is_none()
    );
    let cancels: Vec<_> = server
        .tap
        .posts()
        .into_iter()
        .filter(|p| p.body["method"] == "notifications/cancelled")
        .collect();
    assert_eq!(cancels.len(), 1, "{cancels:?}");
    assert_ne!(
        cancels[0].session, None,
        "the cancel travels on the session"
    );
    server.stop();
}

#[tokio::test]
async fn v2025_the_reason_is_the_cancelled_scope_s_cause() {
    let server = Server::start(Era::Legacy).await;
    let upstream = std::sync::Arc::new(HttpUpstream::new("up", &server.url));
    let (scope, canceller) = Scope::root();
    let task = tokio::spawn({
        let upstream = upstream.clone();
        scope.run(async move {
            tokio::select! {
                result = upstream.call(call("sleep", json!({"seconds": 30, "label": "scoped"}))) => Some(result),
                () = cancelkit::cancelled() => None,
            }
        })
    });
    wait_for(&server.log, |e| e["event"] == "started").await;
    canceller.cancel(CancelReason::Timeout(Duration::from_secs(7)));
    // The upstream request is a child of the scope: the call ends with it, unanswered.
    let ended = task.await.unwrap();
    assert!(!matches!(ended, Some(Ok(_))), "{ended:?}");
    let notice = wait_for(&server.log, |e| e["event"] == "notifications/cancelled").await;
    assert_eq!(notice["reason"], "timed out after 7s");
    assert_eq!(notice["requestId"], server.log.started("scoped")["id"]);
    server.stop();
}

/// A call dropped after its POST reached the server but before the server took it in: the
/// first `notifications/cancelled` overtakes the call (rmcp ignores a cancel for a request it
/// does not know, then runs the call), so the connector sends it again once the server answers
/// the POST, and the tool stops.
#[tokio::test]
async fn v2025_a_cancel_that_overtook_its_call_is_sent_again() {
    let server = Server::start(Era::Legacy).await;
    let upstream = HttpUpstream::new("up", &server.url);
    upstream.list_tools().await.expect("tools/list");
    server.hold_calls(Duration::from_millis(400));
    let sleep = upstream.call(call("sleep", json!({"seconds": 30, "label": "held"})));
    let dropped = tokio::time::timeout(Duration::from_millis(150), sleep).await;
    assert!(dropped.is_err(), "the call finished: {dropped:?}");
    assert_eq!(
        server.tap.count("tools/call"),
        1,
        "the POST reached the server"
    );
    let started = wait_for(&server.log, |e| e["event"] == "started").await;
    let cancelled = wait_for(&server.log, |e| e["event"] == "cancelled").await;
    assert_eq!(cancelled["id"], started["id"], "{cancelled}");
    assert_eq!(cancelled["how"], "token", "{cancelled}");
    let notices: Vec<_> = server
        .tap
        .posts()
        .into_iter()
        .filter(|p| p.body["method"] == "notifications/cancelled")
        .map(|p| p.body["params"]["requestId"].clone())
        .collect();
    assert_eq!(notices, [started["id"].clone(), started["id"].clone()]);
    server.stop();
}

async fn passes_upstream_errors(era: Era) {
    let server = Server::start(era).await;
    let upstream = HttpUpstream::new("up", &server.url);
    let error = upstream
        .call(call("fail", json!({})))
        .await
        .expect_err("fail fails");
    let CallError::Rpc(error) = error else {
        panic!("not passed through: {error:?}");
    };
    assert_eq!(error.code.code(), -32602);
    assert_eq!(error.message, "no such thing");
    assert_eq!(error.data, Some(json!({"why": "testing"})));
    server.stop();
}

#[tokio::test]
async fn v2026_upstream_errors_pass_through() {
    passes_upstream_errors(Era::Both).await;
}

#[tokio::test]
async fn v2025_upstream_errors_pass_through() {
    passes_upstream_errors(Era::Legacy).await;
}

/// An answer beyond 16 MiB is refused (the call is lost), and the upstream serves on.
async fn refuses_oversized_answers(era: Era) {
    let server = Server::start(era).await;
    let upstream = HttpUpstream::new("up", &server.url);
    let limit = cancelkit_gateway::upstream::http::MAX_MESSAGE_BYTES;
    let error = upstream
        .call(call("big", json!({"bytes": limit + 1})))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, CallError::Lost(why) if why.contains("exceeds")),
        "{error:?}"
    );
    let result = upstream
        .call(call("big", json!({"bytes": 1 << 20})))
        .await
        .expect("a large answer within the limit");
    assert_eq!(text(&result).len(), 1 << 20);
    server.stop();
}

#[tokio::test]
async fn v2026_oversized_answers_are_refused() {
    refuses_oversized_answers(Era::Both).await;
}

#[tokio::test]
async fn v2025_oversized_answers_are_refused() {
    refuses_oversized_answers(Era::Legacy).await;
}

/// At 2026-07-28 an argument annotated `x-mcp-header` travels in its `Mcp-Param-*` header
/// too (rmcp refuses the call without it): known from `tools/list`, or learned by listing the
/// tools again when the server refuses the call with HeaderMismatch.
#[tokio::test]
async fn v2026_annotated_arguments_travel_in_headers() {
    let server = Server::start(Era::Both).await;
    let upstream = HttpUpstream::new("up", &server.url);
    upstream.list_tools().await.unwrap();
    let result = upstream
        .call(call("routed", json!({"region": "eu west "})))
        .await
        .expect("routed");
    assert_eq!(text(&result), "eu west ");
    let routed = server.log.find(|e| e["event"] == "routed").unwrap();
    assert_eq!(routed["header"], "=?base64?ZXUgd2VzdCA=?=", "{routed}");

    let cold = HttpUpstream::new("cold", &server.url);
    let lists = server.tap.count("tools/list");
    let result = cold
        .call(call("routed", json!({"region": "us"})))
        .await
        .expect("routed before tools/list");
    assert_eq!(text(&result), "us");
    assert_eq!(
        server.tap.count("tools/list"),
        lists + 1,
        "listed on demand"
    );
    server.stop();
}

#[tokio::test]
async fn v2026_json_lists_tools_and_calls_echo() {
    lists_tools_and_echoes(Era::Json).await;
}

#[tokio::test]
async fn v2026_json_progress_is_forwarded() {
    forwards_progress(Era::Json).await;
}

#[tokio::test]
async fn v2026_json_upstream_errors_pass_through() {
    passes_upstream_errors(Era::Json).await;
}

#[tokio::test]
async fn v2026_json_oversized_answers_are_refused() {
    refuses_oversized_answers(Era::Json).await;
}

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
