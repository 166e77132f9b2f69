//! Unit tests of the client's pure parts; the behaviour against servers is tested in
//! `tests/tests/http_client/`.

use std::time::Duration;

use cancelkit_protocol::jsonrpc::RequestId;
use reqwest::StatusCode;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::declared::declarations;
use super::failure::{self, Failure, TransportFailure};
use super::session::{Era, Learned, era_of};
use super::stream::delay;
use super::{ClientError, HttpClient};

fn error_of(bytes: &[u8]) -> Value {
    serde_json::from_slice::<Value>(bytes).unwrap()
}

#[test]
fn an_error_status_passes_the_servers_json_rpc_error_on_under_our_id() {
    let body = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad session"}}"#;
    let failure = failure::from_status(StatusCode::BAD_REQUEST, body);
    let response = error_of(&failure.response(&RequestId::from(9)));
    assert_eq!(
        response,
        json!({"jsonrpc": "2.0", "id": 9, "error": {"code": -32600, "message": "Bad session"}})
    );
}

#[test]
fn an_error_status_without_json_rpc_is_32603_with_the_status_and_the_bodys_start() {
    let body = format!("boom\n{}", "y".repeat(500));
    let failure = failure::from_status(StatusCode::INTERNAL_SERVER_ERROR, body.as_bytes());
    let response = error_of(&failure.response(&RequestId::from("r")));
    let error = &response["error"];
    assert_eq!(response["id"], "r");
    assert_eq!(error["code"], -32603);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.starts_with("the server answered HTTP 500 Internal Server Error: boom y"),
        "{message}"
    );
    assert!(message.ends_with("..."), "cut: {message}");
    assert!(message.len() < 300, "{message}");
    assert_eq!(error["data"]["status"], 500);
    assert_eq!(error["data"]["transport"], "http_status");
}

#[test]
fn every_failure_names_its_kind_for_the_caller() {
    let cases = [
        (
            Failure::Unreachable("x".into()),
            TransportFailure::Unreachable,
        ),
        (Failure::SessionExpired, TransportFailure::SessionExpired),
        (Failure::Lost("x".into()), TransportFailure::Lost),
        (Failure::TooLarge("x".into()), TransportFailure::TooLarge),
        (Failure::BadAnswer("x".into()), TransportFailure::BadAnswer),
    ];
    for (failure, kind) in cases {
        assert_eq!(TransportFailure::of(&failure.to_error()), Some(kind));
    }
    assert_eq!(
        TransportFailure::of(&failure::not_sent(10)),
        Some(TransportFailure::NotSent)
    );
    assert_eq!(
        TransportFailure::of(&crate::JsonRpcError::internal("x")),
        None
    );
    assert!(!TransportFailure::Lost.never_reached_the_server());
}

#[test]
fn reopening_waits_for_the_servers_retry_doubling_on_failures_up_to_the_maximum() {
    let (default, max) = (Duration::from_secs(1), Duration::from_secs(30));
    assert_eq!(delay(None, 1, default, max), default);
    assert_eq!(
        delay(Some(250), 1, default, max),
        Duration::from_millis(250)
    );
    assert_eq!(
        delay(Some(250), 3, default, max),
        Duration::from_millis(1000)
    );
    assert_eq!(delay(Some(u64::MAX), 1, default, max), max);
    assert_eq!(delay(None, 400, default, max), max);
}

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).unwrap()
}

#[test]
fn a_request_is_2026_when_stamped_or_server_discover() {
    let stamped = raw(
        r#"{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#,
    );
    assert_eq!(era_of("tools/call", Some(&stamped)), Era::V2026);
    assert_eq!(era_of("server/discover", None), Era::V2026);
    assert_eq!(
        era_of("tools/call", Some(&raw(r#"{"name":"x"}"#))),
        Era::Legacy
    );
    assert_eq!(
        era_of(
            "initialize",
            Some(&raw(r#"{"protocolVersion":"2025-11-25"}"#))
        ),
        Era::Legacy
    );
    let older = raw(
        r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}"#,
    );
    assert_eq!(era_of("tools/list", Some(&older)), Era::Legacy);
}

#[test]
fn only_http_urls_make_a_client() {
    assert!(HttpClient::new("http://127.0.0.1:1/mcp").is_ok());
    assert!(HttpClient::new("https://example.com/mcp").is_ok());
    assert!(
        matches!(HttpClient::new("ftp://example.com/"), Err(ClientError::Scheme(s)) if s == "ftp")
    );
    assert!(matches!(
        HttpClient::new("not a url"),
        Err(ClientError::Url(_))
    ));
}

/// A tool whose only parameter `p` has `property` for its schema.
fn tool(name: &str, property: Value) -> Value {
    json!({"name": name, "inputSchema": {"type": "object", "properties": {"p": property}}})
}

#[test]
fn tools_with_invalid_header_declarations_are_left_out_at_2026() {
    let valid = [
        tool("plain", json!({"type": "string"})),
        tool(
            "string",
            json!({"type": "string", "x-mcp-header": "Region"}),
        ),
        tool(
            "integer",
            json!({"type": "integer", "x-mcp-header": "Priority"}),
        ),
        tool(
            "boolean",
            json!({"type": "boolean", "x-mcp-header": "Verbose"}),
        ),
        json!({"name": "nested", "inputSchema": {"type": "object", "properties": {"a": {
            "type": "object", "properties": {"b": {"type": "string", "x-mcp-header": "B"}}}},
            "default": {"x-mcp-header": "data, not a declaration"}}}),
    ];
    let invalid = [
        tool("empty", json!({"type": "string", "x-mcp-header": ""})),
        tool(
            "space",
            json!({"type": "string", "x-mcp-header": "My Region"}),
        ),
        tool(
            "colon",
            json!({"type": "string", "x-mcp-header": "Region:1"}),
        ),
        tool(
            "non_ascii",
            json!({"type": "string", "x-mcp-header": "Région"}),
        ),
        tool(
            "control",
            json!({"type": "string", "x-mcp-header": "Region\t1"}),
        ),
        tool("not_a_string", json!({"type": "string", "x-mcp-header": 7})),
        tool("object", json!({"type": "object", "x-mcp-header": "Data"})),
        tool("array", json!({"type": "array", "x-mcp-header": "Items"})),
        tool("null", json!({"type": "null", "x-mcp-header": "Nil"})),
        tool("number", json!({"type": "number", "x-mcp-header": "Score"})),
        tool("untyped", json!({"x-mcp-header": "Any"})),
        tool(
            "in_items",
            json!({"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}),
        ),
        json!({"name": "on_root", "inputSchema": {"type": "string", "x-mcp-header": "Root"}}),
        json!({"name": "duplicate", "inputSchema": {"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": "MyField"},
            "b": {"type": "string", "x-mcp-header": "myfield"}}}}),
    ];
    for tool in &valid {
        assert!(
            declarations(&tool["inputSchema"]).is_ok(),
            "{tool} is a valid tool"
        );
    }
    for tool in &invalid {
        assert!(
            declarations(&tool["inputSchema"]).is_err(),
            "{tool} is an invalid tool"
        );
    }
    let all: Vec<Value> = valid.iter().chain(&invalid).cloned().collect();
    let listed = raw(&json!({"tools": all, "nextCursor": "c"}).to_string());
    let names = |result: &RawValue| -> Vec<String> {
        let result: Value = serde_json::from_str(result.get()).unwrap();
        assert_eq!(result["nextCursor"], "c");
        result["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    // Before server/discover (a legacy session) the list passes as the server sent it.
    let learned = Learned::default();
    assert!(learned.learn("tools/list", &Ok(listed.clone())).is_none());
    learned.learn("server/discover", &Ok(raw("{}")));
    let kept = learned
        .learn("tools/list", &Ok(listed))
        .expect("invalid tools are left out");
    assert_eq!(
        names(&kept),
        ["plain", "string", "integer", "boolean", "nested"]
    );
    // A list with nothing invalid passes as it was.
    let fine = raw(&json!({"tools": valid}).to_string());
    assert!(learned.learn("tools/list", &Ok(fine)).is_none());
}
