//! 2026-07-28 via `discover()`: the cancel is the closed response stream, and the server sends
//! the client no requests and no `notifications/cancelled`.

use serde_json::{Value, json};

use crate::harness::{
    PROTOCOL_VERSION_META, assert_client_cancel_honoured, assert_quiet, discover_run,
};

/// a. 2026-07-28 via `discover()`: every request stamped, no session, and the cancel is the
/// closed response stream. Nothing to resume (every exchange a POST), and nothing logged at
/// WARNING or above.
#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn a_discover_2026_07_28_closing_the_stream_stops_the_tool_without_a_response() {
    let report = discover_run();
    let all = report.lines();
    assert_eq!(report.posts("server/discover").len(), 1, "{all}");
    assert_eq!(report.posts("initialize"), Vec::<&Value>::new(), "{all}");

    // No session: no GET stream, no DELETE, no Mcp-Session-Id either way; every message a
    // POST stamped with 2026-07-28 in its _meta and its MCP-Protocol-Version header.
    for exchange in report.exchanges() {
        assert_eq!(exchange["method"], "POST", "{exchange}\n{all}");
        assert!(
            exchange["headers"].get("mcp-session-id").is_none()
                && exchange["responseHeaders"].get("mcp-session-id").is_none(),
            "{exchange}\n{all}"
        );
        assert_eq!(
            exchange["headers"]["mcp-protocol-version"], "2026-07-28",
            "{exchange}"
        );
        assert_eq!(
            exchange["body"]["params"]["_meta"][PROTOCOL_VERSION_META], "2026-07-28",
            "{exchange}"
        );
        assert_eq!(exchange["status"], 200, "{exchange}\n{all}");
    }

    let line = assert_client_cancel_honoured(
        report,
        "2026-07-28",
        "the client closed the response stream",
    );

    // The SDK closed the call's stream (it aborts the POST) and sent no notifications/cancelled:
    // at 2026-07-28 over HTTP the closed stream is the cancel.
    let post = report.tool_post("sleep");
    let end = post["end"].as_str().unwrap_or_default();
    assert!(
        end == "cancelled by the client" || end == "closed by the client",
        "the sleep's stream ended {end:?}, not by the client:\n{all}"
    );
    assert_eq!(
        report.posts("notifications/cancelled"),
        Vec::<&Value>::new(),
        "{all}"
    );

    // The server logged the cancel under its own id for the request (one peer serves every
    // 2026-07-28 client), the one the stop was logged with.
    let ours = line
        .split_once("sleep tool stopped request_id=")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .expect("a request id in the stop line");
    assert!(
        report.server_log.contains(&format!(
            "the peer cancelled a request request_id={ours} reason=\"the client closed the response stream\""
        )),
        "{all}"
    );
    assert_quiet(report);
}

/// b. 2026-07-28: after the cancelled call, and after `ask_client` (which at 2026-07-28 may not
/// ask the client anything), the server has sent the client no requests and no
/// `notifications/cancelled`.
#[test]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
fn b_discover_2026_07_28_server_sends_no_requests_and_no_notifications_cancelled() {
    let report = discover_run();
    let all = report.lines();
    assert_eq!(report.event("sleep")["outcome"], "cancelled", "{all}");
    let asked = report.event("ask_client");
    assert!(
        asked["error"]
            .as_str()
            .is_some_and(|e| e.contains("issues no requests")),
        "{all}"
    );
    assert_eq!(
        report.event("sampling_callbacks")["calls"],
        json!([]),
        "{all}"
    );
    let requests: Vec<_> = report
        .received()
        .into_iter()
        .filter(|m| m.get("method").is_some() && m.get("id").is_some())
        .collect();
    assert_eq!(requests, Vec::<&Value>::new(), "{all}");
    assert_eq!(
        report.received_method("notifications/cancelled"),
        Vec::<&Value>::new(),
        "{all}"
    );
}
