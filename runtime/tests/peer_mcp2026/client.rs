//! A negotiated client: it discovers a 2026-07-28 server or falls back to `initialize`, and
//! stamps its requests; a fixed 2026-07-28 client and a negotiated server.

use std::time::Duration;

use cancelkit::peer::{
    Context, DEFAULT_DISCOVER_TIMEOUT, McpRevision, Peer, Protocol, RequestError, Router,
};
use cancelkit::{CancelReason, Cancelled, JsonRpcError};
use serde_json::{Value, json};

use crate::common::pair;
use crate::{EVERY_REVISION, NEGOTIATED};

fn legacy_server_router() -> Router {
    Router::new()
        .request("initialize", |p: Value, _cx: Context| async move {
            Ok::<_, JsonRpcError>(json!({
                "protocolVersion": p["protocolVersion"],
                "capabilities": {},
                "serverInfo": {"name": "legacy", "version": "1"}
            }))
        })
        .notification(
            "notifications/initialized",
            |_: Value, _cx: Context| async {},
        )
        .request("echo", |p: Value, _cx: Context| async move {
            Ok::<_, JsonRpcError>(json!({"echo": p}))
        })
}

#[tokio::test]
async fn a_negotiated_client_discovers_a_2026_server_and_stamps_its_requests() {
    let server = Peer::builder(NEGOTIATED).router(
        legacy_server_router()
            .request("server/discover", |_: Value, _cx: Context| async {
                Ok::<_, JsonRpcError>(json!({"capabilities": {}}))
            })
            .request("subscriptions/listen", |_: Value, _cx: Context| async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err::<Value, JsonRpcError>(Cancelled::new(CancelReason::Shutdown).into())
            }),
    );
    let client = Peer::builder(NEGOTIATED)
        .client_capabilities(json!({"sampling": {}}))
        .client_info(json!({"name": "test-client", "version": "1"}));
    let (server, client) = pair(server, client);
    let handle = client.handle();
    let negotiated = handle
        .discover_or_initialize(
            json!({"name": "test-client", "version": "1"}),
            DEFAULT_DISCOVER_TIMEOUT,
        )
        .await
        .unwrap();
    assert_eq!(negotiated.revision, McpRevision::V2026_07_28);
    assert_eq!(
        server.handle().mcp_revision(),
        Some(McpRevision::V2026_07_28)
    );
    let echoed: Value = handle.request("echo", json!({"x": 1})).await.unwrap();
    let meta = &echoed["echo"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
        "{echoed}"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"sampling": {}})
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "test-client"
    );
    assert_eq!(echoed["resultType"], "complete");
    // The server ends our subscription: our request fails with -32800, not a hang.
    let ended = tokio::time::timeout(
        Duration::from_secs(5),
        handle.request::<_, Value>("subscriptions/listen", json!({})),
    )
    .await
    .expect("the stream's end reaches the client");
    match ended {
        Err(RequestError::Rpc(error)) => assert!(error.is_cancelled(), "{error:?}"),
        other => panic!("expected the subscription to end with -32800, got {other:?}"),
    }
}

#[tokio::test]
async fn a_negotiated_client_falls_back_to_initialize_with_a_legacy_server() {
    let server =
        Peer::builder(Protocol::Mcp(McpRevision::V2025_11_25)).router(legacy_server_router());
    let (server, client) = pair(server, Peer::builder(NEGOTIATED));
    let negotiated = client
        .handle()
        .discover_or_initialize(
            json!({"name": "c", "version": "1"}),
            DEFAULT_DISCOVER_TIMEOUT,
        )
        .await
        .unwrap();
    assert_eq!(negotiated.revision, McpRevision::V2025_11_25);
    assert_eq!(negotiated.server["serverInfo"]["name"], "legacy");
    let echoed: Value = client
        .handle()
        .request("echo", json!({"x": 1}))
        .await
        .unwrap();
    assert!(
        echoed["echo"].get("_meta").is_none(),
        "legacy requests are not stamped: {echoed}"
    );
    assert!(echoed.get("resultType").is_none());
    drop(server);
}

#[tokio::test]
async fn a_fixed_2026_client_stamps_from_its_first_request_and_a_negotiated_server_follows() {
    let server = Peer::builder(NEGOTIATED).router(legacy_server_router());
    let client = Peer::builder(Protocol::Mcp(McpRevision::V2026_07_28));
    let (server, client) = pair(server, client);
    let echoed: Value = client.handle().request("echo", json!({})).await.unwrap();
    assert_eq!(
        echoed["echo"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
        "{echoed}"
    );
    assert_eq!(
        echoed["echo"]["_meta"]["io.modelcontextprotocol/clientCapabilities"],
        json!({})
    );
    assert_eq!(
        server.handle().mcp_revision(),
        Some(McpRevision::V2026_07_28)
    );
    // A fixed 2026-07-28 client only discovers: a legacy answer is an error, not a fallback.
    let refused = client
        .handle()
        .request::<_, Value>("initialize", json!({}))
        .await;
    assert!(
        matches!(refused, Err(RequestError::Rpc(ref e)) if e.code.code() == -32601),
        "{refused:?}"
    );
}

#[tokio::test]
async fn the_client_info_given_to_discover_is_stamped_on_every_later_request() {
    let server = Peer::builder(NEGOTIATED).router(legacy_server_router());
    let (_server, client) = pair(server, Peer::builder(NEGOTIATED));
    let negotiated = client
        .handle()
        .discover_or_initialize(
            json!({"name": "learned", "version": "2"}),
            DEFAULT_DISCOVER_TIMEOUT,
        )
        .await
        .unwrap();
    // The server has no `server/discover` route: the runtime answers it rather than leave a
    // client that already ruled out `initialize` stranded.
    assert_eq!(negotiated.revision, McpRevision::V2026_07_28);
    assert_eq!(
        negotiated.server["supportedVersions"],
        json!(EVERY_REVISION)
    );
    assert_eq!(negotiated.server["capabilities"], json!({}));
    let echoed: Value = client.handle().request("echo", json!({})).await.unwrap();
    assert_eq!(
        echoed["echo"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"], "learned",
        "{echoed}"
    );
}
