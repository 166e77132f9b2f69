//! `MCP-Protocol-Version` at the gateway's `/mcp`: every published legacy revision is answered
//! as itself by `initialize`. In a session a request whose header names any legacy revision
//! (the negotiated one SHOULD be sent, but the suite's client sends 2025-03-26) or none is
//! served by the session's rules; 2026-07-28 (a revision without sessions) and unknown versions
//! get 400 with -32600. A 2026-07-28 request's header must match its stamp (HeaderMismatch
//! -32020 otherwise; its absence is a mismatch too).

mod support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::http::{Reply, echo_call, mcp_session, stamped};
use support::{Gateway, client, token};

async fn post(
    gateway: &Gateway,
    session: Option<&str>,
    version: Option<&str>,
    message: &Value,
) -> Reply {
    let mut request = client()
        .post(gateway.url("/mcp"))
        .bearer_auth(token("alice"))
        .header("accept", "application/json, text/event-stream")
        .json(message);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    if let Some(version) = version {
        request = request.header("mcp-protocol-version", version);
    }
    // A 2026-07-28 request names its method and tool in headers too.
    if message["params"]["_meta"].is_object() {
        let method = message["method"].as_str().unwrap_or_default();
        for (name, value) in cancelkit::wire::headers::routing(method, &message["params"]) {
            request = request.header(name, value);
        }
    }
    Reply::read(request.send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_legacy_revision_is_answered_as_itself() {
    let gateway = Gateway::start();
    for (asked, answered) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ] {
        let reply = post(
            &gateway,
            None,
            None,
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": asked, "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}}),
        )
        .await;
        assert_eq!(
            reply.body["result"]["protocolVersion"], answered,
            "{asked}: {}",
            reply.text
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_serves_any_legacy_revision_and_other_headers_are_refused() {
    let gateway = Gateway::start();
    let session = mcp_session(&gateway, "alice").await;
    let call = echo_call(json!(1), "hi");
    for version in [
        None,
        Some("2025-11-25"),
        Some("2025-06-18"),
        Some("2025-03-26"),
    ] {
        let reply = post(&gateway, Some(&session), version, &call).await;
        assert_eq!(reply.status, StatusCode::OK, "{version:?}: {}", reply.text);
        assert_eq!(reply.response()["result"]["content"][0]["text"], "hi");
    }
    for version in ["2026-07-28", "1999-01-01"] {
        let reply = post(&gateway, Some(&session), Some(version), &call).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{version}: {}",
            reply.text
        );
        assert_eq!(reply.body["error"]["code"], -32600, "{}", reply.text);
        let message = reply.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(version) && message.contains("2025-11-25"),
            "{message}"
        );
    }

    let modern = stamped(echo_call(json!(2), "hi"), "2026-07-28");
    let served = post(&gateway, None, Some("2026-07-28"), &modern).await;
    assert_eq!(served.status, StatusCode::OK, "{}", served.text);
    let missing = post(&gateway, None, None, &modern).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST, "{}", missing.text);
    assert_eq!(missing.body["error"]["code"], -32020, "{}", missing.text);
    let mismatched = post(&gateway, None, Some("2025-11-25"), &modern).await;
    assert_eq!(
        mismatched.status,
        StatusCode::BAD_REQUEST,
        "{}",
        mismatched.text
    );
    assert_eq!(
        mismatched.body["error"]["code"], -32020,
        "{}",
        mismatched.text
    );
}
