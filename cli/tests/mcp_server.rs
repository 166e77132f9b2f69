//! A real MCP session behind `cancelkit trace`: the cancelkit runtime's `mcp_server` example,
//! a `tools/call` cancelled with `notifications/cancelled`, and the timeline `trace view` draws.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_cancelkit");

#[test]
fn a_cancelled_tools_call_on_cancelkits_mcp_server() {
    let server = cancelkit_tests::example("mcp_server");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mcp.jsonl");
    let mut proxy = Command::new(BIN)
        .arg("trace")
        .arg("--out")
        .arg(&out)
        .arg("--")
        .arg(&server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = proxy.stdin.take().unwrap();
    let mut stdout = BufReader::new(proxy.stdout.take().unwrap());
    let mut send = |m: Value| {
        stdin.write_all(format!("{m}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    let mut receive = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    };

    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "trace-test", "version": "0"}}}),
    );
    assert_eq!(receive()["id"], 1);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"seconds": 60}}}));
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "still serving"}}}));
    assert_eq!(receive()["id"], 3);
    send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "the user pressed stop"}}),
    );
    send(json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}));
    // MCP sends no response to a cancelled request: the next answer is the ping's
    assert_eq!(receive()["id"], 4);
    drop(stdin);

    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = proxy.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the server did not exit at EOF");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");

    let html_path = dir.path().join("mcp.html");
    let view = Command::new(BIN)
        .args(["trace", "view"])
        .arg(&out)
        .arg("-o")
        .arg(&html_path)
        .output()
        .unwrap();
    assert!(view.status.success(), "{view:?}");
    let html = std::fs::read_to_string(&html_path).unwrap();
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
