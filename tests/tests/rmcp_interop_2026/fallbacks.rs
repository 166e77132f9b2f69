//! Fallback to the legacy handshake, both directions, and a negotiated server without a
//! `server/discover` route.

use cancelkit::peer::{DEFAULT_DISCOVER_TIMEOUT, McpRevision};
use rmcp::ClientServiceExt;
use rmcp::model::ProtocolVersion;
use serde_json::json;

use crate::harness::{DumpOnPanic, tapped_pipe};
use crate::our_client::{our_client_against_rmcp, our_drop_cancels_the_rmcp_tool};
use crate::our_server::our_server;
use crate::rmcp_client::{
    RmcpCancel, assert_cancelled_without_response, auto_mode, echo, start_and_cancel_slow,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_falls_back_to_initialize_with_a_legacy_rmcp_server() {
    let (peer, mut events, tap) = our_client_against_rmcp(true);
    let _wire = DumpOnPanic(tap.clone());
    let negotiated = peer
        .handle()
        .discover_or_initialize(
            json!({"name": "cancelkit-test-client", "version": "0"}),
            DEFAULT_DISCOVER_TIMEOUT,
        )
        .await
        .expect("the legacy handshake follows");
    assert_eq!(negotiated.revision, McpRevision::V2025_11_25);
    assert_eq!(peer.handle().mcp_revision(), Some(McpRevision::V2025_11_25));
    assert_eq!(negotiated.server["protocolVersion"], "2025-11-25");

    let refused = tap.response_to("server/discover");
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    assert_eq!(
        tap.first_methods(3).await,
        ["server/discover", "initialize", "notifications/initialized"]
    );
    let initialize = tap
        .requests()
        .into_iter()
        .find(|m| m["method"] == "initialize")
        .unwrap();
    assert_eq!(initialize["params"]["protocolVersion"], "2025-11-25");

    our_drop_cancels_the_rmcp_tool(&peer, &mut events, &tap).await;
    tap.assert_no_request_stamped_after_initialize();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_client_falls_back_to_initialize_with_our_legacy_server() {
    let (client_end, server_end, tap) = tapped_pipe();
    let _wire = DumpOnPanic(tap.clone());
    let (_server, mut events) = our_server(McpRevision::V2025_11_25, false, server_end);
    let client =
        ().serve_with_lifecycle(tokio::io::split(client_end), auto_mode())
            .await
            .expect("rmcp falls back to initialize");
    let info = client.peer_info().unwrap();
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);

    let refused = tap.response_to("server/discover");
    assert!(refused.get("error").is_some(), "{refused}");
    assert_eq!(
        tap.first_methods(3).await,
        ["server/discover", "initialize", "notifications/initialized"]
    );

    echo(&client, "legacy").await;
    let id = start_and_cancel_slow(&client, &tap, &mut events, RmcpCancel::Handle).await;
    assert_cancelled_without_response(&client, &tap, &mut events, &id).await;
    tap.assert_no_request_stamped_after_initialize();
    client.cancel().await.unwrap();
}

/// A `Negotiated` server whose router has no `server/discover` route: the stamped probe has
/// decided the connection's era (2026-07-28), so answering it -32601 would send rmcp's `Auto`
/// client to an `initialize` that this era refuses, and it could not connect at all. The
/// runtime answers the probe itself (the supported versions, no capabilities) instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_client_connects_to_a_negotiated_server_without_a_discover_route() {
    let (client_end, server_end, tap) = tapped_pipe();
    let _wire = DumpOnPanic(tap.clone());
    let (_server, _events) = our_server(McpRevision::Negotiated, false, server_end);
    let client =
        ().serve_with_lifecycle(tokio::io::split(client_end), auto_mode())
            .await
            .expect("rmcp connects, in either era");
    echo(&client, "connected").await;
    client.cancel().await.unwrap();
}
