//! Our negotiated client → an rmcp server: `discover_or_initialize` picks 2026-07-28, and
//! dropping a call cancels the rmcp tool's token.

use std::borrow::Cow;
use std::time::Duration;

use cancelkit::peer::{DEFAULT_DISCOVER_TIMEOUT, McpRevision, Peer, Protocol};
use cancelkit::{CancellationToken, cancellable};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ErrorData, ProtocolVersion};
use rmcp::{ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::harness::{DropGuard, DumpOnPanic, Events, Tap, V2026, next, tapped_pipe};

/// An rmcp server as an rmcp user writes it; `legacy` pins it to 2025-11-25 and older.
#[derive(Clone)]
struct RmcpServer {
    events: Events,
    legacy: bool,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SlowParams {
    seconds: u64,
}

#[tool_router]
impl RmcpServer {
    #[tool(description = "Sleeps; stops as soon as the call is cancelled")]
    #[cancellable(token = ct)]
    async fn slow(
        &self,
        Parameters(params): Parameters<SlowParams>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let _ = self.events.send("started");
        let mut guard = DropGuard {
            events: self.events.clone(),
            finished: false,
        };
        tokio::time::sleep(Duration::from_secs(params.seconds)).await;
        guard.finished = true;
        Ok(CallToolResult::success(vec![ContentBlock::text("done")]))
    }
}

#[tool_handler]
impl ServerHandler for RmcpServer {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        if self.legacy {
            Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
        } else {
            Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }
}

/// Our negotiated client against an rmcp server on a tapped pipe.
pub(crate) fn our_client_against_rmcp(
    legacy: bool,
) -> (Peer, mpsc::UnboundedReceiver<&'static str>, Tap) {
    let (client_end, server_end, tap) = tapped_pipe();
    let (events, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let running = RmcpServer { events, legacy }
            .serve(tokio::io::split(server_end))
            .await
            .expect("rmcp serves");
        let _ = running.waiting().await;
    });
    let (read, write) = tokio::io::split(client_end);
    let peer = Peer::builder(Protocol::Mcp(McpRevision::Negotiated))
        .client_info(json!({"name": "cancelkit-test-client", "version": "0"}))
        .connect(read, write);
    (peer, rx, tap)
}

/// A fast call answered, then a slow one dropped: the rmcp tool's token is cancelled and the
/// tool stops within 5 s, nothing answers the dropped call, and the connection still serves.
pub(crate) async fn our_drop_cancels_the_rmcp_tool(
    peer: &Peer,
    events: &mut mpsc::UnboundedReceiver<&'static str>,
    tap: &Tap,
) {
    let done: Value = peer
        .handle()
        .request(
            "tools/call",
            json!({"name": "slow", "arguments": {"seconds": 0}}),
        )
        .await
        .expect("the fast call is answered");
    assert_eq!(done["content"][0]["text"], "done");
    assert_eq!(next(events).await, "started");
    assert_eq!(next(events).await, "finished");

    let pending = peer.handle().request::<_, Value>(
        "tools/call",
        json!({"name": "slow", "arguments": {"seconds": 30}}),
    );
    let id = serde_json::to_value(pending.id()).unwrap();
    assert_eq!(next(events).await, "started");
    drop(pending);
    assert_eq!(
        next(events).await,
        "stopped",
        "rmcp cancelled the tool's token and the tool stopped"
    );
    assert!(
        tap.to_server()
            .iter()
            .any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == id),
        "we sent notifications/cancelled for {id}"
    );
    let again: Value = peer
        .handle()
        .request(
            "tools/call",
            json!({"name": "slow", "arguments": {"seconds": 0}}),
        )
        .await
        .expect("the next call is answered");
    assert_eq!(again["content"][0]["text"], "done");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(tap.responses_for(&id), Vec::<Value>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_discovers_rmcp_and_dropping_a_call_cancels_the_rmcp_tool() {
    let (peer, mut events, tap) = our_client_against_rmcp(false);
    let _wire = DumpOnPanic(tap.clone());
    let negotiated = peer
        .handle()
        .discover_or_initialize(
            json!({"name": "cancelkit-test-client", "version": "0"}),
            DEFAULT_DISCOVER_TIMEOUT,
        )
        .await
        .expect("rmcp answers server/discover");
    assert_eq!(negotiated.revision, McpRevision::V2026_07_28);
    assert_eq!(peer.handle().mcp_revision(), Some(McpRevision::V2026_07_28));
    assert!(
        negotiated.server["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(V2026)),
        "{}",
        negotiated.server
    );

    our_drop_cancels_the_rmcp_tool(&peer, &mut events, &tap).await;

    assert_eq!(tap.client_methods()[0], "server/discover");
    assert!(
        !tap.client_methods()
            .iter()
            .any(|m| m == "initialize" || m == "notifications/initialized"),
        "{:?}",
        tap.client_methods()
    );
    tap.assert_every_request_stamped();
    for request in tap.requests() {
        assert_eq!(
            request["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"],
            "cancelkit-test-client"
        );
    }
    let answer = tap.response_to("tools/call");
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert_eq!(tap.cancels_to_client(), Vec::<Value>::new());
}
