//! Calls that complete, in each era: tools listed and called, progress forwarded, upstream
//! errors passed through, oversized answers refused, annotated arguments in headers.

use cancelkit_gateway::upstream::http::HttpUpstream;
use cancelkit_gateway::upstream::{CallError, ToolCall};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::rmcp_server::{Era, Server};
use crate::{call, text};

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
            arguments: Some(super::raw(&json!({"seconds": 0.45, "label": "p"}))),
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
