//! A real MCP session behind `cancelkit trace`: the cancelkit runtime's `mcp_server` example,
//! a `tools/call` cancelled with `notifications/cancelled`, and the timeline `trace view` draws.

use std::process::Stdio;

use serde_json::json;

mod support;

use support::{Traced, view};

#[test]
fn a_cancelled_tools_call_on_cancelkits_mcp_server() {
    let server = cancelkit_tests::example("mcp_server");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mcp.jsonl");
    let mut session = Traced::start(&out, &[&server], Stdio::piped());

    session.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "trace-test", "version": "0"}}}),
    );
    assert_eq!(session.receive()["id"], 1);
    session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"seconds": 60}}}));
    session.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "still serving"}}}));
    assert_eq!(session.receive()["id"], 3);
    session.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "the user pressed stop"}}),
    );
    session.send(json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}));
    // MCP sends no response to a cancelled request: the next answer is the ping's
    assert_eq!(session.receive()["id"], 4);
    session.finish();

    let html_path = dir.path().join("mcp.html");
    let html = view(&out, &html_path);
    let rows: Vec<&str> = html.split("<div class=\"row\"").skip(1).collect();
    let heads: Vec<&str> = rows.iter().map(|r| &r[..r.find('>').unwrap()]).collect();
    assert_eq!(
        heads,
        [
            " data-method=\"initialize\" data-id=\"1\" data-dir=\"in\"",
            " data-method=\"tools/call\" data-id=\"2\" data-dir=\"in\"",
            " data-method=\"tools/call\" data-id=\"3\" data-dir=\"in\"",
            " data-method=\"ping\" data-id=\"4\" data-dir=\"in\"",
        ]
    );
    let cancelled = rows[1];
    assert!(cancelled.contains("class=\"cancel\""), "{cancelled}");
    assert!(cancelled.contains("class=\"bar open\""), "{cancelled}");
    assert!(
        cancelled.contains("notifications/cancelled at"),
        "{cancelled}"
    );
    assert!(cancelled.contains("no response"), "{cancelled}");
    for row in [rows[0], rows[2], rows[3]] {
        assert!(
            row.contains("class=\"bar\"") && !row.contains("class=\"cancel\""),
            "{row}"
        );
    }
    assert!(html.contains("<input id=\"filter\""));
}
