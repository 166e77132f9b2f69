//! The ACP agent: an MCP client of the MCP server it starts.

use std::process::{ExitCode, Stdio};
use std::sync::OnceLock;

use cancelkit::peer::{Context, McpRevision, Peer, PeerHandle, Protocol, Router};
use cancelkit::{JsonRpcError, cancellable};
use serde_json::{Value, json};
use tokio::time::timeout;

use crate::shared::{Error, TOOL_SECONDS, WAIT, event, me};

static MCP: OnceLock<PeerHandle> = OnceLock::new();

async fn initialize(_params: Value, _cx: Context) -> Result<Value, JsonRpcError> {
    Ok(json!({
        "protocolVersion": 1,
        "agentCapabilities": {"loadSession": false, "promptCapabilities": {}},
        "authMethods": [],
        "agentInfo": {"name": "cancelkit-cascade-agent", "version": env!("CARGO_PKG_VERSION")}
    }))
}

async fn new_session(_params: Value, _cx: Context) -> Result<Value, JsonRpcError> {
    Ok(json!({"sessionId": "sess-1"}))
}

/// One prompt turn: call the MCP server's `run` tool. No cancellation code: on
/// `session/cancel` the runtime answers `stopReason: "cancelled"` and drops this future,
/// and with it the `tools/call` request, which sends `notifications/cancelled`.
#[cancellable]
async fn prompt(_params: Value, _cx: Context) -> Result<Value, JsonRpcError> {
    let mcp = MCP
        .get()
        .ok_or_else(|| JsonRpcError::internal("no MCP server"))?;
    let call = mcp.request::<_, Value>(
        "tools/call",
        json!({"name": "run", "arguments": {"seconds": TOOL_SECONDS}}),
    );
    event("mcp_request_sent", json!({"request_id": call.id()}));
    let result = call.await?;
    Ok(json!({"stopReason": "end_turn", "_meta": {"tool": result}}))
}

pub async fn agent() -> Result<ExitCode, Error> {
    super::log::init();
    let mut server = tokio::process::Command::new(me()?)
        .arg("mcp-server")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let (stdin, stdout) = (
        server.stdin.take().ok_or("no stdin")?,
        server.stdout.take().ok_or("no stdout")?,
    );
    let mcp_peer = Peer::builder(Protocol::Mcp(McpRevision::V2025_11_25)).connect(stdout, stdin);
    let mcp = mcp_peer.handle();
    let _: Value = timeout(
        WAIT,
        mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "cancelkit-cascade-agent", "version": "0"}}),
        ),
    )
    .await??;
    mcp.notify("notifications/initialized", json!({})).await?;
    MCP.set(mcp.clone()).map_err(|_| "set twice")?;

    let router = Router::new()
        .request("initialize", initialize)
        .request("session/new", new_session)
        .request("session/prompt", prompt);
    let acp = Peer::builder(Protocol::Acp)
        .router(router)
        .connect(tokio::io::stdin(), tokio::io::stdout());
    acp.closed().await;

    mcp.close();
    let _ = timeout(WAIT, mcp_peer.closed()).await;
    if timeout(WAIT, server.wait()).await.is_err() {
        let _ = server.kill().await;
    }
    Ok(ExitCode::SUCCESS)
}
