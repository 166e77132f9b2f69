//! `MCP-Protocol-Version` in a session: any legacy revision the server speaks is served by the
//! session's own rules (the header SHOULD be the negotiated one; only an invalid or unsupported
//! one MUST get 400), 2026-07-28 — a revision without sessions — and anything unknown get 400
//! with -32600, on `POST` and `GET`.

use cancelkit::wire::{headers, sse};
use serde_json::{Value, json};

use crate::harness::{client, post, session, tool};

/// The revisions `initialize` answers as themselves: each is served in a 2025-11-25 session.
const LEGACY: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// Refused in a session: the revision without sessions, an unknown date, no date at all.
const REFUSED: [&str; 3] = ["2026-07-28", "1999-01-01", "not-a-version"];

#[tokio::test]
async fn a_session_serves_every_legacy_version_and_refuses_others() {
    let server = crate::harness::start(|s| s).await;
    let session = session(&server).await;
    for (n, version) in LEGACY.into_iter().enumerate() {
        let call = tool(json!(n), "echo", json!({"text": version}));
        let response = post(&server.url, Some(&session), &call)
            .header(headers::PROTOCOL_VERSION, version)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{version}");
        let body = response.text().await.unwrap();
        assert!(
            body.contains(&format!(r#""text":"{version}""#)),
            "{version}: the echo answers: {body}"
        );
    }
    // The suite's three concurrent POSTs (server-sse-multiple-streams of its release 0.1.16).
    let lists = (0..3).map(|n| {
        let list = json!({"jsonrpc": "2.0", "id": 1000 + n, "method": "tools/list", "params": {}});
        post(&server.url, Some(&session), &list)
            .header(headers::PROTOCOL_VERSION, "2025-03-26")
            .send()
    });
    for response in futures_util::future::join_all(lists).await {
        assert_eq!(response.unwrap().status(), 200);
    }
    for version in REFUSED {
        let call = tool(json!(9), "echo", json!({"text": "x"}));
        let response = post(&server.url, Some(&session), &call)
            .header(headers::PROTOCOL_VERSION, version)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{version}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], -32600, "{version}: {body}");
        assert_eq!(body["id"], 9, "{version}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(version) && message.contains("2025-11-25"),
            "{version}: {message}"
        );
        let get = client()
            .get(&server.url)
            .header("accept", sse::CONTENT_TYPE)
            .header(headers::SESSION_ID, &session)
            .header(headers::PROTOCOL_VERSION, version)
            .send()
            .await
            .unwrap();
        assert_eq!(get.status(), 400, "GET with {version}");
    }
    // Without the header the session is served too; DELETE (which reads no version) ends it.
    let call = tool(json!(10), "echo", json!({"text": "none"}));
    let response = post(&server.url, Some(&session), &call)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let delete = client()
        .delete(&server.url)
        .header(headers::SESSION_ID, &session)
        .header(headers::PROTOCOL_VERSION, "2025-03-26")
        .send()
        .await
        .unwrap();
    assert!(delete.status().is_success(), "{}", delete.status());
}
