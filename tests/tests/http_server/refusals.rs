//! Bad input: every refusal with its status and JSON-RPC error, and a rebound host name refused.

use cancelkit::wire::origin::OriginPolicy;
use cancelkit::wire::{headers, sse};
use serde_json::{Value, json};

use crate::harness::{Server, client, post, session, stamped, start, tool};

/// A raw POST with these headers and body; status and JSON body.
async fn raw(server: &Server, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut request = client().post(&server.url).body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn bad_requests_get_a_clear_status_and_error() {
    let server = start(|s| s.max_sessions(1)).await;
    let json_headers = [
        ("content-type", "application/json"),
        ("accept", headers::ACCEPT_JSON_OR_SSE),
    ];
    let echo = stamped(tool(json!(1), "echo", json!({"text": "x"}))).to_string();
    // Not acceptable, wrong media type.
    let (status, _) = raw(
        &server,
        &[
            ("content-type", "application/json"),
            ("accept", "text/html"),
        ],
        &echo,
    )
    .await;
    assert_eq!(status, 406);
    let (status, _) = raw(&server, &[("content-type", "text/plain")], &echo).await;
    assert_eq!(status, 415);
    // Not JSON, not JSON-RPC, a batch.
    let (status, body) = raw(&server, &json_headers, "{\"jsonrpc\":").await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32700))
    );
    let (status, body) = raw(
        &server,
        &json_headers,
        r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    assert_eq!(body["id"], 1);
    let (status, body) = raw(&server, &json_headers, &format!("[{echo}]")).await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    // Too large for the peer's frame limit.
    let big = stamped(tool(json!(1), "echo", json!({"text": "x".repeat(100_000)}))).to_string();
    let (status, _) = raw(&server, &json_headers, &big).await;
    assert_eq!(status, 413);
    // Neither a session nor a 2026-07-28 stamp.
    let unstamped = tool(json!(1), "echo", json!({"text": "x"})).to_string();
    let (status, body) = raw(&server, &json_headers, &unstamped).await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    // An unknown session.
    let (status, body) = raw(
        &server,
        &[json_headers[0], json_headers[1], ("mcp-session-id", "nope")],
        &unstamped,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (404, Some(-32001))
    );
    // Headers that disagree with a 2026-07-28 body.
    let (status, body) = raw(
        &server,
        &[
            json_headers[0],
            json_headers[1],
            ("mcp-protocol-version", "2025-11-25"),
        ],
        &echo,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32020))
    );
    let (status, body) = raw(
        &server,
        &[
            json_headers[0],
            json_headers[1],
            ("mcp-method", "tools/list"),
        ],
        &echo,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32020))
    );
    // A foreign origin (DNS rebinding).
    let (status, _) = raw(
        &server,
        &[
            json_headers[0],
            json_headers[1],
            ("origin", "http://evil.example"),
        ],
        &echo,
    )
    .await;
    assert_eq!(status, 403);
    // A session's protocol version, a duplicate id in flight, too many sessions.
    let session = session(&server).await;
    let session_headers = [
        json_headers[0],
        json_headers[1],
        ("mcp-session-id", session.as_str()),
    ];
    let (status, body) = raw(
        &server,
        &[
            session_headers[0],
            session_headers[1],
            session_headers[2],
            ("mcp-protocol-version", "1999-01-01"),
        ],
        &unstamped,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    let long = tool(json!(7), "sleep", json!({"seconds": 30}));
    let first = post(&server.url, Some(&session), &long)
        .send()
        .await
        .unwrap();
    let (status, body) = raw(&server, &session_headers, &long.to_string()).await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32600)),
        "{body}"
    );
    drop(first);
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let (status, body) = raw(&server, &json_headers, &initialize.to_string()).await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (503, Some(-32050))
    );
    // GET without a session, DELETE of an unknown one.
    let get = client()
        .get(&server.url)
        .header("accept", sse::CONTENT_TYPE)
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 405);
    let delete = client()
        .delete(&server.url)
        .header("mcp-session-id", "nope")
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), 404);
}

#[tokio::test]
async fn a_loopback_server_checking_hosts_refuses_a_rebound_name() {
    let server = start(|s| s.origin_policy(OriginPolicy::new().loopback_hosts())).await;
    let echo = stamped(tool(json!(1), "echo", json!({"text": "x"})));
    let refused = post(&server.url, None, &echo)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let allowed = post(&server.url, None, &echo).send().await.unwrap();
    assert_eq!(allowed.status(), 200);
}
