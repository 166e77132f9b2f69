//! A server's side of the handshake: `server/discover` chooses 2026-07-28, requests without
//! their `_meta` or of the old handshake are refused, and `initialize` still chooses older
//! revisions.

use cancelkit::peer::McpRevision;
use serde_json::json;

use crate::{EVERY_REVISION, discover, meta, serve_negotiated, sleep_call};

#[tokio::test]
async fn discover_chooses_2026_and_the_runtime_completes_its_result() {
    let mut s = serve_negotiated(|b| b);
    assert_eq!(
        s.peer.mcp_revision(),
        None,
        "undecided before the first message"
    );
    let answer = discover(&mut s).await;
    let result = &answer["result"];
    assert_eq!(result["resultType"], "complete", "{answer}");
    assert_eq!(result["supportedVersions"], json!(EVERY_REVISION));
    assert_eq!(result["capabilities"]["tools"], json!({}));
    assert!(result["ttlMs"].is_u64() && result["cacheScope"].is_string());
    assert!(
        result["capabilities"].get("extensions").is_none(),
        "no tasks extension without task tools"
    );
    let called = s
        .wire
        .call(json!(2), "tools/call", sleep_call("fast", 0, meta()))
        .await;
    assert_eq!(called["result"]["resultType"], "complete", "{called}");
    assert_eq!(called["result"]["content"][0]["text"], "fast");
    assert!(
        called["result"].get("ttlMs").is_none(),
        "a tool result is not cacheable"
    );
    // Lists are cacheable results: `ttlMs` and `cacheScope` are required, and added.
    let listed = s
        .wire
        .call(json!(3), "tools/list", json!({"_meta": meta()}))
        .await;
    assert_eq!(listed["result"]["tools"], json!([]), "{listed}");
    assert_eq!(listed["result"]["ttlMs"], 0);
    assert_eq!(listed["result"]["cacheScope"], "private");
    assert_eq!(listed["result"]["resultType"], "complete");
    let kept = s
        .wire
        .call(json!(4), "resources/read", json!({"_meta": meta()}))
        .await;
    assert_eq!(
        kept["result"]["ttlMs"], 60_000,
        "the application's choice is kept: {kept}"
    );
    assert_eq!(kept["result"]["cacheScope"], "public");
}

#[tokio::test]
async fn requests_without_their_meta_in_another_version_or_of_the_handshake_are_refused() {
    let mut s = serve_negotiated(|b| b);
    discover(&mut s).await;
    let bare = s
        .wire
        .call(
            json!(1),
            "tools/call",
            json!({"name": "sleep", "arguments": {"label": "x", "ms": 0}}),
        )
        .await;
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    let later = s
        .wire
        .call(
            json!(2),
            "tools/call",
            sleep_call(
                "x",
                0,
                json!({"io.modelcontextprotocol/protocolVersion": "2030-01-01", "io.modelcontextprotocol/clientCapabilities": {}}),
            ),
        )
        .await;
    assert_eq!(later["error"]["code"], -32022, "{later}");
    assert_eq!(later["error"]["data"]["requested"], "2030-01-01");
    assert_eq!(later["error"]["data"]["supported"], json!(EVERY_REVISION));
    for method in ["ping", "initialize"] {
        let answer = s
            .wire
            .call(json!(method), method, json!({"_meta": meta()}))
            .await;
        assert_eq!(answer["error"]["code"], -32601, "{answer}");
    }
    assert!(
        s.events.try_recv().is_err(),
        "no handler ran for a refused request"
    );
}

#[tokio::test]
async fn an_unsupported_discover_decides_nothing_and_initialize_still_can() {
    let mut s = serve_negotiated(|b| b);
    let answer = s
        .wire
        .call(
            json!(1),
            "server/discover",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2030-01-01", "io.modelcontextprotocol/clientCapabilities": {}}}),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32022, "{answer}");
    assert_eq!(s.peer.mcp_revision(), None);
    let init = s
        .wire
        .call(
            json!(2),
            "initialize",
            json!({"protocolVersion": "2025-11-25", "label": "init", "ms": 0}),
        )
        .await;
    assert!(init.get("result").is_some(), "{init}");
    assert_eq!(s.peer.mcp_revision(), Some(McpRevision::V2025_11_25));
    // Legacy rules from now on: no `_meta` needed, and a task is asked for with `params.task`.
    let task = s
        .wire
        .call(
            json!(3),
            "tools/call",
            json!({"name": "sleep", "arguments": {"label": "t", "ms": 0}, "task": {"ttl": 1000}}),
        )
        .await;
    assert_eq!(task["result"]["task"]["ttl"], 1000, "{task}");
}

#[tokio::test]
async fn a_2024_initialize_chooses_2024_where_tasks_do_not_exist() {
    let mut s = serve_negotiated(|b| b);
    s.wire
        .call(
            json!(1),
            "initialize",
            json!({"protocolVersion": "2024-11-05", "label": "init", "ms": 0}),
        )
        .await;
    assert_eq!(s.peer.mcp_revision(), Some(McpRevision::V2024_11_05));
    let call = s
        .wire
        .call(
            json!(2),
            "tools/call",
            json!({"name": "sleep", "arguments": {"label": "t", "ms": 0}, "task": {"ttl": 1000}}),
        )
        .await;
    assert_eq!(call["result"]["content"][0]["text"], "t", "{call}");
}
